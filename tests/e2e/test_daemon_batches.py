"""Parallel batches through the real daemon under `{loopwarden: {preset: "fast"}}`: a fan-out
sent as one EvaluateRequest of 20 calls, then one of their 20 outcomes; batch ids; and
criticalScope "batch" for one agent."""
from __future__ import annotations

import json

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb

from tests.support.grpc_helpers import Stream, call, channel, outcome

pytestmark = pytest.mark.daemon

CONFIG = """{
  loopwarden: {preset: "fast"},
  agents: {list: [{id: "strict", loopwarden: {criticalScope: "batch", abortAfterBlocks: false, progressResetsRepeats: false,
                                             sameOutcome: {enabled: false}}}]},
}"""
EMPTY = '{"content":[{"type":"text","text":""}]}'
ENFORCING = (pb.ACTION_BLOCK, pb.ACTION_ABORT)


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


def search(i: int) -> str:
    return json.dumps({"origin": "SFO", "destination": "JFK", "flexible_days": i})


def test_three_fan_outs_of_20_distinct_searches_and_a_61st_are_not_blocked(daemon):
    run = "batches/fan-out"
    seen = []
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        for fan_out in range(3):
            queries = range(fan_out * 20, fan_out * 20 + 20)
            seen += stream.send(*[call(run, "search_flights", search(i)) for i in queries])
            seen += stream.send(*[outcome(run, "search_flights", search(i), EMPTY) for i in queries])
        seen.append(stream.one(call(run, "search_flights", search(60))))
    assert len(seen) == 121
    assert [v for v in seen if v.action in ENFORCING] == []


def test_the_same_searches_one_by_one_are_churn(daemon):
    """Call, outcome, call, outcome: not a batch; argumentChurn blocks at its blockAt (10)."""
    run = "batches/one-by-one"
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        for i in range(10):
            stream.send(call(run, "search_flights", search(i)))
            stream.send(outcome(run, "search_flights", search(i), EMPTY))
        verdict = stream.one(call(run, "search_flights", search(10)))
    assert (verdict.action, verdict.detector, verdict.count) == (pb.ACTION_BLOCK, pb.DETECTOR_ARGUMENT_CHURN, 10)


def test_a_batch_id_groups_calls_reported_one_by_one(daemon):
    """A hook reports each call of one turn with its outcome, sharing the turn's batch id: the
    turn's identical calls count once (fast: blocked at 3 identical outcomes; 3 turns of 3
    identical reads, 9 calls, are not blocked, the 4th turn is)."""
    run = "batches/batch-id"
    seen = []
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        for turn in range(4):
            for _ in range(3):
                event = call(run, "read", '{"path":"a"}')
                event.tool_call.batch_id = f"turn-{turn}"
                seen.append(stream.one(event))
                stream.send(outcome(run, "read", '{"path":"a"}', '"same"'))
    assert [v for v in seen[:9] if v.action in ENFORCING] == []
    assert (seen[9].action, seen[9].detector, seen[9].count) == (pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT, 3)


def test_critical_scope_batch_through_the_daemon(daemon):
    run = "batches/critical-scope"
    loop = ("read", '{"path":"a"}')
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        for _ in range(5):
            stream.send(call(run, *loop, agent_id="strict"))
            stream.send(outcome(run, *loop, '"same"', agent_id="strict"))
        turn = stream.send(call(run, *loop, agent_id="strict"), call(run, "grep", '{"q":"x"}', agent_id="strict"))
        recovery = stream.send(call(run, "write", '{"path":"plan"}', agent_id="strict"))
        stream.send(outcome(run, "write", '{"path":"plan"}', '"ok"', agent_id="strict"))
        stream.send(call(run, "write", '{"path":"notes"}', agent_id="strict"))
        stream.send(outcome(run, "write", '{"path":"notes"}', '"ok"', agent_id="strict"))
        (second,) = stream.send(call(run, *loop, agent_id="strict"))
    assert [(v.action, v.detector) for v in turn] == [(pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT)] * 2
    assert recovery[0].action == pb.ACTION_ALLOW
    assert (second.action, second.error_code) == (pb.ACTION_ABORT, "loop_recovery_failed")


def test_the_python_client_sends_a_batch_id(client):
    """`tool_call(..., batch_id=...)`: the same turns as above through the client library."""
    from loopwarden import Action

    run = "batches/client-batch-id"
    seen = []
    for turn in range(3):
        for _ in range(3):
            seen.append(client.tool_call(run, "read", {"path": "a"}, batch_id=f"turn-{turn}").action)
            client.tool_outcome(run, "read", {"path": "a"}, result="same")
    assert Action.BLOCK not in seen and Action.ABORT not in seen
    # Without batch ids the same nine calls are nine repeats: blocked at the 4th (sameOutcome, 3).
    for _ in range(3):
        client.tool_call(run + "/plain", "read", {"path": "a"})
        client.tool_outcome(run + "/plain", "read", {"path": "a"}, result="same")
    assert client.tool_call(run + "/plain", "read", {"path": "a"}).action is Action.BLOCK
