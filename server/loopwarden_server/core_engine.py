"""The compiled engine (loopwarden-core) seen from Python: what happens per request and per config.

Design. The core owns everything per event: protobuf decode, envelope limits, the run store,
retries, fingerprints, detectors, the guard, decision ids and the response bytes. Python crosses
into it once per request and gets back the response bytes plus a small summary: counter deltas
by label set, the request's latency histogram counts, the few decisions worth a log line, and the
runs it evicted. Here those become Prometheus increments and decision log lines, so metrics and
logs read exactly as with `--engine python`. Config stays Python's: each (re)load is compiled
into one frozen settings mapping per agent and handed over whole.

`available()` says whether the extension is importable; the daemon falls back to the Python
engine (the reference) when it is not.
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from .config import Config
from .engine import LoopDetectionSettings
from .metrics import DEFAULT_AGENT, LATENCY_BUCKETS, Metrics
from .settings import Limits

try:  # an optional distribution: the daemon installs and runs without a Rust toolchain
    import loopwarden_core
except ImportError:  # pragma: no cover - exercised by installs without the extension
    loopwarden_core = None

try:
    from .integration import current_integration
except ImportError:  # pragma: no cover - older trees without the integration label
    current_integration = None

decision_log = logging.getLogger("loopwarden.decisions")

ENGINES = ("core", "python")

# The core's counter codes (core/src/service/summary.rs, `counter`).
EVENTS, REJECTED, VERDICTS, RETRIED, SHADOW, WARNINGS, BLOCKS, ESCALATION_ABORTS, GUARD_ABORTS = range(9)

_SETTINGS_FIELDS = tuple(
    f.name for f in dataclasses.fields(LoopDetectionSettings)
    if f.name not in ("preset",)
)
_LIMIT_FIELDS = ("max_params_bytes", "max_result_bytes", "max_run_id_chars", "max_tool_name_chars",
                 "max_agent_id_chars", "max_session_id_chars", "max_tool_call_id_chars", "max_json_depth",
                 "max_events_per_request")


def available() -> bool:
    return loopwarden_core is not None


def default_engine() -> str:
    return "core" if available() else "python"


def choose_engine(requested: str) -> tuple[str, str]:
    """The engine this daemon runs (`core` or `python`) and, when it is not the one asked for,
    why. "" asks for the default: core when the extension is importable."""
    wanted = requested or "core"
    if wanted == "python":
        return "python", ""
    if not available():
        return "python", "loopwarden-core is not installed (no Rust toolchain at install time; `make core` builds it)"
    return "core", ""


def settings_dict(settings: LoopDetectionSettings) -> dict:
    return {name: getattr(settings, name) for name in _SETTINGS_FIELDS}


class CoreService:
    """One daemon's runs in the compiled core: raw request bytes in, raw response bytes out."""

    def __init__(self, config: Config, metrics: Metrics, limits: Limits, *, max_runs: int,
                 idle_ttl_seconds: float, clock: Callable[[], float], instance_id: str = "lw") -> None:
        if loopwarden_core is None:
            raise RuntimeError("loopwarden-core is not installed (build it with `make core`)")
        self.metrics = metrics
        self.limits = limits
        self.clock = clock
        self.idle_ttl_seconds = float(idle_ttl_seconds)
        # runs_loaded{memory} of a shared state store (keeper.py's `missing` counts the same)
        self.on_held: Callable[[int], None] | None = None
        self.native = loopwarden_core.Core(
            instance_id, max_runs, float(idle_ttl_seconds),
            {name: getattr(limits, name) for name in _LIMIT_FIELDS}, list(LATENCY_BUCKETS))
        self._verdict_labels_have_integration = "integration" in getattr(metrics.verdicts, "labelnames", ())
        self._config = config
        self.swap_config(config)
        metrics.active_runs.set_function(lambda: len(self.native))

    @property
    def config(self) -> Config:
        return self._config

    def swap_config(self, config: Config) -> None:
        """Compile the config once: settings per agent id, the defaults, the tool catalog."""
        agents = {agent: settings_dict(settings) for agent, settings in config.agent_settings.items()}
        catalog = config.tool_catalog
        self.native.configure(settings_dict(config.global_settings), agents,
                             sorted(catalog.provider_send_tools), sorted(catalog.extra_poll_tools))
        self._config = config

    def __len__(self) -> int:
        return len(self.native)

    def evaluate(self, data: bytes, tenant: str = "", routed: str = "", lazy: bool = False) -> bytes | str | list[str]:
        """EvaluateRequest bytes -> EvaluateResponse bytes, or the reason the request is refused
        whole (`undecodable`, `too_many_events`). `routed`: the stream's x-loopwarden-run-id.
        `lazy` (a shared state store): the ids of runs the request names that are not in memory,
        when there are any, and nothing evaluated: load them and call again without `lazy`."""
        self.native.debug_logs = decision_log.isEnabledFor(logging.DEBUG)
        response, summary = self.native.evaluate(data, tenant, self.clock(), routed, lazy)
        if response is None:
            return self._not_loaded(summary)
        self._apply(summary, tenant)
        return response

    def check(self, data: bytes, tenant: str = "", routed: str = "", lazy: bool = False) -> bytes | str | list[str]:
        """CheckRequest bytes -> CheckResponse bytes, or `undecodable` / `missing_event`, or (lazy)
        the run to load first, as `evaluate`."""
        self.native.debug_logs = decision_log.isEnabledFor(logging.DEBUG)
        response, summary = self.native.check(data, tenant, self.clock(), routed, lazy)
        if response is None:
            return self._not_loaded(summary)
        self._apply(summary, tenant)
        return response

    def _not_loaded(self, refusal: str | tuple) -> str | list[str]:
        if type(refusal) is str:
            return refusal
        missing, held = refusal
        if held and self.on_held is not None:
            self.on_held(held)
        return missing

    def held(self, tenant: str, run_id: str) -> bool:
        return self.native.held(tenant, run_id)

    def count_evictions(self, reasons: list[str]) -> None:
        for reason in reasons:
            self.metrics.evictions.labels(reason).inc()

    def inspect(self, run_id: str, tenant: str = "") -> tuple | None:
        """A run's view, None when none is held: (run_id, agent_id, records, (armed, window,
        observed), blocks, aborted, abort_error_code, events_evaluated, [recent Verdict bytes],
        settings, agent label as the metrics spell it); the transport turns it into an
        InspectRunResponse."""
        view = self.native.inspect(tenant, run_id)
        if view is None:
            return None
        config = self._config
        agent = view[1].strip()
        return (*view, config.settings_for(view[1]), agent if agent in config.agent_ids else DEFAULT_AGENT)

    def expire_idle(self, budget: int = 10_000) -> int:
        dropped = self.native.expire_idle(self.clock(), budget)
        if dropped:
            self.metrics.evictions.labels("idle_ttl").inc(dropped)
        return dropped

    def remove(self, tenant: str, run_id: str) -> bool:
        return self.native.remove(tenant, run_id)

    def _apply(self, summary: tuple, tenant: str) -> None:
        """The request's counter deltas, latency counts, decision log lines and evictions."""
        counters, buckets, seconds, logs, evictions, held = summary
        metrics = self.metrics
        tenant_labels = metrics.tenant_labels(tenant)
        integration = ()
        if self._verdict_labels_have_integration:
            integration = (current_integration.get() if current_integration is not None else "grpc",)
        for code, first, second, agent, count in counters:
            if code == EVENTS:
                metrics.event_of(first).inc(count)
            elif code == VERDICTS:
                metrics.verdict_of(first, second, agent, *integration, *tenant_labels).inc(count)
            elif code == REJECTED:
                metrics.rejected_of(first).inc(count)
            elif code == RETRIED:
                metrics.retried_events.inc(count)
            elif code == WARNINGS:
                metrics.warning_of(first, agent, *tenant_labels).inc(count)
            elif code == BLOCKS:
                metrics.block_of(first, agent, *tenant_labels).inc(count)
            elif code == SHADOW:
                metrics.shadow_verdict_of(first, second).inc(count)
            elif code == ESCALATION_ABORTS:
                metrics.escalation_abort_of(first, agent, *tenant_labels).inc(count)
            elif code == GUARD_ABORTS:
                metrics.guard_abort_of(agent, *tenant_labels).inc(count)
        histogram = metrics.evaluation_seconds
        counts = histogram._counts  # noqa: SLF001 - the histogram is ours (metrics.py) and lock-free by design
        for index, count in enumerate(buckets):
            if count:
                counts[index] += count
        histogram._sum += seconds  # noqa: SLF001
        for level, message, extra in logs:
            decision_log.log(level, message, extra=extra)
        for reason in evictions:
            metrics.evictions.labels(reason).inc()
        if held and self.on_held is not None:
            self.on_held(held)
