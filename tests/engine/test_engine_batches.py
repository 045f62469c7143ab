"""Parallel batches under `{loopwarden: {preset: "fast"}}`, and
criticalScope "batch"."""
from tests.engine.driver import A, D, Run, settings_from

FAST = {"loopwarden": {"preset": "fast"}}
EMPTY = {"content": [{"type": "text", "text": ""}]}
ENFORCING = (A.block, A.abort)



def search(i: int) -> dict:
    return {"origin": "SFO", "destination": "JFK", "date": f"2024-05-{1 + i % 28:02d}", "cabin": f"c{i}"}


def test_three_fan_outs_of_20_distinct_searches_then_a_61st_are_not_blocked():
    """Each fan-out: all 20 calls, then 20 outcomes, every one the identical empty result."""
    run = Run(settings_from(FAST))
    verdicts = []
    for fan_out in range(3):
        queries = range(fan_out * 20, fan_out * 20 + 20)
        verdicts += [run.call("search_flights", search(i)) for i in queries]
        for i in queries:
            run.outcome("search_flights", search(i), EMPTY)
    verdicts.append(run.call("search_flights", search(60)))
    assert [v for v in verdicts if v.action in ENFORCING] == []


def test_without_parallel_batches_the_same_fan_outs_are_blocked_as_churn():
    """The mechanism, not a threshold: the same calls judged one by one are churn at once."""
    run = Run(settings_from({"loopwarden": {"preset": "fast", "parallelBatches": False}}))
    queries = range(20)
    for i in queries:
        run.call("search_flights", search(i))
    for i in queries:
        run.outcome("search_flights", search(i), EMPTY)
    verdict = run.call("search_flights", search(20))
    assert (verdict.action, verdict.detector) == (A.block, D.argument_churn)


def test_a_reread_alternating_with_distinct_empty_searches_is_not_blocked():
    """16 calls: 8 identical re-reads of unchanged notes between 8 distinct searches that all
    return the same empty result (the shape of a real good run)."""
    run = Run(settings_from(FAST))
    verdicts = []
    for i in range(16):
        tool, params, result = (("read", {"path": "policy.md"}, {"content": [{"type": "text", "text": "policy"}]})
                                if i % 2 == 0 else ("search_flights", search(i), EMPTY))
        verdict = run.call(tool, params)
        verdicts.append(verdict)
        if verdict.action not in ENFORCING:
            run.outcome(tool, params, result)
    assert [v for v in verdicts if v.action in ENFORCING] == []


def test_identical_rereads_with_nothing_new_between_are_still_blocked():
    # At sameOutcome's blockAt (3) under fast; tests/engine/test_engine_judgment.py has the rest.
    run = Run(settings_from(FAST))
    for _ in range(3):
        run.done("read", {"path": "policy.md"}, {"content": [{"type": "text", "text": "policy"}]})
    verdict = run.call("read", {"path": "policy.md"})
    assert (verdict.action, verdict.detector, verdict.count) == (A.block, D.generic_repeat, 3)


def test_critical_scope_batch_blocks_siblings_leaves_a_recovery_turn_then_aborts():
    """criticalScope "batch": the batch's first critical blocks the siblings evaluated after it;
    the next turn runs; a second critical ends the run (ABORT loop_recovery_failed). Here the
    batches are calls issued while the batch's earlier calls are still pending."""
    run = Run(settings_from({"tools": {"loopDetection": {"enabled": True}},
                             "loopwarden": {"criticalScope": "batch"}}))
    loop = ("read", {"path": "a"}, {"content": [{"type": "text", "text": "same"}]})
    for _ in range(20):
        run.done(*loop)
    # One turn of three calls: an unrelated call still pending, then the loop, then a sibling.
    first = run.call("list", {"dir": "/"})
    blocked = run.call(loop[0], loop[1])
    sibling = run.call("grep", {"q": "x"})
    assert first.action == A.allow
    assert (blocked.action, blocked.detector, blocked.count) == (A.block, D.generic_repeat, 20)
    assert (sibling.action, sibling.detector) == (A.block, D.generic_repeat)
    assert "one recovery turn" in sibling.message
    run.outcome("list", {"dir": "/"}, {"content": [{"type": "text", "text": "a b"}]})
    # The recovery turn.
    recovery = run.call("write", {"path": "plan.md"})
    assert recovery.action == A.allow
    run.outcome("write", {"path": "plan.md"}, {"content": [{"type": "text", "text": "ok"}]})
    other = run.call("write", {"path": "notes.md"})
    run.outcome("write", {"path": "notes.md"}, {"content": [{"type": "text", "text": "ok"}]})
    assert other.action == A.allow
    second = run.call(loop[0], loop[1])
    assert (second.action, second.error_code) == (A.abort, "loop_recovery_failed")
    assert run.call("list", {"dir": "/"}).error_code == "loop_recovery_failed"


def test_critical_scope_call_is_the_default():
    run = Run(settings_from({"tools": {"loopDetection": {"enabled": True}}}))
    loop = ("read", {"path": "a"}, {"content": [{"type": "text", "text": "same"}]})
    for _ in range(20):
        run.done(*loop)
    run.call("list", {"dir": "/"})
    assert run.call(*loop[:2]).action == A.block
    assert run.call("grep", {"q": "x"}).action == A.allow
