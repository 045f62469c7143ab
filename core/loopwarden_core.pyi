"""loopwarden-core: the compiled per-event engine (Rust). The daemon's Python is its typed face.

Every object the core returns is frozen and read by name. Nothing here does I/O: the daemon
feeds it request bytes or event fields and turns its answers into metrics, logs and replies.
A `Core` is one daemon's core; its roles are typed objects over it: `Core.evaluator`,
`Core.inspection`, `Core.persistence`, `Core.exemptions`.

Test hooks (`canonical_json`, `args_digest`, `Core._panic_tool`, `Persistence.encode_run`,
`Inspection.tenant_runs`) exist only in a core built with the `testing` feature (the dev venv);
`TEST_HOOKS` names those this build carries, none in the release wheel.
"""
from typing import ClassVar, Protocol, final

__version__: str

# Shared vocabulary, defined once in the core.
COUNTERS: tuple[str, ...]
"""Counter names by code: COUNTERS[delta.counter] names the metric a CounterDelta increments."""
DETECTORS: tuple[str, ...]
"""Every detector id a verdict can carry."""
ACTIONS: tuple[str, ...]
LEVELS: tuple[str, ...]
TEST_HOOKS: tuple[str, ...]
"""The test hooks this build carries: all of them with the `testing` feature, none without."""

# Test hooks: only in a core built with `testing`.
def canonical_json(text: str, max_depth: int = 64) -> bytes: ...
def args_digest(tool_name: str, params_json: str) -> bytes: ...
def outcome_fingerprint(tool_name: str, params_json: str, result_json: str | None, error: str | None,
                        provider_send_tools: list[str] = ..., extra_poll_tools: list[str] = ...
                        ) -> tuple[int, bytes, str | None]: ...
def normalize_tool_name(raw: str) -> str: ...
def parse_json_path(text: str) -> list[str | None]: ...

class EventLike(Protocol):
    """An event as `Evaluator.decide` reads it, by attribute (the client's EventRecord): the Event
    envelope's fields and every kind message's, once per name. `kind` names the Event.kind member
    ("tool_call", ...); enums are spelled as the config spells them (`tool_class` "", "readOnly",
    "mutating", "poll"; `scope` "", "once", "always"); a oneof is its optional string members."""
    # generated:event-like:begin (proto/loopwarden/v1/loopwarden.proto: edit there, then `make tables`)
    @property
    def kind(self) -> str | None: ...
    @property
    def run_id(self) -> str: ...
    @property
    def agent_id(self) -> str: ...
    @property
    def session_id(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def parent_run_id(self) -> str: ...
    @property
    def accepts_ask(self) -> bool: ...
    @property
    def tool_name(self) -> str: ...
    @property
    def tool_call_id(self) -> str: ...
    @property
    def params_json(self) -> str: ...
    @property
    def tool_class(self) -> str: ...
    @property
    def batch_id(self) -> str: ...
    @property
    def result_json(self) -> str | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def duration_ms(self) -> int: ...
    @property
    def prompt_id(self) -> str: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cost_usd(self) -> float: ...
    @property
    def model(self) -> str: ...
    @property
    def decision_id(self) -> str: ...
    @property
    def approved(self) -> bool: ...
    @property
    def scope(self) -> str: ...
    @property
    def ttl_seconds(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def text_digest(self) -> str: ...
    @property
    def output_kind(self) -> str: ...
    @property
    def stop_hook_active(self) -> bool: ...
    # generated:event-like:end

@final
class CounterDelta:
    counter: int
    first: str
    second: str
    agent: str
    count: int

@final
class DecisionLog:
    level: int
    message: str
    extra: dict[str, object]

@final
class Verdict:
    seq: int
    run_id: str
    agent_id: str
    action: str
    detector: str
    level: str
    count: int
    message: str
    warning_key: str
    announce: bool
    paired_tool_name: str
    error_code: str
    tool_name: str
    decision_id: str
    evidence_seqs: list[int]
    evidence_call_ids: list[str]
    loop_started_seq: int
    shadow_action: str | None
    kind: str  # the event's kind: "tool_call", "tool_outcome", "user_turn", …
    tool_call_id: str  # the event's tool call id ("" for kinds without one)

@final
class Summary:
    counters: list[CounterDelta]
    latency_buckets: list[int]
    latency_sum: float
    logs: list[DecisionLog]
    evictions: list[str]
    held_runs: int
    reported: list[Verdict]

@final
class Pending:
    """A decoded request waiting for its runs to be loaded; hand it to Evaluator.resume."""

@final
class MissingRun:
    """A run a lazy request names that memory lacks: loaded (under its tree's root's key) first."""
    run_id: str
    root: str
    def __init__(self, run_id: str, root: str | None = None) -> None: ...

@final
class Answer:
    response: bytes | None
    verdict: Verdict | None
    refusal: str
    missing_runs: list[MissingRun]
    pending: Pending | None
    summary: Summary | None

@final
class RecordView:
    # generated:record-view:begin (proto/loopwarden/v1/loopwarden.proto: edit there, then `make tables`)
    seq: int
    tool_name: str
    args_hash: str
    tool_call_id: str
    result_hash: str
    unknown_tool_name: str
    # generated:record-view:end

@final
class RunView:
    run_id: str
    agent_id: str
    agent_label: str
    records: list[RecordView]
    guard_armed: bool
    guard_window_size: int
    guard_observed: int
    blocks: int
    aborted: bool
    abort_error_code: str
    events_evaluated: int
    recent_verdicts: list[bytes]
    parent_run_id: str
    children: list[str]
    root_run_id: str
    depth: int
    tree_totals: TotalsView | None
    run_totals: TotalsView | None
    output_streaks: OutputStreaksView | None

@final
class OutputStreaksView:
    """Where the detectors of loops without tool calls stand for a run (InspectRun's OutputStreaks)."""
    messages: int
    thoughts: int
    final_answers: int
    compactions: int
    stop_continuations: int
    final_answer_turns: int

@final
class TotalsView:
    tool_calls: int
    tool_ms: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    wall_seconds: float
    runs: int

@final
class ExemptionView:
    """A standing exemption ("always" answer to an ASK); times in Unix seconds."""
    id: str
    agent_id: str
    tool_name: str
    args_hash: str
    created_at: float
    expires_at: float
    run_id: str

@final
class ToolRule:
    """One loopwarden.toolRules entry as the config loader compiled it (settings' `tool_rules`):
    each path as its steps, a member name or None for `[*]`."""
    tool: str
    tool_class: str
    ignore_args: list[list[str | None]]
    keep_args: list[list[str | None]]
    ignore_result: list[list[str | None]]
    def __init__(self, tool: str, tool_class: str, *, ignore_args: list[list[str | None]] = ...,
                 keep_args: list[list[str | None]] = ..., ignore_result: list[list[str | None]] = ...) -> None: ...

@final
class Limits:
    """Input limits; an event over one is REJECTed with a stable error code. A keyword left out
    is the core's default."""
    # generated:limits:begin (tables/loopwarden.toml [[limit]]: edit there, then `make tables`)
    max_params_bytes: int
    max_result_bytes: int
    max_run_id_chars: int
    max_tool_name_chars: int
    max_agent_id_chars: int
    max_session_id_chars: int
    max_tool_call_id_chars: int
    max_json_depth: int
    max_output_text_bytes: int
    max_events_per_request: int
    def __init__(
        self,
        *,
        max_params_bytes: int | None = None,
        max_result_bytes: int | None = None,
        max_run_id_chars: int | None = None,
        max_tool_name_chars: int | None = None,
        max_agent_id_chars: int | None = None,
        max_session_id_chars: int | None = None,
        max_tool_call_id_chars: int | None = None,
        max_json_depth: int | None = None,
        max_output_text_bytes: int | None = None,
        max_events_per_request: int | None = None,
    ) -> None: ...
    # generated:limits:end

@final
class Settings:
    """One agent's resolved settings as the core reads them, every field a required keyword (the
    daemon builds one from its resolved settings: core.py's `core_settings`)."""
    # generated:settings:begin (tables/loopwarden.toml: edit there, then `make tables`)
    # Master switch of the rolling detectors. true: every detector and the post-compaction guard;
    # unset: only the guard; false: nothing runs and nothing is recorded. The embedded default
    # config sets true.
    enabled: bool | None
    # Recent tool calls remembered per run.
    history_size: int
    # Repeats of the same call before the agent is warned (the call still runs).
    warning_threshold: int
    # Repeats of the same call with the same result before the next one is blocked.
    critical_threshold: int
    # Consecutive calls to a tool that does not exist before the next one is blocked.
    unknown_tool_threshold: int
    # The circuit breaker: repeats with an unchanged result before the next call is blocked,
    # whichever detectors are on.
    global_circuit_breaker_threshold: int
    # The same call with the same result, again and again.
    generic_repeat: bool
    # Polling a known status tool that reports no change.
    known_poll_no_progress: bool
    # Alternating between two calls without progress.
    ping_pong: bool
    # Attempts watched after a context-compaction retry; the run is aborted when all N are the same
    # call with the same result.
    compaction_window_size: int
    # The N-th BLOCK of a run becomes ABORT (`tool_loop_persisted`); false or 0: off.
    abort_after_blocks: int
    # Completed calls in a row with no new (tool, args, result) triple before the next call is
    # blocked.
    run_wide_breaker_threshold: int
    # Compute and report BLOCK and ABORT, but answer ALLOW: enforce nothing.
    shadow: bool
    # Streak of calls to one tool with changing arguments and one outcome that warns.
    argument_churn_warn_at: int
    # The streak that blocks; false: warn only.
    argument_churn_block_at: int
    # Identical failures of the same call that block; one fewer warns.
    error_repeat_threshold: int
    # Identical outcomes of one call (same tool, same arguments, nothing new in between) after which
    # the next identical call is blocked; the call before it is warned. Below C, it is the block; C
    # still blocks if lower.
    same_outcome_block_at: int
    # The same for outcomes that prove less when they repeat: a success that says nothing (an empty
    # result, a command that printed nothing), since a silent write may have changed what it does
    # not report, and an error that names a retryable condition (503, 429, a rate limit, a timeout),
    # since a retry may succeed. Not for known polls, whose unchanged answer is the no-progress
    # itself.
    same_outcome_inconclusive_block_at: int
    # A ping-pong with a side that only returned empty results is warned, never blocked.
    ping_pong_needs_answers: bool
    # Block a `mutating` tool called again with identical (projected) arguments after an identical
    # call of the run succeeded (`duplicate_side_effect`).
    duplicate_side_effect: bool
    # Full repetitions of a 3- to 6-call cycle with unchanged outcomes after which the call
    # continuing it is warned.
    cycle_warn_after: int
    # Full repetitions after which the call continuing the cycle is blocked; false: warn only. The
    # history must hold them (blockAfter x period calls).
    cycle_block_after: int
    # exec terminal failures (non-zero exit, not timed out, some output) continue one generic_repeat
    # streak across changing commands while their failure text, without timestamps, clock times,
    # pids, attempt counters and durations, stays the same.
    exec_failure_streak: bool
    # Consecutive failed calls (error outcomes, any tools) after which the next call is blocked; one
    # fewer warns.
    failure_cascade_threshold: int
    # Calls issued together are one batch (one EvaluateRequest, one ToolCall.batch_id, or calls
    # issued while the batch's earlier calls are still pending, at most 64): identical calls in a
    # batch count once, and a fan-out of distinct calls is one step of argumentChurn and the run-
    # wide breaker.
    parallel_batches: bool
    # `call`: a critical verdict blocks its own call. `batch`: the first critical also blocks the
    # later calls of its batch and leaves one recovery turn; a second critical ends the run
    # (`loop_recovery_failed`).
    critical_scope: str
    # An identical call with an unchanged outcome is a repeat only since another call last brought
    # the run something new (a new (tool, args, result) triple): re-reading unchanged data between
    # new calls is not a loop.
    progress_resets_repeats: bool
    # A `user_turn` event (a new instruction from a person or an orchestrator) starts the run fresh
    # for detection: history, announced warnings, sticky blocks and their count, the run-wide streak
    # and batch recovery are cleared (an aborted run stays aborted; duplicateSideEffect's memory
    # stays). False keeps streaks across turns (hosts whose user is a simulator).
    user_turn_resets: bool
    # Deepest run of a tree (root: depth 0): every event of a run deeper than this is ABORTed
    # (`tree_too_deep`). The root run's agent settings apply; false or 0: no limit.
    run_tree_max_depth: int
    # Children ever created under one parent run: the first event of a child past it is ABORTed
    # (`too_many_children`) and the child is not counted. The root run's agent settings apply; false
    # or 0: no limit.
    run_tree_max_children: int
    # Tool calls one run may make (the run's own agent settings): call N + 1 is ABORTed
    # (`budget_exhausted`); false or 0: off.
    budget_tool_calls_per_run: int
    # Tool calls the whole run tree may make (the root run's agent settings): the call past it, in
    # any run of the tree, is ABORTed; false or 0: off.
    budget_tool_calls_per_tree: int
    # Seconds of tool time (the sum of `ToolOutcome.duration_ms`) the tree may spend: the first call
    # after the total passes it is ABORTed; false or 0: off.
    budget_tool_seconds_per_tree: int
    # Input plus output tokens (`usage` events) the tree may spend: the first call after the total
    # passes it is ABORTed; false or 0: off.
    budget_tokens_per_tree: int
    # US dollars (`usage.cost_usd`) the tree may spend: the first call after the total passes it is
    # ABORTed; false or 0: off.
    budget_cost_usd_per_tree: float
    # Seconds since the tree's first event: the first call after that is ABORTed; false or 0: off.
    budget_wall_seconds_per_tree: int
    # The fraction of a budget whose reaching warns (once per budget per run, on a call that would
    # be allowed) with what is used and what is left; false or 0: no warnings.
    budget_warn_at: float
    # `abort`: the first call past a budget is ABORTed (`budget_exhausted`). `ask`: it is ASKed (a
    # human decides whether the run goes on; the run is not aborted) when the event accepts ASK,
    # else ABORTed.
    on_budget: str
    # `block`: a critical verdict blocks its call. `ask`: the first critical of a pattern in a run
    # is ACTION_ASK (a person decides whether the call runs) for callers that set `accepts_ask`;
    # others still get the BLOCK. A denial (or no answer within `askTimeoutSeconds`) makes the
    # pattern's later criticals BLOCK. Aborts are never asked.
    on_critical: str
    # An ASK with no `approval` within this many seconds counts as a denial (judged when the run's
    # next event arrives).
    ask_timeout_seconds: int
    # How long an "always" approval (a standing exemption) stands when the approval gives no
    # `ttl_seconds` (at most 30 days; an approval's own ttl_seconds is capped to the same 30 days).
    exemption_ttl_seconds: int
    # Outputs of one kind (message, thought, final answer) with the same normalised text in a row,
    # no new (tool, args, result) triple and no user turn in between, that warn. No good run of the
    # text-bearing real traces repeats one text of one kind twice with no new tool outcome between
    # (37,604 outputs), nor 3 times with tool work between.
    repeated_output_warn_at: int
    # The same count that ends the run (`output_loop_persisted`); false: warn only.
    repeated_output_abort_at: int
    # Length in characters of the piece of normalised text whose repetition inside one output is a
    # loop by itself.
    repeated_output_chunk_chars: int
    # Copies of one `chunkChars` piece outside closed ``` code blocks, each starting within 6 x
    # chunkChars of the previous, that make an output a loop by itself: the first such output is
    # warned, the next one of its kind (no new tool result between) ends the run.
    repeated_output_chunk_repeats: int
    # `compaction_retry` events with no new (tool, args, result) triple between any two of them that
    # end the run (`compaction_storm`). No good run of the traces adds a context window of text
    # without a new tool outcome, so none could compact twice.
    compaction_storm_abort_at: int
    # Final-answer outputs with `stop_hook_active` in a row, no new (tool, args, result) triple in
    # between, that end the run (`stop_hook_loop`); keep it below the host's own cap (Claude Code
    # stops after 8 continuations).
    stop_continuation_abort_at: int
    # Successive turns (user turns apart) ending in the same normalised final answer, with no new
    # (tool, args, result) triple in any of them, that warn. No good τ-bench conversation closes two
    # quiet turns with the same answer (2,460 user turns).
    repeated_final_answer_warn_at: int
    # The same count that ends the run (`final_answer_loop`); false: warn only.
    repeated_final_answer_abort_at: int
    def __init__(
        self,
        *,
        enabled: bool | None,
        history_size: int,
        warning_threshold: int,
        critical_threshold: int,
        unknown_tool_threshold: int,
        global_circuit_breaker_threshold: int,
        generic_repeat: bool,
        known_poll_no_progress: bool,
        ping_pong: bool,
        compaction_window_size: int,
        abort_after_blocks: int,
        run_wide_breaker_threshold: int,
        shadow: bool,
        argument_churn_warn_at: int,
        argument_churn_block_at: int,
        error_repeat_threshold: int,
        same_outcome_block_at: int,
        same_outcome_inconclusive_block_at: int,
        ping_pong_needs_answers: bool,
        tool_rules: list[ToolRule],
        duplicate_side_effect: bool,
        cycle_warn_after: int,
        cycle_block_after: int,
        exec_failure_streak: bool,
        failure_cascade_threshold: int,
        parallel_batches: bool,
        critical_scope: str,
        progress_resets_repeats: bool,
        user_turn_resets: bool,
        run_tree_max_depth: int,
        run_tree_max_children: int,
        budget_tool_calls_per_run: int,
        budget_tool_calls_per_tree: int,
        budget_tool_seconds_per_tree: int,
        budget_tokens_per_tree: int,
        budget_cost_usd_per_tree: float,
        budget_wall_seconds_per_tree: int,
        budget_warn_at: float,
        on_budget: str,
        on_critical: str,
        ask_timeout_seconds: int,
        exemption_ttl_seconds: int,
        repeated_output_warn_at: int,
        repeated_output_abort_at: int,
        repeated_output_chunk_chars: int,
        repeated_output_chunk_repeats: int,
        compaction_storm_abort_at: int,
        stop_continuation_abort_at: int,
        repeated_final_answer_warn_at: int,
        repeated_final_answer_abort_at: int,
    ) -> None: ...
    # generated:settings:end

@final
class Loaded:
    """What became of a stored run handed to Persistence.load or Persistence.merge."""
    RESTORED: ClassVar[Loaded]
    RESTORED_BASE_ONLY: ClassVar[Loaded]  # restored from its full record; the delta after it did not apply
    EXPIRED: ClassVar[Loaded]
    MISMATCH: ClassVar[Loaded]  # not the run asked for
    MERGED: ClassVar[Loaded]  # merged into memory's copy (a run whose load had failed)
    HELD: ClassVar[Loaded]  # memory's copy is current; the record is not used
    @property
    def restored(self) -> bool: ...  # RESTORED or RESTORED_BASE_ONLY

@final
class RunLoad:
    outcome: Loaded
    evictions: list[str]  # reasons of the runs taking it in evicted

@final
class DirtyRun:
    """A run changed since the last take_dirty: held False when it ended or was evicted (its
    stored copy is deleted); root its tree's root, which names the stored key."""
    tenant: str
    run_id: str
    held: bool
    root: str
    def __init__(self, tenant: str, run_id: str, held: bool, root: str | None = None) -> None: ...
    @property
    def key(self) -> tuple[str, str]: ...  # (tenant, run_id)

@final
class MarkedRun:
    """A run whose load from the shared store failed, marked until its stored copy is merged."""
    tenant: str
    run_id: str
    root: str

@final
class StoredTable:
    record: bytes  # a tenant's exemption table as its stored value (core/src/stored.rs)
    ttl_seconds: float

@final
class TableLoad:
    tenant: str
    count: int  # exemptions taken in, still in force

@final
class Evaluator:
    """Core.evaluator: one call per request or event."""
    # agent_only: the caller's token is limited to agent-side events (user_turn and approval are
    # REJECTed user_side_only); a lazy answer's Pending keeps it for resume.
    def evaluate(self, data: bytes, tenant: str, now: float, routed: str = "", lazy: bool = False,
                 report: bool = False, agent_only: bool = False) -> Answer: ...
    def check(self, data: bytes, tenant: str, now: float, routed: str = "", lazy: bool = False,
              report: bool = False, agent_only: bool = False) -> Answer: ...
    def decide(self, event: EventLike, *, tenant: str = "", now: float = 0.0, lazy: bool = False,
               report: bool = False) -> Answer: ...
    def resume(self, pending: Pending, tenant: str, now: float, routed: str = "", report: bool = False) -> Answer: ...

@final
class Inspection:
    """Core.inspection: a held run as InspectRun shows it."""
    def held(self, tenant: str, run_id: str) -> bool: ...
    def run(self, tenant: str, run_id: str, now: float = 0.0) -> RunView | None: ...
    def tenant_runs(self, tenant: str) -> int: ...  # test hook

@final
class Persistence:
    """Core.persistence: the runs as the state store moves them (statestore/runs.py)."""
    def track_changes(self, evictions_delete: bool) -> None: ...
    def dirty_count(self) -> int: ...
    def take_dirty(self) -> list[DirtyRun]: ...
    def redirty(self, items: list[DirtyRun]) -> None: ...
    def clear(self) -> None: ...  # every run and exemption
    def held(self, tenant: str, run_id: str) -> bool: ...
    # A flush's stored value (core/src/stored.rs), or with `deltas` perhaps a delta.
    def take_record(self, tenant: str, run_id: str, wall_now: float, now: float,
                    deltas: bool = False) -> bytes | None: ...
    def load(self, record: bytes, wall_now: float, now: float, expect: tuple[str, str] | None = None,
             delta: bytes | None = None) -> RunLoad: ...
    # A run whose load from the shared store failed: evaluated from memory, marked, merged once
    # the store answers.
    def merge(self, record: bytes, wall_now: float, now: float, expect: tuple[str, str]) -> RunLoad: ...
    def mark_unmerged(self, tenant: str, run_id: str, root: str) -> bool: ...  # True: newly marked
    def clear_unmerged(self, tenant: str, run_id: str) -> bool: ...
    def unmerged(self) -> list[MarkedRun]: ...
    def unmerged_count(self) -> int: ...
    # Fencing: the owner generation of a held run's copy (0: none known or not held), and until
    # when (the core's clock) this replica's lease on it is known to be live.
    def owner_gen(self, tenant: str, run_id: str) -> int: ...
    def set_owner_gen(self, tenant: str, run_id: str, gen: int, lease_until: float | None = None) -> None: ...
    def lease_lapsed(self, tenant: str, run_id: str, now: float) -> bool: ...
    def forget(self, tenant: str, run_id: str) -> bool: ...  # drop a held run, the store keeps it
    def encode_run(self, tenant: str, run_id: str, wall_now: float, now: float) -> bytes | None: ...  # test hook

@final
class Exemptions:
    """Core.exemptions: standing exemptions as the API shows them and the state store moves them."""
    def of_tenant(self, tenant: str, agent_id: str, tool_name: str, wall_now: float,
                  now: float) -> list[ExemptionView]: ...
    def of_run(self, tenant: str, run_id: str, wall_now: float, now: float) -> list[ExemptionView]: ...
    def revoke(self, tenant: str, id: str, wall_now: float, now: float) -> ExemptionView | None: ...
    def count(self, now: float) -> int: ...
    def track_changes(self) -> None: ...
    def dirty_count(self) -> int: ...
    def take_dirty(self) -> list[str]: ...
    def redirty(self, tenants: list[str]) -> None: ...
    def encode(self, tenant: str, wall_now: float, now: float) -> StoredTable | None: ...
    def absent(self, tenant: str) -> None: ...
    def load(self, record: bytes, wall_now: float, now: float) -> TableLoad: ...

@final
class Core:
    """One daemon's run store and compiled config; its roles are typed objects over it."""
    debug_logs: bool
    _panic_tool: str | None  # test hook: a call of this tool makes the core panic
    def __init__(self, instance_id: str, max_runs: int, idle_ttl_seconds: float, limits: Limits,
                 latency_bounds: list[float]) -> None: ...
    def configure(self, default: Settings, agents: dict[str, Settings], provider_send_tools: list[str],
                  extra_poll_tools: list[str]) -> None: ...
    @property
    def limits(self) -> Limits: ...
    def set_tenant_quota(self, runs: int) -> None: ...  # 0: no per-tenant run quota
    def __len__(self) -> int: ...
    def expire_idle(self, now: float, budget: int) -> int: ...
    @property
    def evaluator(self) -> Evaluator: ...
    @property
    def inspection(self) -> Inspection: ...
    @property
    def persistence(self) -> Persistence: ...
    @property
    def exemptions(self) -> Exemptions: ...
