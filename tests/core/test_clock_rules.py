"""The rules that depend on elapsed time, judged by the real core (CoreService, the wrapper the
daemon runs) at times the test sets: the ask timeout, wallSecondsPerTree, the idle TTL, and the
idle time a stored run spent while no replica held it. With the clock in the test's hands each
boundary is checked on both sides in microseconds, where a real clock would need sleeps long
enough to survive a busy machine. tests/e2e checks each rule once more through a real daemon and
its real clock (`make test`)."""
from __future__ import annotations

from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden_core import Loaded
from prometheus_client import generate_latest

from tests.core.harness import CoreEngine
from tests.support.grpc_helpers import SAME, call, outcome
from tests.support.metrics import value

ENABLED = "{tools: {loopDetection: {enabled: true}}}"
X = '{"path":"/x"}'


def _scrape(engine: CoreEngine) -> str:
    return generate_latest(engine.registry).decode()


def _one(engine: CoreEngine, event: pb.Event) -> pb.Verdict:
    (verdict,) = engine.evaluate([event])
    return verdict


class TestAskTimeout:
    CONFIG = """{
      tools: {loopDetection: {enabled: true}},
      loopwarden: {onCritical: "ask"},
      agents: {list: [{id: "quick", loopwarden: {askTimeoutSeconds: 10}}]},
    }"""

    def _asked(self, run_id: str) -> CoreEngine:
        """An engine whose run `run_id` (agent "quick") has one ask pending, asked at clock 1000."""
        engine = CoreEngine(self.CONFIG)
        for i in range(20):
            verdicts = engine.evaluate([call(run_id, "read", X, tool_call_id=f"c{i}", agent_id="quick", accepts_ask=True),
                                        outcome(run_id, "read", X, SAME, agent_id="quick")])
            assert verdicts[0].action in (pb.ACTION_ALLOW, pb.ACTION_WARN), verdicts[0]
        asked = _one(engine, call(run_id, "read", X, tool_call_id="c-asked", agent_id="quick", accepts_ask=True))
        assert pb.ACTION_ASK == asked.action, asked
        return engine

    def _approve(self, run_id: str, call_id: str) -> pb.Event:
        return pb.Event(run_id=run_id, agent_id="quick",
                        approval=pb.Approval(tool_call_id=call_id, approved=True, scope=pb.APPROVAL_SCOPE_ONCE))

    def test_an_answer_just_inside_the_timeout_is_taken(self):
        engine = self._asked("inside")
        engine.clock.now += 9.9
        answered = _one(engine, self._approve("inside", "c-asked"))
        assert pb.ACTION_ALLOW == answered.action, answered
        assert 0 == value(_scrape(engine), "loopwarden_approvals_total", answer="timed_out", agent="quick")

    def test_an_unanswered_ask_past_the_timeout_is_a_denial(self):
        engine = self._asked("late")
        engine.clock.now += 10.0
        after = _one(engine, call("late", "read", X, tool_call_id="c-next", agent_id="quick", accepts_ask=True))
        late_answer = _one(engine, self._approve("late", "c-asked"))
        assert (pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT) == (after.action, after.detector)
        assert (pb.ACTION_REJECT, "no_pending_ask") == (late_answer.action, late_answer.error_code)
        assert 1 == value(_scrape(engine), "loopwarden_approvals_total", answer="timed_out", agent="quick")


class TestWallSecondsPerTree:
    CONFIG = """{
      tools: {loopDetection: {enabled: true}},
      agents: {list: [{id: "wall", loopwarden: {budgets: {wallSecondsPerTree: 60}}}]},
    }"""

    def _tree(self) -> CoreEngine:
        """A tree whose root (agent "wall") started at clock 1000, with one child run."""
        engine = CoreEngine(self.CONFIG)
        first = _one(engine, call("root", "read", '{"n":1}', agent_id="wall"))
        engine.clock.now += 1.0
        child = _one(engine, call("root/child", "read", '{"n":2}', parent_run_id="root"))
        assert (pb.ACTION_ALLOW, pb.ACTION_ALLOW) == (first.action, child.action)
        return engine

    def test_a_call_within_the_trees_wall_time_goes_on(self):
        engine = self._tree()
        engine.clock.now = 1000.0 + 59.0
        within = _one(engine, call("root/child", "read", '{"n":3}', parent_run_id="root"))
        assert pb.ACTION_ABORT != within.action, within

    def test_the_first_call_after_the_tree_is_that_old_aborts(self):
        engine = self._tree()
        engine.clock.now = 1000.0 + 61.0
        late = _one(engine, call("root/child", "read", '{"n":3}', parent_run_id="root"))
        assert (pb.ACTION_ABORT, "budget_exhausted") == (late.action, late.error_code), late
        assert "wallSecondsPerTree" in late.message, late.message


class TestIdleTtl:
    def _engine(self) -> CoreEngine:
        engine = CoreEngine(ENABLED, idle_ttl=300.0)
        for _ in range(10):
            _one(engine, call("idle", "read"))
        _one(engine, call("busy", "read"))
        return engine

    def test_a_sweep_before_the_ttl_keeps_the_run(self):
        engine = self._engine()
        engine.clock.now += 299.0
        assert (0, 2) == (engine.service.expire_idle(), len(engine.service))

    def test_a_run_idle_past_the_ttl_is_dropped_and_starts_from_zero(self):
        engine = self._engine()
        engine.clock.now += 200.0
        _one(engine, call("busy", "write"))  # touched: idle for 200 s less than "idle"
        engine.clock.now += 101.0
        assert (1, 1) == (engine.service.expire_idle(), len(engine.service))
        assert 1 == value(_scrape(engine), "loopwarden_run_evictions_total", reason="idle_ttl")
        assert engine.inspect("idle") is None
        fresh = engine.inspect("busy")
        assert fresh is not None and 2 == fresh.events_evaluated
        assert pb.ACTION_ALLOW == _one(engine, call("idle", "read")).action


class TestStoredIdleTime:
    """A stored run's idle time counts from its last event by the wall clock, the time no replica
    held it included: a daemon started after the TTL passed does not take it back."""

    def _record(self) -> bytes:
        engine = CoreEngine(ENABLED, idle_ttl=300.0)
        _one(engine, call("stored", "read"))
        record = engine.service.native.persistence.encode_run("", "stored", 1_700_000_000.0, engine.clock.now)
        assert record is not None
        return bytes(record)

    def test_a_run_stored_within_the_ttl_is_restored(self):
        restarted = CoreEngine(ENABLED, idle_ttl=300.0)
        loaded = restarted.service.native.persistence.load(self._record(), 1_700_000_000.0 + 299.0, 5.0)
        assert Loaded.RESTORED == loaded.outcome
        assert restarted.inspect("stored") is not None

    def test_a_run_stored_longer_than_the_ttl_is_skipped(self):
        restarted = CoreEngine(ENABLED, idle_ttl=300.0)
        loaded = restarted.service.native.persistence.load(self._record(), 1_700_000_000.0 + 301.0, 5.0)
        assert Loaded.EXPIRED == loaded.outcome
        assert restarted.inspect("stored") is None
