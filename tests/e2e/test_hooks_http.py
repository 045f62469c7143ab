"""The agent-hook endpoints of the real daemon (`--hooks-listen`), and the command-hook form
(`loopwarden hook`) against the same daemon: the documented hook JSON in, the hook answers out."""
from __future__ import annotations

import concurrent.futures
import json
import signal
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from loopwarden import LoopwardenClient
from loopwarden.hooks.protocol import ASK_THE_USER
from tests.client.python.hooks import payloads
from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import Stream, call, channel
from tests.support.metrics import delta

pytestmark = pytest.mark.daemon

CRITICAL = 20  # the default critical threshold: calls 1..20 run, 21 is denied


def hooks_address(daemon) -> str:
    return next(line for line in daemon.logs() if line.get("msg") == "listening")["hooks_address"]


def post(address: str, path: str, body, *, headers: dict | None = None, scheme: str = "http",
         context: ssl.SSLContext | None = None) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(f"{scheme}://{address}{path}", data=data, method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def hook_sender(daemon, dialect: str):
    """A function that posts one hook input of `dialect` to the daemon's endpoint and returns its
    answer, asserting the 200 every answer of the endpoint has."""
    address = hooks_address(daemon)

    def send(body: dict) -> dict:
        status, answer = post(address, f"/v1/hooks/{dialect}", body)
        assert 200 == status, answer
        return answer

    return send


def claude_code_sender(daemon):
    return hook_sender(daemon, "claude-code")


def hook_command(daemon, dialect: str, payload: dict, *extra: str) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "loopwarden", "hook", dialect, "--address", daemon.grpc_target,
                           *extra], input=json.dumps(payload), capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


# The hook tests' daemon and sender (the other test_hooks_* modules import these two fixtures).
@pytest.fixture(scope="module")
def daemon_args() -> tuple[str, ...]:
    return ("--hooks-listen", "127.0.0.1:0", "--hooks-agent", "")


@pytest.fixture
def send(daemon):
    return claude_code_sender(daemon)


def reference_messages(client: LoopwardenClient, run_id: str, tool: str = "Bash", params: dict | None = None,
                       result=payloads.BASH_RESPONSE) -> tuple[str, str]:
    """What the daemon itself says (announced warning, block) for 21 identical calls of `tool`
    (by default Claude Code's Bash call of the payloads)."""
    warning = block = ""
    if params is None:
        params = payloads.claude_pre_tool_use(run_id, "x")["tool_input"]
    for index in range(CRITICAL + 1):
        verdict = client.tool_call(run_id, tool, params, tool_call_id=f"ref-{index}")
        if verdict.action.value == "warn" and verdict.announce:
            warning = verdict.message
        if verdict.action.value == "block":
            block = verdict.message
        else:
            client.tool_outcome(run_id, tool, params, result=result, tool_call_id=f"ref-{index}")
    client.run_end(run_id)
    return warning, block


def claude_loop(send, session: str) -> list[dict]:
    """21 identical Bash calls, each allowed one followed by its PostToolUse; the PreToolUse answers."""
    answers = []
    for index in range(1, CRITICAL + 2):
        answers.append(send(payloads.claude_pre_tool_use(session, f"toolu_{index}")))
        if "permissionDecision" not in answers[-1].get("hookSpecificOutput", {}):
            assert {} == send(payloads.claude_post_tool_use(session, f"toolu_{index}"))
    return answers


def codex_loop(send, session: str) -> list[dict]:
    answers = []
    for index in range(1, CRITICAL + 2):
        answers.append(send(payloads.codex_pre_tool_use(session, f"call_{index}")))
        if "permissionDecision" not in answers[-1].get("hookSpecificOutput", {}):
            assert {} == send(payloads.codex_post_tool_use(session, f"call_{index}"))
    return answers


def assert_loop_answers(answers: list[dict], warning: str, block: str) -> None:
    """1-10 plain allows, 11 the announced warning (model and user), 12-20 allowed silently
    (unannounced warnings, spec section 6), 21 denied with the block message; never an allow decision."""
    assert [{}] * 10 == answers[:10]
    assert {"hookEventName": "PreToolUse", "additionalContext": warning} == answers[10]["hookSpecificOutput"]
    assert f"loopwarden: {warning}" == answers[10]["systemMessage"]
    assert [{}] * 9 == answers[11:20]
    assert {"hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": block} == answers[20]["hookSpecificOutput"]
    assert not any(a.get("hookSpecificOutput", {}).get("permissionDecision") == "allow" for a in answers)


class TestClaudeCodeEndpoint:
    def test_identical_bash_calls_warn_then_are_denied_at_21(self, daemon, client, run_id):
        """21 identical Bash calls: 1-20 allowed (the warning passed on when announced), 21 denied."""
        warning, block = reference_messages(client, f"{run_id}-reference")
        address = hooks_address(daemon)

        answers = claude_loop(lambda body: post(address, "/v1/hooks/claude-code", body)[1], run_id)

        assert_loop_answers(answers, warning, block)

    def test_every_hook_delivered_twice_counts_each_call_once(self, daemon, client, run_id):
        """The plugin and install-hooks' entries both installed (or Cursor running Claude Code's
        hooks beside its own, or a hook retried): each hook arrives twice, at once. Warned at the
        11th call and denied at the 21st all the same, the message saying 20 calls, and both
        deliveries get the same answer."""
        warning, block = reference_messages(client, f"{run_id}-reference")
        address = hooks_address(daemon)
        pairs = []

        def twice(body: dict) -> dict:
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                first, second = pool.map(lambda _: post(address, "/v1/hooks/claude-code", body)[1], range(2))
            pairs.append((first, second))
            return first

        answers = claude_loop(twice, run_id)

        assert_loop_answers(answers, warning, block)
        assert "called 20 times" in block
        assert all(first == second for first, second in pairs), [p for p in pairs if p[0] != p[1]][:2]
        inspected = client.inspect(run_id)
        assert (21, 42) == (inspected.run_totals.tool_calls, inspected.events_evaluated), \
            "21 calls, 20 outcomes and the blocked call's, each once"

    def test_a_loop_that_persists_after_compaction_stops_the_session(self, daemon, run_id):
        """PreCompact, then three identical call/outcome pairs: the third outcome stops the session
        (continue: false, compaction_loop_persisted); the next call is denied and stops it again."""
        address = hooks_address(daemon)

        def send(body):
            return post(address, "/v1/hooks/claude-code", body)[1]

        assert {} == send(payloads.claude_pre_compact(run_id))
        outcomes = []
        for index in range(3):
            assert {} == send(payloads.claude_pre_tool_use(run_id, f"toolu_{index}"))
            outcomes.append(send(payloads.claude_post_tool_use(run_id, f"toolu_{index}")))
        after = send(payloads.claude_pre_tool_use(run_id, "toolu_after"))

        assert [{}, {}] == outcomes[:2]
        assert False is outcomes[2]["continue"] and "compaction_loop_persisted" in outcomes[2]["stopReason"]
        assert (False, "deny") == (after["continue"], after["hookSpecificOutput"]["permissionDecision"])

    def test_session_end_frees_the_run(self, daemon, client, run_id):
        address = hooks_address(daemon)
        post(address, "/v1/hooks/claude-code", payloads.claude_pre_tool_use(run_id, "toolu_1"))

        assert (200, {}) == post(address, "/v1/hooks/claude-code", payloads.claude_session_end(run_id))
        with pytest.raises(Exception, match="no state"):
            client.inspect(run_id)

    def test_a_failed_tool_is_its_outcome(self, daemon, client, run_id):
        address = hooks_address(daemon)
        post(address, "/v1/hooks/claude-code", payloads.claude_pre_tool_use(run_id, "toolu_1"))

        status, body = post(address, "/v1/hooks/claude-code",
                            payloads.claude_post_tool_use_failure(run_id, "toolu_1", "exit status 1"))

        assert (200, {}) == (status, body)
        assert client.inspect(run_id).records[0].result_hash

    def test_an_event_loopwarden_does_not_map_gets_the_empty_answer(self, daemon, run_id):
        assert (200, {}) == post(hooks_address(daemon), "/v1/hooks/claude-code", payloads.claude_session_start(run_id))

    @pytest.mark.parametrize(("body", "message"), [
        (b'{"hook_event_name": "PreToolUse", ', "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"hook_event_name": "PreToolUse", "tool_name": "Bash"}', "session_id"),
    ])
    def test_malformed_input_is_a_400_that_says_what_is_wrong(self, daemon, body, message):
        status, answer = post(hooks_address(daemon), "/v1/hooks/claude-code", body)

        assert 400 == status
        assert message in answer["error"]

    def test_other_paths_and_methods(self, daemon):
        address = hooks_address(daemon)
        status, answer = post(address, "/v1/hooks/windsurf", {})

        assert 404 == status and "/v1/hooks/claude-code" in answer["error"]
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://{address}/v1/hooks/claude-code", timeout=5)
        refused.value.close()
        assert 405 == refused.value.code

    def test_the_agent_comes_from_the_query(self, daemon, client, run_id):
        post(hooks_address(daemon), "/v1/hooks/claude-code?agent=coder", payloads.claude_pre_tool_use(run_id, "t"))

        assert "coder" == client.inspect(run_id).agent_id


class TestCodexEndpoint:
    def test_identical_calls_are_denied_at_21(self, daemon, client, run_id):
        warning, block = reference_messages(client, f"{run_id}-reference")
        address = hooks_address(daemon)

        answers = codex_loop(lambda body: post(address, "/v1/hooks/codex", body)[1], run_id)

        assert_loop_answers(answers, warning, f"{block} {ASK_THE_USER}")  # Codex cannot ask

    def test_abort_denies_without_the_fields_codex_refuses_before_a_tool(self, daemon, run_id):
        """Codex drops a PreToolUse answer carrying continue/stopReason: the abort only denies there,
        and the PostToolUse that reported the loop stops the session."""
        address = hooks_address(daemon)

        def send(body):
            return post(address, "/v1/hooks/codex", body)[1]

        send(payloads.codex_pre_compact(run_id))
        for index in range(3):
            send(payloads.codex_pre_tool_use(run_id, f"call_{index}"))
            last = send(payloads.codex_post_tool_use(run_id, f"call_{index}"))
        after = send(payloads.codex_pre_tool_use(run_id, "call_after"))

        assert False is last["continue"]
        assert "deny" == after["hookSpecificOutput"]["permissionDecision"]
        assert set() == {"continue", "stopReason"} & set(after)

    def test_a_codex_event_without_a_mapping_gets_the_empty_answer(self, daemon, run_id):
        assert (200, {}) == post(hooks_address(daemon), "/v1/hooks/codex", payloads.codex_stop(run_id))


class TestCommandForm:
    def test_claude_code_command_answers_as_the_endpoint_does(self, daemon, client, run_id):
        """`loopwarden hook claude-code` on stdin/stdout: the same 21 answers as the HTTP endpoint."""
        warning, block = reference_messages(client, f"{run_id}-reference")

        def send(body):
            code, out, err = hook_command(daemon, "claude-code", body)
            assert (0, "") == (code, err)
            return json.loads(out)

        answers = claude_loop(send, run_id)

        assert_loop_answers(answers, warning, block)
        assert answers == claude_loop(lambda body: post(hooks_address(daemon), "/v1/hooks/claude-code", body)[1],
                                      f"{run_id}-http")

    def test_codex_command_denies_at_21(self, daemon, client, run_id):
        warning, block = reference_messages(client, f"{run_id}-reference")

        answers = codex_loop(lambda body: json.loads(hook_command(daemon, "codex", body)[1]), run_id)

        assert_loop_answers(answers, warning, f"{block} {ASK_THE_USER}")

    def test_malformed_stdin_exits_1_with_the_reason(self, daemon):
        done = subprocess.run([sys.executable, "-m", "loopwarden", "hook", "claude-code", "--address",
                               daemon.grpc_target], input="{nope", capture_output=True, text=True, timeout=60)

        assert (1, "") == (done.returncode, done.stdout)
        assert "not JSON" in done.stderr

    def test_an_unreachable_daemon_lets_the_call_run_unless_fail_closed(self, run_id):
        from tests.client.python.integrations.support import dead_target

        target = dead_target()
        opened = subprocess.run([sys.executable, "-m", "loopwarden", "hook", "claude-code", "--address", target],
                                input=json.dumps(payloads.claude_pre_tool_use(run_id, "t")), capture_output=True,
                                text=True, timeout=60)
        closed = subprocess.run([sys.executable, "-m", "loopwarden", "hook", "claude-code", "--address", target,
                                 "--fail-closed"], input=json.dumps(payloads.claude_pre_tool_use(run_id, "t")),
                                capture_output=True, text=True, timeout=60)

        assert 0 == opened.returncode and "without a loop check" in json.loads(opened.stdout)["systemMessage"]
        assert "deny" == json.loads(closed.stdout)["hookSpecificOutput"]["permissionDecision"]
        assert "did not answer" in opened.stderr


class TestIntegrationLabel:
    def test_each_path_counts_under_its_integration(self, daemon, run_id):
        """HTTP hooks, the command form (its gRPC header), plain gRPC and an unknown header each
        count their verdicts under their own bounded label."""
        before = daemon.scrape()
        post(hooks_address(daemon), "/v1/hooks/claude-code", payloads.claude_pre_tool_use(f"{run_id}-a", "t"))
        post(hooks_address(daemon), "/v1/hooks/codex", payloads.codex_pre_tool_use(f"{run_id}-b", "t"))
        hook_command(daemon, "codex", payloads.codex_pre_tool_use(f"{run_id}-c", "t"))
        with LoopwardenClient(daemon.grpc_target) as plain:
            plain.tool_call(f"{run_id}-d", "read", {"path": "/x"})
        with LoopwardenClient(daemon.grpc_target, metadata=[("x-loopwarden-integration", "made-up")]) as odd:
            odd.tool_call(f"{run_id}-e", "read", {"path": "/x"})
        after = daemon.scrape()

        def allowed(integration):
            return delta(before, after, "loopwarden_verdicts_total", action="allow", detector="none",
                         agent="default", integration=integration)

        assert {"claude_code": 1, "codex": 2, "grpc": 1, "other": 1, "mcp_proxy": 0} == {
            name: allowed(name) for name in ("claude_code", "codex", "grpc", "other", "mcp_proxy")}


class TestSecuredListener:
    def test_the_token_file_and_tls_of_the_grpc_port_apply(self, certs, tmp_path, run_id):
        """With TLS and named tokens: no token is a 401, a tenant's token works, and two tenants
        with one session id have two runs."""
        tokens = tmp_path / "tokens"
        tokens.write_text("alpha alpha-token-1\nbeta beta-token-2\n")
        args = ["--hooks-listen", "127.0.0.1:0", "--auth-token-file", str(tokens),
                "--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key")]
        context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        with running_daemon("{tools: {loopDetection: {enabled: true}}}", args) as secured:
            address = hooks_address(secured)

            def send(body, token):
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                return post(address, "/v1/hooks/claude-code", body, headers=headers, scheme="https", context=context)

            missing = send(payloads.claude_pre_tool_use(run_id, "t"), None)
            wrong = send(payloads.claude_pre_tool_use(run_id, "t"), "nope")
            alpha = [send(payloads.claude_pre_tool_use(run_id, f"t{i}"), "alpha-token-1")[1] for i in range(11)]
            beta = send(payloads.claude_pre_tool_use(run_id, "t0"), "beta-token-2")

        assert (401, 401) == (missing[0], wrong[0])
        assert "additionalContext" in alpha[10].get("hookSpecificOutput", {})
        assert (200, {}) == beta


class TestUnavailable:
    @pytest.mark.parametrize(("fail_closed", "expected"), [(False, "systemMessage"), (True, "hookSpecificOutput")])
    def test_a_draining_daemon_answers_without_blocking_unless_fail_closed(self, fail_closed, expected, run_id):
        """While the daemon drains (an open stream holds it), hooked calls run with a note to the
        user, or are denied with --hooks-fail-closed; nothing else is answered with a 5xx."""
        args = ["--hooks-listen", "127.0.0.1:0", "--drain-grace", "5", *(["--hooks-fail-closed"] * fail_closed)]
        with running_daemon("{tools: {loopDetection: {enabled: true}}}", args) as draining:
            address = hooks_address(draining)
            with channel(draining.grpc_target) as ch, Stream(ch) as stream:
                stream.one(call(f"{run_id}-stream", "read"))
                draining.signal(signal.SIGTERM)
                draining.wait_for_log(lambda line: line.get("msg") == "draining")
                status, answer = post(address, "/v1/hooks/claude-code", payloads.claude_pre_tool_use(run_id, "t"))

        assert 200 == status
        assert expected in answer
        assert "shutting down" in json.dumps(answer)
        if fail_closed:
            assert "deny" == answer["hookSpecificOutput"]["permissionDecision"]


class TestSlowEvaluation:
    def test_an_evaluation_that_does_not_answer_in_time_lets_the_call_run_unless_fail_closed(self):
        """The endpoint waits a bounded time for the engine: past it, the call runs with a note to
        the user (or is denied when fail-closed), and the agent is never left hanging."""
        import asyncio

        from loopwarden.hooks import host, parse
        from loopwarden_server.hooks_http import HooksEndpoint
        from loopwarden_server.lifecycle import Lifecycle

        class Stalled:  # an engine call that never ends (a state store that does not answer)
            async def evaluate(self, records, integration, tenant, routed, agent_only=False):
                await asyncio.Event().wait()

        hook = parse(host("claude-code"), payloads.claude_pre_tool_use("s", "t"))

        async def answers() -> list[dict]:
            out = []
            for fail_closed in (False, True):
                endpoint = HooksEndpoint(Stalled(), Lifecycle(), None, tokens=None, default_agent="",
                                         fail_closed=fail_closed, max_body_bytes=1024, answer_timeout=0.2)
                out.append(await endpoint.decide(hook, ""))
            return out

        open_answer, closed_answer = asyncio.run(answers())

        assert "did not answer within 0.2 s" in open_answer["systemMessage"]
        assert "deny" == closed_answer["hookSpecificOutput"]["permissionDecision"]
