"""Who may speak for the person: a token the token file limits to agent-side events
(`TENANT TOKEN agent`) cannot send a `user_turn` (which lifts blocks) or an `approval` (which
answers an ask) — the agent a loop guard restrains must not free itself. The same tenant's
user-side token (the host's hook path, the operator) can. Real daemon, real gRPC and hook
requests."""
from __future__ import annotations

import grpc
import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from loopwarden_server.transport.auth import TokenFileError, parse_token_file
from tests.client.python.hooks import payloads
from tests.e2e.test_hooks_http import hooks_address, post
from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import SAME, Stream, call, channel, outcome
from tests.support.metrics import delta

pytestmark = pytest.mark.daemon

TOKENS = "alpha alpha-user-token\nalpha alpha-agent-token agent\n"
CONFIG = '{tools: {loopDetection: {enabled: true}}, loopwarden: {onCritical: "ask"}}'
AGENT, USER = "alpha-agent-token", "alpha-user-token"


def bearer(token: str) -> tuple:
    return (("authorization", f"Bearer {token}"),)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    token_file = tmp_path_factory.mktemp("tokens") / "tokens"
    token_file.write_text(TOKENS)
    args = ["--auth-token-file", str(token_file), "--hooks-listen", "127.0.0.1:0", "--hooks-agent", ""]
    with running_daemon(CONFIG, args) as handle:
        yield handle


def _asked(stream: Stream, run_id: str) -> pb.Verdict:
    """20 identical calls with outcomes, then the 21st: the critical, ASKed (onCritical: ask)."""
    for index in range(20):
        stream.send(call(run_id, "read", seq=2 * index + 1, tool_call_id=f"c{index}", accepts_ask=True),
                    outcome(run_id, "read", result_json=SAME, seq=2 * index + 2, tool_call_id=f"c{index}"))
    return stream.one(call(run_id, "read", seq=41, tool_call_id="c20", accepts_ask=True))


def _user_turn(run_id: str) -> pb.Event:
    return pb.Event(run_id=run_id, user_turn=pb.UserTurn(prompt_id="p2"))


def _denied(run_id: str) -> pb.Event:
    return pb.Event(run_id=run_id, approval=pb.Approval(tool_call_id="c20", approved=True))


class TestTheTokenFile:
    def test_a_tenant_holds_one_token_of_each_side(self):
        table = parse_token_file(TOKENS.encode())

        assert ("alpha", True) == (table.caller_for(AGENT.encode()).tenant, table.caller_for(AGENT.encode()).agent_only)
        assert ("alpha", False) == (table.caller_for(USER.encode()).tenant, table.caller_for(USER.encode()).agent_only)
        assert frozenset({"alpha"}) == table.tenants

    @pytest.mark.parametrize(("text", "says"), [
        ("a t1 agent\na t2 agent\n", "line 2: tenant 'a' already has an agent-side token"),
        ("a t1\na t2\n", "line 2: tenant 'a' already has a token"),
        ("a t1 agents\n", "line 1: expected `TENANT TOKEN` or `TENANT TOKEN agent`"),
    ])
    def test_what_it_refuses_is_named(self, text, says):
        with pytest.raises(TokenFileError, match=says):
            parse_token_file(text.encode())


class TestAgentSideTokens:
    def test_an_agent_side_user_turn_is_refused_counted_and_lifts_nothing(self, daemon, run_id):
        with channel(daemon.grpc_target) as ch, Stream(ch, bearer(AGENT)) as agent:
            asked = _asked(agent, run_id)
            before = daemon.scrape()
            forged = agent.one(_user_turn(run_id))
            approval = agent.one(_denied(run_id))
            after = daemon.scrape()
            still = agent.one(call(run_id, "read", seq=42, tool_call_id="c21", accepts_ask=True))

        assert pb.ACTION_ASK == asked.action
        assert (pb.ACTION_REJECT, "user_side_only") == (forged.action, forged.error_code)
        assert "speaks for the person" in forged.message
        assert (pb.ACTION_REJECT, "user_side_only") == (approval.action, approval.error_code)
        assert 2 == delta(before, after, "loopwarden_rejected_events_total", error_code="user_side_only")
        assert pb.ACTION_ALLOW != still.action, "nothing was lifted or approved"

    def test_the_same_tenants_user_side_token_lifts_the_block(self, daemon, run_id):
        with channel(daemon.grpc_target) as ch:
            with Stream(ch, bearer(AGENT)) as agent:
                assert pb.ACTION_ASK == _asked(agent, run_id).action
            lifted = pb_grpc.LoopDetectionServiceStub(ch).Check(pb.CheckRequest(event=_user_turn(run_id)),
                                                                metadata=bearer(USER))
            with Stream(ch, bearer(AGENT)) as agent:
                after = agent.one(call(run_id, "read", seq=43, tool_call_id="c22", accepts_ask=True))

        assert pb.ACTION_ALLOW == lifted.verdict.action
        assert pb.ACTION_ALLOW == after.action, "a user turn starts the run's streaks fresh"

    def test_check_refuses_it_too(self, daemon, run_id):
        with channel(daemon.grpc_target) as ch:
            answer = pb_grpc.LoopDetectionServiceStub(ch).Check(pb.CheckRequest(event=_user_turn(run_id)),
                                                                metadata=bearer(AGENT))

        assert (pb.ACTION_REJECT, "user_side_only") == (answer.verdict.action, answer.verdict.error_code)

    def test_a_prompt_through_the_hook_path_lifts_the_block(self, daemon, run_id):
        """The host's hook path carries the user-side token: UserPromptSubmit is the person's turn."""
        address = hooks_address(daemon)

        def send(body: dict, token: str) -> dict:
            status, answer = post(address, "/v1/hooks/claude-code", body, headers={"Authorization": f"Bearer {token}"})
            assert 200 == status, answer
            return answer

        for index in range(1, 21):
            send(payloads.claude_pre_tool_use(run_id, f"toolu_{index}"), USER)
            send(payloads.claude_post_tool_use(run_id, f"toolu_{index}"), USER)
        asked = send(payloads.claude_pre_tool_use(run_id, "toolu_21"), USER)
        send(payloads.claude_user_prompt_submit(run_id, "carry on"), USER)
        after = send(payloads.claude_pre_tool_use(run_id, "toolu_22"), USER)

        assert "ask" == asked["hookSpecificOutput"]["permissionDecision"]
        assert {} == after, "the prompt lifted the block: the call runs"

    def test_a_hook_sent_with_the_agent_side_token_cannot_lift_it(self, daemon, run_id):
        address = hooks_address(daemon)
        before = daemon.scrape()

        status, answer = post(address, "/v1/hooks/claude-code", payloads.claude_user_prompt_submit(run_id, "go"),
                               headers={"Authorization": f"Bearer {AGENT}"})

        assert 200 == status and "continue" not in answer, "a prompt is never held up"
        assert "user_side_only" in answer["systemMessage"], "the person is told the prompt was not taken"
        assert 1 == delta(before, daemon.scrape(), "loopwarden_rejected_events_total", error_code="user_side_only")


def test_an_unknown_token_is_still_unauthenticated(daemon, run_id):
    with channel(daemon.grpc_target) as ch, pytest.raises(grpc.RpcError) as failure:
        pb_grpc.LoopDetectionServiceStub(ch).Check(pb.CheckRequest(event=_user_turn(run_id)),
                                                   metadata=bearer("nobody"))

    assert grpc.StatusCode.UNAUTHENTICATED == failure.value.code()
