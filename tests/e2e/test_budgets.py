"""Budgets through the real daemon: one test per kind of loopwarden.budgets,
the WARN at warnAt, the ABORT past the cap (or ASK with onBudget: "ask" and accepts_ask), counters
untouched by user_turn, and budgets that survive kill -9 with the file state store."""
from __future__ import annotations

import signal
import time

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import SAME, Stream, call, channel, outcome
from tests.support.metrics import value
from tests.support.state import wait_until_flushed

pytestmark = pytest.mark.daemon


@pytest.fixture(scope="module")
def daemon_config() -> str:
    # Tree budgets follow the ROOT run's agent: each test's root names one of these agents.
    return """{
      tools: {loopDetection: {enabled: true}},
      agents: {list: [
        {id: "calls", loopwarden: {budgets: {toolCallsPerRun: 30}}},
        {id: "tree-calls", loopwarden: {budgets: {toolCallsPerTree: 20}}},
        {id: "tokens", loopwarden: {budgets: {tokensPerTree: 1000}}},
        {id: "cost", loopwarden: {budgets: {costUsdPerTree: 0.5}}},
        {id: "tool-time", loopwarden: {budgets: {toolSecondsPerTree: 2}}},
        {id: "wall", loopwarden: {budgets: {wallSecondsPerTree: 1}}},
        {id: "asks", loopwarden: {budgets: {toolCallsPerRun: 3}, onBudget: "ask"}},
      ]},
    }"""


def _inspect(target: str, run_id: str) -> pb.InspectRunResponse:
    with channel(target) as ch:
        return pb_grpc.LoopDetectionServiceStub(ch).InspectRun(pb.InspectRunRequest(run_id=run_id), timeout=5)


def _step(n: int) -> str:
    """Distinct arguments per call, so no loop detector has anything to say."""
    return f'{{"step":{n}}}'


def _usage(run: str, input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0, **fields) -> pb.Event:
    return pb.Event(run_id=run, usage=pb.Usage(input_tokens=input_tokens, output_tokens=output_tokens,
                                               cost_usd=cost_usd, model="test-model"), **fields)


def _is_exhausted(verdict: pb.Verdict) -> bool:
    return (verdict.action, verdict.detector, verdict.error_code) == (pb.ACTION_ABORT, pb.DETECTOR_BUDGET, "budget_exhausted")


def test_tool_calls_per_run_warns_at_the_24th_and_aborts_the_31st(daemon, run_id):
    before = value(daemon.scrape(), "loopwarden_limit_aborts_total", reason="budget_exhausted", agent="calls")
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        verdicts = [stream.one(call(run_id, "read", _step(n), agent_id="calls")) for n in range(1, 32)]
        later = stream.one(call(run_id, "read", _step(99)))
    assert [pb.ACTION_ALLOW] * 23 == [v.action for v in verdicts[:23]]
    warn = verdicts[23]
    assert (pb.ACTION_WARN, pb.DETECTOR_BUDGET, pb.LEVEL_WARNING) == (warn.action, warn.detector, warn.level)
    assert "24 tool calls of the toolCallsPerRun budget of 30 tool calls is used; 6 tool calls left" in warn.message, warn.message
    assert [pb.ACTION_ALLOW] * 6 == [v.action for v in verdicts[24:30]], "warned once"
    assert _is_exhausted(verdicts[30]), verdicts[30]
    assert "toolCallsPerRun" in verdicts[30].message
    assert _is_exhausted(later), "the run stays aborted"
    after = value(daemon.scrape(), "loopwarden_limit_aborts_total", reason="budget_exhausted", agent="calls")
    assert before + 1 == after


def test_tool_calls_per_tree_counts_every_run_of_the_tree(daemon, run_id):
    root, kids = run_id, [f"{run_id}/a", f"{run_id}/b"]
    header = (("x-loopwarden-run-id", root),)
    with channel(daemon.grpc_target) as ch, Stream(ch, metadata=header) as stream:
        runs = [root] * 6 + [kids[0]] * 7 + [kids[1]] * 7  # 20 calls across the tree
        # The children run under the default agent: the tree budget is the root's agent's.
        verdicts = [stream.one(call(run, "read", _step(n), agent_id="tree-calls" if run == root else "",
                                    parent_run_id="" if run == root else root))
                    for n, run in enumerate(runs)]
        past = stream.one(call(kids[1], "read", _step(21)))
        sibling = stream.one(call(kids[0], "read", _step(22)))
        parent = stream.one(call(root, "read", _step(23)))
    assert not any(_is_exhausted(v) for v in verdicts), [v.action for v in verdicts]
    assert _is_exhausted(past), past
    assert "toolCallsPerTree" in past.message
    assert _is_exhausted(sibling) and _is_exhausted(parent), "every run of the tree is past it"
    assert 23 == _inspect(daemon.grpc_target, root).tree_totals.tool_calls


def test_tokens_per_tree_aborts_the_first_call_after_the_total_passes_the_cap(daemon, run_id):
    child = f"{run_id}/child"
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        assert pb.ACTION_ALLOW == stream.one(call(run_id, "read", _step(1), agent_id="tokens")).action
        assert pb.ACTION_ALLOW == stream.one(_usage(run_id, 400, 100)).action
        assert pb.ACTION_ALLOW == stream.one(_usage(child, 300, 200, parent_run_id=run_id)).action
        at_cap = stream.one(call(child, "read", _step(2)))
        assert pb.ACTION_ALLOW == stream.one(_usage(run_id, 0, 1)).action
        past = stream.one(call(run_id, "read", _step(3)))
    assert (pb.ACTION_WARN, pb.DETECTOR_BUDGET) == (at_cap.action, at_cap.detector), "1,000 of 1,000: warned, not stopped"
    assert _is_exhausted(past), past
    totals = _inspect(daemon.grpc_target, run_id).tree_totals
    assert (700, 301) == (totals.input_tokens, totals.output_tokens)


def test_cost_usd_per_tree(daemon, run_id):
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        stream.one(call(run_id, "read", _step(1), agent_id="cost"))
        stream.one(_usage(run_id, cost_usd=0.3))
        under = stream.one(call(run_id, "read", _step(2)))
        stream.one(_usage(run_id, cost_usd=0.25))
        past = stream.one(call(run_id, "read", _step(3)))
    assert pb.ACTION_ABORT != under.action
    assert _is_exhausted(past), past
    assert "$0.50" in past.message and "$0.55" in past.message, past.message


def test_tool_seconds_per_tree_sums_outcome_durations(daemon, run_id):
    def timed(n: int, ms: int) -> pb.Event:
        event = outcome(run_id, "read", _step(n), SAME)
        event.tool_outcome.duration_ms = ms
        return event

    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        stream.one(call(run_id, "read", _step(1), agent_id="tool-time"))
        stream.one(timed(1, 1500))
        under = stream.one(call(run_id, "read", _step(2)))
        stream.one(timed(2, 600))
        past = stream.one(call(run_id, "read", _step(3)))
    assert pb.ACTION_ABORT != under.action
    assert _is_exhausted(past), past
    assert 2100 == _inspect(daemon.grpc_target, run_id).run_totals.tool_ms


def test_wall_seconds_per_tree_aborts_the_first_call_after_the_tree_is_that_old(daemon, run_id):
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        first = stream.one(call(run_id, "read", _step(1), agent_id="wall"))
        child = stream.one(call(f"{run_id}/child", "read", _step(2), parent_run_id=run_id))
        time.sleep(1.3)
        late = stream.one(call(f"{run_id}/child", "read", _step(3), parent_run_id=run_id))
    assert (pb.ACTION_ALLOW, pb.ACTION_ALLOW) == (first.action, child.action)
    assert _is_exhausted(late), late
    assert "wallSecondsPerTree" in late.message, late.message


def test_on_budget_ask_asks_callers_that_accept_it_and_aborts_the_others(daemon, run_id):
    other = f"{run_id}/no-ask"
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        for n in range(3):
            stream.one(call(run_id, "read", _step(n), agent_id="asks", accepts_ask=True))
            stream.one(call(other, "read", _step(n), agent_id="asks"))
        asked = stream.one(call(run_id, "read", _step(4), accepts_ask=True))
        asked_again = stream.one(call(run_id, "read", _step(5), accepts_ask=True))
        aborted = stream.one(call(other, "read", _step(4)))
    assert (pb.ACTION_ASK, pb.DETECTOR_BUDGET, "") == (asked.action, asked.detector, asked.error_code)
    assert "A person must decide" in asked.message, asked.message
    assert pb.ACTION_ASK == asked_again.action, "the run is not aborted by an ASK"
    assert not _inspect(daemon.grpc_target, run_id).aborted
    assert _is_exhausted(aborted)


def _approval(run: str, tool_call_id: str, approved: bool) -> pb.Event:
    return pb.Event(run_id=run, approval=pb.Approval(tool_call_id=tool_call_id, approved=approved,
                                                     scope=pb.APPROVAL_SCOPE_ONCE))


def test_an_approved_budget_ask_gives_another_allowance_and_a_denial_ends_the_run(daemon, run_id):
    """toolCallsPerRun 3 with onBudget ask: the 4th call is ASKed; approving it lets the run go on
    for another 3 calls (the 4th counted among them), the 7th is ASKed again; a denial ends the
    run at its next call (ABORT budget_exhausted)."""
    ask = {"agent_id": "asks", "accepts_ask": True}
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        first = [stream.one(call(run_id, "read", _step(n), tool_call_id=f"c{n}", **ask)) for n in range(1, 5)]
        approved = stream.one(_approval(run_id, "c4", True))
        more = [stream.one(call(run_id, "read", _step(n), tool_call_id=f"c{n}", **ask)) for n in range(5, 8)]
        denied = stream.one(_approval(run_id, "c7", False))
        after = stream.one(call(run_id, "read", _step(8), tool_call_id="c8", **ask))
        stale = stream.one(_approval(run_id, "c4", True))
    assert [(pb.ACTION_ALLOW, 0), (pb.ACTION_ALLOW, 0), (pb.ACTION_WARN, pb.DETECTOR_BUDGET),
            (pb.ACTION_ASK, pb.DETECTOR_BUDGET)] == [(v.action, v.detector) for v in first]
    assert pb.ACTION_ALLOW == approved.action
    assert [pb.ACTION_ALLOW, pb.ACTION_ALLOW, pb.ACTION_ASK] == [v.action for v in more], [v.message for v in more]
    assert (pb.ACTION_ASK, pb.DETECTOR_BUDGET) == (more[2].action, more[2].detector)
    assert pb.ACTION_ALLOW == denied.action
    assert _is_exhausted(after), after
    assert _inspect(daemon.grpc_target, run_id).aborted
    assert _is_exhausted(stale), "an aborted run answers any later event with its ABORT"


def test_user_turn_leaves_the_budget_counters_unchanged(daemon, run_id):
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        for n in range(5):
            stream.one(call(run_id, "read", _step(n), agent_id="calls"))
        stream.one(_usage(run_id, 10, 20, 0.01))
        before = _inspect(daemon.grpc_target, run_id)
        assert pb.ACTION_ALLOW == stream.one(pb.Event(run_id=run_id, user_turn=pb.UserTurn(prompt_id="p2"))).action
        after = _inspect(daemon.grpc_target, run_id)
    assert 5 == before.run_totals.tool_calls
    for field in ("tool_calls", "tool_ms", "input_tokens", "output_tokens", "cost_usd", "runs"):
        assert getattr(before.run_totals, field) == getattr(after.run_totals, field), field
        assert getattr(before.tree_totals, field) == getattr(after.tree_totals, field), field


ONE_BUDGET = "{tools: {loopDetection: {enabled: true}}, loopwarden: {budgets: {toolCallsPerRun: 30, toolCallsPerTree: 45}}}"


class TestKillNine:
    def test_a_budget_survives_kill_9_with_the_file_store(self, tmp_path):
        """20 calls, flushed, kill -9, restart, 11 more: the 31st is ABORT budget_exhausted. A child
        run (stored under its root's key) brings its share of the tree budget back too."""
        state = f"file:{tmp_path / 'runs.state'}"
        root, child = "budget-root", "budget-root/child"
        header = (("x-loopwarden-run-id", root),)
        with running_daemon(ONE_BUDGET, ["--state-store", state]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch, metadata=header) as stream:
                first = [stream.one(call(root, "read", _step(n))) for n in range(20)]
                kid = [stream.one(call(child, "read", _step(n), parent_run_id=root)) for n in range(10)]
            wait_until_flushed(daemon, 2)
            daemon.process.kill()
            assert -signal.SIGKILL == daemon.process.wait(timeout=10)
        assert not any(_is_exhausted(v) for v in first + kid)
        with running_daemon(ONE_BUDGET, ["--state-store", state]) as daemon:
            restored = daemon.wait_for_log(lambda l: l.get("msg") == "state restored")
            view = _inspect(daemon.grpc_target, child)
            with channel(daemon.grpc_target) as ch, Stream(ch, metadata=header) as stream:
                more = [stream.one(call(root, "read", _step(100 + n))) for n in range(11)]
        assert 2 == restored["runs"]
        assert (root, root, 1, 10) == (view.parent_run_id, view.root_run_id, view.depth, view.run_totals.tool_calls)
        assert not any(_is_exhausted(v) for v in more[:10]), [v.action for v in more]
        assert _is_exhausted(more[10]), more[10]
        assert "toolCallsPerRun" in more[10].message, "30 per run comes before the tree's 45 (40 used)"
