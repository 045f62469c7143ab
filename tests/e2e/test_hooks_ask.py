"""ASK through the real daemon's Claude Code hook endpoint and the command form, under
`loopwarden.onCritical: "ask"`: the 21st identical call is answered
`permissionDecision: "ask"`; its PostToolUse (the person approved, the call ran) is sent as an
approval-once, so the next identical call asks again; a PermissionDenied of an asked call is a
denial, after which the pattern is denied. Codex cannot ask: the same loop there is denied, the
reason telling the model to ask the user, whose reply (a new prompt) lifts the block.

"""
from __future__ import annotations

import json

import pytest

from loopwarden.hooks.protocol import ASK_THE_USER
from tests.client.python.hooks import payloads
from tests.e2e.test_hooks_http import (
    CRITICAL, claude_loop, codex_loop, hook_command, hooks_address, post,
)
from tests.e2e.test_hooks_http import daemon_args, send  # noqa: F401 - the hook tests' shared fixtures
from tests.support.metrics import delta

pytestmark = pytest.mark.daemon

# The embedded default's detection (enabled: true) with ASK on criticals.
CONFIG = '{tools: {loopDetection: {enabled: true}}, loopwarden: {onCritical: "ask"}}'


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


def decision(answer: dict) -> str:
    return answer.get("hookSpecificOutput", {}).get("permissionDecision", "")


def test_the_21st_identical_call_is_asked_with_the_reason(send, run_id):
    answers = claude_loop(send, run_id)

    assert [""] * CRITICAL + ["ask"] == [decision(a) for a in answers]
    asked = answers[-1]["hookSpecificOutput"]
    assert "PreToolUse" == asked["hookEventName"] and asked["permissionDecisionReason"]
    assert {"continue", "stopReason"}.isdisjoint(answers[-1]), "an ask never stops the session"


def test_an_approved_call_asks_again_next_time_and_a_denial_then_denies(send, run_id):
    answers = claude_loop(send, run_id)  # the 21st was asked; claude_loop sent no PostToolUse for it
    assert "ask" == decision(answers[-1])

    assert {} == send(payloads.claude_post_tool_use(run_id, f"toolu_{CRITICAL + 1}"))  # approved once: it ran
    again = send(payloads.claude_pre_tool_use(run_id, "toolu_again"))
    assert "ask" == decision(again), "approval once: the next critical of the pattern asks again"

    assert {} == send(payloads.claude_permission_denied(run_id, "toolu_again"))
    after = send(payloads.claude_pre_tool_use(run_id, "toolu_after"))
    assert "deny" == decision(after), "after a denial the pattern's criticals are denied"


def _denied_answers(before: str, after: str) -> float:
    return delta(before, after, "loopwarden_approvals_total", answer="denied", agent="default")


def test_an_ask_no_hook_answers_is_denied_when_the_same_call_comes_again(daemon, send, run_id):
    """A headless `claude -p` (or dontAsk, or a permission tool saying no) denies the asked call
    with no hook: the model's next attempt at the same call is the answer. It is denied at once
    (the pattern's criticals are denied after a denial), not asked again, and the daemon holds no
    ask open until askTimeoutSeconds."""
    answers = claude_loop(send, run_id)
    assert "ask" == decision(answers[-1])
    before = daemon.scrape()

    again = send(payloads.claude_pre_tool_use(run_id, "toolu_again"))

    assert "deny" == decision(again)
    assert again["hookSpecificOutput"]["permissionDecisionReason"].startswith("CRITICAL: ")
    assert 1 == _denied_answers(before, daemon.scrape())


def test_an_ask_no_hook_answers_is_denied_by_its_batch_end(daemon, send, run_id):
    """Claude Code's PostToolBatch: every call of the turn resolved, and an asked call that ran
    would have sent its PostToolUse first. One call a turn here."""
    batch_end = payloads.claude_post_tool_batch(run_id, [])
    assert {} == send(batch_end)
    for index in range(1, CRITICAL + 1):
        assert "" == decision(send(payloads.claude_pre_tool_use(run_id, f"toolu_{index}")))
        send(payloads.claude_post_tool_use(run_id, f"toolu_{index}"))
        assert {} == send(batch_end)
    assert "ask" == decision(send(payloads.claude_pre_tool_use(run_id, f"toolu_{CRITICAL + 1}")))
    before = daemon.scrape()

    assert {} == send(batch_end)

    assert 1 == _denied_answers(before, daemon.scrape())
    assert "deny" == decision(send(payloads.claude_pre_tool_use(run_id, "toolu_again")))


def test_the_command_form_denies_an_unanswered_ask_when_the_same_call_comes_again(daemon, send, run_id, tmp_path):
    """`loopwarden hook`, one process per hook: the marker of the asked call is the denial the
    next process sends ahead of the same call."""
    import os
    import subprocess
    import sys

    state = tmp_path / "hook-state"

    def command(body):
        done = subprocess.run([sys.executable, "-m", "loopwarden", "hook", "claude-code", "--address",
                               daemon.grpc_target], input=json.dumps(body), capture_output=True, text=True,
                              timeout=60, env={**os.environ, "LOOPWARDEN_HOOK_STATE_DIR": str(state)})
        assert (0, "") == (done.returncode, done.stderr)
        return json.loads(done.stdout)

    for index in range(1, CRITICAL + 1):
        send(payloads.claude_pre_tool_use(run_id, f"toolu_{index}"))
        send(payloads.claude_post_tool_use(run_id, f"toolu_{index}"))
    assert "ask" == decision(command(payloads.claude_pre_tool_use(run_id, "toolu_21")))
    assert {} == command(payloads.claude_pre_tool_use(run_id, "toolu_other", "pwd")), "another call: no answer"
    assert 1 == len(list(state.glob("*.ask")))
    before = daemon.scrape()

    assert "deny" == decision(command(payloads.claude_pre_tool_use(run_id, "toolu_22")))

    assert 1 == _denied_answers(before, daemon.scrape())
    assert [] == list(state.glob("*.ask"))


def test_a_stuck_subagent_is_asked_too(send, run_id):
    answers = []
    for index in range(1, CRITICAL + 2):
        answers.append(send(payloads.in_subagent(payloads.claude_pre_tool_use(run_id, f"toolu_{index}"), "a1")))
        if not decision(answers[-1]):
            send(payloads.in_subagent(payloads.claude_post_tool_use(run_id, f"toolu_{index}"), "a1"))

    assert "ask" == decision(answers[-1])


def test_codex_cannot_ask_so_its_deny_tells_the_model_to_ask_the_user(daemon, run_id):
    """Codex's documented fallback: the 21st call is denied with a reason ending in the
    instruction to ask the user, and the user's reply, a new prompt (UserPromptSubmit), lets the
    same call run."""
    address = hooks_address(daemon)

    def send(body):
        return post(address, "/v1/hooks/codex", body)[1]

    answers = codex_loop(send, run_id)

    assert "deny" == decision(answers[-1])
    reason = answers[-1]["hookSpecificOutput"]["permissionDecisionReason"]
    assert reason.startswith("CRITICAL: ") and reason.endswith(ASK_THE_USER)
    assert {} == send(payloads.codex_user_prompt_submit(run_id, "yes, run it once more", "turn-2"))
    assert "" == decision(send(payloads.codex_pre_tool_use(run_id, "call_after")))


def test_the_command_form_remembers_its_asks_across_processes(daemon, send, run_id, tmp_path):
    """One process per hook: the PreToolUse answered ASK leaves a marker in the state dir, the
    PermissionDenied of that call (another process) sends the denial, so the next call is denied."""
    state = ("--address", daemon.grpc_target)
    env_dir = tmp_path / "hook-state"

    def command(body):
        import os
        import subprocess
        import sys

        done = subprocess.run([sys.executable, "-m", "loopwarden", "hook", "claude-code", *state],
                              input=json.dumps(body), capture_output=True, text=True, timeout=60,
                              env={**os.environ, "LOOPWARDEN_HOOK_STATE_DIR": str(env_dir)})
        assert (0, "") == (done.returncode, done.stderr)
        return json.loads(done.stdout)

    for index in range(1, CRITICAL + 1):  # 20 calls through the endpoint: the same run
        send(payloads.claude_pre_tool_use(run_id, f"toolu_{index}"))
        send(payloads.claude_post_tool_use(run_id, f"toolu_{index}"))

    asked = command(payloads.claude_pre_tool_use(run_id, "toolu_21"))
    assert "ask" == decision(asked)
    assert 1 == len(list(env_dir.glob("*.ask")))
    assert {} == command(payloads.claude_post_tool_use(run_id, "toolu_21"))  # approved once
    assert [] == list(env_dir.glob("*.ask"))

    assert "ask" == decision(command(payloads.claude_pre_tool_use(run_id, "toolu_22")))
    assert {} == command(payloads.claude_permission_denied(run_id, "toolu_22"))
    assert "deny" == decision(command(payloads.claude_pre_tool_use(run_id, "toolu_23")))


def test_a_post_tool_use_of_a_call_never_asked_sends_no_approval(daemon, run_id):
    """No marker, no approval: no REJECT no_pending_ask counted for an ordinary outcome."""
    before = daemon.scrape()
    code, out, err = hook_command(daemon, "claude-code", payloads.claude_post_tool_use(run_id, "toolu_1"))
    after = daemon.scrape()

    assert (0, {}) == (code, json.loads(out)), err
    assert 0 == delta(before, after, "loopwarden_rejected_events_total", error_code="no_pending_ask")


def test_the_command_form_denies_an_ask_it_cannot_remember(daemon, send, run_id, tmp_path):
    """A state dir that cannot be written: the approval could not be reported, so the call is
    denied instead of asked, and the reason says so."""
    import os
    import subprocess
    import sys

    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    for index in range(1, CRITICAL + 1):
        send(payloads.claude_pre_tool_use(run_id, f"toolu_{index}"))
        send(payloads.claude_post_tool_use(run_id, f"toolu_{index}"))

    done = subprocess.run([sys.executable, "-m", "loopwarden", "hook", "claude-code", "--address", daemon.grpc_target],
                          input=json.dumps(payloads.claude_pre_tool_use(run_id, "toolu_21")), capture_output=True,
                          text=True, timeout=60, env={**os.environ, "LOOPWARDEN_HOOK_STATE_DIR": str(blocker / "asks")})

    assert 0 == done.returncode
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert "deny" == answer["permissionDecision"] and "could not keep this question open" in answer[
        "permissionDecisionReason"]
    assert "cannot remember the asked call" in done.stderr
