"""Tool rules and the duplicate side-effect guard through the real daemon: the acceptance lines
over gRPC, the class a caller sends (ToolCall.tool_class) and InspectRun's effective config."""
from __future__ import annotations

import json

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.support.grpc_helpers import SAME, Stream, call, channel, outcome

pytestmark = pytest.mark.daemon

CONFIG = """{
  tools: {loopDetection: {enabled: true}},
  loopwarden: {
    toolRules: {fetch: {ignoreArgs: ["$.nonce"]}},
  },
  agents: {list: [
    {id: "mailer", loopwarden: {duplicateSideEffect: {enabled: true},
                                toolRules: {send_email: {class: "mutating"}, read: {class: "readOnly"}}}},
  ]},
}"""


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


def test_an_ignored_nonce_is_blocked_as_a_repeat_at_call_21(daemon):
    """25 `fetch` calls differing only in `nonce`, each with the same outcome: call 21 is the first
    BLOCK, generic_repeat with count 20."""
    verdicts = []
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        for index in range(25):
            params = json.dumps({"url": "https://x.test", "nonce": f"n{index}"})
            verdict = stream.one(call("nonce-1", "fetch", params))
            verdicts.append(verdict)
            if verdict.action != pb.ACTION_BLOCK:
                stream.one(outcome("nonce-1", "fetch", params, SAME))
    blocks = [(i + 1, v.detector, v.count) for i, v in enumerate(verdicts) if v.action == pb.ACTION_BLOCK]
    assert blocks[0] == (21, pb.DETECTOR_GENERIC_REPEAT, 20)
    assert len(blocks) == 5


def test_a_second_identical_send_is_blocked_and_a_second_read_is_not(daemon):
    email = json.dumps({"to": "ana@example.com", "body": "invoice"})
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        first = stream.one(call("mail-1", "send_email", email, "c1", agent_id="mailer"))
        stream.one(outcome("mail-1", "send_email", email, '{"sent": true}', tool_call_id="c1", agent_id="mailer"))
        second = stream.one(call("mail-1", "send_email", email, "c2", agent_id="mailer"))
        stream.one(call("mail-1", "read", "{}", "r1", agent_id="mailer"))
        stream.one(outcome("mail-1", "read", "{}", SAME, tool_call_id="r1", agent_id="mailer"))
        read_again = stream.one(call("mail-1", "read", "{}", "r2", agent_id="mailer"))
    assert first.action == pb.ACTION_ALLOW
    assert (second.action, second.detector, second.count) == (pb.ACTION_BLOCK, pb.DETECTOR_DUPLICATE_SIDE_EFFECT, 1)
    assert "first call: seq" in second.message and "call id c1" in second.message
    assert read_again.action == pb.ACTION_ALLOW


def test_a_class_the_caller_sends_is_used_when_the_config_is_silent(daemon):
    """ToolCall.tool_class MUTATING (what the MCP proxy sends from ToolAnnotations) makes an
    unconfigured tool judged; READ_ONLY on a tool the config calls mutating does not win."""
    def annotated(run_id, tool, call_id, tool_class):
        event = call(run_id, tool, "{}", call_id, agent_id="mailer")
        event.tool_call.tool_class = tool_class
        return event

    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        stream.one(annotated("mail-2", "create_issue", "c1", pb.TOOL_CLASS_MUTATING))
        stream.one(outcome("mail-2", "create_issue", "{}", '{"id": 7}', tool_call_id="c1", agent_id="mailer"))
        repeat = stream.one(annotated("mail-2", "create_issue", "c2", pb.TOOL_CLASS_MUTATING))
        stream.one(annotated("mail-2", "send_email", "e1", pb.TOOL_CLASS_READ_ONLY))
        stream.one(outcome("mail-2", "send_email", "{}", '{"sent": true}', tool_call_id="e1", agent_id="mailer"))
        config_wins = stream.one(annotated("mail-2", "send_email", "e2", pb.TOOL_CLASS_READ_ONLY))
    assert (repeat.action, repeat.detector) == (pb.ACTION_BLOCK, pb.DETECTOR_DUPLICATE_SIDE_EFFECT)
    assert (config_wins.action, config_wins.detector) == (pb.ACTION_BLOCK, pb.DETECTOR_DUPLICATE_SIDE_EFFECT)


def test_inspect_run_shows_the_agents_rules(daemon):
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        stream.one(call("mail-3", "read", "{}", agent_id="mailer"))
        response = pb_grpc.LoopDetectionServiceStub(ch).InspectRun(pb.InspectRunRequest(run_id="mail-3"), timeout=5)
    config = response.effective_config
    rules = {r.tool: r for r in config.tool_rules}
    assert config.duplicate_side_effect is True
    assert sorted(rules) == ["fetch", "read", "send_email"]
    assert list(rules["fetch"].ignore_args) == ["$.nonce"]
    assert (rules["send_email"].tool_class, rules["read"].tool_class) == (pb.TOOL_CLASS_MUTATING, pb.TOOL_CLASS_READ_ONLY)
