"""Hook events the daemon refuses (a REJECT: tool_input nested 70 deep, a NaN in tool_input, a
300-character session id) judge nothing: fail closed, the call is denied in the host's own format
naming the reason; fail open, it runs with the reason shown to the user and counted
(`loopwarden_hook_events_refused_total{reason,host}`). Through every path a host attaches by: the
daemon's HTTP endpoint (`--hooks-fail-closed`, or a hook URL's `?fail_closed=1`), the Python command
hook (`loopwarden hook --fail-closed`) and the compiled one (`loopwarden-hook --fail-closed`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.client.python.hooks import dialect_payloads, payloads
from tests.e2e.test_hooks_http import hooks_address, post
from tests.support.daemon import running_daemon
from tests.support.hook_binary import hook_binary
from tests.support.metrics import delta

pytestmark = pytest.mark.daemon

DIALECTS = ("claude-code", "codex", "gemini-cli", "cursor")
# Each refused kind: the engine's error code for it.
KINDS = {"nested_70_deep": "json_too_deep", "nan": "invalid_params_json", "session_id_300": "run_id_too_long"}
REFUSED = "loopwarden_hook_events_refused_total"


def _nested(depth: int):
    value: object = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


def before_tool(dialect: str, kind: str, run_id: str) -> dict:
    """The dialect's before-tool hook input of one refused kind."""
    session = run_id.ljust(300, "s") if kind == "session_id_300" else run_id
    tool_input = {"nested_70_deep": {"command": _nested(70)}, "nan": {"command": "ls", "n": float("nan")}}.get(kind)
    if dialect == "claude-code":
        body = payloads.claude_pre_tool_use(session, "toolu_1")
    elif dialect == "codex":
        body = payloads.codex_pre_tool_use(session, "call_1")
    elif dialect == "gemini-cli":
        body = dialect_payloads.gemini_before_tool(session)
    else:
        body = dialect_payloads.cursor_pre_tool_use(session, "tu_1")
    if tool_input is not None:
        body["tool_input"] = tool_input
    return body


def encoded(body: dict) -> bytes:
    return json.dumps(body).encode()  # NaN spelled as Python (and JavaScript hosts' lenient writers) do


def assert_denied(dialect: str, answer: dict, code: str) -> None:
    """A deny in the host's own format whose reason names `code`."""
    if dialect in ("claude-code", "codex"):
        specific = answer["hookSpecificOutput"]
        assert ("PreToolUse", "deny") == (specific["hookEventName"], specific["permissionDecision"])
        reason = specific["permissionDecisionReason"]
    elif dialect == "gemini-cli":
        assert "deny" == answer["decision"]
        reason = answer["reason"]
    else:
        assert "deny" == answer["permission"]
        reason = answer["agent_message"]
        assert code in answer["user_message"]
    assert code in reason and "fail closed" in reason


def assert_allowed_with_reason(dialect: str, answer: dict, code: str) -> None:
    """No deny, and the user is told the call ran unchecked, and why."""
    assert "hookSpecificOutput" not in answer and "decision" not in answer and "permission" not in answer
    message = answer["user_message"] if dialect == "cursor" else answer["systemMessage"]
    assert code in message and "without a loop check" in message


@pytest.fixture(scope="module")
def closed_daemon():
    with running_daemon(extra_args=("--hooks-listen", "127.0.0.1:0", "--hooks-agent", "", "--hooks-fail-closed")) as d:
        yield d


@pytest.fixture(scope="module")
def open_daemon():
    with running_daemon(extra_args=("--hooks-listen", "127.0.0.1:0", "--hooks-agent", "")) as d:
        yield d


CASES = [pytest.param(dialect, kind, id=f"{dialect}-{kind}") for dialect in DIALECTS for kind in KINDS]


class TestHttpEndpoint:
    @pytest.mark.parametrize(("dialect", "kind"), CASES)
    def test_fail_closed_denies_a_refused_event(self, closed_daemon, run_id, dialect, kind):
        before = closed_daemon.scrape()

        status, answer = post(hooks_address(closed_daemon), f"/v1/hooks/{dialect}",
                              encoded(before_tool(dialect, kind, run_id)))

        assert 200 == status
        assert_denied(dialect, answer, KINDS[kind])
        assert 1 == delta(before, closed_daemon.scrape(), REFUSED, reason=KINDS[kind], host=dialect)

    @pytest.mark.parametrize(("dialect", "kind"), CASES)
    def test_fail_open_runs_it_says_why_and_counts_it(self, open_daemon, run_id, dialect, kind):
        before = open_daemon.scrape()

        status, answer = post(hooks_address(open_daemon), f"/v1/hooks/{dialect}",
                              encoded(before_tool(dialect, kind, run_id)))

        assert 200 == status
        assert_allowed_with_reason(dialect, answer, KINDS[kind])
        assert 1 == delta(before, open_daemon.scrape(), REFUSED, reason=KINDS[kind], host=dialect)

    @pytest.mark.parametrize("dialect", DIALECTS)
    def test_a_hook_url_can_ask_to_fail_closed(self, open_daemon, run_id, dialect):
        status, answer = post(hooks_address(open_daemon), f"/v1/hooks/{dialect}?fail_closed=1",
                              encoded(before_tool(dialect, "nan", run_id)))

        assert 200 == status
        assert_denied(dialect, answer, "invalid_params_json")

    def test_a_refused_event_after_the_call_is_said_not_checked(self, closed_daemon, run_id):
        """A PostToolUse cannot be denied (the call ran): the user is told it was not checked."""
        body = payloads.claude_post_tool_use(run_id.ljust(300, "s"), "toolu_1")

        status, answer = post(hooks_address(closed_daemon), "/v1/hooks/claude-code", body)

        assert 200 == status and "hookSpecificOutput" not in answer
        assert "run_id_too_long" in answer["systemMessage"] and "not checked" in answer["systemMessage"]

    @pytest.mark.parametrize("dialect", DIALECTS)
    def test_fail_closed_denies_an_unreadable_before_tool_input(self, closed_daemon, dialect):
        """A before-tool input that is not the host's hook JSON (no session id) is denied: a 400
        would let the call run."""
        body = before_tool(dialect, "nan", "x")
        body.pop("conversation_id" if dialect == "cursor" else "session_id")
        before = closed_daemon.scrape()

        status, answer = post(hooks_address(closed_daemon), f"/v1/hooks/{dialect}", body)

        assert 200 == status
        assert_denied(dialect, answer, "not a")
        assert 1 == delta(before, closed_daemon.scrape(), REFUSED, reason="not_hook_input", host=dialect)

    def test_fail_open_an_unreadable_input_stays_a_400_and_is_counted(self, open_daemon):
        before = open_daemon.scrape()

        status, answer = post(hooks_address(open_daemon), "/v1/hooks/codex", b'{"hook_event_name": "PreToolUse", ')

        assert 400 == status and "not JSON" in answer["error"]
        assert 1 == delta(before, open_daemon.scrape(), REFUSED, reason="not_json", host="codex")


def python_hook(daemon, dialect: str, body: bytes, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loopwarden", "hook", dialect, "--address", daemon.grpc_target,
                           *flags], input=body, capture_output=True, timeout=60)


class TestPythonCommandHook:
    @pytest.mark.parametrize(("dialect", "kind"), CASES)
    def test_fail_closed_denies_a_refused_event(self, open_daemon, run_id, dialect, kind):
        done = python_hook(open_daemon, dialect, encoded(before_tool(dialect, kind, run_id)), "--fail-closed")

        assert 0 == done.returncode, done.stderr
        assert_denied(dialect, json.loads(done.stdout), KINDS[kind])
        assert KINDS[kind].encode() in done.stderr

    @pytest.mark.parametrize(("dialect", "kind"), CASES)
    def test_fail_open_runs_it_and_says_why(self, open_daemon, run_id, dialect, kind):
        done = python_hook(open_daemon, dialect, encoded(before_tool(dialect, kind, run_id)))

        assert 0 == done.returncode, done.stderr
        assert_allowed_with_reason(dialect, json.loads(done.stdout), KINDS[kind])

    @pytest.mark.parametrize("dialect", DIALECTS)
    def test_fail_closed_denies_an_unreadable_before_tool_input(self, open_daemon, dialect):
        body = before_tool(dialect, "nan", "x")
        body.pop("conversation_id" if dialect == "cursor" else "session_id")

        closed = python_hook(open_daemon, dialect, encoded(body), "--fail-closed")
        opened = python_hook(open_daemon, dialect, encoded(body))

        assert 0 == closed.returncode, closed.stderr
        assert_denied(dialect, json.loads(closed.stdout), "not a")
        assert (1, b"") == (opened.returncode, opened.stdout)  # a non-blocking error, as before


@pytest.fixture(scope="module")
def binary():
    os.environ.setdefault("CARGO_BUILD_JOBS", "1")
    return str(hook_binary())


def compiled_hook(binary: str, daemon, dialect: str, body: bytes, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, dialect, "--url", f"http://{hooks_address(daemon)}", *flags], input=body,
                          capture_output=True, timeout=30)


class TestCompiledCommandHook:
    @pytest.mark.parametrize(("dialect", "kind"), CASES)
    def test_fail_closed_denies_a_refused_event(self, binary, open_daemon, run_id, dialect, kind):
        """The daemon's default is open: the hook's --fail-closed is passed on with the request."""
        done = compiled_hook(binary, open_daemon, dialect, encoded(before_tool(dialect, kind, run_id)), "--fail-closed")

        assert 0 == done.returncode, done.stderr
        assert_denied(dialect, json.loads(done.stdout), KINDS[kind])

    @pytest.mark.parametrize(("dialect", "kind"), CASES)
    def test_fail_open_runs_it_and_says_why(self, binary, open_daemon, run_id, dialect, kind):
        done = compiled_hook(binary, open_daemon, dialect, encoded(before_tool(dialect, kind, run_id)))

        assert 0 == done.returncode, done.stderr
        assert_allowed_with_reason(dialect, json.loads(done.stdout), KINDS[kind])

    @pytest.mark.parametrize("dialect", DIALECTS)
    def test_the_daemons_fail_closed_holds_without_the_flag(self, binary, closed_daemon, run_id, dialect):
        done = compiled_hook(binary, closed_daemon, dialect, encoded(before_tool(dialect, "nested_70_deep", run_id)))

        assert 0 == done.returncode, done.stderr
        assert_denied(dialect, json.loads(done.stdout), "json_too_deep")

    @pytest.mark.parametrize("dialect", DIALECTS)
    def test_fail_closed_denies_an_unreadable_before_tool_input(self, binary, open_daemon, dialect):
        body = before_tool(dialect, "nan", "x")
        body.pop("conversation_id" if dialect == "cursor" else "session_id")

        closed = compiled_hook(binary, open_daemon, dialect, encoded(body), "--fail-closed")
        opened = compiled_hook(binary, open_daemon, dialect, encoded(body))

        assert 0 == closed.returncode, closed.stderr
        assert_denied(dialect, json.loads(closed.stdout), "not a")
        assert (1, b"") == (opened.returncode, opened.stdout)
