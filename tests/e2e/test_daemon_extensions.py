"""The opt-in extensions through the real daemon: escalation, run-wide breaker, shadow mode, explanations."""
from __future__ import annotations

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.conformance.scenarios import load_variants
from tests.engine.test_engine_conformance import run_variant_on_engine
from tests.support.grpc_helpers import SAME, Stream, call, channel, compaction, outcome
from tests.support.metrics import value

pytestmark = pytest.mark.daemon

CONFIG = """{
  tools: {loopDetection: {enabled: true}},
  loopwarden: {abortAfterBlocks: 2},
  agents: {list: [
    {id: "rotating", loopwarden: {abortAfterBlocks: false, runWideBreaker: {enabled: true, threshold: 6}}},
    {id: "trial", loopwarden: {abortAfterBlocks: false, shadowMode: true}},
    {id: "plain", loopwarden: {abortAfterBlocks: false}},
  ]},
}"""
X = '{"path":"/x"}'


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


def _inspect(daemon, run_id: str) -> pb.InspectRunResponse:
    with channel(daemon.grpc_target) as ch:
        return pb_grpc.LoopDetectionServiceStub(ch).InspectRun(pb.InspectRunRequest(run_id=run_id), timeout=5)


def _done(stream: Stream, run_id: str, tool: str, params: str, result: str, agent: str = "", seq: int = 0):
    return stream.send(call(run_id, tool, params, agent_id=agent, seq=seq),
                       outcome(run_id, tool, params, result, agent_id=agent, seq=seq + 1 if seq else 0))


class TestEscalation:
    def test_the_nth_block_aborts_the_run(self, daemon):
        """abortAfterBlocks 2: the first block is a BLOCK, the second an ABORT (tool_loop_persisted) that sticks."""
        before = daemon.scrape()
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            for _ in range(20):
                _done(stream, "esc-1", "read", X, SAME)
            first = stream.one(call("esc-1", "read", X))
            second = stream.one(call("esc-1", "read", X))
            later = stream.one(call("esc-1", "list", "{}"))
        after = daemon.scrape()
        assert (pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT) == (first.action, first.detector)
        assert (pb.ACTION_ABORT, "tool_loop_persisted", pb.DETECTOR_GENERIC_REPEAT) == (
            second.action, second.error_code, second.detector)
        assert "read" in second.message and "generic_repeat" in second.message
        assert (pb.ACTION_ABORT, "tool_loop_persisted") == (later.action, later.error_code)
        assert 1 == value(after, "loopwarden_escalation_aborts_total", detector="generic_repeat", agent="default") - value(
            before, "loopwarden_escalation_aborts_total", detector="generic_repeat", agent="default")
        assert 1 == value(after, "loopwarden_blocks_total", detector="generic_repeat", agent="default") - value(
            before, "loopwarden_blocks_total", detector="generic_repeat", agent="default")
        assert (True, "tool_loop_persisted", 2) == (lambda r: (r.aborted, r.abort_error_code, r.blocks))(_inspect(daemon, "esc-1"))

    def test_an_agent_can_switch_escalation_off(self, daemon):
        """abortAfterBlocks: false for an agent keeps the reference behaviour: blocks stay blocks."""
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            for _ in range(20):
                _done(stream, "esc-2", "read", X, SAME, agent="plain")
            actions = [stream.one(call("esc-2", "read", X, agent_id="plain")).action for _ in range(4)]
        assert [pb.ACTION_BLOCK] * 4 == actions


class TestRunWideBreaker:
    def test_rotating_calls_with_no_new_results_trip_it(self, daemon):
        """Three calls in rotation, same results: after 6 repeats of seen triples the next call is blocked."""
        cycle = [("read", '{"path":"/a"}'), ("list", '{"dir":"/w"}'), ("search", '{"q":"x"}')]
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            allowed = []
            for step in range(9):  # 3 new triples, then 6 repeats
                tool, params = cycle[step % 3]
                allowed += _done(stream, "rw-1", tool, params, SAME, agent="rotating")
            tool, params = cycle[0]
            blocked = stream.one(call("rw-1", tool, params, agent_id="rotating"))
        assert {pb.ACTION_ALLOW} == {v.action for v in allowed}
        assert (pb.ACTION_BLOCK, pb.DETECTOR_RUN_WIDE_NO_PROGRESS, pb.LEVEL_CRITICAL, 6) == (
            blocked.action, blocked.detector, blocked.level, blocked.count)
        assert 6 == len(blocked.evidence.seqs)

    def test_a_new_triple_resets_it_and_it_is_off_by_default(self, daemon):
        """Five repeats then one new result: no block. The same rotation for another agent never trips it."""
        cycle = [("read", '{"path":"/a"}'), ("list", '{"dir":"/w"}'), ("search", '{"q":"x"}')]
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            for step in range(8):
                tool, params = cycle[step % 3]
                _done(stream, "rw-2", tool, params, SAME, agent="rotating")
            _done(stream, "rw-2", "read", '{"path":"/a"}', '"something new"', agent="rotating")
            after_reset = stream.one(call("rw-2", "list", '{"dir":"/w"}', agent_id="rotating"))
            for step in range(30):
                tool, params = cycle[step % 3]
                _done(stream, "rw-3", tool, params, SAME, agent="plain")
            default_agent = stream.one(call("rw-3", "read", '{"path":"/a"}', agent_id="plain"))
        assert pb.ACTION_ALLOW == after_reset.action
        assert pb.DETECTOR_RUN_WIDE_NO_PROGRESS != default_agent.detector


class TestShadowMode:
    def test_blocks_are_reported_not_enforced(self, daemon):
        """A would-be BLOCK is ALLOW with shadow=true and shadow_action=BLOCK; counted as shadow, not as a block."""
        before = daemon.scrape()
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            for _ in range(20):
                _done(stream, "sh-1", "read", X, SAME, agent="trial")
            first = stream.one(call("sh-1", "read", X, agent_id="trial"))
            stream.one(outcome("sh-1", "read", X, SAME, agent_id="trial"))
            second = stream.one(call("sh-1", "read", X, agent_id="trial"))
        after = daemon.scrape()
        assert (pb.ACTION_ALLOW, True, pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT, 20) == (
            first.action, first.shadow, first.shadow_action, first.detector, first.count)
        assert (pb.ACTION_ALLOW, pb.ACTION_BLOCK, 21) == (second.action, second.shadow_action, second.count)
        assert 2 == value(after, "loopwarden_shadow_verdicts_total", action="block", detector="generic_repeat") - value(
            before, "loopwarden_shadow_verdicts_total", action="block", detector="generic_repeat")
        assert 0 == value(after, "loopwarden_blocks_total", detector="generic_repeat", agent="trial")
        line = daemon.wait_for_log(lambda l: l.get("msg") == "shadow block (not enforced)" and l.get("run_id") == "sh-1")
        assert ("trial", "generic_repeat", first.decision_id) == (line["agent_id"], line["detector"], line["decision_id"])

    def test_a_guard_abort_in_shadow_mode_leaves_the_run_alive(self, daemon):
        """The post-compaction guard reports shadow ABORT; the run carries on."""
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            stream.one(compaction("sh-2", agent_id="trial"))
            verdicts = [_done(stream, "sh-2", "gw", "{}", SAME, agent="trial")[1] for _ in range(3)]
            next_call = stream.one(call("sh-2", "gw", "{}", agent_id="trial"))
        assert (pb.ACTION_ALLOW, pb.ACTION_ABORT, "compaction_loop_persisted") == (
            verdicts[2].action, verdicts[2].shadow_action, verdicts[2].error_code)
        assert (pb.ACTION_ALLOW, False) == (next_call.action, next_call.shadow)
        assert not _inspect(daemon, "sh-2").aborted


class TestExplanations:
    def test_verdicts_carry_their_evidence_and_a_decision_id(self, daemon):
        """A generic warning names the ten prior calls; a block names the twenty identical outcomes."""
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            seqs = []
            for index in range(20):
                seqs.append(2 * index + 1)
                _done(stream, "ex-1", "read", X, SAME, agent="plain", seq=2 * index + 1)
            block = stream.one(call("ex-1", "read", X, agent_id="plain", seq=100))
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            for index in range(10):
                stream.one(call("ex-2", "read", X, seq=index + 1, tool_call_id=f"c{index}"))
            warned_at_11 = stream.one(call("ex-2", "read", X, seq=11))
        assert (list(range(1, 11)), 1) == (list(warned_at_11.evidence.seqs), warned_at_11.evidence.loop_started_seq)
        assert [f"c{i}" for i in range(10)] == list(warned_at_11.evidence.tool_call_ids)
        assert (seqs, 1) == (list(block.evidence.seqs), block.evidence.loop_started_seq)
        assert block.decision_id and warned_at_11.decision_id and block.decision_id != warned_at_11.decision_id

    def test_inspect_run_shows_the_last_verdicts_with_evidence(self, daemon):
        """InspectRun lists the run's latest WARN/BLOCK/ABORT verdicts, oldest first, with their evidence."""
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            for index in range(12):
                stream.one(call("ex-3", "read", X, seq=index + 1))
        recent = _inspect(daemon, "ex-3").recent_verdicts
        assert [11, 12] == [v.seq for v in recent]
        assert [list(range(1, 11)), list(range(1, 12))] == [list(v.evidence.seqs) for v in recent]
        line = daemon.wait_for_log(lambda l: l.get("decision_id") == recent[0].decision_id)
        assert (list(range(1, 11)), 1) == (line["evidence_seqs"], line["loop_started_seq"])

    def test_ping_pong_and_guard_evidence(self, daemon):
        """Ping-pong names the alternating tail; the guard names the identical outcomes."""
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            for index in range(9):
                tool, params = (("read", '{"p":"/a"}'), ("list", '{"d":"/w"}'))[index % 2]
                stream.one(call("ex-4", tool, params, seq=index + 1))
            pong = stream.one(call("ex-4", "list", '{"d":"/w"}', seq=10))
            stream.one(compaction("ex-5", seq=1))
            for index in range(3):
                verdicts = _done(stream, "ex-5", "gw", "{}", SAME, agent="plain", seq=10 * (index + 1))
        assert (pb.DETECTOR_PING_PONG, list(range(1, 10))) == (pong.detector, list(pong.evidence.seqs))
        assert (pb.ACTION_ABORT, [11, 21, 31]) == (verdicts[1].action, list(verdicts[1].evidence.seqs))


@pytest.mark.parametrize("variant", [v for v in load_variants() if not v.extension], ids=lambda v: v.id)
def test_conformance_is_unchanged_with_every_extension_explicitly_off(variant):
    """Each spec example gives the same verdicts when the loopwarden block switches everything off."""
    config = {**variant.config, "loopwarden": {
        "abortAfterBlocks": False, "shadowMode": False, "runWideBreaker": {"enabled": False}}}
    run_variant_on_engine(variant, config)
