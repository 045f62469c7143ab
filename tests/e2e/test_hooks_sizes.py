"""Hook payloads of any size are judged or answered, never left unguarded.

A tool input or output over the daemon's event limits (--max-params-bytes / --max-result-bytes,
1 MiB) is judged by its stand-in (sha256, length, prefix: loopwarden.hooks.reduction), so a loop of
identical 2 MiB or 5 MiB outputs is denied at 21 like a loop of small ones; an input over
--hooks-max-body-bytes gets a 200 in the host's format saying the call was not checked (a deny when
fail-closed), never a non-2xx, which Claude Code would take as "run the call"."""
from __future__ import annotations

import http.client
import json

import pytest

from tests.client.python.hooks import payloads
from tests.e2e.test_hooks_http import CRITICAL, claude_code_sender, hook_command, hooks_address, post
from tests.e2e.test_hooks_http import daemon_args, send  # noqa: F401 - the hook tests' shared fixtures
from tests.support.daemon import running_daemon

pytestmark = pytest.mark.daemon

MIB = 1024 * 1024
CONFIG = "{tools: {loopDetection: {enabled: true}}}"


def big_response(size: int, fill: str = "x") -> dict:
    return {**payloads.BASH_RESPONSE, "stdout": fill * size}


def pre_answers_of_identical_calls(send, session: str, calls: int, *, response=None, tool_input=None) -> list[dict]:
    """`calls` identical Bash calls: each PreToolUse, and for each call it lets run its PostToolUse
    (with `response` as its tool_response); the PreToolUse answers."""
    answers = []
    for index in range(1, calls + 1):
        pre = payloads.claude_pre_tool_use(session, f"toolu_{index}")
        post_body = payloads.claude_post_tool_use(session, f"toolu_{index}", response=response)
        if tool_input is not None:
            pre["tool_input"] = post_body["tool_input"] = tool_input
        answers.append(send(pre))
        if answers[-1].get("hookSpecificOutput", {}).get("permissionDecision") != "deny":
            assert {} == send(post_body)
    return answers


def denied(answer: dict) -> bool:
    return answer.get("hookSpecificOutput", {}).get("permissionDecision") == "deny"


@pytest.mark.parametrize("size", [2 * MIB, 5 * MIB])
def test_identical_outputs_over_the_event_limit_are_denied_at_21(daemon, send, run_id, size):
    answers = pre_answers_of_identical_calls(send, run_id, 25, response=big_response(size))

    assert [False] * CRITICAL + [True] * 5 == [denied(answer) for answer in answers]
    reduced = [line for line in daemon.logs() if line.get("msg", "").startswith("hook input reduced")
               and line.get("run_id") == run_id]
    assert CRITICAL == len(reduced)  # every PostToolUse's tool_response, logged as reduced
    assert {("tool_response", len(json.dumps(big_response(size))))} == {(r["field"], r["bytes"]) for r in reduced}


def test_different_outputs_over_the_limit_hash_differently(daemon, client, send, run_id):
    for index, fill in enumerate("ab"):
        send(payloads.claude_pre_tool_use(run_id, f"toolu_{index}"))
        send(payloads.claude_post_tool_use(run_id, f"toolu_{index}", response=big_response(2 * MIB, fill)))

    first, second = client.inspect(run_id).records
    assert first.result_hash and second.result_hash
    assert first.result_hash != second.result_hash


def test_identical_inputs_over_the_event_limit_are_denied_at_21(send, run_id):
    answers = pre_answers_of_identical_calls(send, run_id, CRITICAL + 1,
                                             tool_input={"command": "cat <<EOF\n" + "y" * (2 * MIB) + "\nEOF"})

    assert [False] * CRITICAL + [True] == [denied(answer) for answer in answers]


def test_the_command_form_reduces_too_and_reports_no_silent_daemon(daemon, client, run_id):
    """5 MiB through `loopwarden hook` (gRPC): judged, recorded, and no "did not answer"."""
    payload = payloads.claude_post_tool_use(run_id, "toolu_1", response=big_response(5 * MIB))
    assert 0 == hook_command(daemon, "claude-code", payloads.claude_pre_tool_use(run_id, "toolu_1"))[0]

    code, stdout, stderr = hook_command(daemon, "claude-code", payload)

    assert (0, {}) == (code, json.loads(stdout))
    assert "did not answer" not in stderr
    assert f"tool_response of {len(json.dumps(big_response(5 * MIB)))} bytes judged by its sha256" in stderr
    assert client.inspect(run_id).records[0].result_hash


def test_the_command_form_reduces_at_the_limits_it_is_given(daemon, client, run_id):
    """`--max-result-bytes` set below the output's size (a daemon with smaller limits): reduced too."""
    payload = payloads.claude_post_tool_use(run_id, "toolu_1", response=big_response(4096))
    hook_command(daemon, "claude-code", payloads.claude_pre_tool_use(run_id, "toolu_1"))

    code, _stdout, stderr = hook_command(daemon, "claude-code", payload, "--max-result-bytes", "2048")

    assert 0 == code
    assert "tool_response of" in stderr and "judged by its sha256" in stderr
    assert client.inspect(run_id).records[0].result_hash


class TestOverTheBodyLimit:
    LIMIT = 3 * MIB

    @pytest.mark.parametrize("fail_closed", [False, True])
    def test_a_pre_tool_use_over_the_limit_is_answered_200_not_checked(self, fail_closed, run_id):
        args = ["--hooks-listen", "127.0.0.1:0", "--hooks-max-body-bytes", str(self.LIMIT),
                *(["--hooks-fail-closed"] * fail_closed)]
        huge = {**payloads.claude_pre_tool_use(run_id, "t"), "tool_input": {"command": "z" * (4 * MIB)}}
        with running_daemon(CONFIG, args) as limited:
            status, answer = post(hooks_address(limited), "/v1/hooks/claude-code", huge)
            chunked = self.post_chunked(hooks_address(limited), huge)
            small = claude_code_sender(limited)(payloads.claude_pre_tool_use(run_id, "t2"))

        assert 200 == status
        for said in (answer, chunked):  # without a Content-Length, read up to the limit: the same answer
            assert f"is over the limit of {self.LIMIT} bytes (--hooks-max-body-bytes)" in json.dumps(said)
        assert list(answer) == list(chunked)
        assert f"({len(json.dumps(huge))} bytes)" in json.dumps(answer)
        if fail_closed:
            assert "deny" == answer["hookSpecificOutput"]["permissionDecision"]
        else:
            assert "hookSpecificOutput" not in answer and "ran without a loop check" in answer["systemMessage"]
        assert {} == small  # the connection and the listener are fine afterwards

    def test_a_post_tool_use_over_the_limit_tells_the_user(self, run_id):
        args = ["--hooks-listen", "127.0.0.1:0", "--hooks-max-body-bytes", str(self.LIMIT), "--hooks-fail-closed"]
        huge = payloads.claude_post_tool_use(run_id, "t", response=big_response(4 * MIB))
        with running_daemon(CONFIG, args) as limited:
            status, answer = post(hooks_address(limited), "/v1/hooks/codex", huge)

        assert 200 == status
        assert ["systemMessage"] == list(answer)  # the call already ran: nothing to deny
        assert "was not checked" in answer["systemMessage"]

    @staticmethod
    def post_chunked(address: str, body: dict) -> dict:
        host, port = address.rsplit(":", 1)
        data = json.dumps(body).encode()
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            chunks = (data[i:i + 65536] for i in range(0, len(data), 65536))
            connection.request("POST", "/v1/hooks/claude-code", chunks, {"Content-Type": "application/json"},
                               encode_chunked=True)
            response = connection.getresponse()
            assert 200 == response.status
            return json.loads(response.read())
        finally:
            connection.close()
