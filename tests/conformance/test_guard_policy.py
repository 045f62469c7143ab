"""The guard-policy table (guard/policy.json) run through every Python place that maps a verdict to
what the agent gets: the tool guard (loopwarden.runner), the framework adapters' gate, the hook
protocol of every host, the LangChain middleware's channel, the OpenAI Agents SDK adapter, and the
MCP proxy's guard.

Each place gets the scenario's verdict where the daemon's would come in (a client, a judge or the
`answer` argument that hands back that verdict, decoded from the proto message by the client's own
wire code) and its real code does the rest; the test only reads what the agent would get out.
"""
from __future__ import annotations

import asyncio
import io
import json
import logging
from dataclasses import replace
from typing import Any

import pytest
from google.protobuf.json_format import ParseDict

from loopwarden import Action, RunAborted, ToolGuard, Verdict, blocked_tool_result
from loopwarden._wire import verdict_from_message
from loopwarden.guard_policy import decide, decide_output
from loopwarden.hooks import HookHost, answer, parse
from loopwarden.hooks import host as hook_host
from loopwarden.hooks.protocol import ASK_THE_USER
from loopwarden.integrations._gate import Call, Gate, Settings
from loopwarden.integrations._langgraph_channel import Channel, GuardedCall
from loopwarden.integrations._langgraph_runs import Place
from loopwarden.integrations.openai_agents import LoopwardenGuardrails
from loopwarden.integrations.openai_agents._runs import Place as AgentsPlace
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden_server.mcp_proxy.guard import ProxyGuard, SessionRun, ToolCall
from tests.conformance.guard_policy import EFFECTS, OUTPUT_EFFECTS, expected, load_output_scenarios, load_scenarios

SCENARIOS = load_scenarios()
IDS = [scenario["name"] for scenario in SCENARIOS]
PARAMS = {"path": "/x"}


def verdict_of(scenario: dict[str, Any], *, run_id: str = "run", seq: int = 1) -> Verdict:
    return verdict_from_message(ParseDict({**scenario["verdict"], "run_id": run_id, "seq": seq}, pb.Verdict()))


def allowed(run_id: str) -> Verdict:
    return Verdict(seq=0, run_id=run_id, action=Action.ALLOW)


def compare(scenario: dict[str, Any], seen: dict[str, Any], *, can_end_run: bool = True) -> None:
    """`seen` against the expectation, `reported` only where the table asserts it."""
    want = expected(scenario, can_end_run=can_end_run)
    got = {key: seen.get(key, "") for key in ("effect", "text")}
    if "reported" in want:
        got["reported"] = seen.get("reported", False)
    assert {"text": "", **want} == got


# -- the table itself -----------------------------------------------------------------------------

def test_the_table_speaks_the_closed_vocabulary():
    """Every scenario names a known effect; only `run` has no text; `reported` is said of every
    refusal and of nothing else; every verdict is a proto Verdict."""
    assert len(IDS) == len(set(IDS))
    for scenario in SCENARIOS:
        expect = scenario["expect"]
        assert expect["effect"] in EFFECTS, scenario["name"]
        assert set(expect) <= {"effect", "text", "reported"}, scenario["name"]
        assert (expect["effect"] != "run") == bool(expect.get("text")), scenario["name"]
        assert (expect["effect"] == "refuse") == ("reported" in expect), scenario["name"]
        assert isinstance(scenario.get("can_ask", False), bool), scenario["name"]
        ParseDict(scenario["verdict"], pb.Verdict())  # raises naming an unknown field or enum value


def test_every_effect_and_action_has_a_scenario():
    assert set(EFFECTS) == {scenario["expect"]["effect"] for scenario in SCENARIOS}
    assert {f"ACTION_{a.name}" for a in Action} == {scenario["verdict"]["action"] for scenario in SCENARIOS}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_guard_policy_decide(scenario):
    """The one Python mapping every guard below goes through."""
    decision = decide(verdict_of(scenario), can_ask=scenario.get("can_ask", False))
    compare(scenario, {"effect": decision.effect, "text": decision.text, "reported": decision.reports_refusal})


# -- the tool guard (loopwarden.runner) -----------------------------------------------------------

class ScriptedClient:
    """Where the daemon's verdicts come in: the tool call gets the scenario's verdict, every other
    event an ALLOW; outcomes are kept to see what the guard reported."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        self.outcomes: list[dict[str, Any]] = []

    def tool_call(self, run_id: str, tool_name: str, params: Any = None, **fields: Any) -> Verdict:
        return replace(self.verdict, run_id=run_id)

    def tool_outcome(self, run_id: str, tool_name: str, params: Any = None, **fields: Any) -> Verdict:
        self.outcomes.append(fields)
        return allowed(run_id)

    def approval(self, run_id: str, **fields: Any) -> Verdict:
        return allowed(run_id)


def _reported(outcomes: list[dict[str, Any]], verdict: Verdict) -> bool:
    return any(outcome.get("result") == blocked_tool_result(verdict) for outcome in outcomes)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_tool_guard(scenario, caplog):
    """ToolGuard.call with its default warning handler (the log) and, where the scenario can ask,
    an ask handler that says no."""
    verdict = verdict_of(scenario)
    client = ScriptedClient(verdict)
    asked: list[str] = []
    ran: list[dict] = []

    def on_ask(v: Verdict) -> None:
        asked.append(v.message)

    def read(**params: Any) -> str:
        ran.append(params)
        return "contents"

    guard = ToolGuard(client, "run", on_ask=on_ask if scenario.get("can_ask") else None)
    seen: dict[str, Any]
    with caplog.at_level(logging.WARNING, logger="loopwarden.runner"):
        try:
            result = guard.call("read", read, dict(PARAMS), tool_call_id="c1")
        except RunAborted as exc:
            result, seen = None, {"effect": "end_run", "text": str(exc)}
    warnings = [r.getMessage().removeprefix("loopwarden: ") for r in caplog.records if r.name == "loopwarden.runner"]
    if asked:
        seen = {"effect": "ask", "text": asked[0]}
    elif ran:
        seen = {"effect": "run_with_warning", "text": warnings[0]} if warnings else {"effect": "run"}
        assert "contents" == result
    elif result is not None:
        seen = {"effect": "refuse", "text": result["content"][0]["text"]}
    seen["reported"] = _reported(client.outcomes, verdict)
    compare(scenario, seen)


# -- the framework adapters' gate (integrations._gate) --------------------------------------------

@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if not s.get("can_ask")],
                         ids=[s["name"] for s in SCENARIOS if not s.get("can_ask")])
def test_framework_gate(scenario):
    """Gate.before: the gate never asks (the adapters that can take the ASK first)."""
    verdict = verdict_of(scenario)
    client = ScriptedClient(verdict)
    gate = Gate(Settings())
    gate._client = client  # the verdicts' way in: the gate's own client slot
    seen = _before_seen(gate.before(Call("run", "read", json.dumps(PARAMS), tool_call_id="c1")))
    seen["reported"] = _reported(client.outcomes, verdict)
    compare(scenario, seen)


def _before_seen(before: Any) -> dict[str, Any]:
    """A gate `Before` in the table's words."""
    effect = {"abort": "end_run", "block": "refuse", "ask": "ask"}.get(before.action)
    if effect is None:
        return {"effect": "run_with_warning", "text": before.warning} if before.warning else {"effect": "run"}
    return {"effect": effect, "text": before.message}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_langgraph_channel(scenario):
    """The LangChain middleware's channel: the gate's policy, plus the ASK it can put to a person (an
    interrupt) when the graph can pause."""
    verdict = verdict_of(scenario)
    client = ScriptedClient(verdict)
    gate = Gate(Settings())
    gate._client = client  # the verdicts' way in, as for the gate
    call = GuardedCall(Place("run"), "read", json.dumps(PARAMS), tool_call_id="c1",
                       accepts_ask=scenario.get("can_ask", False))
    seen = _before_seen(Channel(gate).before(call))
    seen["reported"] = _reported(client.outcomes, verdict)
    compare(scenario, seen)


class ScriptedAsyncClient(ScriptedClient):
    """ScriptedClient for the asyncio client's callers."""

    async def tool_call(self, run_id: str, tool_name: str, params: Any = None, **fields: Any) -> Verdict:
        return super().tool_call(run_id, tool_name, params, **fields)

    async def tool_outcome(self, run_id: str, tool_name: str, params: Any = None, **fields: Any) -> Verdict:
        return super().tool_outcome(run_id, tool_name, params, **fields)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_openai_agents_guardrails(scenario):
    """The Agents SDK adapter's decision on a call (with `ask=True` it holds an ASK for its approval
    gate: a "block" that carries the ASK verdict, which the gate then puts to the person)."""
    verdict = verdict_of(scenario)
    client = ScriptedAsyncClient(verdict)
    can_ask = scenario.get("can_ask", False)
    guardrails = LoopwardenGuardrails(ask=can_ask)

    async def decide_call() -> Any:
        # The verdicts' way in: the gate's asyncio client slot, for this loop.
        guardrails._gate._async = (asyncio.get_running_loop(), client)
        return await guardrails._before(AgentsPlace("run"), Call("run", "read", json.dumps(PARAMS), tool_call_id="c1"),
                                        accepts_ask=can_ask)

    before = asyncio.run(decide_call())
    held = before.action == "block" and before.verdict is not None and before.verdict.action is Action.ASK and can_ask
    seen = {"effect": "ask", "text": before.message} if held else _before_seen(before)
    seen["reported"] = _reported(client.outcomes, verdict)
    compare(scenario, seen)


# -- the hook protocol, one before-tool input per host --------------------------------------------

# host name -> (its before-tool input, whether that hook can ask the person, whether its answer can end
# the run). The two flags are what the table expects of the host; the test also holds the host
# module's own capabilities to them, so a host that gains or loses one shows up here.
HOOKS: dict[str, tuple[dict[str, Any], bool, bool]] = {
    "claude-code": ({
        "hook_event_name": "PreToolUse", "session_id": "s-1", "transcript_path": "/tmp/t.jsonl", "cwd": "/w",
        "permission_mode": "default", "tool_name": "Read", "tool_input": PARAMS, "tool_use_id": "toolu_1"}, True, True),
    "codex": ({
        "hook_event_name": "PreToolUse", "session_id": "s-1", "turn_id": "t-1", "transcript_path": None, "cwd": "/w",
        "model": "gpt-5", "permission_mode": "default", "tool_name": "Bash", "tool_input": {"command": "ls"},
        "tool_use_id": "call_1"}, False, False),
    "gemini-cli": ({
        "hook_event_name": "BeforeTool", "session_id": "s-1", "transcript_path": "/tmp/t.json", "cwd": "/w",
        "timestamp": "2026-01-01T00:00:00Z", "tool_name": "read_file", "tool_input": PARAMS}, False, True),
    "cursor": ({
        "hook_event_name": "preToolUse", "conversation_id": "c-1", "generation_id": "g-1", "tool_name": "Read",
        "tool_input": PARAMS, "tool_use_id": "tu-1"}, True, False),
    "cursor-shell": ({
        "hook_event_name": "beforeShellExecution", "conversation_id": "c-1", "generation_id": "g-1",
        "command": "ls", "cwd": "/w"}, False, False),
}
HOOK_CASES = [(host, scenario) for host, (_, can_ask, _) in HOOKS.items() for scenario in SCENARIOS
              if scenario.get("can_ask", can_ask) == can_ask]

def _hook_seen(host: HookHost, out: dict[str, Any]) -> dict[str, Any]:
    """What the host does with the hook's answer, in the table's words."""
    if host.name == "gemini-cli":
        if out.get("continue") is False:
            return {"effect": "end_run", "text": out["stopReason"]}
        if out.get("decision") == "deny":
            return {"effect": "refuse", "text": out["reason"]}
        context = out.get("hookSpecificOutput", {}).get("additionalContext")
        return {"effect": "run_with_warning", "text": context} if context else {"effect": "run"}
    if host.name == "cursor":
        if out.get("permission") in ("ask", "deny"):
            return {"effect": {"ask": "ask", "deny": "refuse"}[out["permission"]], "text": out["agent_message"]}
        return {"effect": "run_with_warning", "text": out["agent_message"]} if "agent_message" in out else {"effect": "run"}
    specific = out.get("hookSpecificOutput", {})
    if out.get("continue") is False:
        assert specific.get("permissionDecision") == "deny"
        return {"effect": "end_run", "text": out["stopReason"]}
    if specific.get("permissionDecision") in ("ask", "deny"):
        return {"effect": {"ask": "ask", "deny": "refuse"}[specific["permissionDecision"]],
                "text": specific["permissionDecisionReason"]}
    context = specific.get("additionalContext")
    return {"effect": "run_with_warning", "text": context} if context else {"effect": "run"}


@pytest.mark.parametrize(("host", "scenario"), [
    pytest.param(host, scenario, id=f"{host}-{scenario['name']}") for host, scenario in HOOK_CASES])
def test_hook_answer(host, scenario):
    """`parse` the host's before-tool input, `answer` it with the verdict; a hook that cannot ask the person
    adds ASK_THE_USER after a refusal's text (the person's reply is a new prompt that lifts it)."""
    payload, can_ask, can_end_run = HOOKS[host]
    hooks = hook_host(host.removesuffix("-shell"))
    assert hooks.stops_before_tool == can_end_run
    assert hooks.can_ask or not can_ask  # Cursor can ask, but not in its shell hook (no call id)
    request = parse(hooks, payload)
    assert request.before_tool and request.event is not None and request.event.accepts_ask == can_ask
    verdict = verdict_of(scenario, run_id=request.event.run_id)
    seen = _hook_seen(hooks, answer(request, verdict))
    suffix = f" {ASK_THE_USER}"
    if seen["effect"] == "refuse" and not can_ask and seen["text"].endswith(suffix) and verdict.action is not Action.ABORT:
        seen["text"] = seen["text"].removesuffix(suffix)
    outcome = request.blocked_outcome(verdict)
    seen["reported"] = outcome is not None and json.loads(outcome.result_json or "null") == blocked_tool_result(verdict)
    compare(scenario, seen, can_end_run=can_end_run)


# -- the MCP proxy's guard ------------------------------------------------------------------------

class ScriptedJudge:
    """The proxy's judge (the daemon, or the offline core) handing back the scenario's verdict."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        self.outcomes: list[str | None] = []

    async def tool_call(self, run: SessionRun, call: ToolCall, *, accepts_ask: bool) -> Verdict:
        return replace(self.verdict, run_id=run.run_id)

    async def tool_outcome(self, run: SessionRun, call: ToolCall, *, result_json: str | None = None,
                           error: str | None = None) -> Verdict:
        self.outcomes.append(result_json)
        return allowed(run.run_id)

    async def user_turn(self, run: SessionRun) -> Verdict:
        return allowed(run.run_id)

    async def approval(self, run: SessionRun, call: ToolCall, *, approved: bool, scope: str) -> Verdict:
        return allowed(run.run_id)

    async def run_end(self, run: SessionRun) -> None:
        return None

    async def close(self) -> None:
        return None


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_mcp_proxy_guard(scenario):
    """ProxyGuard.before, fail open; a session that declared elicitation can be asked."""
    verdict = verdict_of(scenario)
    judge = ScriptedJudge(verdict)
    guard = ProxyGuard(judge, stderr=io.StringIO())
    run = SessionRun("run", accepts_ask=scenario.get("can_ask", False))
    before = asyncio.run(guard.before(run, ToolCall("read", json.dumps(PARAMS), "1")))
    seen: dict[str, Any]
    if before.ask is not None:
        seen = {"effect": "ask", "text": before.ask.message}  # the elicitation's message (relay._hold)
    elif before.refusal is not None:
        seen = {"effect": "end_run" if run.aborted is not None else "refuse",
                "text": before.refusal["content"][0]["text"]}
    elif before.warning:
        seen = {"effect": "run_with_warning", "text": before.warning}
    else:
        assert not before.error
        seen = {"effect": "run"}
    seen["reported"] = json.dumps(blocked_tool_result(verdict)) in judge.outcomes
    compare(scenario, seen)


# -- verdicts on what the model wrote and on compactions (the table's `outputs`) -------------------

OUTPUT_SCENARIOS = load_output_scenarios()
OUTPUT_IDS = [scenario["name"] for scenario in OUTPUT_SCENARIOS]


def test_the_outputs_speak_their_closed_vocabulary():
    assert len(OUTPUT_IDS) == len(set(OUTPUT_IDS)) and not set(OUTPUT_IDS) & set(IDS)
    assert set(OUTPUT_EFFECTS) == {scenario["expect"]["effect"] for scenario in OUTPUT_SCENARIOS}
    assert {f"ACTION_{a.name}" for a in Action} == {scenario["verdict"]["action"] for scenario in OUTPUT_SCENARIOS}
    for scenario in OUTPUT_SCENARIOS:
        expect = scenario["expect"]
        assert set(expect) <= {"effect", "text"} and expect["effect"] in OUTPUT_EFFECTS, scenario["name"]
        assert (expect["effect"] != "run") == bool(expect.get("text")), scenario["name"]
        ParseDict(scenario["verdict"], pb.Verdict())


@pytest.mark.parametrize("scenario", OUTPUT_SCENARIOS, ids=OUTPUT_IDS)
def test_guard_policy_decide_output(scenario):
    decision = decide_output(verdict_of(scenario))
    assert {"text": "", **scenario["expect"]} == {"effect": decision.effect, "text": decision.text}


# Each host's hook at the end of a turn (a stop hook), where an answer that keeps the turn going
# would be the worst one: what the host does with loopwarden's answer there.
STOP_HOOKS = {
    "claude-code": {"hook_event_name": "Stop", "session_id": "s-1", "transcript_path": "/tmp/t.jsonl", "cwd": "/w",
                    "permission_mode": "default", "stop_hook_active": True, "last_assistant_message": "Done."},
    "codex": {"hook_event_name": "Stop", "session_id": "s-1", "turn_id": "t-1", "transcript_path": None, "cwd": "/w",
              "model": "gpt-5", "permission_mode": "default", "stop_hook_active": True,
              "last_assistant_message": "Done."},
    "gemini-cli": {"hook_event_name": "AfterAgent", "session_id": "s-1", "transcript_path": "/tmp/t.json", "cwd": "/w",
                   "timestamp": "2026-01-01T00:00:00Z", "prompt": "go", "prompt_response": "Done.",
                   "stop_hook_active": True},
}


def _stop_seen(out: dict[str, Any]) -> dict[str, Any]:
    """What the host does with a stop hook's answer, in the table's words; nothing in it may keep
    the turn going (a block or deny decision, context the host would continue the turn to give)."""
    assert not {"decision", "reason", "hookSpecificOutput"} & set(out), out
    if out.get("continue") is False:
        return {"effect": "end_run", "text": out["stopReason"]}
    if "systemMessage" in out:
        return {"effect": "run_with_warning", "text": out["systemMessage"].removeprefix("loopwarden: ")}
    assert out == {}, out
    return {"effect": "run", "text": ""}


@pytest.mark.parametrize(("host", "scenario"), [
    pytest.param(host, scenario, id=f"{host}-{scenario['name']}") for host in STOP_HOOKS for scenario in OUTPUT_SCENARIOS])
def test_stop_hook_answer(host, scenario):
    """`parse` the host's stop hook (the final answer, a stop hook already active), `answer` it. A
    REJECT judged nothing: the person is told the hook was not checked, the model nothing."""
    request = parse(hook_host(host), STOP_HOOKS[host])
    assert request.event is not None and request.event.stop_hook_active
    verdict = verdict_of(scenario, run_id=request.event.run_id)
    seen = _stop_seen(answer(request, verdict))
    if verdict.action is Action.REJECT:
        assert seen["effect"] == "run_with_warning" and "not checked" in seen["text"]
        seen = {"effect": "run", "text": ""}
    assert {"text": "", **scenario["expect"]} == seen
