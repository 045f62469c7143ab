"""Gemini CLI's and Cursor's hooks through the real daemon's endpoints (`/v1/hooks/gemini-cli`,
`/v1/hooks/cursor`) and the command form (`loopwarden hook gemini-cli|cursor`), with payloads built
from the hosts' references (tests/client/python/hooks/dialect_payloads.py): a loop of identical
calls gets the announced warning at 11 and the deny at 21, in each host's own output format."""
from __future__ import annotations

import json

import pytest

from loopwarden.hooks.protocol import ASK_THE_USER
from tests.client.python.hooks import dialect_payloads as p
from tests.e2e.test_hooks_http import hook_command, hook_sender, hooks_address, post
from tests.e2e.test_hooks_http import daemon_args  # noqa: F401 - the hook tests' shared daemon
from tests.e2e.test_hooks_http import reference_messages

pytestmark = pytest.mark.daemon

CRITICAL = 20


# Per host: its dialect, the before/after payload builders, and how its answers spell a deny and a warning.
HOSTS = {
    "gemini-cli": dict(
        before=lambda run, i: p.gemini_before_tool(run), after=lambda run, i: p.gemini_after_tool(run),
        tool=p.GEMINI_SHELL, params=p.GEMINI_INPUT,
        denied=lambda a: a.get("decision") == "deny",
        deny=lambda block: {"decision": "deny", "reason": f"{block} {ASK_THE_USER}"},  # it cannot ask
        warn=lambda warning: {"hookSpecificOutput": {"additionalContext": warning},
                              "systemMessage": f"loopwarden: {warning}"}),
    "cursor": dict(
        before=lambda run, i: p.cursor_pre_tool_use(run, f"tu-{i}"), after=lambda run, i: p.cursor_post_tool_use(
            run, f"tu-{i}"),
        tool=p.CURSOR_SHELL, params=p.CURSOR_INPUT,
        denied=lambda a: a.get("permission") == "deny",
        deny=lambda block: {"permission": "deny", "agent_message": block, "user_message": f"loopwarden: {block}"},
        warn=lambda warning: {"agent_message": warning, "user_message": f"loopwarden: {warning}"}),
}


@pytest.mark.parametrize("dialect", sorted(HOSTS))
def test_identical_calls_warn_at_11_and_are_denied_at_21(daemon, client, run_id, dialect):
    """Calls 1-20 run (the 11th carries the warning, 12-20 say nothing), the 21st is denied; the
    11th and the 21st go through the command form, which answers as the endpoint does."""
    host = HOSTS[dialect]
    warning, block = reference_messages(client, f"{run_id}-reference", host["tool"], host["params"], "total 0\n")
    assert warning and block
    address = hooks_address(daemon)

    def endpoint(body: dict) -> dict:
        status, answer = post(address, f"/v1/hooks/{dialect}", body)
        assert 200 == status, answer
        return answer

    def command(body: dict) -> dict:
        code, out, err = hook_command(daemon, dialect, body)
        assert 0 == code, err
        return json.loads(out)

    answers = []
    for index in range(1, CRITICAL + 2):
        send = command if index in (11, CRITICAL + 1) else endpoint
        answers.append(send(host["before"](run_id, index)))
        if not host["denied"](answers[-1]):
            assert {} == endpoint(host["after"](run_id, index))

    assert [{}] * 10 == answers[:10]
    assert host["warn"](warning) == answers[10]
    assert [{}] * 9 == answers[11:20]
    assert host["deny"](block) == answers[20]
    assert host["tool"] == client.inspect(run_id).records[0].tool_name


LIFECYCLE = {
    "gemini-cli": (p.gemini_pre_compress, p.gemini_before_agent, p.gemini_session_end, None),
    "cursor": (p.cursor_pre_compact, p.cursor_before_submit_prompt, p.cursor_session_end,
               lambda a: "compaction_loop_persisted" in a.get("additional_context", "")),
}


def test_a_loop_that_persists_after_compaction_is_stopped(daemon, run_id):
    """Cursor's compaction event, then three identical call/outcome pairs: the third outcome's
    answer stops the loop in Cursor's words, and the next call is denied."""
    host, (compaction, _, _, stopped) = HOSTS["cursor"], LIFECYCLE["cursor"]
    send = hook_sender(daemon, "cursor")

    assert {} == send(compaction(run_id))
    outcomes = []
    for index in range(3):
        assert {} == send(host["before"](run_id, index))
        outcomes.append(send(host["after"](run_id, index)))

    assert [{}, {}] == outcomes[:2] and stopped(outcomes[2])
    assert host["denied"](send(host["before"](run_id, 3)))


def test_gemini_clis_precompress_is_no_compaction(daemon, run_id):
    """Gemini CLI 0.61.0 fires PreCompress before every model request, compaction or not: it arms
    nothing, so three identical call/outcome pairs after it run on."""
    host, (compaction, _, _, _) = HOSTS["gemini-cli"], LIFECYCLE["gemini-cli"]
    send = hook_sender(daemon, "gemini-cli")

    assert {} == send(compaction(run_id))
    for index in range(4):
        assert {} == send(host["before"](run_id, index))
        assert {} == send(host["after"](run_id, index))


@pytest.mark.parametrize("dialect", sorted(HOSTS))
def test_a_new_prompt_lifts_the_block_and_session_end_frees_the_run(daemon, client, run_id, dialect):
    host, (_, prompt, end, _) = HOSTS[dialect], LIFECYCLE[dialect]
    send = hook_sender(daemon, dialect)

    for index in range(1, CRITICAL + 2):
        answer = send(host["before"](run_id, index))
        if not host["denied"](answer):
            send(host["after"](run_id, index))
    assert host["denied"](answer)
    assert {} == send(prompt(run_id))
    assert not host["denied"](send(host["before"](run_id, 99)))
    assert {} == send(end(run_id))
    with pytest.raises(Exception, match="no state"):
        client.inspect(run_id)


@pytest.mark.parametrize("dialect", sorted(HOSTS))
def test_malformed_input_is_a_400_naming_the_field(daemon, dialect):
    body = HOSTS[dialect]["before"]("x", 1)
    body.pop("conversation_id" if dialect == "cursor" else "session_id")

    status, answer = post(hooks_address(daemon), f"/v1/hooks/{dialect}", body)

    assert 400 == status and ("conversation_id" if dialect == "cursor" else "session_id") in answer["error"]


@pytest.mark.parametrize(("dialect", "denied"), [("gemini-cli", "decision"), ("cursor", "permission")])
def test_the_command_form_with_the_daemon_down(dialect, denied, run_id):
    """No daemon: the call runs with a note for the user, or is denied with --fail-closed."""
    import subprocess
    import sys

    body = json.dumps(HOSTS[dialect]["before"](run_id, 1))

    def run(*extra):
        done = subprocess.run([sys.executable, "-m", "loopwarden", "hook", dialect, "--address", "127.0.0.1:9",
                               "--timeout", "2", *extra], input=body, capture_output=True, text=True, timeout=60)
        assert 0 == done.returncode, done.stderr
        return json.loads(done.stdout)

    open_answer = run()
    assert denied not in open_answer and "without a loop check" in json.dumps(open_answer)
    assert "deny" == run("--fail-closed")[denied]
