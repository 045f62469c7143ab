"""ASK under `loopwarden.onCritical: "ask"` through the real daemon, for Gemini CLI and Cursor:
Cursor's preToolUse (which names its call by tool_use_id) is asked (`permission: "ask"`), and the
asked call's later postToolUse is sent as the person's approval-once, so the next identical call
asks again; Cursor's beforeShellExecution (no call id) and Gemini CLI (no call id at all) cannot
ask: their events never accept ASK, so the engine gives the same loop the BLOCK (as Codex's), whose
reason tells the model to ask the user."""
from __future__ import annotations

import pytest

from loopwarden.hooks.protocol import ASK_THE_USER
from tests.client.python.hooks import dialect_payloads as p
from tests.e2e.test_hooks_http import CRITICAL, hook_sender
from tests.e2e.test_hooks_http import daemon_args  # noqa: F401 - the hook tests' shared daemon
from tests.e2e.test_hooks_ask import CONFIG

pytestmark = pytest.mark.daemon


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


def test_cursor_asks_and_an_approved_call_asks_again(daemon, run_id):
    send = hook_sender(daemon, "cursor")
    answers = []
    for index in range(1, CRITICAL + 2):
        answers.append(send(p.cursor_pre_tool_use(run_id, f"tu-{index}")))
        if "permission" not in answers[-1]:
            send(p.cursor_post_tool_use(run_id, f"tu-{index}"))

    assert [None] * CRITICAL + ["ask"] == [a.get("permission") for a in answers]
    assert answers[-1]["agent_message"]
    assert {} == send(p.cursor_post_tool_use(run_id, f"tu-{CRITICAL + 1}"))  # the person said yes: it ran
    assert "ask" == send(p.cursor_pre_tool_use(run_id, "tu-again")).get("permission")


@pytest.mark.parametrize("dialect", ["gemini-cli", "cursor"])
def test_a_host_hook_without_a_call_id_gets_the_deny(daemon, run_id, dialect):
    send = hook_sender(daemon, dialect)
    before = p.gemini_before_tool if dialect == "gemini-cli" else p.cursor_before_shell_execution
    after = p.gemini_after_tool if dialect == "gemini-cli" else (
        lambda run: {**p.cursor_before_shell_execution(run), "hook_event_name": "afterShellExecution",
                     "output": "total 0\n", "duration": 12})
    answers = []
    for _ in range(CRITICAL + 1):
        answers.append(send(before(run_id)))
        if not ({"decision", "permission"} & set(answers[-1])):
            send(after(run_id))

    last = answers[-1]
    assert "deny" == (last.get("decision") or last.get("permission"))
    reason = last.get("reason") or last.get("agent_message")
    assert reason.startswith("CRITICAL: ") and reason.endswith(ASK_THE_USER), "the model is to ask the user"
