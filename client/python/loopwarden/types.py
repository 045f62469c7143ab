"""The client's own verdict type and errors: callers never need to import grpc or protobuf."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Action(str, enum.Enum):
    """What the runner must do. An action newer than this client reaches it as BLOCK (never an
    error): the safe reading of "the daemon said something other than run it"."""

    ALLOW = "allow"
    WARN = "warn"
    BLOCK = "block"
    ABORT = "abort"
    REJECT = "reject"
    # Hold the call for a human (only for events sent with accepts_ask): run it only if they
    # approve, then report their answer with the client's `approval` verb.
    ASK = "ask"


@dataclass(frozen=True, slots=True)
class Verdict:
    seq: int
    run_id: str
    action: Action
    detector: str = ""  # "generic_repeat", "ping_pong", … ("" for a plain allow)
    level: str = ""  # "warning" or "critical" when a detector matched
    count: int = 0
    message: str = ""
    warning_key: str = ""
    announce: bool = False
    paired_tool_name: str = ""
    error_code: str = ""
    tool_name: str = ""
    decision_id: str = ""  # WARN/BLOCK/ABORT: names the decision in the daemon's log and InspectRun
    evidence_seqs: tuple[int, ...] = ()  # the records that formed the pattern, oldest first
    evidence_call_ids: tuple[str, ...] = ()
    loop_started_seq: int = 0
    shadow: bool = False  # shadow mode: computed, not enforced
    shadow_action: Action | None = None  # what would have been enforced

    @property
    def may_run(self) -> bool:
        """The tool call may go ahead (ALLOW or WARN). An ASK may not until a human approves."""
        return self.action in (Action.ALLOW, Action.WARN)

    @property
    def asks(self) -> bool:
        """The call waits for a human: show them `message`, report their answer as an approval."""
        return self.action is Action.ASK


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One entry of a run's history (InspectRun's RunRecord, field for field)."""

    # generated:run-record:begin (proto/loopwarden/v1/loopwarden.proto: edit there, then `make tables`)
    # The seq of the event that created the record.
    seq: int
    # The tool as the call that formed the record spelled it (args_hash is over the normalised
    # name).
    tool_name: str
    # The hash of the call's projected arguments.
    args_hash: str
    # The call's tool call id, if it had one.
    tool_call_id: str
    # The hash of the outcome; empty while the call is pending (no outcome yet).
    result_hash: str
    # The missing tool's name when the outcome's error said no such tool exists.
    unknown_tool_name: str
    # generated:run-record:end


@dataclass(frozen=True, slots=True)
class Totals:
    """What a run, or its whole tree, has spent (loopwarden.budgets)."""

    tool_calls: int = 0  # tool calls evaluated (retries once)
    tool_ms: int = 0  # sum of the outcomes' duration_ms
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    wall_seconds: float = 0.0  # since the run's (the tree's) first event
    runs: int = 0  # runs of the tree so far, ended ones too; 1 for a run alone


@dataclass(frozen=True, slots=True)
class OutputStreaks:
    """Where the detectors of loops without tool calls stand for a run (all 0: none counted)."""

    messages: int = 0  # repeated_output: identical messages in a row
    thoughts: int = 0  # ... thoughts
    final_answers: int = 0  # ... final answers
    compactions: int = 0  # compaction_storm: compactions since the last new tool result
    stop_continuations: int = 0  # stop_continuation: final answers a stop hook kept going, in a row
    final_answer_turns: int = 0  # repeated_final_answer: turns ending in the same answer, no tool work

    @property
    def any(self) -> bool:
        return any((self.messages, self.thoughts, self.final_answers, self.compactions, self.stop_continuations,
                    self.final_answer_turns))


@dataclass(frozen=True, slots=True)
class Exemption:
    """A standing approval (an "always" answer to an ASK): criticals of this agent, tool and
    projected arguments are allowed until it expires. Budgets and the breakers still apply."""

    id: str
    agent_id: str  # "": the global config's agent
    tool_name: str  # normalised
    args_hash: str  # as RunRecord.args_hash
    created_at: float  # unix seconds
    expires_at: float
    run_id: str  # the run whose ASK it answered


@dataclass(frozen=True, slots=True)
class RunInspection:
    run_id: str
    agent_id: str
    records: list[RunRecord]
    guard_armed: bool
    guard_window_size: int
    guard_observed: int
    blocks: int
    aborted: bool
    abort_error_code: str
    effective_config: dict = field(default_factory=dict)
    events_evaluated: int = 0
    recent_verdicts: list[Verdict] = field(default_factory=list)
    # The agent as the metrics' `agent` label spells it ("default" for an agent the config does
    # not name). Empty from a daemon older than this field.
    agent_label: str = ""
    # The run's place in its run tree: its parent ("" for a root), its children oldest first
    # (ended ones too), the tree's root (the run itself for a root) and its depth (root: 0).
    parent_run_id: str = ""
    children: list[str] = field(default_factory=list)
    root_run_id: str = ""
    depth: int = 0
    # What the whole tree has spent, and what this run alone has.
    tree_totals: Totals = field(default_factory=Totals)
    run_totals: Totals = field(default_factory=Totals)
    # Standing approvals of the run's tenant that apply to this run's agent.
    exemptions: list[Exemption] = field(default_factory=list)
    # The detectors of loops without tool calls' counts.
    output_streaks: OutputStreaks = field(default_factory=OutputStreaks)


class LoopwardenError(Exception):
    """Base of every error the client raises."""


class LoopwardenUnavailable(LoopwardenError):
    """The daemon could not be reached, or the stream broke; the next call reconnects."""


class RunNotFound(LoopwardenError):
    """InspectRun: the daemon holds no state for that run."""


class ExemptionNotFound(LoopwardenError):
    """RevokeExemption: the daemon holds no such exemption for the caller's tenant."""


class RunAborted(LoopwardenError):
    """Raised by the tool guard when the daemon aborts the run."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message or verdict.error_code)
        self.verdict = verdict
