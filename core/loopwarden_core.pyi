"""loopwarden-core: the compiled per-event engine (Rust). The daemon's Python is its typed face.

Every object the core returns is frozen and read by name. Nothing here does I/O: the daemon
feeds it request bytes or event fields and turns its answers into metrics, logs and replies.
"""
from typing import final

__version__: str

# Shared vocabulary, defined once in the core.
COUNTERS: tuple[str, ...]
"""Counter names by code: COUNTERS[delta.counter] names the metric a CounterDelta increments."""
DETECTORS: tuple[str, ...]
"""Every detector id a verdict can carry."""
ACTIONS: tuple[str, ...]
LEVELS: tuple[str, ...]

def canonical_json(text: str, max_depth: int = 64) -> bytes: ...
def args_digest(tool_name: str, params_json: str) -> bytes: ...
def outcome_fingerprint(tool_name: str, params_json: str, result_json: str | None, error: str | None,
                        provider_send_tools: list[str] = ..., extra_poll_tools: list[str] = ...
                        ) -> tuple[int, bytes, str | None]: ...
def normalize_tool_name(raw: str) -> str: ...
def parse_json_path(text: str) -> list[str | None]: ...

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
    """A decoded request waiting for its runs to be loaded; hand it to Core.resume."""

@final
class Answer:
    response: bytes | None
    verdict: Verdict | None
    refusal: str
    missing_runs: list[tuple[str, str]]  # (run id, its tree's root)
    pending: Pending | None
    summary: Summary | None

@final
class RecordView:
    seq: int
    tool_name: str
    args_hash: str
    tool_call_id: str
    result_hash: str
    unknown_tool_name: str

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
class Core:
    debug_logs: bool
    def __init__(self, instance_id: str, max_runs: int, idle_ttl_seconds: float, limits: dict[str, int],
                 latency_bounds: list[float]) -> None: ...
    def configure(self, default: dict[str, object], agents: dict[str, dict[str, object]],
                  provider_send_tools: list[str], extra_poll_tools: list[str]) -> None: ...
    # agent_only: the caller's token is limited to agent-side events (user_turn and approval are
    # REJECTed user_side_only); a lazy answer's Pending keeps it for resume.
    def evaluate(self, data: bytes, tenant: str, now: float, routed: str = "", lazy: bool = False,
                 report: bool = False, agent_only: bool = False) -> Answer: ...
    def check(self, data: bytes, tenant: str, now: float, routed: str = "", lazy: bool = False,
              report: bool = False, agent_only: bool = False) -> Answer: ...
    def decide(self, kind: str, run_id: str, *, tenant: str = "", now: float = 0.0, agent_id: str = "",
               session_id: str = "", seq: int = 0, tool_name: str = "", params_json: str = "",
               tool_call_id: str = "", result_json: str | None = None, error: str | None = None,
               lazy: bool = False, report: bool = False, tool_class: str = "", batch_id: str = "",
               prompt_id: str = "", parent_run_id: str = "", accepts_ask: bool = False, duration_ms: int = 0,
               input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0, model: str = "",
               decision_id: str = "", approved: bool = False, scope: str = "", ttl_seconds: int = 0) -> Answer: ...
    def resume(self, pending: Pending, tenant: str, now: float, routed: str = "", report: bool = False) -> Answer: ...
    def set_tenant_quota(self, runs: int) -> None: ...  # 0: no per-tenant run quota
    def tenant_runs(self, tenant: str) -> int: ...
    def track_changes(self, evictions_delete: bool) -> None: ...
    def dirty_count(self) -> int: ...
    def take_dirty(self) -> list[tuple[tuple[str, str], bool, str]]: ...  # ((tenant, run), held, root)
    def redirty(self, items: list[tuple[tuple[str, str], bool, str]]) -> None: ...
    def clear(self) -> None: ...
    def held(self, tenant: str, run_id: str) -> bool: ...
    def encode_run(self, tenant: str, run_id: str, wall_now: float, now: float) -> bytes | None: ...
    # A flush's stored value (core/src/stored.rs), or with `deltas` perhaps a delta.
    def take_record(self, tenant: str, run_id: str, wall_now: float, now: float,
                    deltas: bool = False) -> bytes | None: ...
    # ("restored" | "restored_base_only" | "expired" | "mismatch", eviction reasons)
    def load_run(self, record: bytes, wall_now: float, now: float, expect: tuple[str, str] | None = None,
                 delta: bytes | None = None) -> tuple[str, list[str]]: ...
    # A run whose load from the shared store failed: evaluated from memory, marked, merged once
    # the store answers. ("merged" | "restored" | "held" | "expired" | "mismatch", eviction reasons)
    def merge_run(self, record: bytes, wall_now: float, now: float,
                  expect: tuple[str, str]) -> tuple[str, list[str]]: ...
    def mark_unmerged(self, tenant: str, run_id: str, root: str) -> bool: ...  # True: newly marked
    def clear_unmerged(self, tenant: str, run_id: str) -> bool: ...
    def unmerged_runs(self) -> list[tuple[str, str, str]]: ...  # (tenant, run_id, root)
    def unmerged_count(self) -> int: ...
    # Fencing: the owner generation of a held run's copy (0: none known or not held), and until
    # when (the core's clock) this replica's lease on it is known to be live.
    def owner_gen(self, tenant: str, run_id: str) -> int: ...
    def set_owner_gen(self, tenant: str, run_id: str, gen: int, lease_until: float | None = None) -> None: ...
    def lease_lapsed(self, tenant: str, run_id: str, now: float) -> bool: ...
    def forget(self, tenant: str, run_id: str) -> bool: ...  # drop a held run, the store keeps it
    def inspect(self, tenant: str, run_id: str, now: float = 0.0) -> RunView | None: ...
    def __len__(self) -> int: ...
    def expire_idle(self, now: float, budget: int) -> int: ...
    def list_exemptions(self, tenant: str, agent_id: str, tool_name: str, wall_now: float,
                        now: float) -> list[ExemptionView]: ...
    def run_exemptions(self, tenant: str, run_id: str, wall_now: float, now: float) -> list[ExemptionView]: ...
    def revoke_exemption(self, tenant: str, id: str, wall_now: float, now: float) -> ExemptionView | None: ...
    def exemption_count(self, now: float) -> int: ...
    def track_exemptions(self) -> None: ...
    def exemptions_dirty_count(self) -> int: ...
    def take_dirty_exemptions(self) -> list[str]: ...
    def redirty_exemptions(self, tenants: list[str]) -> None: ...
    def encode_exemptions(self, tenant: str, wall_now: float, now: float) -> tuple[bytes, float] | None: ...
    def exemptions_absent(self, tenant: str) -> None: ...
    def load_exemptions(self, record: bytes, wall_now: float, now: float) -> tuple[str, int]: ...
