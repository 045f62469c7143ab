"""OpenTelemetry traces end to end: a daemon process exporting through the OTLP/HTTP and OTLP/gRPC
exporters to receivers written here, and a daemon without the otel extra installed."""
from __future__ import annotations

import json
import os
import pathlib

import pytest

from loopwarden import LoopwardenClient
from loopwarden_server.tracing import OTEL_EXTRA
from tests.support.cli import loopwarden
from tests.support.daemon import running_daemon
from tests.support.otlp import grpc_receiver_running, http_receiver_running
from tests.support.tracing import PARENT_SPAN_ID, TRACE_ID, loop_until_block, traceparent, until

pytestmark = pytest.mark.daemon


# ---------------------------------------------------------------------------------------------
# End to end: the daemon as a subprocess, exporting to receivers on loopback


@pytest.fixture
def http_receiver():
    yield from http_receiver_running()


@pytest.fixture
def grpc_receiver():
    yield from grpc_receiver_running()


# Fast export, and the GenAI opt-in unset whatever the caller's environment says: these spans are
# the default form (the opt-in's: test_tracing_genai.py).
FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_SEMCONV_STABILITY_OPT_IN": ""}


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
