"""OpenTelemetry traces, in-process: the real daemon wiring (app.Daemon on a thread) with the SDK's
in-memory exporter. Spans for Check, InspectRun and each Evaluate stream, joined to the caller's
trace, with one span event per verdict other than a plain ALLOW carrying the verdict's decision id.
The export to real receivers and the daemon without the extra: tests/e2e/test_tracing.py.
"""
from __future__ import annotations

import asyncio
import threading

import grpc
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopwarden import LoopwardenClient, events
from loopwarden_server import app
from loopwarden_server.settings import DaemonSettings
from loopwarden_server.tracing import VERDICT_EVENT, ExportTarget, Tracing, TracingError, export_target
from tests.support.cli import dead_address
from tests.support.tracing import (
    PARENT_SPAN_ID, SERVICE, TRACE_ID, loop_until_block, traceparent, until,
)


# ---------------------------------------------------------------------------------------------
# In-process: the daemon's own wiring, spans kept in memory


class InProcessDaemon:
    """app.Daemon on its own event loop thread, its tracing replaced by an in-memory exporter."""

    def __init__(self, tracing: Tracing) -> None:
        self.address = dead_address()
        self.exporter = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._tracing = tracing
        self.daemon = self._run(self._make())
        self._run(self.daemon.start())

    def _run(self, coroutine, timeout: float = 30.0):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    async def _make(self):
        settings = DaemonSettings(listen=self.address, metrics_listen="127.0.0.1:0", drain_grace_seconds=1.0)
        return app.Daemon(settings)

    def stop(self) -> None:
        self._run(self.daemon.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


@pytest.fixture(scope="module")
def memory():
    """(daemon, exporter): the real Daemon with its tracer provider exporting into memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(provider, "in-memory exporter")
    patch = pytest.MonkeyPatch()
    patch.setattr(app, "tracing_from", lambda *_args, **_kwargs: tracing)
    try:
        daemon = InProcessDaemon(tracing)
    finally:
        patch.undo()
    yield daemon, exporter
    daemon.stop()


def spans_of(exporter: InMemorySpanExporter, method: str, trace_id: int = TRACE_ID) -> list:
    return [span for span in exporter.get_finished_spans()
            if span.name == f"/{SERVICE}/{method}" and span.context.trace_id == trace_id]


def verdict_events(span) -> list[dict]:
    return [dict(event.attributes) for event in span.events if event.name == VERDICT_EVENT]


class TestSpans:
    def test_check_span_joins_the_callers_trace(self, memory, run_id):
        """A Check carrying `traceparent` gets a SERVER span in that trace, child of the caller's span."""
        daemon, exporter = memory
        trace_id = TRACE_ID + 1
        with LoopwardenClient(daemon.address, metadata=[traceparent(trace_id)]) as client:
            client.check(events.tool_call(run_id, "read", {"path": "/a"}))

        (span,) = until(lambda: spans_of(exporter, "Check", trace_id))

        assert (PARENT_SPAN_ID, "SpanKind.SERVER") == (span.parent.span_id, str(span.kind))
        assert ("grpc", SERVICE, "Check") == (span.attributes["rpc.system"], span.attributes["rpc.service"],
                                               span.attributes["rpc.method"])
        assert [] == verdict_events(span)  # a plain ALLOW adds nothing

    def test_blocked_call_is_a_span_event_with_the_verdicts_decision_id(self, memory, run_id):
        """The 21st identical call, blocked, is one `loopwarden.verdict` event on its Check span, carrying the
        run, tool, action, detector, count and the decision id the verdict carried."""
        daemon, exporter = memory
        trace_id = TRACE_ID + 2
        with LoopwardenClient(daemon.address, metadata=[traceparent(trace_id)]) as client:
            verdict = loop_until_block(client, run_id)

        (span,) = until(lambda: spans_of(exporter, "Check", trace_id))

        assert "block" == verdict.action.value
        assert [{"loopwarden.run_id": run_id, "loopwarden.seq": 0, "loopwarden.action": "block",
                 "loopwarden.detector": "generic_repeat", "loopwarden.count": 20,
                 "loopwarden.decision_id": verdict.decision_id, "loopwarden.tool": "read"}] == verdict_events(span)

    def test_evaluate_stream_is_one_span_with_an_event_per_verdict_that_is_not_allow(self, memory, run_id):
        """Twelve identical calls on one stream: one Evaluate span (ended with the stream), holding one event
        for each of the two WARNs and none for the ten ALLOWs."""
        daemon, exporter = memory
        trace_id = TRACE_ID + 3
        with LoopwardenClient(daemon.address, metadata=[traceparent(trace_id)]) as client:
            verdicts = [client.tool_call(run_id, "read", {"path": "/x"}) for _ in range(12)]

        (span,) = until(lambda: spans_of(exporter, "Evaluate", trace_id))

        warned = [verdict for verdict in verdicts if verdict.action.value == "warn"]
        assert 2 == len(warned)
        assert PARENT_SPAN_ID == span.parent.span_id
        assert [(v.seq, v.decision_id, "warn") for v in warned] == [
            (event["loopwarden.seq"], event["loopwarden.decision_id"], event["loopwarden.action"])
            for event in verdict_events(span)]

    def test_rejected_event_is_an_event_too(self, memory, run_id):
        """A REJECT (here: params that are not JSON) is recorded with its error code."""
        daemon, exporter = memory
        trace_id = TRACE_ID + 4
        with LoopwardenClient(daemon.address, metadata=[traceparent(trace_id)]) as client:
            client.check(events.tool_call(run_id, "read", params_json="{oops"))

        (span,) = until(lambda: spans_of(exporter, "Check", trace_id))

        (event,) = verdict_events(span)
        assert ("reject", "invalid_params_json") == (event["loopwarden.action"], event["loopwarden.error_code"])

    def test_inspect_run_span_joins_the_callers_trace(self, memory, run_id):
        daemon, exporter = memory
        trace_id = TRACE_ID + 5
        with LoopwardenClient(daemon.address, metadata=[traceparent(trace_id)]) as client:
            client.check(events.tool_call(run_id, "read"))
            client.inspect(run_id)

        (span,) = until(lambda: spans_of(exporter, "InspectRun", trace_id))

        assert PARENT_SPAN_ID == span.parent.span_id

    def test_unsampled_caller_records_nothing(self, memory, run_id):
        """A caller whose trace is not sampled gets no span (and so no verdict events), even for a BLOCK."""
        daemon, exporter = memory
        trace_id = TRACE_ID + 6
        with LoopwardenClient(daemon.address, metadata=[traceparent(trace_id, sampled=False)]) as client:
            assert "block" == loop_until_block(client, run_id).action.value
        with LoopwardenClient(daemon.address, metadata=[traceparent(trace_id + 100)]) as client:
            client.check(events.tool_call(run_id + "-marker", "read"))
        until(lambda: spans_of(exporter, "Check", trace_id + 100))  # spans end in order: the first are done

        assert [] == [span for span in exporter.get_finished_spans() if span.context.trace_id == trace_id]

    def test_health_is_not_traced(self, memory):
        """Health checks (probes) make no spans."""
        daemon, exporter = memory
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        with grpc.insecure_channel(daemon.address) as channel:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)

        assert [] == [span.name for span in exporter.get_finished_spans() if "Health" in span.name]


# ---------------------------------------------------------------------------------------------
# Where spans go


class TestExportTarget:
    def test_url_means_otlp_http_on_the_traces_path(self):
        assert ExportTarget("http/protobuf", "http://collector:4318/v1/traces", "--otlp-endpoint") == export_target(
            "http://collector:4318", {})

    def test_url_with_a_path_is_kept(self):
        assert "https://otel.example.com:4318/custom" == export_target("https://otel.example.com:4318/custom", {}).endpoint

    def test_host_and_port_mean_plaintext_otlp_grpc(self):
        assert ExportTarget("grpc", "http://otel-collector.observability.svc:4317", "--otlp-endpoint") == export_target(
            "otel-collector.observability.svc:4317", {})

    def test_protocol_variable_overrides_the_choice(self):
        target = export_target("https://collector:4317", {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})

        assert ("grpc", "https://collector:4317") == (target.protocol, target.endpoint)

    def test_unsupported_protocol_is_refused(self):
        with pytest.raises(TracingError, match="http/json"):
            export_target("http://collector:4318", {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})

    def test_standard_variables_turn_it_on(self):
        assert ExportTarget("http/protobuf", None, "OTEL_EXPORTER_OTLP_ENDPOINT") == export_target(
            None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})

    def test_sdk_disabled_or_nothing_set_means_off(self):
        assert (None, None) == (export_target(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                                                     "OTEL_SDK_DISABLED": "true"}), export_target(None, {}))
