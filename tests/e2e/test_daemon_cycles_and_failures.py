"""The opt-in cycle and failure detectors' promises through the real daemon: a stable cycle of P calls is warned and
blocked by `cycle` by its 4P-th call, forty changing exec commands failing alike are blocked at
call 21 (execFailureStreak), and N failing calls of N tools block call N + 1 (failureCascade).
The escaped external-content wrappers (a default-on change) run here through
test_daemon_conformance.py's ex30."""
from __future__ import annotations

import json

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb

from tests.support.grpc_helpers import Stream, call, channel, outcome

pytestmark = pytest.mark.daemon

CONFIG = """{
  tools: {loopDetection: {enabled: true}},
  loopwarden: {
    cycles: {enabled: true},
    execFailureStreak: {enabled: true},
    failureCascade: {enabled: true, threshold: 5},
  },
}"""
MEMBERS = [("list", '{"dir":"src"}'), ("read", '{"path":"a.py"}'), ("grep", '{"q":"todo"}'),
           ("read", '{"path":"b.py"}'), ("exec", '{"command":"make"}'), ("edit", '{"path":"a.py"}')]


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


def _rounds(stream: Stream, run_id: str, calls) -> list[pb.Verdict]:
    """Each call and, unless it was stopped, its outcome: the calls' verdicts."""
    verdicts = []
    for tool, params, result in calls:
        verdict = stream.one(call(run_id, tool, params))
        if verdict.action in (pb.ACTION_ALLOW, pb.ACTION_WARN):
            stream.one(outcome(run_id, tool, params, result))
        verdicts.append(verdict)
    return verdicts


@pytest.mark.parametrize("period", [3, 4, 5, 6])
def test_a_stable_cycle_is_warned_then_blocked(daemon, period):
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        calls = [(*MEMBERS[i % period], json.dumps(f"member {i % period}")) for i in range(4 * period)]
        verdicts = _rounds(stream, f"cycle-{period}", calls)
    seen = [(v.action, v.detector, v.count) for v in verdicts]
    assert seen[2 * period] == (pb.ACTION_WARN, pb.DETECTOR_CYCLE, 2 * period + 1)
    assert seen[3 * period] == (pb.ACTION_BLOCK, pb.DETECTOR_CYCLE, 3 * period + 1)
    assert all(action == pb.ACTION_ALLOW for action, _, _ in seen[:2 * period])


def test_forty_exec_commands_failing_alike_block_at_call_21(daemon):
    def failed(i: int) -> str:
        text = f"Traceback at 10:{i:02}:07 (attempt {i}, pid={4000 + i}): ModuleNotFoundError: No module named 'foo'"
        return json.dumps({"content": [{"type": "text", "text": text}],
                           "details": {"status": "failed", "exitCode": 1, "aggregated": text, "durationMs": 30 + i}})
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        verdicts = _rounds(stream, "exec-40", [("exec", json.dumps({"command": f"python job-{i}.py"}), failed(i))
                                               for i in range(40)])
    assert all(v.action == pb.ACTION_ALLOW for v in verdicts[:20])
    assert (verdicts[20].action, verdicts[20].detector, verdicts[20].count) == (pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT, 20)
    assert len(verdicts[20].evidence.seqs) == 20


def test_failing_calls_of_different_tools_block_the_next_call(daemon):
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        for i in range(5):
            stream.one(call("cascade", f"tool_{i}", "{}"))
            stream.one(outcome("cascade", f"tool_{i}", "{}", error=f"tool_{i}: permission denied"))
        verdict = stream.one(call("cascade", "tool_5", "{}"))
    assert (verdict.action, verdict.detector, verdict.count) == (pb.ACTION_BLOCK, pb.DETECTOR_FAILURE_CASCADE, 5)
    assert verdict.message.startswith("CRITICAL: the last 5 tool calls all failed")
