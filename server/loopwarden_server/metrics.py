"""Every Prometheus metric of the daemon, defined once, on an injected registry.

Labels are bounded: detector, action, kind, error code, reason, result, and an `agent` label that
is an agent id named in the config or "default". Never a run id, tool arguments or free text.
"""
from __future__ import annotations

import platform
import time
from bisect import bisect_left
from collections.abc import Callable

import loopwarden_core
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

# Per-event evaluation is microseconds; resolve the 5 µs - 100 µs range finely.
LATENCY_BUCKETS = (
    0.000005, 0.00001, 0.00002, 0.00003, 0.00004, 0.00005, 0.000075, 0.0001, 0.00025, 0.0005,
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
)

VERSION = "0.1.0"
HOOK_UNCHECKED_REASONS = ("busy", "timeout", "draining", "restoring", "too_large", "too_deep", "slow_body", "failed")
DEFAULT_AGENT = "default"
# The rolling detectors (the guard aborts, it never warns or blocks): label values known up front.
DETECTORS = tuple(d for d in loopwarden_core.DETECTORS if d != "post_compaction_guard")
# The detectors of loops without tool calls, whose ABORTs loopwarden_output_loop_aborts counts.
OUTPUT_LOOP_DETECTORS = ("repeated_output", "compaction_storm", "stop_continuation", "repeated_final_answer")


# PyO3's refusal of a read while a call holds the core mutably (its exact message).
_BORROWED = "Already mutably borrowed"
SCRAPE_READ_PATIENCE_SECONDS = 1.0


def from_scrape_thread(read: Callable[[], float]) -> Callable[[], float]:
    """`read` of the core, made safe to call from the metrics server's thread.

    The event loop thread's calls into the core hold it mutably; one that allocates Python
    objects can start a garbage collection whose finalizers run Python code, and the
    interpreter may hand the GIL to another thread right there. A scrape reading the core at
    that moment is refused by PyO3's borrow check: it waits for the call to end (sleeping lets
    the GIL go back to it) instead of failing the whole scrape with a 500.
    """
    def patient() -> float:
        deadline = time.monotonic() + SCRAPE_READ_PATIENCE_SECONDS
        while True:
            try:
                return read()
            except RuntimeError as exc:
                if _BORROWED not in str(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(0.0005)
    return patient


class _Count:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


class EventLoopCounter:
    """A labelled counter for the per-event path: children are plain numbers, no lock.

    NOTE: only the event loop thread increments; the scrape thread reads. Reading a float
    attribute is atomic under the GIL, so a scrape sees each child's value before or after an
    increment, never a torn one. prometheus_client's own Counter takes a lock per increment.
    """

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...], registry: CollectorRegistry):
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self._children: dict[tuple[str, ...], _Count] = {}
        registry.register(self)

    def labels(self, *values: str) -> _Count:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = _Count()
        return child

    def collect(self):
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in list(self._children.items()):
            family.add_metric(values, child.value)
        yield family

    def describe(self):
        yield CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)


class EventLoopHistogram:
    """An unlabelled histogram for the per-event path: bisect into plain counts, no lock."""

    def __init__(self, name: str, documentation: str, buckets: tuple[float, ...], registry: CollectorRegistry):
        self.name, self.documentation = name, documentation
        self._bounds = list(buckets)
        self._counts = [0] * (len(buckets) + 1)  # the last one is +Inf
        self._sum = 0.0
        registry.register(self)

    def observe(self, value: float) -> None:
        self._counts[bisect_left(self._bounds, value)] += 1
        self._sum += value

    def add_counts(self, counts: list[int], total: float) -> None:
        """Observations counted elsewhere (the core times each event): counts per bucket, as
        this histogram's buckets are laid out, and their sum."""
        mine = self._counts
        for index, count in enumerate(counts):
            if count:
                mine[index] += count
        self._sum += total

    def collect(self):
        counts, total, cumulative = list(self._counts), self._sum, 0
        buckets = []
        for bound, count in zip([*self._bounds, float("inf")], counts):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        yield HistogramMetricFamily(self.name, self.documentation, buckets=buckets, sum_value=total)

    def describe(self):
        yield HistogramMetricFamily(self.name, self.documentation)


class _Children:
    """labels() takes a lock and builds a key on every call; on the per-event path the few
    label combinations are resolved once and kept here (label values are bounded sets)."""

    __slots__ = ("_metric", "_cache")

    def __init__(self, metric) -> None:
        self._metric = metric
        self._cache: dict[tuple, object] = {}

    def __call__(self, *labels: str):
        child = self._cache.get(labels)
        if child is None:
            child = self._cache[labels] = self._metric.labels(*labels)
        return child


OTHER_TENANT = "other"


class Metrics:
    """Every metric of the daemon, on an injected registry. Label values come from bounded sets.

    With `tenant_label` on, the verdict, warning, block and abort counters carry a `tenant` label:
    the tenant's name when the token file names it (`known_tenants`), else "other", so a client
    cannot create series. Off (the default), they carry none.
    """

    def __init__(self, registry: CollectorRegistry, grpc_version: str = "unknown", *, tenant_label: bool = False,
                 known_tenants: Callable[[], frozenset[str]] = frozenset) -> None:
        self.registry = registry
        self._tenant_label = tenant_label
        self._known_tenants = known_tenants
        tenant = ["tenant"] if tenant_label else []
        self.warnings = Counter(
            "loopwarden_warnings",
            "Announced loop warnings (first per pattern and run, then once per decade of count).",
            ["detector", "agent", *tenant], registry=registry)
        self.blocks = Counter(
            "loopwarden_blocks", "Tool calls blocked because a loop detector reached its critical level.",
            ["detector", "agent", *tenant], registry=registry)
        self.guard_aborts = Counter(
            "loopwarden_guard_aborts", "Runs aborted by the post-compaction guard (compaction_loop_persisted).",
            ["agent", *tenant], registry=registry)
        self.limit_aborts = Counter(
            "loopwarden_limit_aborts", "Runs aborted by a limit: budget_exhausted (loopwarden.budgets), tree_too_deep "
            "and too_many_children (loopwarden.runTree).",
            ["reason", "agent", *tenant], registry=registry)
        self.output_loop_aborts = Counter(
            "loopwarden_output_loop_aborts", "Runs aborted by a detector of loops without tool calls (repeated_output, "
            "compaction_storm, stop_continuation, repeated_final_answer).",
            ["detector", "agent", *tenant], registry=registry)
        self.escalation_aborts = Counter(
            "loopwarden_escalation_aborts", "Runs aborted because they reached abortAfterBlocks (tool_loop_persisted).",
            ["detector", "agent", *tenant], registry=registry)
        self.shadow_verdicts = Counter(
            "loopwarden_shadow_verdicts",
            "Shadow mode: BLOCK/ABORT verdicts computed but not enforced, by the action withheld.",
            ["action", "detector"], registry=registry)
        self.verdicts = EventLoopCounter(
            "loopwarden_verdicts", "Verdicts given, by action, deciding detector (none for a plain allow), agent and "
            "integration (grpc, claude_code, codex, gemini_cli, cursor, mcp_proxy, langchain, openai_agents, openclaw, "
            "other).",
            ("action", "detector", "agent", "integration", *tenant), registry)
        self.events = EventLoopCounter(
            "loopwarden_events", "Events received, by kind (unknown when the event had none).",
            ("kind",), registry)
        self.rejected = Counter(
            "loopwarden_rejected_events", "Events rejected as malformed, by error code.",
            ["error_code"], registry=registry)
        self.rejected_requests = Counter(
            "loopwarden_rejected_requests", "Requests refused whole, ending their stream or call, by reason "
            "(too_many_events, undecodable, tenant_streams: a tenant over its share of Evaluate streams).",
            ["reason"], registry=registry)
        self.retried_events = Counter(
            "loopwarden_retried_events", "Events recognised as retries (same run, seq and content) and answered "
            "with their first verdict.", registry=registry)
        self.idle_streams_closed = Counter(
            "loopwarden_idle_streams_closed", "Evaluate streams closed after sending nothing for the idle timeout.",
            registry=registry)
        self.auth_failures = Counter(
            "loopwarden_auth_failures", "RPCs refused UNAUTHENTICATED, by reason (missing_token, invalid_token, "
            "token_file_unusable).", ["reason"], registry=registry)
        self.hooks_unchecked = Counter(
            "loopwarden_hook_requests_unchecked",
            "Hook requests answered in the host's format without a verdict (the call not checked, or "
            "denied under --hooks-fail-closed), by reason: busy (the tenant's share of concurrent hook "
            "requests is taken), timeout, draining, restoring, too_large, too_deep, slow_body, failed.",
            ["reason"], registry=registry)
        self.hooks_refused = Counter(
            "loopwarden_hook_events_refused",
            "Hook events the daemon answered but could not judge, by reason and host: the engine's error "
            "code for an event it refused (a REJECT: json_too_deep, invalid_params_json, run_id_too_long, ...), "
            "not_json or "
            "not_hook_input for an input it could not read. The call ran with the reason shown, or was "
            "denied under --hooks-fail-closed.",
            ["reason", "host"], registry=registry)
        self.token_file_ok = Gauge(
            "loopwarden_token_file_ok", "1 while the bearer token file is readable and holds tokens; 0 while it "
            "fails closed (every authenticated RPC refused).", registry=registry)
        self.evaluation_seconds = EventLoopHistogram(
            "loopwarden_evaluation_duration_seconds", "Time to evaluate one event inside the daemon, in seconds.",
            LATENCY_BUCKETS, registry)
        self.active_runs = Gauge(
            "loopwarden_active_runs", "Runs whose state the daemon currently holds.", registry=registry)
        self.active_streams = Gauge(
            "loopwarden_active_streams", "Open Evaluate streams.", registry=registry)
        self.evictions = Counter(
            "loopwarden_run_evictions", "Run states dropped before run_end, by reason (idle_ttl, max_runs, or "
            "tenant_quota: a tenant's new run past its run quota evicted its own oldest); with --tenant-label, "
            "by the tenant whose event caused it.", ["reason", *tenant], registry=registry)
        self.config_reloads = Counter(
            "loopwarden_config_reloads", "Config file reloads, by result (success or failure).",
            ["result"], registry=registry)
        self.config_last_reload_ok = Gauge(
            "loopwarden_config_last_reload_successful",
            "1 if the last config reload succeeded (or none was tried), else 0.",
            registry=registry)
        self.asks = Counter(
            "loopwarden_asks", "Tool calls held for a person (ACTION_ASK), by the detector whose critical asked.",
            ["detector", "agent"], registry=registry)
        self.approvals = Counter(
            "loopwarden_approvals", "Answers to an ASK, by answer (approved_once, approved_always, denied, and "
            "timed_out: no answer within askTimeoutSeconds, counted as a denial).",
            ["answer", "agent"], registry=registry)
        self.exemptions_in_force = Gauge(
            "loopwarden_exemptions", "Standing exemptions (\"always\" answers to an ASK) in force, every tenant's.",
            registry=registry)
        self.build_info = Gauge(
            "loopwarden_build_info",
            "Build information; always 1. engine: the per-event engine (core: the compiled loopwarden-core).",
            ["version", "python_version", "grpc_version", "engine"], registry=registry)

        self.warning_of = _Children(self.warnings)
        self.block_of = _Children(self.blocks)
        self.guard_abort_of = _Children(self.guard_aborts)
        self.escalation_abort_of = _Children(self.escalation_aborts)
        self.limit_abort_of = _Children(self.limit_aborts)
        self.output_loop_abort_of = _Children(self.output_loop_aborts)
        self.shadow_verdict_of = _Children(self.shadow_verdicts)
        self.verdict_of = _Children(self.verdicts)
        self.event_of = _Children(self.events)
        self.rejected_of = _Children(self.rejected)
        self.ask_of = _Children(self.asks)
        self.approval_of = _Children(self.approvals)

        self._build = (VERSION, platform.python_version(), grpc_version)
        self.set_engine("python")
        # Series that exist from the first scrape make rate() and absent() alerts behave.
        default_tenant = (OTHER_TENANT,) if tenant_label else ()
        for detector in DETECTORS:
            self.warnings.labels(detector, DEFAULT_AGENT, *default_tenant)
            self.blocks.labels(detector, DEFAULT_AGENT, *default_tenant)
        self.guard_aborts.labels(DEFAULT_AGENT, *default_tenant)
        for answer in ("approved_once", "approved_always", "denied", "timed_out"):
            self.approvals.labels(answer, DEFAULT_AGENT)
        for reason in ("budget_exhausted", "tree_too_deep", "too_many_children"):
            self.limit_aborts.labels(reason, DEFAULT_AGENT, *default_tenant)
        for detector in OUTPUT_LOOP_DETECTORS:
            self.output_loop_aborts.labels(detector, DEFAULT_AGENT, *default_tenant)
        for reason in ("too_many_events", "undecodable", "tenant_streams"):
            self.rejected_requests.labels(reason)
        for reason in ("missing_token", "invalid_token", "token_file_unusable"):
            self.auth_failures.labels(reason)
        self.token_file_ok.set(1)
        for reason in HOOK_UNCHECKED_REASONS:
            self.hooks_unchecked.labels(reason)
        self.config_last_reload_ok.set(1)
        for reason in ("idle_ttl", "max_runs", "tenant_quota"):
            self.evictions.labels(reason, *default_tenant)
        for result in ("success", "failure"):
            self.config_reloads.labels(result)

    def set_engine(self, engine: str) -> None:
        """The engine this daemon evaluates with, as build info shows it (one series)."""
        self.build_info.clear()
        self.build_info.labels(*self._build, engine).set(1)

    def eviction_of(self, reason: str, tenant: str = ""):
        """The evictions counter of `reason`, labelled with `tenant` (the one whose event caused it;
        "" for the idle sweep, which counts as "other") when --tenant-label is on."""
        return self.evictions.labels(reason, *self.tenant_labels(tenant))

    def tenant_labels(self, tenant: str) -> tuple[str, ...]:
        """The tenant label value(s) to append to a counter's labels: () when the label is off."""
        if not self._tenant_label:
            return ()
        return (tenant,) if tenant and tenant in self._known_tenants() else (OTHER_TENANT,)
