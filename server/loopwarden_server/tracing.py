"""OpenTelemetry traces, opt-in: `pip install 'loopwarden[otel]'` and `--otlp-endpoint` (or the
standard OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).

What is traced, with the standard gRPC instrumentation's server spans (so each span joins the
caller's trace through the `traceparent` metadata, W3C trace context unless OTEL_PROPAGATORS says
otherwise):
- Check and InspectRun: one span per call;
- Evaluate: one span per stream (a stream may carry many runs for hours: the span is exported when
  the stream ends);
- on those spans, one `loopwarden.verdict` event per verdict other than a plain ALLOW: WARN,
  BLOCK, ABORT, REJECT and shadow-mode verdicts, with run, seq, tool, action, detector, count and
  the decision id the verdict carried. A plain ALLOW adds nothing, and an unsampled span (the
  caller's trace not sampled, or OTEL_TRACES_SAMPLER) costs one check per decision.
Health and reflection are not traced (probes would drown the traces).

In the GenAI conventions: with OTEL_SEMCONV_STABILITY_OPT_IN including `gen_ai_latest_experimental`,
each of those events is a `gen_ai.guardrail.result` event instead, in the OpenTelemetry GenAI
guardrail conventions pinned in loopwarden.tracing (the client module, which holds the one mapping
of a verdict onto them: loopwarden's action names as result values, the detector as the rule id,
the event's kind as the source, its agent id as the policy id, `gen_ai.tool.name`,
`gen_ai.tool.call.id`, the run id as `gen_ai.conversation.id`, and loopwarden's decision id, seq and
count beside them). The conventions' `apply_guardrail` CLIENT span is the caller's: the clients emit
it and send its trace context, so the daemon's server span, holding these events, is its child.
Without the opt-in the `loopwarden.verdict` events above are unchanged.

Where spans go: `--otlp-endpoint http(s)://HOST:PORT[/PATH]` exports OTLP/HTTP (protobuf; the path
defaults to /v1/traces); a bare `HOST:PORT` exports OTLP/gRPC in plaintext, as a collector's 4317
receiver listens by default. OTEL_EXPORTER_OTLP_PROTOCOL (grpc | http/protobuf) overrides that
choice. Without the flag, the standard OTEL_EXPORTER_OTLP_* variables configure the exporter
(default protocol http/protobuf). OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the service
(default `loopwarden`).

Nothing here is imported unless tracing is on, so the daemon runs without the extra installed.
"""
from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from loopwarden.tracing import GUARDRAIL_RESULT_EVENT, opted_in, result_attributes

OTEL_EXTRA = "pip install 'loopwarden[otel]'"
VERDICT_EVENT = "loopwarden.verdict"
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
PROTOCOLS = ("grpc", "http/protobuf")
HTTP_TRACES_PATH = "/v1/traces"
EXPORT_TIMEOUT_SECONDS = 5
# Not traced: the standard health service (probes) and reflection.
UNTRACED_SERVICE_PREFIXES = ("grpc.health.", "grpc.reflection.")


class TracingError(RuntimeError):
    """Tracing was asked for and cannot be set up; the message says what to do."""


@dataclass(frozen=True, slots=True)
class ExportTarget:
    """Where spans go. `endpoint` None: the exporter reads the OTEL_EXPORTER_OTLP_* variables itself."""

    protocol: str
    endpoint: str | None
    source: str  # the flag or variable that turned tracing on

    def describe(self) -> str:
        return f"OTLP {self.protocol} to {self.endpoint or 'the OTEL_EXPORTER_OTLP_* endpoint'} ({self.source})"


def _protocol(environ: Mapping[str, str], default: str) -> str:
    for name in PROTOCOL_VARIABLES:
        value = environ.get(name, "").strip().lower()
        if value:
            if value not in PROTOCOLS:
                raise TracingError(f"{name}={value!r}: loopwarden exports traces over {' or '.join(PROTOCOLS)}")
            return value
    return default


def export_target(flag_endpoint: str | None, environ: Mapping[str, str]) -> ExportTarget | None:
    """Whether tracing is on and where spans go (None: off)."""
    if flag_endpoint:
        endpoint = flag_endpoint.strip()
        has_scheme = "://" in endpoint
        protocol = _protocol(environ, "http/protobuf" if has_scheme else "grpc")
        if protocol == "http/protobuf":
            if not has_scheme:
                raise TracingError(f"--otlp-endpoint {endpoint}: OTLP/HTTP needs a URL, e.g. http://{endpoint}")
            if urlsplit(endpoint).path in ("", "/"):
                endpoint = endpoint.rstrip("/") + HTTP_TRACES_PATH
        elif not has_scheme:
            endpoint = f"http://{endpoint}"  # the gRPC exporter: http:// is plaintext, https:// is TLS
        return ExportTarget(protocol, endpoint, "--otlp-endpoint")
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    for name in ENDPOINT_VARIABLES:
        if environ.get(name, "").strip():
            return ExportTarget(_protocol(environ, "http/protobuf"), None, name)
    return None


def _exporter(target: ExportTarget):
    # Two classes of one name: bound to one local name, so a type checker reads them as one type.
    exporter: type
    if target.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
        exporter = GrpcExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
        exporter = HttpExporter
    kwargs: dict[str, Any] = {"timeout": EXPORT_TIMEOUT_SECONDS}
    if target.endpoint is not None:
        kwargs["endpoint"] = target.endpoint
    return exporter(**kwargs)


def tracing_from(flag_endpoint: str | None, environ: Mapping[str, str], *, version: str = "") -> Tracing | None:
    """Tracing as the flag and environment ask for it; None when off.

    TracingError when --otlp-endpoint is given and the extra is not installed. When only an
    OTEL_EXPORTER_OTLP_* variable asks for it (set cluster-wide, say), a missing extra leaves
    tracing off and the daemon says so in its start-up log instead of refusing to start.
    """
    target = export_target(flag_endpoint, environ)
    if target is None:
        return None
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        exporter = _exporter(target)
    except ImportError as exc:
        message = (f"{target.source} asks for OpenTelemetry traces, which need the otel extra: {OTEL_EXTRA} "
                   f"({exc.name or exc} is missing)")
        if target.source == "--otlp-endpoint":
            raise TracingError(message) from None
        return Tracing.unavailable(message)
    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over these defaults (Resource.create merges them last).
    resource = Resource.create({SERVICE_NAME: "loopwarden", SERVICE_VERSION: version or "unknown"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return Tracing(provider, target.describe(), version, genai=opted_in(environ))


class Tracing:
    """The tracer provider and what the composition root wires in: a server interceptor and a
    service wrapper that adds verdict events to the current span."""

    def __init__(self, provider, description: str, version: str = "", *, genai: bool = False) -> None:
        self.provider = provider
        self.available = provider is not None
        # OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental: verdicts in the GenAI conventions.
        self.genai = genai
        self.description = f"{description}; GenAI guardrail conventions" if genai and self.available else description
        self._tracer = provider.get_tracer("loopwarden", version) if provider is not None else None

    @classmethod
    def unavailable(cls, reason: str) -> Tracing:
        """Asked for by the environment but not installed: wires nothing, and says why."""
        return cls(None, f"off: {reason}")

    def server_interceptor(self):
        """The standard grpc.aio server interceptor (or None when unavailable), made to understand
        handlers that use context.read/write, as Evaluate does."""
        if self._tracer is None:
            return None
        return _read_write_aware_interceptor(self._tracer)

    def current_span(self):
        """OpenTelemetry's get_current_span, or None when tracing is unavailable."""
        if self._tracer is None:
            return None
        from opentelemetry.trace import get_current_span

        return get_current_span

    def verdict_event(self, verdict) -> tuple[str, dict[str, Any]]:
        """The span event (name, attributes) for one decision the core reported."""
        if self.genai:
            return GUARDRAIL_RESULT_EVENT, core_guardrail_attributes(verdict)
        return VERDICT_EVENT, core_verdict_attributes(verdict)

    def shutdown(self) -> None:
        """Export what is still buffered (bounded by the exporter's timeout)."""
        if self.provider is not None:
            self.provider.shutdown()


def _read_write_aware_interceptor(tracer):
    from opentelemetry.instrumentation.grpc import filters
    from opentelemetry.instrumentation.grpc._aio_server import (
        OpenTelemetryAioServerInterceptor, _OpenTelemetryAioServicerContext,
    )

    untraced = filters.negate(filters.any_of(*(filters.service_prefix(prefix) for prefix in UNTRACED_SERVICE_PREFIXES)))

    class ReadWriteAwareInterceptor(OpenTelemetryAioServerInterceptor):
        # NOTE: the instrumentation wraps a streaming handler as an async generator (`async for`
        # over what it returns). Evaluate is a coroutine that reads and writes through its
        # context, so such a handler gets the same span, awaited instead (version pinned in the
        # extra; tests/daemon/test_tracing.py drives a stream through it).
        def _intercept_aio_server_stream(self, behavior, handler_call_details):
            if inspect.isasyncgenfunction(behavior):
                return super()._intercept_aio_server_stream(behavior, handler_call_details)

            async def _stream_interceptor(request_iterator, context):
                with self._set_remote_context(context):
                    with self._start_span(handler_call_details, context, set_status_on_exception=False) as span:
                        context = _OpenTelemetryAioServicerContext(context, span)
                        try:
                            return await behavior(request_iterator, context)
                        except Exception as error:
                            if type(error) is not Exception:  # as the instrumentation does: aborts are statuses
                                span.record_exception(error)
                            raise

            return _stream_interceptor

    return ReadWriteAwareInterceptor(tracer, filter_=untraced)


def core_verdict_attributes(verdict) -> dict[str, Any]:
    """The span event's attributes for one decision (a loopwarden_core.Verdict the core reported)."""
    return _attributes(verdict.run_id, verdict.seq, verdict.action, verdict.detector or "none", verdict.count,
                       verdict.decision_id, verdict.tool_name, verdict.agent_id, verdict.error_code,
                       verdict.shadow_action)


def core_guardrail_attributes(verdict) -> dict[str, Any]:
    """The `gen_ai.guardrail.result` event's attributes for one decision (the opt-in's form)."""
    return result_attributes(
        action=verdict.action, run_id=verdict.run_id, kind=verdict.kind, detector=verdict.detector,
        tool_name=verdict.tool_name, tool_call_id=verdict.tool_call_id, agent_id=verdict.agent_id,
        error_code=verdict.error_code, decision_id=verdict.decision_id, seq=verdict.seq, count=verdict.count,
        shadow_action=verdict.shadow_action)


def _attributes(run_id: str, seq: int, action: str, detector: str, count: int, decision_id: str, tool: str,
                agent_id: str, error_code: str, shadow_action: str | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "loopwarden.run_id": run_id,
        "loopwarden.seq": seq,
        "loopwarden.action": action,
        "loopwarden.detector": detector,
        "loopwarden.count": count,
        "loopwarden.decision_id": decision_id,
    }
    if tool:
        attributes["loopwarden.tool"] = tool
    if agent_id:
        attributes["loopwarden.agent_id"] = agent_id
    if error_code:
        attributes["loopwarden.error_code"] = error_code
    if shadow_action is not None:
        attributes["loopwarden.shadow_action"] = shadow_action
    return attributes
