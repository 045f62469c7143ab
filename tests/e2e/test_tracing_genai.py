"""Traces in the OpenTelemetry GenAI guardrail conventions (pinned in loopwarden.tracing), opt-in with
OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental: the Python client's spans kept by the SDK's
in-memory exporter, and a daemon process exporting its own over OTLP/HTTP to a receiver on loopback.
Without the opt-in, the client adds no span and the daemon's `loopwarden.verdict` events are as before."""
from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from loopwarden import AsyncLoopwardenClient, AsyncToolGuard, LoopwardenClient, ToolGuard, events
from loopwarden.tracing import (
    CONVENTIONS_COMMIT, GUARDRAIL_RESULT_EVENT, GUARDRAIL_SPAN, OPT_IN_VARIABLE, _server, opted_in,
)
from loopwarden_server.tracing import VERDICT_EVENT
from tests.support.daemon import running_daemon
from tests.support.otlp import http_receiver_running
from tests.support.tracing import until

pytestmark = pytest.mark.daemon

CONFIG = "{tools:{loopDetection:{enabled:true}}}"
AGENT = "genai-agent"
FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "100"}
OPTED_IN = {**FAST_EXPORT, OPT_IN_VARIABLE: "http,gen_ai_latest_experimental"}
OPTED_OUT = {**FAST_EXPORT, OPT_IN_VARIABLE: ""}


@pytest.fixture
def http_receiver():
    yield from http_receiver_running()


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def guarded_loop(client: LoopwardenClient, run_id: str, calls: int = 21) -> list:
    """`calls` identical `read` calls through ToolGuard (each with its own tool call id), returning the
    same result: what each guarded call handed back (the tool's result, or the blocked result)."""
    guard = ToolGuard(client, run_id, agent_id=AGENT)
    return [guard.call("read", lambda path: {"content": "same"}, {"path": "/x"}, tool_call_id=f"call-{i}")
            for i in range(1, calls + 1)]


def guardrail_events(span) -> list[dict]:
    return [dict(event.attributes) for event in span.events if event.name == GUARDRAIL_RESULT_EVENT]


class TestClientSpans:
    def test_loop_produces_guardrail_spans_under_the_tool_spans(self, monkeypatch, provider, exporter, run_id):
        """21 guarded calls: an `execute_tool read` span each, holding two `apply_guardrail loopwarden` CLIENT
        spans (the call before it runs, its outcome after) in the pinned conventions; the calls' results are
        ALLOW ×10, WARN ×10 (from the 11th) and BLOCK at the 21st, each WARN and the BLOCK a
        `gen_ai.guardrail.result` event naming the detector as its rule, the tool, the call and the run."""
        monkeypatch.setenv(OPT_IN_VARIABLE, "gen_ai_latest_experimental")
        with running_daemon(CONFIG) as daemon:
            with LoopwardenClient(daemon.grpc_target, tracer_provider=provider) as client:
                results = guarded_loop(client, run_id)

        spans = exporter.get_finished_spans()
        tools = [span for span in spans if span.name == "execute_tool read"]
        assert "blocked" == results[-1]["details"]["status"]
        assert [f"call-{i}" for i in range(1, 22)] == [span.attributes["gen_ai.tool.call.id"] for span in tools]
        assert {("execute_tool", "read", run_id, SpanKind.INTERNAL)} == {
            (span.attributes["gen_ai.operation.name"], span.attributes["gen_ai.tool.name"],
             span.attributes["gen_ai.conversation.id"], span.kind) for span in tools}

        calls, outcomes = [], []
        for tool in tools:
            children = [span for span in spans if span.parent is not None
                        and span.parent.span_id == tool.context.span_id]
            assert [(GUARDRAIL_SPAN, SpanKind.CLIENT)] * 2 == [(span.name, span.kind) for span in children]
            assert {tool.context.trace_id} == {span.context.trace_id for span in children}
            call, outcome = children
            calls.append(call)
            outcomes.append(outcome)

        tool_call_id = tools[-1].attributes["gen_ai.tool.call.id"]
        assert {"gen_ai.operation.name": "apply_guardrail", "gen_ai.provider.name": "loopwarden",
                "gen_ai.guardrail.component.name": "loopwarden", "server.address": "127.0.0.1",
                "server.port": int(daemon.grpc_target.rsplit(":", 1)[1]), "gen_ai.conversation.id": run_id,
                "gen_ai.guardrail.source": "tool_call", "gen_ai.guardrail.policy.id": AGENT,
                "gen_ai.tool.name": "read", "gen_ai.tool.call.id": tool_call_id,
                "gen_ai.guardrail.result.type": "action", "gen_ai.guardrail.result.value": "block",
                } == dict(calls[-1].attributes)
        assert ["allow"] * 10 + ["warn"] * 10 + ["block"] == [
            span.attributes["gen_ai.guardrail.result.value"] for span in calls]
        assert {"tool_outcome"} == {span.attributes["gen_ai.guardrail.source"] for span in outcomes}
        assert [] == [span for span in calls[:10] + outcomes if guardrail_events(span)]  # plain ALLOWs: no event

        reported = [(index + 1, guardrail_events(span)) for index, span in enumerate(calls) if guardrail_events(span)]
        assert list(range(11, 22)) == [number for number, _ in reported]
        for number, (event,) in reported:
            decision_id = event.pop("loopwarden.decision_id")
            assert decision_id
            assert {"gen_ai.guardrail.component.name": "loopwarden", "gen_ai.provider.name": "loopwarden",
                    "gen_ai.guardrail.result.type": "action",
                    "gen_ai.guardrail.result.value": "block" if number == 21 else "warn",
                    "gen_ai.guardrail.policy.rule.id": "generic_repeat", "gen_ai.guardrail.policy.id": AGENT,
                    "gen_ai.guardrail.source": "tool_call", "gen_ai.tool.name": "read",
                    "gen_ai.tool.call.id": f"call-{number}", "gen_ai.conversation.id": run_id,
                    "loopwarden.seq": event["loopwarden.seq"], "loopwarden.count": number - 1} == event

    def test_the_asyncio_client_and_guard_make_the_same_spans(self, monkeypatch, provider, exporter, run_id):
        """AsyncToolGuard over AsyncLoopwardenClient: an `execute_tool` span holding the call's two guardrail
        spans, as the blocking client's."""
        monkeypatch.setenv(OPT_IN_VARIABLE, "gen_ai_latest_experimental")

        async def read(path):
            return {"content": "same"}

        async def one_call(target):
            async with AsyncLoopwardenClient(target, tracer_provider=provider) as client:
                return await AsyncToolGuard(client, run_id).call("read", read, {"path": "/x"}, tool_call_id="a-1")

        with running_daemon(CONFIG) as daemon:
            assert {"content": "same"} == asyncio.run(one_call(daemon.grpc_target))

        (tool,) = [span for span in exporter.get_finished_spans() if span.name == "execute_tool read"]
        children = [span for span in exporter.get_finished_spans()
                    if span.parent is not None and span.parent.span_id == tool.context.span_id]
        assert [("tool_call", "allow", "a-1"), ("tool_outcome", "allow", "a-1")] == [
            (span.attributes["gen_ai.guardrail.source"], span.attributes["gen_ai.guardrail.result.value"],
             span.attributes["gen_ai.tool.call.id"]) for span in children]

    def test_a_tool_that_raises_marks_its_span(self, monkeypatch, provider, exporter, run_id):
        """The tool's exception ends its `execute_tool` span with error.type; the guardrail spans stay OK."""
        monkeypatch.setenv(OPT_IN_VARIABLE, "gen_ai_latest_experimental")

        def broken(path):
            raise FileNotFoundError(path)

        with running_daemon(CONFIG) as daemon:
            with LoopwardenClient(daemon.grpc_target, tracer_provider=provider) as client:
                with pytest.raises(FileNotFoundError):
                    ToolGuard(client, run_id).call("read", broken, {"path": "/missing"})

        (tool,) = [span for span in exporter.get_finished_spans() if span.name == "execute_tool read"]
        guardrails = [span for span in exporter.get_finished_spans() if span.name == GUARDRAIL_SPAN]
        assert ("FileNotFoundError", "ERROR") == (tool.attributes["error.type"], tool.status.status_code.name)
        assert ["UNSET", "UNSET"] == [span.status.status_code.name for span in guardrails]

    def test_an_unreachable_daemon_is_an_error_on_the_guardrail_span(self, monkeypatch, provider, exporter, run_id):
        """A request that fails (no daemon listening) ends its span with error.type and status ERROR."""
        monkeypatch.setenv(OPT_IN_VARIABLE, "gen_ai_latest_experimental")
        from tests.support.cli import dead_address

        with LoopwardenClient(dead_address(), tracer_provider=provider, timeout=2) as client:
            with pytest.raises(Exception) as raised:
                client.check(events.tool_call(run_id, "read"))

        (span,) = exporter.get_finished_spans()
        assert (type(raised.value).__qualname__, "ERROR") == (span.attributes["error.type"],
                                                               span.status.status_code.name)

    def test_without_the_opt_in_the_client_adds_no_span(self, monkeypatch, provider, exporter, run_id):
        """OpenTelemetry installed, OTEL_SEMCONV_STABILITY_OPT_IN unset: the same loop exports nothing."""
        monkeypatch.delenv(OPT_IN_VARIABLE, raising=False)
        with running_daemon(CONFIG) as daemon:
            with LoopwardenClient(daemon.grpc_target, tracer_provider=provider) as client:
                results = guarded_loop(client, run_id)
                assert client.tracing is None

        assert "blocked" == results[-1]["details"]["status"]
        assert () == tuple(exporter.get_finished_spans())


class TestDaemonSpans:
    def test_daemon_reports_guardrail_results_under_the_clients_span(self, http_receiver, monkeypatch, provider,
                                                                     exporter, run_id):
        """Daemon and client opted in: the Evaluate stream's span holds a `gen_ai.guardrail.result` event for
        each WARN and the BLOCK (and no `loopwarden.verdict` event); a Check carries the client span's trace
        context, so the daemon's Check span is that span's child and holds the BLOCK's result event, with
        the decision id the verdict carried."""
        endpoint, received = http_receiver
        monkeypatch.setenv(OPT_IN_VARIABLE, "gen_ai_latest_experimental")
        with running_daemon(CONFIG, ["--otlp-endpoint", endpoint], env=OPTED_IN) as daemon:
            listening = daemon.wait_for_log(lambda line: line.get("msg") == "listening")
            with LoopwardenClient(daemon.grpc_target, tracer_provider=provider) as client:
                guarded_loop(client, run_id, calls=20)
                verdict = client.check(events.tool_call(run_id, "read", {"path": "/x"}, tool_call_id="call-21",
                                                        agent_id=AGENT))
            (client_span,) = [span for span in exporter.get_finished_spans()
                              if span.name == GUARDRAIL_SPAN and span.attributes.get("gen_ai.tool.call.id") == "call-21"]
            (check,) = until(lambda: received.named("Check", client_span.context.trace_id), timeout=15)
            (stream,) = until(lambda: [span for span in received.spans if span["name"].endswith("/Evaluate")],
                              timeout=15)

        assert listening["tracing"].endswith("; GenAI guardrail conventions")
        assert "block" == verdict.action.value
        assert f"{client_span.context.span_id:016x}" == check["parent_span_id"]
        ((name, event),) = check["all_events"]
        assert GUARDRAIL_RESULT_EVENT == name
        assert {"gen_ai.guardrail.component.name": "loopwarden", "gen_ai.provider.name": "loopwarden",
                "gen_ai.guardrail.result.type": "action", "gen_ai.guardrail.result.value": "block",
                "gen_ai.guardrail.policy.rule.id": "generic_repeat", "gen_ai.guardrail.policy.id": AGENT,
                "gen_ai.guardrail.source": "tool_call", "gen_ai.tool.name": "read", "gen_ai.tool.call.id": "call-21",
                "gen_ai.conversation.id": run_id, "loopwarden.decision_id": verdict.decision_id,
                "loopwarden.seq": verdict.seq, "loopwarden.count": 20} == event
        assert [(GUARDRAIL_RESULT_EVENT, "warn", f"call-{i}") for i in range(11, 21)] == [
            (name, event["gen_ai.guardrail.result.value"], event["gen_ai.tool.call.id"])
            for name, event in stream["all_events"]]
        assert [] == [span for span in received.spans if span["events"]]  # no loopwarden.verdict event

    def test_without_the_opt_in_the_daemons_events_are_unchanged(self, http_receiver, monkeypatch, provider,
                                                                 exporter, run_id):
        """Neither opted in: the stream span holds `loopwarden.verdict` events with loopwarden.* attributes
        only, as before; the client exports nothing."""
        endpoint, received = http_receiver
        monkeypatch.delenv(OPT_IN_VARIABLE, raising=False)
        with running_daemon(CONFIG, ["--otlp-endpoint", endpoint], env=OPTED_OUT) as daemon:
            listening = daemon.wait_for_log(lambda line: line.get("msg") == "listening")
            with LoopwardenClient(daemon.grpc_target, tracer_provider=provider) as client:
                guarded_loop(client, run_id)
            (stream,) = until(lambda: [span for span in received.spans if span["name"].endswith("/Evaluate")],
                              timeout=15)

        assert "GenAI" not in listening["tracing"]
        assert () == tuple(exporter.get_finished_spans())
        assert [VERDICT_EVENT] * 11 == [name for name, _ in stream["all_events"]]
        assert ["warn"] * 10 + ["block"] == [event["loopwarden.action"] for event in stream["events"]]
        assert {"loopwarden.run_id", "loopwarden.seq", "loopwarden.action", "loopwarden.detector",
                "loopwarden.count", "loopwarden.decision_id", "loopwarden.tool", "loopwarden.agent_id"} == set(
            stream["events"][-1])


class TestOptIn:
    @pytest.mark.parametrize(("value", "expected"), [
        ("gen_ai_latest_experimental", True), ("http, gen_ai_latest_experimental", True),
        ("GEN_AI_LATEST_EXPERIMENTAL", True), ("", False), ("http", False), ("gen_ai", False)])
    def test_the_opt_in_is_one_item_of_a_comma_separated_list(self, value, expected):
        assert expected is opted_in({OPT_IN_VARIABLE: value})

    def test_the_pinned_commit_is_named(self):
        assert 40 == len(CONVENTIONS_COMMIT)

    @pytest.mark.parametrize(("target", "expected"), [
        ("127.0.0.1:50051", {"server.address": "127.0.0.1", "server.port": 50051}),
        ("[::1]:50051", {"server.address": "::1", "server.port": 50051}),
        ("dns:///loopwarden.svc:50051", {"server.address": "loopwarden.svc", "server.port": 50051}),
        ("unix:/run/loopwarden.sock", {"server.address": "/run/loopwarden.sock"})])
    def test_server_address_and_port_come_from_the_target(self, target, expected):
        assert expected == _server(target)
