"""The compiled engine (loopwarden-core) seen from Python: what happens per request and per config.

Design. The core owns everything per event: protobuf decode, envelope limits, the run store,
retries, fingerprints, detectors, the guard, decision ids and the response bytes. Python crosses
into it once per request (or once per replayed event, with the event's fields: no protobuf round
trip; the hook endpoints send Evaluate requests, transport/hook_requests.py) and gets back a
typed `Answer`: the response, and a `Summary` of counter deltas, latency counts, the decisions
worth a log line and the runs it evicted. Here those become Prometheus
increments and decision log lines. Config stays Python's: each (re)load is compiled into one
typed `loopwarden_core.Settings` per agent and handed over whole.

Every counter code, detector id and action name comes from the core (`loopwarden_core.COUNTERS`,
`DETECTORS`, `ACTIONS`): Python has no second table of them.

The core's face is split by role, each a typed object over the same core: `evaluator` (here),
`inspection` and `exemptions` (here, for the servicer), `persistence` (the state store's side,
statestore/runs.py). This module knows nothing of the state store: a lazy answer's runs are
loaded by whatever `LoadsRuns` the transport hands `loaded` (statestore/loader.py's RunLoader).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol, cast

import loopwarden_core
from loopwarden.eventformat import EventRecord

from .config import Config
from .config.tables import ResolvedSettings
from .integration import current_integration
from .logs import log_batch
from .metrics import LATENCY_BUCKETS, Metrics, from_scrape_thread
from .settings import Limits

decision_log = logging.getLogger("loopwarden.decisions")

# The counters a Summary's deltas increment, by the core's own codes. Plain ints (an IntEnum
# member costs ~6x an int in each comparison of the per-request loop); a name the core does not
# export fails the import.
_CODE = {name: code for code, name in enumerate(loopwarden_core.COUNTERS)}
EVENTS, REJECTED, VERDICTS, RETRIED, SHADOW, WARNINGS, BLOCKS, ESCALATION_ABORTS, GUARD_ABORTS, LIMIT_ABORTS, \
    OUTPUT_LOOP_ABORTS = (
    _CODE[name] for name in ("events", "rejected", "verdicts", "retried", "shadow", "warnings", "blocks",
                             "escalation_aborts", "guard_aborts", "limit_aborts", "output_loop_aborts"))
ASKS, APPROVALS = _CODE["asks"], _CODE["approvals"]

Answer = loopwarden_core.Answer
Pending = loopwarden_core.Pending
Summary = loopwarden_core.Summary
RunView = loopwarden_core.RunView
RecordView = loopwarden_core.RecordView
ExemptionView = loopwarden_core.ExemptionView
TotalsView = loopwarden_core.TotalsView
OutputStreaksView = loopwarden_core.OutputStreaksView
CoreVerdict = loopwarden_core.Verdict


class LoadsRuns(Protocol):
    """What loads a lazy answer's runs from a shared state store (statestore/loader.py's
    RunLoader): the transport hands one to `CoreService.loaded`."""

    async def ensure_loaded(self, tenant: str, runs: Sequence[str | loopwarden_core.MissingRun]) -> None: ...


def core_limits(limits: Limits) -> loopwarden_core.Limits:
    """The envelope limits the core enforces, as its typed struct, each by name (the keywords are
    generated from tables/loopwarden.toml's `core = true` limits, so a limit added there is passed
    on here, and checked by mypy against the stub)."""
    return loopwarden_core.Limits(
        # generated:core-limits:begin (tables/loopwarden.toml [[limit]]: edit there, then `make tables`)
        max_params_bytes=limits.max_params_bytes,
        max_result_bytes=limits.max_result_bytes,
        max_run_id_chars=limits.max_run_id_chars,
        max_tool_name_chars=limits.max_tool_name_chars,
        max_agent_id_chars=limits.max_agent_id_chars,
        max_session_id_chars=limits.max_session_id_chars,
        max_tool_call_id_chars=limits.max_tool_call_id_chars,
        max_json_depth=limits.max_json_depth,
        max_output_text_bytes=limits.max_output_text_bytes,
        max_events_per_request=limits.max_events_per_request,
        # generated:core-limits:end
    )


def core_settings(settings: ResolvedSettings) -> loopwarden_core.Settings:
    """The settings as the core's typed object, each field by name (tool rules compiled: their
    paths as parsed steps). The keywords are generated from tables/loopwarden.toml, and every one
    is required, so a setting added there and left out here fails the type check and the call."""
    return loopwarden_core.Settings(
        # generated:core-settings:begin (tables/loopwarden.toml: edit there, then `make tables`)
        enabled=settings.enabled,
        history_size=settings.history_size,
        warning_threshold=settings.warning_threshold,
        critical_threshold=settings.critical_threshold,
        unknown_tool_threshold=settings.unknown_tool_threshold,
        global_circuit_breaker_threshold=settings.global_circuit_breaker_threshold,
        generic_repeat=settings.generic_repeat,
        known_poll_no_progress=settings.known_poll_no_progress,
        ping_pong=settings.ping_pong,
        compaction_window_size=settings.compaction_window_size,
        abort_after_blocks=settings.abort_after_blocks,
        run_wide_breaker_threshold=settings.run_wide_breaker_threshold,
        shadow=settings.shadow,
        argument_churn_warn_at=settings.argument_churn_warn_at,
        argument_churn_block_at=settings.argument_churn_block_at,
        error_repeat_threshold=settings.error_repeat_threshold,
        same_outcome_block_at=settings.same_outcome_block_at,
        same_outcome_inconclusive_block_at=settings.same_outcome_inconclusive_block_at,
        ping_pong_needs_answers=settings.ping_pong_needs_answers,
        tool_rules=settings.tool_rules.compiled(),
        duplicate_side_effect=settings.duplicate_side_effect,
        cycle_warn_after=settings.cycle_warn_after,
        cycle_block_after=settings.cycle_block_after,
        exec_failure_streak=settings.exec_failure_streak,
        failure_cascade_threshold=settings.failure_cascade_threshold,
        parallel_batches=settings.parallel_batches,
        critical_scope=settings.critical_scope,
        progress_resets_repeats=settings.progress_resets_repeats,
        user_turn_resets=settings.user_turn_resets,
        run_tree_max_depth=settings.run_tree_max_depth,
        run_tree_max_children=settings.run_tree_max_children,
        budget_tool_calls_per_run=settings.budget_tool_calls_per_run,
        budget_tool_calls_per_tree=settings.budget_tool_calls_per_tree,
        budget_tool_seconds_per_tree=settings.budget_tool_seconds_per_tree,
        budget_tokens_per_tree=settings.budget_tokens_per_tree,
        budget_cost_usd_per_tree=settings.budget_cost_usd_per_tree,
        budget_wall_seconds_per_tree=settings.budget_wall_seconds_per_tree,
        budget_warn_at=settings.budget_warn_at,
        on_budget=settings.on_budget,
        on_critical=settings.on_critical,
        ask_timeout_seconds=settings.ask_timeout_seconds,
        exemption_ttl_seconds=settings.exemption_ttl_seconds,
        repeated_output_warn_at=settings.repeated_output_warn_at,
        repeated_output_abort_at=settings.repeated_output_abort_at,
        repeated_output_chunk_chars=settings.repeated_output_chunk_chars,
        repeated_output_chunk_repeats=settings.repeated_output_chunk_repeats,
        compaction_storm_abort_at=settings.compaction_storm_abort_at,
        stop_continuation_abort_at=settings.stop_continuation_abort_at,
        repeated_final_answer_warn_at=settings.repeated_final_answer_warn_at,
        repeated_final_answer_abort_at=settings.repeated_final_answer_abort_at,
        # generated:core-settings:end
    )


class CoreService:
    """One daemon's runs in the compiled core."""

    def __init__(self, config: Config, metrics: Metrics, limits: Limits, *, max_runs: int,
                 idle_ttl_seconds: float, clock: Callable[[], float], instance_id: str = "lw") -> None:
        self.metrics = metrics
        self.limits = limits
        self.clock = clock
        self.idle_ttl_seconds = float(idle_ttl_seconds)
        # runs_loaded{memory} of a shared state store: events of a lazy request whose run was held
        self.on_held: Callable[[int], None] | None = None
        self.native = loopwarden_core.Core(
            instance_id, max_runs, float(idle_ttl_seconds), core_limits(limits), list(LATENCY_BUCKETS))
        # The core's roles, each a typed object over it (persistence: statestore/runs.py's).
        self.evaluator = self.native.evaluator
        self.inspection = self.native.inspection
        self.exemptions = self.native.exemptions
        self._config = config
        self.swap_config(config)
        metrics.active_runs.set_function(from_scrape_thread(lambda: len(self.native)))
        metrics.exemptions_in_force.set_function(from_scrape_thread(lambda: self.exemptions.count(self.clock())))
        # Exemption times are the core's clock in memory and Unix seconds outside.
        self.wall_clock: Callable[[], float] = time.time

    @property
    def config(self) -> Config:
        return self._config

    def swap_config(self, config: Config) -> None:
        """Compile the config once: settings per agent id, the defaults, the tool catalog."""
        agents = {agent: core_settings(settings) for agent, settings in config.agent_settings.items()}
        catalog = config.tool_catalog
        self.native.configure(core_settings(config.global_settings), agents,
                              sorted(catalog.provider_send_tools), sorted(catalog.extra_poll_tools))
        self._config = config

    def __len__(self) -> int:
        return len(self.native)

    # ------------------------------------------------------------------ per request

    def evaluate(self, data: bytes, tenant: str = "", routed: str = "", *, lazy: bool = False,
                 report: bool = False, agent_only: bool = False) -> Answer:
        """EvaluateRequest bytes. `routed`: the stream's x-loopwarden-run-id. `lazy` (a shared
        state store): when the request names runs not in memory, the answer names them and holds
        the decoded request for `resume`. `report`: the summary lists the decisions for spans.
        `agent_only`: the caller's token is limited to agent-side events (its user turns and
        approvals are refused, REJECT user_side_only)."""
        self.native.debug_logs = decision_log.isEnabledFor(logging.DEBUG)
        return self._applied(self.evaluator.evaluate(data, tenant, self.clock(), routed, lazy, report, agent_only),
                             tenant)

    def check(self, data: bytes, tenant: str = "", routed: str = "", *, lazy: bool = False,
              report: bool = False, agent_only: bool = False) -> Answer:
        """CheckRequest bytes; the refusal `missing_event` when it carries none. `agent_only`: the
        caller's token is limited to agent-side events (its user turns and approvals are refused)."""
        self.native.debug_logs = decision_log.isEnabledFor(logging.DEBUG)
        return self._applied(self.evaluator.check(data, tenant, self.clock(), routed, lazy, report, agent_only),
                             tenant)

    def decide(self, record: EventRecord, tenant: str = "", *, lazy: bool = False) -> Answer:
        """One event from its record (offline replay, the MCP proxy's offline judge): the
        answer's `verdict` is the decision. No protobuf on the way in or out."""
        self.native.debug_logs = decision_log.isEnabledFor(logging.DEBUG)
        answer = self.evaluator.decide(record, tenant=tenant, now=self.clock(), lazy=lazy)
        return self._applied(answer, tenant)

    def resume(self, pending: Pending, tenant: str = "", routed: str = "", *, report: bool = False) -> Answer:
        """A request a lazy call set aside, now that its runs are loaded (decoded once)."""
        return self._applied(self.evaluator.resume(pending, tenant, self.clock(), routed, report), tenant)

    async def loaded(self, answer: Answer, loader: LoadsRuns, tenant: str, routed: str = "", *,
                     report: bool = False) -> Answer:
        """A lazy answer once the runs it names are loaded from the shared store: the request it
        set aside, evaluated. Any other answer as it is."""
        if not answer.missing_runs:
            return answer
        await loader.ensure_loaded(tenant, answer.missing_runs)
        return self.resume(cast(Pending, answer.pending), tenant, routed, report=report)  # set with missing_runs

    # ------------------------------------------------------------------ runs

    def set_tenant_quota(self, runs: int) -> None:
        """Runs one tenant may hold (0: none, one pool); tenancy.py sets it."""
        self.native.set_tenant_quota(runs)

    def held(self, tenant: str, run_id: str) -> bool:
        return self.inspection.held(tenant, run_id)

    def inspect(self, run_id: str, tenant: str = "") -> RunView | None:
        return self.inspection.run(tenant, run_id, self.clock())

    # ------------------------------------------------------------------ standing exemptions

    def list_exemptions(self, tenant: str = "", agent_id: str = "", tool_name: str = "") -> list[ExemptionView]:
        """The tenant's standing exemptions, newest first (empty filters match all)."""
        return self.exemptions.of_tenant(tenant, agent_id, tool_name, self.wall_clock(), self.clock())

    def run_exemptions(self, run_id: str, tenant: str = "") -> list[ExemptionView]:
        """The tenant's exemptions that apply to a held run's agent (InspectRun)."""
        return self.exemptions.of_run(tenant, run_id, self.wall_clock(), self.clock())

    def revoke_exemption(self, exemption_id: str, tenant: str = "") -> ExemptionView | None:
        """Withdraw one of the tenant's exemptions; None when it holds no such id."""
        return self.exemptions.revoke(tenant, exemption_id, self.wall_clock(), self.clock())

    def count_evictions(self, reasons: list[str], tenant: str = "") -> None:
        for reason in reasons:
            self.metrics.eviction_of(reason, tenant).inc()

    def expire_idle(self, budget: int = 10_000) -> int:
        dropped = self.native.expire_idle(self.clock(), budget)
        if dropped:
            self.metrics.eviction_of("idle_ttl").inc(dropped)
        return dropped

    # ------------------------------------------------------------------ the summary

    def _applied(self, answer: Answer, tenant: str) -> Answer:
        summary = answer.summary
        if summary is None:  # refused whole: nothing was evaluated
            return answer
        if answer.missing_runs:  # nothing evaluated yet: only the runs already held count
            if summary.held_runs and self.on_held is not None:
                self.on_held(summary.held_runs)
            return answer
        self._apply(summary, tenant)
        return answer

    def _apply(self, summary: loopwarden_core.Summary, tenant: str) -> None:
        """The request's counter deltas, latency counts, decision log lines and evictions."""
        metrics = self.metrics
        tenant_labels = metrics.tenant_labels(tenant)
        for delta in summary.counters:
            code, first, agent, count = delta.counter, delta.first, delta.agent, delta.count
            if code == EVENTS:
                metrics.event_of(first).inc(count)
            elif code == VERDICTS:
                metrics.verdict_of(first, delta.second, agent, current_integration.get(), *tenant_labels).inc(count)
            elif code == REJECTED:
                metrics.rejected_of(first).inc(count)
            elif code == RETRIED:
                metrics.retried_events.inc(count)
            elif code == WARNINGS:
                metrics.warning_of(first, agent, *tenant_labels).inc(count)
            elif code == BLOCKS:
                metrics.block_of(first, agent, *tenant_labels).inc(count)
            elif code == SHADOW:
                metrics.shadow_verdict_of(first, delta.second).inc(count)
            elif code == ESCALATION_ABORTS:
                metrics.escalation_abort_of(first, agent, *tenant_labels).inc(count)
            elif code == GUARD_ABORTS:
                metrics.guard_abort_of(agent, *tenant_labels).inc(count)
            elif code == ASKS:
                metrics.ask_of(first, agent).inc(count)
            elif code == APPROVALS:
                metrics.approval_of(first, agent).inc(count)
            elif code == LIMIT_ABORTS:
                metrics.limit_abort_of(first, agent, *tenant_labels).inc(count)
            elif code == OUTPUT_LOOP_ABORTS:
                metrics.output_loop_abort_of(first, agent, *tenant_labels).inc(count)
        metrics.evaluation_seconds.add_counts(summary.latency_buckets, summary.latency_sum)
        if summary.logs:
            log_batch(decision_log, ((line.level, line.message, line.extra) for line in summary.logs))
        for reason in summary.evictions:
            metrics.eviction_of(reason, tenant).inc()
        if summary.held_runs and self.on_held is not None:
            self.on_held(summary.held_runs)
