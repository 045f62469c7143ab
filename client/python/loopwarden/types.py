"""The client's own verdict type and errors: callers never need to import grpc or protobuf."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Action(str, enum.Enum):
    ALLOW = "allow"
    WARN = "warn"
    BLOCK = "block"
    ABORT = "abort"
    REJECT = "reject"
    ASK = "ask"  # hold the call for a person; send their answer as an approval


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
        """The tool call may go ahead (ALLOW or WARN)."""
        return self.action in (Action.ALLOW, Action.WARN)


@dataclass(frozen=True, slots=True)
class RunRecord:
    seq: int
    tool_name: str
    args_hash: str
    tool_call_id: str
    result_hash: str  # "" while pending
    unknown_tool_name: str


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


@dataclass(frozen=True, slots=True)
class Exemption:
    """A standing approval (an "always" answer to an ASK): criticals of this (agent, tool,
    projected arguments) are allowed until it expires; budgets and the breakers still apply."""
    id: str
    agent_id: str  # "": the global config's agent
    tool_name: str
    args_hash: str
    created_at: float  # Unix seconds
    expires_at: float
    run_id: str  # the run whose ASK it answered


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
