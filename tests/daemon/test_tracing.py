"""OpenTelemetry traces: spans for Check, InspectRun and each Evaluate stream, joined to the caller's
trace, with one span event per verdict other than a plain ALLOW carrying the verdict's decision id.

In-process (the SDK's in-memory exporter behind the real daemon wiring), end to end through the
OTLP/HTTP and OTLP/gRPC exporters to receivers written here, and without the extra installed.
"""
from __future__ import annotations

import asyncio
import json
import os
import pathlib
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopwarden import LoopwardenClient, events
from loopwarden_server import app
from loopwarden_server.settings import DaemonSettings
from loopwarden_server.tracing import (
    OTEL_EXTRA, VERDICT_EVENT, ExportTarget, Tracing, TracingError, export_target,
)
from tests.support.cli import dead_address, loopwarden
from tests.support.daemon import running_daemon

SERVICE = "loopwarden.v1.LoopDetectionService"
RESULT = '{"content": [{"type": "text", "text": "same"}], "details": {}}'
TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
PARENT_SPAN_ID = 0x00F067AA0BA902B7


def traceparent(trace_id: int = TRACE_ID, sampled: bool = True) -> tuple[str, str]:
    return ("traceparent", f"00-{trace_id:032x}-{PARENT_SPAN_ID:016x}-{'01' if sampled else '00'}")


def until(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s")


def loop_until_block(client: LoopwardenClient, run_id: str):
    """Twenty identical calls and outcomes on the client's stream, then the 21st call through Check."""
    for _ in range(20):
        client.tool_call(run_id, "read", {"path": "/x"})
        client.tool_outcome(run_id, "read", {"path": "/x"}, result_json=RESULT)
    return client.check(events.tool_call(run_id, "read", {"path": "/x"}))


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


# ---------------------------------------------------------------------------------------------
# End to end: the daemon as a subprocess, exporting to receivers on loopback


class Received:
    """Spans a receiver got, flattened: (name, trace id, parent span id, [event attributes])."""

    def __init__(self) -> None:
        self.spans: list[dict] = []
        self._lock = threading.Lock()

    def add(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self._lock:
            for resource_spans in request.resource_spans:
                service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}.get("service.name")
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append({
                            "service": service, "name": span.name, "trace_id": span.trace_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "events": [{a.key: _value(a.value) for a in event.attributes}
                                       for event in span.events if event.name == VERDICT_EVENT]})

    def named(self, method: str, trace_id: int) -> list[dict]:
        with self._lock:
            return [span for span in self.spans if span["name"] == f"/{SERVICE}/{method}"
                    and span["trace_id"] == f"{trace_id:032x}"]


def _value(value):
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


@pytest.fixture
def http_receiver():
    """An OTLP/HTTP receiver: POST /v1/traces with an ExportTraceServiceRequest (protobuf)."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the http.server hook's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            received.add(trace_service_pb2.ExportTraceServiceRequest.FromString(body))
            reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *_args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", received
    server.shutdown()
    server.server_close()


@pytest.fixture
def grpc_receiver():
    """An OTLP/gRPC receiver (opentelemetry.proto.collector.trace.v1.TraceService) on loopback, plaintext."""
    received = Received()

    class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):  # noqa: N802 - the service's method name
            received.add(request)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", received
    server.stop(0)


FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "100"}


class TestEndToEnd:
    def test_blocked_call_reaches_an_otlp_http_collector(self, http_receiver, run_id):
        """--otlp-endpoint http://…: the Check span of the blocked 21st call arrives over OTLP/HTTP, in the
        caller's trace, with the verdict's decision id on its event; the service is named loopwarden."""
        endpoint, received = http_receiver
        with running_daemon("{tools:{loopDetection:{enabled:true}}}", ["--otlp-endpoint", endpoint],
                            env=FAST_EXPORT) as daemon:
            listening = daemon.wait_for_log(lambda line: line.get("msg") == "listening")
            with LoopwardenClient(daemon.grpc_target, metadata=[traceparent()]) as client:
                verdict = loop_until_block(client, run_id)
            (span,) = until(lambda: received.named("Check", TRACE_ID), timeout=15)

        assert f"OTLP http/protobuf to {endpoint}/v1/traces (--otlp-endpoint)" == listening["tracing"]
        assert ("loopwarden", f"{PARENT_SPAN_ID:016x}") == (span["service"], span["parent_span_id"])
        (event,) = span["events"]
        assert ("block", "generic_repeat", 20, verdict.decision_id, run_id) == (
            event["loopwarden.action"], event["loopwarden.detector"], event["loopwarden.count"],
            event["loopwarden.decision_id"], event["loopwarden.run_id"])

    def test_stream_span_reaches_an_otlp_grpc_collector(self, grpc_receiver, run_id):
        """--otlp-endpoint HOST:PORT: the Evaluate stream's span, with its WARN event, arrives over OTLP/gRPC
        once the stream ends."""
        endpoint, received = grpc_receiver
        with running_daemon("{tools:{loopDetection:{enabled:true}}}", ["--otlp-endpoint", endpoint],
                            env=FAST_EXPORT) as daemon:
            with LoopwardenClient(daemon.grpc_target, metadata=[traceparent()]) as client:
                verdicts = [client.tool_call(run_id, "read", {"path": "/x"}) for _ in range(11)]
            (span,) = until(lambda: received.named("Evaluate", TRACE_ID), timeout=15)

        assert "warn" == verdicts[-1].action.value
        assert [verdicts[-1].decision_id] == [event["loopwarden.decision_id"] for event in span["events"]]


# ---------------------------------------------------------------------------------------------
# Without the extra


@pytest.fixture(scope="module")
def without_opentelemetry(tmp_path_factory) -> dict[str, str]:
    """An environment in which `import opentelemetry` fails, as in an install without the otel extra."""
    shadow = tmp_path_factory.mktemp("no-otel")
    (shadow / "opentelemetry").mkdir()
    (shadow / "opentelemetry" / "__init__.py").write_text(
        'raise ImportError("opentelemetry is hidden by the test", name="opentelemetry")\n')
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(shadow), os.environ.get("PYTHONPATH", "")]))}


class TestWithoutTheExtra:
    def test_daemon_starts_without_it(self, without_opentelemetry):
        """Without --otlp-endpoint the daemon starts and reports tracing off."""
        with running_daemon(None, env=without_opentelemetry) as daemon:
            listening = daemon.wait_for_log(lambda line: line.get("msg") == "listening")

        assert "off" == listening["tracing"]

    def test_otlp_endpoint_says_which_extra_to_install(self, without_opentelemetry):
        """--otlp-endpoint without the extra: exit 2, and the error says pip install 'loopwarden[otel]'."""
        result = loopwarden("serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                            "--otlp-endpoint", "http://127.0.0.1:4318", env=without_opentelemetry, timeout=30)

        assert 2 == result.returncode
        error = json.loads(result.stderr.splitlines()[-1])["error"]
        assert f"--otlp-endpoint asks for OpenTelemetry traces, which need the otel extra: {OTEL_EXTRA}" in error

    def test_standard_variable_alone_leaves_tracing_off_and_says_why(self, without_opentelemetry):
        """OTEL_EXPORTER_OTLP_ENDPOINT set (say, cluster-wide) without the extra: the daemon starts, and its
        start-up line says tracing is off and what to install."""
        env = {**without_opentelemetry, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
        with running_daemon(None, env=env) as daemon:
            listening = daemon.wait_for_log(lambda line: line.get("msg") == "listening")

        assert listening["tracing"].startswith("off: OTEL_EXPORTER_OTLP_ENDPOINT asks for OpenTelemetry traces")
        assert OTEL_EXTRA in listening["tracing"]


def test_the_extra_is_declared():
    """server/pyproject.toml declares the otel extra with the packages tracing.py imports."""
    import tomllib

    pyproject = tomllib.loads((pathlib.Path(__file__).resolve().parents[2] / "server" / "pyproject.toml").read_text())
    names = {requirement.split("==")[0] for requirement in pyproject["project"]["optional-dependencies"]["otel"]}

    assert {"opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http", "opentelemetry-exporter-otlp-proto-grpc",
            "opentelemetry-instrumentation-grpc"} <= names
