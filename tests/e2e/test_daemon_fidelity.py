"""Config fidelity through the real daemon: agents.entries overrides, the opt-in detectors (argument churn,
identical errors) with their metric labels and evidence, the fast preset, result shapes and tool
spellings."""
from __future__ import annotations

import json

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.support.grpc_helpers import Stream, call, channel, outcome
from tests.support.metrics import delta

pytestmark = pytest.mark.daemon

CONFIG = """{
  tools: {loopDetection: {enabled: true}},
  agents: {
    entries: {
      "safe-runner": {tools: {loopDetection: {warningThreshold: 3, criticalThreshold: 5}}},
      "churny": {loopwarden: {argumentChurn: {enabled: true, warnAt: 3, blockAt: 5}}},
      "failing": {loopwarden: {errorRepeat: {enabled: true, threshold: 5}}},
      "quick": {loopwarden: {preset: "fast"}},
    },
  },
}"""
PAGE = json.dumps({"content": [{"type": "text", "text": "the same page"}], "details": {}})
ERROR = "Error: payment amount does not add up, total price is 1203, but paid 833"


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


def inspect(daemon, run_id: str) -> pb.InspectRunResponse:
    with channel(daemon.grpc_target) as ch:
        return pb_grpc.LoopDetectionServiceStub(ch).InspectRun(pb.InspectRunRequest(run_id=run_id), timeout=5)


def drive(daemon, run_id: str, agent: str, calls, blocked_calls_run: bool = False) -> list[pb.Verdict]:
    """Send each (tool, params_json, result_json | None, error | None) as a call and, unless blocked, its outcome."""
    verdicts = []
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        for tool, params, result, error in calls:
            verdict = stream.one(call(run_id, tool, params, agent_id=agent))
            verdicts.append(verdict)
            if verdict.action in (pb.ACTION_BLOCK, pb.ACTION_ABORT) and not blocked_calls_run:
                continue
            fields = {"error": error} if error is not None else {}
            stream.one(outcome(run_id, tool, params, result if error is None else None, agent_id=agent, **fields))
    return verdicts


def first_enforced(verdicts: list[pb.Verdict]) -> tuple[int, pb.Verdict]:
    """(1-based call number, verdict) of the first BLOCK/ABORT."""
    return next((i, v) for i, v in enumerate(verdicts, 1) if v.action in (pb.ACTION_BLOCK, pb.ACTION_ABORT))


class TestAgentsEntries:
    def test_an_entries_override_changes_that_agents_verdicts(self, daemon, run_id):
        """agents.entries.safe-runner.tools.loopDetection (W 3, C 5): its 4th identical call is warned, its 6th blocked."""
        same = [("read", '{"path":"/x"}', PAGE, None)] * 6
        verdicts = drive(daemon, run_id, "safe-runner", same)
        assert [pb.ACTION_ALLOW] * 3 + [pb.ACTION_WARN] * 2 + [pb.ACTION_BLOCK] == [v.action for v in verdicts]
        assert (pb.DETECTOR_GENERIC_REPEAT, 5) == (verdicts[-1].detector, verdicts[-1].count)
        effective = inspect(daemon, run_id).effective_config
        assert (3, 5) == (effective.warning_threshold, effective.critical_threshold)

    def test_other_agents_keep_the_global_settings(self, daemon, run_id):
        """An agent without an entry gets the global block: six identical calls are all allowed."""
        verdicts = drive(daemon, run_id, "someone-else", [("read", '{"path":"/x"}', PAGE, None)] * 6)
        assert {pb.ACTION_ALLOW} == {v.action for v in verdicts}


class TestArgumentChurn:
    def test_a_nonce_rotating_loop_is_blocked_at_block_at(self, daemon, run_id):
        """warnAt 3 / blockAt 5: the call that sees 5 prior matching outcomes is blocked, with evidence and a metric."""
        before = daemon.scrape()
        calls = [("web_fetch", json.dumps({"url": "https://x.test", "nonce": f"n{i}"}), PAGE, None) for i in range(7)]
        verdicts = drive(daemon, run_id, "churny", calls)
        after = daemon.scrape()
        assert [pb.ACTION_ALLOW] * 3 + [pb.ACTION_WARN] * 2 + [pb.ACTION_BLOCK] * 2 == [v.action for v in verdicts]
        block = verdicts[5]
        assert (pb.DETECTOR_ARGUMENT_CHURN, pb.LEVEL_CRITICAL, 5) == (block.detector, block.level, block.count)
        assert block.message.startswith("CRITICAL:") and "changing arguments" in block.message
        assert 5 == len(block.evidence.seqs) and block.evidence.loop_started_seq == block.evidence.seqs[0]
        assert 2 == delta(before, after, "loopwarden_blocks_total", detector="argument_churn", agent="churny")

    def test_the_same_loop_without_it_is_never_flagged(self, daemon, run_id):
        """The reference misses the evasion: 25 nonce calls of one page are all allowed."""
        calls = [("web_fetch", json.dumps({"url": "https://x.test", "nonce": f"n{i}"}), PAGE, None) for i in range(25)]
        assert {pb.ACTION_ALLOW} == {v.action for v in drive(daemon, run_id, "", calls)}


class TestErrorRepeat:
    def test_the_sixth_identical_failure_is_blocked(self, daemon, run_id):
        """threshold 5: the 5th identical failing call is warned (count 4), the 6th blocked (count 5)."""
        before = daemon.scrape()
        verdicts = drive(daemon, run_id, "failing", [("book_reservation", '{"amount":833}', None, ERROR)] * 6)
        after = daemon.scrape()
        assert [(pb.ACTION_ALLOW, 0)] * 4 + [(pb.ACTION_WARN, 4), (pb.ACTION_BLOCK, 5)] == [
            (v.action, v.count) for v in verdicts]
        assert {pb.DETECTOR_ERROR_REPEAT} == {v.detector for v in verdicts[4:]}
        assert "identical error" in verdicts[-1].message
        assert 1 == delta(before, after, "loopwarden_blocks_total", detector="error_repeat", agent="failing")
        assert 1 == delta(before, after, "loopwarden_warnings_total", detector="error_repeat", agent="failing")


class TestFastPreset:
    def test_effective_config_names_the_preset(self, daemon, run_id):
        """InspectRun shows the preset and the opt-in detectors it switched on."""
        drive(daemon, run_id, "quick", [("read", "{}", PAGE, None)])
        effective = inspect(daemon, run_id).effective_config
        assert ("fast", 4, 5, 6, 10, 5, 6, 3, 3, 4) == (
            effective.preset, effective.warning_threshold, effective.critical_threshold,
            effective.argument_churn_warn_at, effective.argument_churn_block_at, effective.error_repeat_threshold,
            effective.run_wide_breaker_threshold, effective.abort_after_blocks,
            effective.same_outcome_block_at, effective.same_outcome_inconclusive_block_at)

    def test_an_identical_call_loop_is_blocked_at_the_fourth_call(self, daemon, run_id):
        """Identical calls with one result: the 3rd is warned, the 4th blocked (sameOutcome)."""
        verdicts = drive(daemon, run_id, "quick", [("read", '{"path":"/x"}', PAGE, None)] * 10)
        number, verdict = first_enforced(verdicts)
        assert (4, pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT, 3) == (number, verdict.action, verdict.detector, verdict.count)
        assert (pb.ACTION_WARN, 2) == (verdicts[2].action, verdicts[2].count)

    def test_an_identical_error_loop_is_blocked_at_the_fourth_call(self, daemon, run_id):
        """The same call failing with the same error: the 4th is blocked."""
        number, verdict = first_enforced(drive(daemon, run_id, "quick", [("pay", '{"amount":1}', None, ERROR)] * 10))
        assert (4, pb.ACTION_BLOCK) == (number, verdict.action)

    def test_a_ping_pong_is_blocked_within_six_calls(self, daemon, run_id):
        """Two lookups alternating with stable results: blocked by the 5th call."""
        sides = [("get_order", '{"id":"A"}', json.dumps({"content": [{"type": "text", "text": "order A"}], "details": {}}), None),
                 ("get_user", '{"id":"u"}', json.dumps({"content": [{"type": "text", "text": "user u"}], "details": {}}), None)]
        number, verdict = first_enforced(drive(daemon, run_id, "quick", [sides[i % 2] for i in range(12)]))
        assert (5, pb.ACTION_BLOCK, pb.DETECTOR_PING_PONG, 5) == (number, verdict.action, verdict.detector, verdict.count)

    def test_blocks_escalate_to_an_abort(self, daemon, run_id):
        """Escalation is on: the 3rd block of a run ends it (tool_loop_persisted)."""
        verdicts = drive(daemon, run_id, "quick", [("read", '{"path":"/x"}', PAGE, None)] * 9)
        assert [pb.ACTION_BLOCK, pb.ACTION_BLOCK, pb.ACTION_ABORT] == [v.action for v in verdicts[3:6]]
        assert "tool_loop_persisted" == verdicts[5].error_code


class TestShapesAndSpellings:
    def test_plain_value_results_are_never_blocked(self, daemon, run_id):
        """`{"value": i}` for i = 1..25 on one call: never blocked through the daemon."""
        calls = [("counter", "{}", json.dumps({"value": i}), None) for i in range(1, 26)]
        assert pb.ACTION_BLOCK not in {v.action for v in drive(daemon, run_id, "", calls)}

    def test_identical_plain_values_are_blocked_at_call_21(self, daemon, run_id):
        """25 identical `{"value": 1}` results: the 21st call is blocked (count 20)."""
        number, verdict = first_enforced(drive(daemon, run_id, "", [("counter", "{}", '{"value": 1}', None)] * 25))
        assert (21, 20) == (number, verdict.count)

    def test_zero_width_and_fullwidth_spellings_are_one_tool(self, daemon, run_id):
        """Rotating read / re\u200bad / ｒｅａｄ: the 11th call is warned (count 10), named as it spelled itself."""
        spellings = ["read", "re\u200bad", "ｒｅａｄ"]
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            verdicts = [stream.one(call(run_id, spellings[i % 3], '{"path":"/x"}')) for i in range(11)]
        assert (pb.ACTION_WARN, 10, "re\u200bad") == (verdicts[-1].action, verdicts[-1].count, verdicts[-1].tool_name)
        assert verdicts[-1].warning_key.startswith("generic:read:"), "the key folds the spellings"
