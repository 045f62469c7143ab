"""The compiled command hook `loopwarden-hook` against a real daemon: it posts
the host's JSON unchanged to the daemon's HTTP hook endpoint and prints the answer, so every answer
is the endpoint's; when the daemon cannot answer it prints what `loopwarden hook` prints."""
from __future__ import annotations

import json
import pathlib
import socket
import subprocess
import sys
import threading
import time

import pytest

from loopwarden.hooks.protocol import ASK_THE_USER
from tests.client.python.hooks import dialect_payloads, payloads
from tests.client.python.integrations.support import dead_target
from tests.e2e.test_hooks_http import (
    assert_loop_answers, claude_loop, codex_loop, hooks_address, post, reference_messages,
)
from tests.e2e.test_hooks_http import daemon_args, send  # noqa: F401 - the hook tests' shared fixtures
from tests.support.hook_binary import REPO, hook_binary

pytestmark = pytest.mark.daemon


def run_hook(dialect: str, body, *flags: str, url: str) -> subprocess.CompletedProcess:
    data = body if isinstance(body, str) else json.dumps(body)
    return subprocess.run([str(hook_binary()), dialect, "--url", url, *flags], input=data, capture_output=True,
                          text=True, timeout=30)


def binary_sender(daemon, dialect: str):
    url = f"http://{hooks_address(daemon)}"

    def send_one(body: dict) -> dict:
        done = run_hook(dialect, body, url=url)
        assert (0, "") == (done.returncode, done.stderr)
        return json.loads(done.stdout)

    return send_one


def http_sender(daemon, dialect: str):
    def send_one(body: dict) -> dict:
        status, answer = post(hooks_address(daemon), f"/v1/hooks/{dialect}", body)
        assert 200 == status, answer
        return answer

    return send_one


class TestAnswersAsTheEndpointDoes:
    def test_claude_code_loop_warns_at_11_and_is_denied_at_21(self, daemon, client, run_id):
        warning, block = reference_messages(client, f"{run_id}-reference")

        answers = claude_loop(binary_sender(daemon, "claude-code"), run_id)

        assert_loop_answers(answers, warning, block)
        assert answers == claude_loop(http_sender(daemon, "claude-code"), f"{run_id}-http")

    def test_codex_loop_warns_at_11_and_is_denied_at_21(self, daemon, client, run_id):
        warning, block = reference_messages(client, f"{run_id}-reference")

        answers = codex_loop(binary_sender(daemon, "codex"), run_id)

        assert_loop_answers(answers, warning, f"{block} {ASK_THE_USER}")  # Codex cannot ask
        assert answers == codex_loop(http_sender(daemon, "codex"), f"{run_id}-http")

    @pytest.mark.parametrize("dialect,event", [
        ("claude-code", lambda s: payloads.claude_user_prompt_submit(s, "go on")),
        ("claude-code", payloads.claude_pre_compact),
        ("claude-code", payloads.claude_session_start),
        ("claude-code", payloads.claude_session_end),
        ("codex", payloads.codex_pre_compact),
        ("codex", payloads.codex_stop),
    ])
    def test_other_events_get_the_endpoints_answer(self, daemon, run_id, dialect, event):
        assert http_sender(daemon, dialect)(event(f"{run_id}-http")) == binary_sender(daemon, dialect)(event(run_id))

    def test_the_agent_flag_reaches_the_endpoint(self, daemon, client, run_id):
        done = run_hook("claude-code", payloads.claude_pre_tool_use(run_id, "t1"), "--agent", "builder",
                        url=f"http://{hooks_address(daemon)}")

        assert (0, {}) == (done.returncode, json.loads(done.stdout))
        assert "builder" == client.inspect(run_id).agent_id

    def test_input_that_is_no_hook_json_exits_1_with_the_daemons_reason(self, daemon):
        done = run_hook("claude-code", "{nope", url=f"http://{hooks_address(daemon)}")

        assert (1, "") == (done.returncode, done.stdout)
        assert "not a claude-code hook input" in done.stderr and "JSON" in done.stderr


def python_hook(target: str, body: dict, *flags: str, dialect: str = "claude-code") -> dict:
    done = subprocess.run([sys.executable, "-m", "loopwarden", "hook", dialect, "--address", target, *flags],
                          input=json.dumps(body), capture_output=True, text=True, timeout=60)
    assert 0 == done.returncode, done.stderr
    return json.loads(done.stdout)


class TestDaemonUnavailable:
    @pytest.mark.parametrize("flags", [(), ("--fail-closed",)], ids=["fail-open", "fail-closed"])
    @pytest.mark.parametrize("dialect", ["claude-code", "codex"])
    def test_an_unreachable_daemon_gets_the_python_commands_answer(self, run_id, dialect, flags):
        """The same JSON `loopwarden hook` prints for the same address: a systemMessage (the call
        runs, unchecked) or, fail closed, a PreToolUse deny; any other event gets {}."""
        target = dead_target()
        pre = (payloads.claude_pre_tool_use if dialect == "claude-code" else payloads.codex_pre_tool_use)(run_id, "t")

        done = run_hook(dialect, pre, *flags, url=f"http://{target}")

        assert 0 == done.returncode and "did not answer" in done.stderr
        answer = json.loads(done.stdout)
        assert python_hook(target, payloads.claude_pre_tool_use(run_id, "t"), *flags) == answer
        if flags:
            assert "deny" == answer["hookSpecificOutput"]["permissionDecision"]
        else:
            assert "without a loop check" in answer["systemMessage"]
        post_event = run_hook(dialect, payloads.claude_post_tool_use(run_id, "t"), *flags, url=f"http://{target}")
        assert (0, {}) == (post_event.returncode, json.loads(post_event.stdout))

    @pytest.mark.parametrize("flags", [(), ("--fail-closed",)], ids=["fail-open", "fail-closed"])
    @pytest.mark.parametrize("dialect", ["gemini-cli", "cursor"])
    def test_gemini_cli_and_cursor_get_the_python_commands_answer_in_their_format(self, run_id, dialect, flags):
        """Gemini CLI's and Cursor's before-tool hooks: the same JSON `loopwarden hook` prints (a
        deny in the host's format when fail closed); their after-tool hooks get {}."""
        target = dead_target()
        if dialect == "gemini-cli":
            before, after = dialect_payloads.gemini_before_tool(run_id), dialect_payloads.gemini_after_tool(run_id)
        else:
            before = dialect_payloads.cursor_pre_tool_use(run_id, "t")
            after = dialect_payloads.cursor_post_tool_use(run_id, "t")

        answer = json.loads(run_hook(dialect, before, *flags, url=f"http://{target}").stdout)

        assert python_hook(target, before, *flags, dialect=dialect) == answer
        denied = answer.get("decision") == "deny" or answer.get("permission") == "deny"
        assert bool(flags) == denied, answer
        assert {} == json.loads(run_hook(dialect, after, *flags, url=f"http://{target}").stdout)

    def test_a_daemon_that_does_not_answer_in_time_is_unavailable(self, run_id):
        """A listener that accepts and never answers: the fallback after --timeout, not a hang."""
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(8)
            held: list[socket.socket] = []
            threading.Thread(target=lambda: held.append(listener.accept()[0]), daemon=True).start()
            started = time.monotonic()
            done = run_hook("claude-code", payloads.claude_pre_tool_use(run_id, "t"), "--fail-closed", "--timeout",
                            "0.5", url=f"http://127.0.0.1:{listener.getsockname()[1]}")
            elapsed = time.monotonic() - started
            for connection in held:
                connection.close()

        assert elapsed < 5
        assert "deny" == json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"]
        assert "no answer within 0.500 s" in done.stderr

    def test_a_refused_token_is_unavailable_not_silence(self, tmp_path, run_id):
        """A 401 (wrong or missing token) is no answer: the call is not run unchecked in silence."""
        from tests.support.daemon import running_daemon

        tokens = tmp_path / "tokens"
        tokens.write_text("alpha alpha-token-1\n")
        good, bad = tmp_path / "good", tmp_path / "bad"
        good.write_text("alpha-token-1\n")
        bad.write_text("wrong\n")
        with running_daemon(extra_args=["--hooks-listen", "127.0.0.1:0", "--auth-token-file", str(tokens)]) as daemon:
            url = f"http://{hooks_address(daemon)}"
            body = payloads.claude_pre_tool_use(run_id, "t")
            accepted = run_hook("claude-code", body, "--token-file", str(good), url=url)
            refused = run_hook("claude-code", body, "--token-file", str(bad), url=url)

        assert (0, {}, "") == (accepted.returncode, json.loads(accepted.stdout), accepted.stderr)
        assert "without a loop check" in json.loads(refused.stdout)["systemMessage"]
        assert "HTTP 401" in refused.stderr


def test_the_makefile_installs_it_next_to_loopwarden(tmp_path):
    """`make serve`'s prerequisite: the binary lands in the venv's bin/ and its absolute path is printed."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()  # the venv exists: only the hook command is to make
    hook_binary()  # built once here, so make's cargo run is the no-op one

    done = subprocess.run(["make", "-C", str(REPO), f"VENV={venv}", f"{venv}/bin/loopwarden-hook"],
                          capture_output=True, text=True, timeout=600)

    assert 0 == done.returncode, done.stderr
    installed = pathlib.Path(venv / "bin" / "loopwarden-hook")
    assert installed.is_file() and installed.stat().st_mode & 0o111
    assert f"{installed}" in done.stdout
    helped = subprocess.run([str(installed), "--help"], capture_output=True, text=True, timeout=30)
    assert 0 == helped.returncode and "usage: loopwarden-hook" in helped.stdout


def test_an_input_over_the_body_limit_gets_the_endpoints_answer(run_id):
    """The endpoint answers an input over --hooks-max-body-bytes (a deny under --hooks-fail-closed)
    before it has read it all; that answer, not a "did not answer", is what the command prints."""
    from tests.support.daemon import running_daemon

    body = payloads.claude_pre_tool_use(run_id, "t", command="x" * (4 << 20))
    with running_daemon(extra_args=["--hooks-listen", "127.0.0.1:0", "--hooks-max-body-bytes", str(1 << 20),
                                    "--hooks-fail-closed"]) as daemon:
        done = run_hook("claude-code", body, url=f"http://{hooks_address(daemon)}")

    assert (0, "") == (done.returncode, done.stderr)
    denied = json.loads(done.stdout)["hookSpecificOutput"]
    assert "deny" == denied["permissionDecision"] and "--hooks-max-body-bytes" in denied["permissionDecisionReason"]
