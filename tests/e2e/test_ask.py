"""The ASK verdict through the real daemon: onCritical "ask", approvals once,
always (a standing exemption, listed and revoked with the real CLI and the RPCs) and denied, the
ask timeout, an approval naming no ask, and an exemption surviving kill -9 with the file store."""
from __future__ import annotations

import json
import signal
import time

import grpc
import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.support.cli import loopwarden
from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import SAME, Stream, call, channel, outcome
from tests.support.metrics import value
from tests.support.state import wait_until_flushed

pytestmark = pytest.mark.daemon

CONFIG = """{
  tools: {loopDetection: {enabled: true}},
  loopwarden: {onCritical: "ask"},
  agents: {list: [
    {id: "quick", loopwarden: {askTimeoutSeconds: 1}},
    {id: "blocker", loopwarden: {onCritical: "block"}},
  ]},
}"""
X = '{"path":"/x"}'


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


def _ask(run_id: str, call_id: str, agent: str = "", accepts_ask: bool = True) -> pb.Event:
    return call(run_id, "read", X, tool_call_id=call_id, agent_id=agent, accepts_ask=accepts_ask)


def _loop(stream: Stream, run_id: str, times: int = 20, agent: str = "") -> None:
    """`times` identical calls with identical outcomes: the next identical call is critical."""
    for i in range(times):
        verdicts = stream.send(_ask(run_id, f"{run_id}-{i}", agent), outcome(run_id, "read", X, SAME, agent_id=agent))
        assert verdicts[0].action in (pb.ACTION_ALLOW, pb.ACTION_WARN), verdicts[0]


def _approve(run_id: str, call_id: str, approved: bool = True, scope: int = pb.APPROVAL_SCOPE_ONCE,
             agent: str = "", decision_id: str = "") -> pb.Event:
    return pb.Event(run_id=run_id, agent_id=agent, approval=pb.Approval(
        tool_call_id=call_id, decision_id=decision_id, approved=approved, scope=scope))


def _ran(stream: Stream, run_id: str, agent: str = "") -> None:
    """The approved call ran: its outcome arrives as any call's does."""
    stream.one(outcome(run_id, "read", X, SAME, agent_id=agent))


def _stub(ch: grpc.Channel) -> pb_grpc.LoopDetectionServiceStub:
    return pb_grpc.LoopDetectionServiceStub(ch)


class TestAsk:
    def test_the_21st_identical_call_is_asked_only_of_a_caller_that_accepts_ask(self, daemon):
        before = daemon.scrape()
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            _loop(stream, "ask-1")
            asked = stream.one(_ask("ask-1", "ask-1-20"))
            _loop(stream, "ask-2")
            blocked = stream.one(_ask("ask-2", "ask-2-20", accepts_ask=False))
            _loop(stream, "ask-3", agent="blocker")
            kept = stream.one(_ask("ask-3", "ask-3-20", agent="blocker"))
        after = daemon.scrape()
        assert (pb.ACTION_ASK, pb.DETECTOR_GENERIC_REPEAT, pb.LEVEL_CRITICAL, 20) == (
            asked.action, asked.detector, asked.level, asked.count)
        assert asked.announce and asked.decision_id and len(asked.evidence.seqs) > 0
        assert asked.message.startswith("CRITICAL: this call is held for a person"), asked.message
        assert (pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT, 20) == (blocked.action, blocked.detector, blocked.count)
        assert (pb.ACTION_BLOCK, 20) == (kept.action, kept.count), "onCritical block"
        assert 1 == value(after, "loopwarden_asks_total", detector="generic_repeat", agent="default") - value(
            before, "loopwarden_asks_total", detector="generic_repeat", agent="default")

    def test_approved_once_the_next_identical_call_is_asked_again(self, daemon):
        before = daemon.scrape()
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            _loop(stream, "once-1")
            assert pb.ACTION_ASK == stream.one(_ask("once-1", "c-asked")).action
            answered = stream.one(_approve("once-1", "c-asked"))
            _ran(stream, "once-1")
            again = stream.one(_ask("once-1", "c-next"))
            run = _stub(ch).InspectRun(pb.InspectRunRequest(run_id="once-1"), timeout=5)
        after = daemon.scrape()
        assert (pb.ACTION_ALLOW, "") == (answered.action, answered.error_code)
        assert (pb.ACTION_ASK, pb.DETECTOR_GENERIC_REPEAT) == (again.action, again.detector)
        assert 0 == run.blocks, "an ASK is not a block"
        assert 1 == value(after, "loopwarden_approvals_total", answer="approved_once", agent="default") - value(
            before, "loopwarden_approvals_total", answer="approved_once", agent="default")

    def test_a_denial_blocks_the_next_one(self, daemon):
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            _loop(stream, "deny-1")
            assert pb.ACTION_ASK == stream.one(_ask("deny-1", "c-asked")).action
            assert pb.ACTION_ALLOW == stream.one(_approve("deny-1", "c-asked", approved=False)).action
            after = stream.one(_ask("deny-1", "c-next"))
        assert (pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT, 20) == (after.action, after.detector, after.count)

    def test_an_approval_naming_no_pending_ask_is_rejected(self, daemon):
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            _loop(stream, "none-1", 3)
            held = stream.one(_approve("none-1", "never-asked"))
            unknown_run = stream.one(_approve("none-nowhere", "", decision_id="lw-1"))
            inspect = _stub(ch).InspectRun
            with pytest.raises(grpc.RpcError) as missing:
                inspect(pb.InspectRunRequest(run_id="none-nowhere"), timeout=5)
        assert (pb.ACTION_REJECT, "no_pending_ask") == (held.action, held.error_code)
        assert '"never-asked"' in held.message, held.message
        assert (pb.ACTION_REJECT, "no_pending_ask") == (unknown_run.action, unknown_run.error_code)
        assert grpc.StatusCode.NOT_FOUND == missing.value.code(), "an answer for an unknown run makes none"

    def test_an_unanswered_ask_past_the_timeout_is_a_denial(self, daemon):
        before = daemon.scrape()
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            _loop(stream, "late-1", agent="quick")
            assert pb.ACTION_ASK == stream.one(_ask("late-1", "c-asked", agent="quick")).action
            time.sleep(1.2)
            after = stream.one(_ask("late-1", "c-next", agent="quick"))
            late_answer = stream.one(_approve("late-1", "c-asked", agent="quick"))
        scraped = daemon.scrape()
        assert (pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT) == (after.action, after.detector)
        assert (pb.ACTION_REJECT, "no_pending_ask") == (late_answer.action, late_answer.error_code)
        assert 1 == value(scraped, "loopwarden_approvals_total", answer="timed_out", agent="quick") - value(
            before, "loopwarden_approvals_total", answer="timed_out", agent="quick")


class TestStandingExemption:
    def test_always_allows_the_next_five_is_listed_and_revoke_asks_again(self, daemon):
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            _loop(stream, "always-1")
            asked = stream.one(_ask("always-1", "c-asked"))
            assert pb.ACTION_ASK == asked.action
            assert pb.ACTION_ALLOW == stream.one(_approve("always-1", "c-asked", scope=pb.APPROVAL_SCOPE_ALWAYS)).action
            _ran(stream, "always-1")
            allowed = []
            for i in range(5):
                allowed.append(stream.one(_ask("always-1", f"c-ok-{i}")))
                _ran(stream, "always-1")
            listed = _stub(ch).ListExemptions(pb.ListExemptionsRequest(tool_name="read"), timeout=5).exemptions
            inspected = _stub(ch).InspectRun(pb.InspectRunRequest(run_id="always-1"), timeout=5)
            cli_list = loopwarden("exemptions", "list", "--json", "--address", daemon.grpc_target)
            cli_table = loopwarden("exemptions", "list", "--tool", "read", "--address", daemon.grpc_target)
            revoked = loopwarden("exemptions", "revoke", asked.decision_id, "--address", daemon.grpc_target)
            again = stream.one(_ask("always-1", "c-after-revoke"))
            revoke_twice = loopwarden("exemptions", "revoke", asked.decision_id, "--address", daemon.grpc_target)
            with pytest.raises(grpc.RpcError) as unknown:
                _stub(ch).RevokeExemption(pb.RevokeExemptionRequest(id=asked.decision_id), timeout=5)
        assert [(pb.ACTION_ALLOW, "")] * 5 == [(v.action, v.message) for v in allowed]
        assert [asked.decision_id] == [e.id for e in listed]
        (exemption,) = listed
        assert ("", "read", "always-1") == (exemption.agent_id, exemption.tool_name, exemption.run_id)
        assert exemption.args_hash.startswith("read:") and exemption.expires_at - exemption.created_at == pytest.approx(86400)
        assert [asked.decision_id] == [e.id for e in inspected.exemptions]
        assert 0 == cli_list.returncode, cli_list.stderr
        assert [asked.decision_id] == [e["id"] for e in json.loads(cli_list.stdout)]
        assert 0 == cli_table.returncode and asked.decision_id in cli_table.stdout and "always-1" in cli_table.stdout
        assert (0, f"revoked {asked.decision_id}") == (revoked.returncode, revoked.stdout.split(" (")[0]), revoked.stderr
        assert (pb.ACTION_ASK, pb.DETECTOR_GENERIC_REPEAT) == (again.action, again.detector)
        assert 1 == revoke_twice.returncode and "not found" in revoke_twice.stderr
        assert grpc.StatusCode.NOT_FOUND == unknown.value.code()

    def test_an_exemption_does_not_cover_another_agent_or_other_arguments(self, daemon):
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            _loop(stream, "scope-1")
            asked = stream.one(_ask("scope-1", "c-asked"))
            stream.one(_approve("scope-1", "c-asked", scope=pb.APPROVAL_SCOPE_ALWAYS))
            _loop(stream, "scope-2", agent="quick")
            other_agent = stream.one(_ask("scope-2", "c-x", agent="quick"))
            listed = _stub(ch).ListExemptions(pb.ListExemptionsRequest(agent_id="quick"), timeout=5).exemptions
            _stub(ch).RevokeExemption(pb.RevokeExemptionRequest(id=asked.decision_id), timeout=5)
        assert pb.ACTION_ASK == other_agent.action
        assert [] == list(listed)


class TestFileStore:
    def test_an_always_exemption_survives_kill_9(self, tmp_path):
        state = f"file:{tmp_path / 'runs.state'}"
        with running_daemon(CONFIG, ["--state-store", state, "--state-flush-interval", "0.2"]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                _loop(stream, "kill-ask")
                asked = stream.one(_ask("kill-ask", "c-asked"))
                stream.one(_approve("kill-ask", "c-asked", scope=pb.APPROVAL_SCOPE_ALWAYS))
                _ran(stream, "kill-ask")
            wait_until_flushed(daemon)
            deadline = time.monotonic() + 10
            while value(daemon.scrape(), "loopwarden_state_dirty_runs") != 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            daemon.process.kill()
            assert -signal.SIGKILL == daemon.process.wait(timeout=10)
        with running_daemon(CONFIG, ["--state-store", state]) as daemon:
            daemon.wait_for_log(lambda l: l.get("msg") == "state restored")
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                listed = _stub(ch).ListExemptions(pb.ListExemptionsRequest(), timeout=5).exemptions
                verdict = stream.one(_ask("kill-ask", "c-after"))
                # A new run of the same agent is covered too: exemptions are tenant-wide.
                _loop(stream, "kill-ask-2")
                other_run = stream.one(_ask("kill-ask-2", "c-other"))
            gauge = value(daemon.scrape(), "loopwarden_exemptions")
        assert [asked.decision_id] == [e.id for e in listed]
        assert (pb.ACTION_ALLOW, "") == (verdict.action, verdict.message)
        assert pb.ACTION_ALLOW == other_run.action
        assert 1 == gauge
