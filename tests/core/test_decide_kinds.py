"""The core's per-field entry (`CoreService.decide`: offline replay, the MCP proxy's offline judge)
takes every event kind and field of the contract: a trace with usage events, outcome durations,
child runs and approvals is judged as the daemon judges it over gRPC, never REJECTed as kindless."""
from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry

from loopwarden.eventformat import EventKind, EventRecord
from loopwarden_server.config import load_config_text
from loopwarden_server.core import CoreService
from loopwarden_server.metrics import Metrics
from loopwarden_server.settings import Limits

CONFIG = """{
  tools: {loopDetection: {enabled: true}},
  loopwarden: {budgets: {tokensPerTree: 1000, toolSecondsPerTree: 5}},
  agents: {list: [{id: "asker", loopwarden: {onCritical: "ask"}}]},
}"""


def _core() -> CoreService:
    return CoreService(load_config_text(CONFIG), Metrics(CollectorRegistry()), Limits(), max_runs=100,
                       idle_ttl_seconds=3600, clock=time.monotonic)


def _decide(core: CoreService, kind: EventKind, run_id: str, **fields):
    return core.decide(EventRecord(kind, run_id=run_id, **fields)).verdict


def test_usage_of_a_child_run_spends_the_trees_token_budget():
    core = _core()
    assert "allow" == _decide(core, EventKind.TOOL_CALL, "root", tool_name="read", params_json='{"n":1}').action
    child = {"parent_run_id": "root"}
    assert "allow" == _decide(core, EventKind.USAGE, "root/child", input_tokens=700, output_tokens=301, model="m", **child).action
    stopped = _decide(core, EventKind.TOOL_CALL, "root", tool_name="read", params_json='{"n":2}')
    assert ("abort", "budget", "budget_exhausted") == (stopped.action, stopped.detector, stopped.error_code)
    view = core.inspect("root/child")
    assert ("root", 1001) == (view.parent_run_id, view.tree_totals.input_tokens + view.tree_totals.output_tokens)


def test_outcome_durations_spend_the_tool_seconds_budget():
    core = _core()
    for n in range(2):
        _decide(core, EventKind.TOOL_CALL, "timed", tool_name="build", params_json=f'{{"n":{n}}}')
        _decide(core, EventKind.TOOL_OUTCOME, "timed", tool_name="build", params_json=f'{{"n":{n}}}',
                result_json='"ok"', duration_ms=3000)
    stopped = _decide(core, EventKind.TOOL_CALL, "timed", tool_name="build", params_json='{"n":9}')
    assert ("abort", "budget_exhausted") == (stopped.action, stopped.error_code)


def test_an_ask_is_answered_with_an_approval_event():
    core = _core()
    asker = {"agent_id": "asker", "accepts_ask": True}
    verdicts = []
    for n in range(21):
        verdicts.append(_decide(core, EventKind.TOOL_CALL, "asked", tool_name="read", params_json="{}",
                                tool_call_id=f"c{n}", **asker))
        if verdicts[-1].action != "ask":
            _decide(core, EventKind.TOOL_OUTCOME, "asked", tool_name="read", params_json="{}",
                    tool_call_id=f"c{n}", result_json='"same"', **asker)
    assert "ask" == verdicts[20].action, [v.action for v in verdicts]
    assert "allow" == _decide(core, EventKind.APPROVAL, "asked", tool_call_id="c20", approved=True, scope="always").action
    assert ["asker"] == [e.agent_id for e in core.list_exemptions()]
    unknown = _decide(core, EventKind.APPROVAL, "asked", tool_call_id="nope", approved=True)
    assert ("reject", "no_pending_ask") == (unknown.action, unknown.error_code)


def test_a_model_output_is_judged_and_its_usage_spends_the_token_budget():
    core = _core()
    said = _decide(core, EventKind.MODEL_OUTPUT, "talker", text="Done.", output_kind="final_answer",
                   input_tokens=600, output_tokens=401, model="m")
    assert ("allow", "") == (said.action, said.error_code)
    view = core.inspect("talker")
    assert 1001 == view.tree_totals.input_tokens + view.tree_totals.output_tokens
    stopped = _decide(core, EventKind.TOOL_CALL, "talker", tool_name="read", params_json="{}")
    assert ("abort", "budget", "budget_exhausted") == (stopped.action, stopped.detector, stopped.error_code)


def test_a_model_output_without_text_or_with_a_bad_kind_is_refused():
    core = _core()
    empty = _decide(core, EventKind.MODEL_OUTPUT, "quiet")
    assert ("reject", "missing_output_text") == (empty.action, empty.error_code)
    assert "neither text nor text_digest" in empty.message
    by_digest = _decide(core, EventKind.MODEL_OUTPUT, "quiet", text_digest="sha:abc", output_kind="thought")
    assert ("allow", "") == (by_digest.action, by_digest.error_code)
    with pytest.raises(ValueError, match="output_kind"):
        _decide(core, EventKind.MODEL_OUTPUT, "quiet", text="x", output_kind="shout")


def test_under_fast_the_same_message_is_warned_then_ends_the_run_and_inspect_shows_the_streak():
    core = CoreService(load_config_text('{loopwarden: {preset: "fast"}}'), Metrics(CollectorRegistry()), Limits(),
                       max_runs=100, idle_ttl_seconds=3600, clock=time.monotonic)
    said = [_decide(core, EventKind.MODEL_OUTPUT, "talker", seq=n, text="Let me check that again.") for n in range(1, 6)]
    assert [(v.action, v.detector) for v in said] == [("allow", "")] * 2 + [("warn", "repeated_output")] * 2 + [
        ("abort", "repeated_output")]
    assert "output_loop_persisted" == said[-1].error_code
    view = core.inspect("talker")
    assert (5, 0, True) == (view.output_streaks.messages, view.output_streaks.compactions, view.aborted)
