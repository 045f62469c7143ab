"""OpenTelemetry spans in the GenAI guardrail conventions, opt-in and without a hard dependency.

The conventions followed are the OpenTelemetry GenAI guardrail conventions (status: Development),
pinned at open-telemetry/semantic-conventions-genai@f5e3733b19bdb5cb9074c2ec26da9e375d52a40a,
docs/gen-ai/gen-ai-guardrails.md: a `gen_ai.apply_guardrail.client` span (CLIENT, named
`apply_guardrail {gen_ai.guardrail.component.name}`) around each request to a remote guardrail
service, and `gen_ai.guardrail.result` events for the results it returns. They are experimental,
so, as OpenTelemetry's instrumentations do, they are emitted only when OTEL_SEMCONV_STABILITY_OPT_IN
(a comma-separated list) includes `gen_ai_latest_experimental`; without it nothing here runs.

How loopwarden's words map onto them (the daemon's span events use the same mapping, see
loopwarden_server/tracing.py):
- component and provider: `loopwarden`; result type `action` and result value loopwarden's own
  action name (`allow`, `warn`, `block`, `abort`, `reject`, `ask`), as the conventions say to keep
  the provider-native result rather than translate it;
- rule id (`gen_ai.guardrail.policy.rule.id`): the detector that decided (`generic_repeat`, …);
- policy id: the event's agent id, the key that selects the agent's block of settings (absent for
  an event without one: the global settings applied);
- source: the event's kind (`tool_call`: the call before it runs, `tool_outcome`: its result, …);
- reason: the verdict's error code (`budget_exhausted`, `invalid_params_json`, …) when it has one
  (the conventions want it low-cardinality and free of user content, which the message is not);
- `gen_ai.tool.name`, `gen_ai.tool.call.id`, and the run id as `gen_ai.conversation.id`;
- `loopwarden.decision_id`, `loopwarden.seq`, `loopwarden.count` and, in shadow mode,
  `loopwarden.shadow_action` beside them, to find the decision in the daemon's log and InspectRun.

In the clients: one CLIENT span per Check or Evaluate request (a child of the caller's current
span: the `execute_tool` span of the tool being guarded; ToolGuard, which runs the tool, opens that
span itself), its result on the span for a request of one event, and one result event per verdict
other than a plain ALLOW. A Check carries the span's trace context to the daemon (`traceparent`),
so the daemon's server span is its child. Install the API with `pip install
'loopwarden-client[otel]'`; with no SDK configured the spans are no-ops.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

CONVENTIONS_REPOSITORY = "open-telemetry/semantic-conventions-genai"
CONVENTIONS_COMMIT = "f5e3733b19bdb5cb9074c2ec26da9e375d52a40a"
OPT_IN_VARIABLE = "OTEL_SEMCONV_STABILITY_OPT_IN"
OPT_IN_VALUE = "gen_ai_latest_experimental"
OTEL_EXTRA = "pip install 'loopwarden-client[otel]'"

GUARDRAIL_RESULT_EVENT = "gen_ai.guardrail.result"
APPLY_GUARDRAIL = "apply_guardrail"
EXECUTE_TOOL = "execute_tool"
COMPONENT = "loopwarden"
GUARDRAIL_SPAN = f"{APPLY_GUARDRAIL} {COMPONENT}"
RESULT_TYPE = "action"
SCOPE = "loopwarden.client"


def opted_in(environ: Mapping[str, str] | None = None) -> bool:
    """OTEL_SEMCONV_STABILITY_OPT_IN names gen_ai_latest_experimental."""
    value = (os.environ if environ is None else environ).get(OPT_IN_VARIABLE, "")
    return OPT_IN_VALUE in (item.strip().lower() for item in value.split(","))


def reportable(action: str, decision_id: str) -> bool:
    """A verdict worth a result event: anything but a plain ALLOW (an ALLOW with a decision id is a
    shadow verdict), the rule the daemon's `loopwarden.verdict` events follow."""
    return action != "allow" or bool(decision_id)


def result_attributes(*, action: str, run_id: str, kind: str = "", detector: str = "", tool_name: str = "",
                      tool_call_id: str = "", agent_id: str = "", error_code: str = "", decision_id: str = "",
                      seq: int = 0, count: int = 0, shadow_action: str | None = None) -> dict[str, Any]:
    """A `gen_ai.guardrail.result` event's attributes for one verdict (the mapping in the module
    docstring); empty values are left out, as the conventions' conditional attributes are."""
    attributes: dict[str, Any] = {
        "gen_ai.guardrail.component.name": COMPONENT,
        "gen_ai.provider.name": COMPONENT,
        "gen_ai.guardrail.result.type": RESULT_TYPE,
        "gen_ai.guardrail.result.value": action,
        "gen_ai.conversation.id": run_id,
    }
    optional = {
        "gen_ai.guardrail.policy.rule.id": "" if detector in ("", "none") else detector,
        "gen_ai.guardrail.policy.id": agent_id,
        "gen_ai.guardrail.source": kind,
        "gen_ai.guardrail.result.reason": error_code,
        "gen_ai.tool.name": tool_name,
        "gen_ai.tool.call.id": tool_call_id,
        "loopwarden.decision_id": decision_id,
    }
    attributes.update((key, value) for key, value in optional.items() if value)
    attributes["loopwarden.seq"] = seq
    attributes["loopwarden.count"] = count
    if shadow_action is not None:
        attributes["loopwarden.shadow_action"] = shadow_action
    return attributes


def _server(target: str) -> dict[str, Any]:
    """server.address / server.port of a gRPC target (`host:port`, `[v6]:port`, `dns:///host:port`,
    `unix:/path`)."""
    if target.startswith(("unix:", "unix-abstract:")):
        return {"server.address": target.split(":", 1)[1]}
    target = target.rsplit("///", 1)[-1]
    host, colon, port = target.rpartition(":")
    if colon and host and port.isdigit():
        return {"server.address": host.strip("[]"), "server.port": int(port)}
    return {"server.address": target} if target else {}


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("loopwarden-client")
    except Exception:  # noqa: BLE001 - not installed as a distribution (a source checkout)
        return ""


class GuardrailSpans:
    """The spans of one client. `create` answers None when the opt-in is not set or the
    OpenTelemetry API is not installed: the client then does nothing more per request."""

    def __init__(self, tracer, server: dict[str, Any]) -> None:
        from opentelemetry import propagate, trace

        self._tracer = tracer
        self._server = server
        self._propagate = propagate
        self._trace = trace

    @classmethod
    def create(cls, target: str | None, tracer_provider=None,
               environ: Mapping[str, str] | None = None) -> GuardrailSpans | None:
        if not opted_in(environ):
            return None
        try:
            from opentelemetry import trace
        except ImportError:
            return None
        tracer = trace.get_tracer(SCOPE, _version() or None, tracer_provider=tracer_provider)
        return cls(tracer, _server(target) if target else {})

    @contextlib.contextmanager
    def request(self, events: Sequence[Any]) -> Iterator[GuardrailRequest]:
        """The CLIENT span of one Check or Evaluate request carrying `events` (pb.Event)."""
        attributes = {"gen_ai.operation.name": APPLY_GUARDRAIL, "gen_ai.provider.name": COMPONENT,
                      "gen_ai.guardrail.component.name": COMPONENT, **self._server}
        attributes.update(_request_attributes(events))
        with self._tracer.start_as_current_span(GUARDRAIL_SPAN, kind=self._trace.SpanKind.CLIENT,
                                                attributes=attributes, record_exception=False,
                                                set_status_on_exception=False) as span:
            try:
                yield GuardrailRequest(span, events, self._propagate)
            except BaseException as exc:
                _failed(span, exc, self._trace)
                raise

    @contextlib.contextmanager
    def execute_tool(self, tool_name: str, tool_call_id: str, run_id: str) -> Iterator[Any]:
        """The `execute_tool {tool}` span (INTERNAL) of a tool a guard runs: its guardrail spans are
        its children. A tool that raises marks the span with its exception's type."""
        attributes = {"gen_ai.operation.name": EXECUTE_TOOL, "gen_ai.tool.name": tool_name,
                      "gen_ai.conversation.id": run_id}
        if tool_call_id:
            attributes["gen_ai.tool.call.id"] = tool_call_id
        with self._tracer.start_as_current_span(f"{EXECUTE_TOOL} {tool_name}", kind=self._trace.SpanKind.INTERNAL,
                                                attributes=attributes, record_exception=False,
                                                set_status_on_exception=False) as span:
            try:
                yield span
            except BaseException as exc:
                _failed(span, exc, self._trace)
                raise


def _request_attributes(events: Sequence[Any]) -> dict[str, Any]:
    """What a request's events have in common: its run (one run), and for one event its tool, call,
    source and policy."""
    runs = {event.run_id.strip() for event in events}
    attributes: dict[str, Any] = {}
    if len(runs) == 1 and "" not in runs:
        attributes["gen_ai.conversation.id"] = runs.pop()
    if len(events) == 1:
        event = events[0]
        kind = event.WhichOneof("kind") or ""
        message = getattr(event, kind) if kind else None
        optional = {"gen_ai.guardrail.source": kind, "gen_ai.guardrail.policy.id": event.agent_id,
                    "gen_ai.tool.name": getattr(message, "tool_name", ""),
                    "gen_ai.tool.call.id": getattr(message, "tool_call_id", "")}
        attributes.update((key, value) for key, value in optional.items() if value)
    return attributes


def _failed(span, exc: BaseException, trace) -> None:
    if span.is_recording():
        span.set_attribute("error.type", type(exc).__qualname__)
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)[:200]))


class GuardrailRequest:
    """One request's span: the trace context to send, and the verdicts that answered it."""

    def __init__(self, span, events: Sequence[Any], propagate) -> None:
        self.span = span
        self._events = events
        self._propagate = propagate

    def metadata(self, metadata: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        """The call's metadata with this span's trace context in place of any the caller set."""
        carrier: dict[str, str] = {}
        self._propagate.inject(carrier)
        if not carrier:
            return metadata
        return tuple((key, value) for key, value in metadata if key not in carrier) + tuple(carrier.items())

    def answered(self, verdicts: list) -> list:
        """Record the verdicts (loopwarden.types.Verdict): the result on the span for one event, a
        result event per verdict other than a plain ALLOW."""
        span = self.span
        if not span.is_recording():
            return verdicts
        if len(verdicts) == 1:
            verdict = verdicts[0]
            span.set_attribute("gen_ai.guardrail.result.type", RESULT_TYPE)
            span.set_attribute("gen_ai.guardrail.result.value", verdict.action.value)
            if verdict.error_code:
                span.set_attribute("gen_ai.guardrail.result.reason", verdict.error_code)
        for event, verdict in zip(self._events, verdicts):
            if reportable(verdict.action.value, verdict.decision_id):
                span.add_event(GUARDRAIL_RESULT_EVENT, verdict_attributes(event, verdict))
        return verdicts


def verdict_attributes(event, verdict) -> dict[str, Any]:
    """A result event's attributes from the event sent (pb.Event) and the verdict it got."""
    kind = event.WhichOneof("kind") or ""
    message = getattr(event, kind) if kind else None
    return result_attributes(
        action=verdict.action.value, run_id=verdict.run_id or event.run_id.strip(), kind=kind,
        detector=verdict.detector, tool_name=verdict.tool_name or getattr(message, "tool_name", ""),
        tool_call_id=getattr(message, "tool_call_id", ""), agent_id=event.agent_id, error_code=verdict.error_code,
        decision_id=verdict.decision_id, seq=verdict.seq, count=verdict.count,
        shadow_action=verdict.shadow_action.value if verdict.shadow_action is not None else None)
