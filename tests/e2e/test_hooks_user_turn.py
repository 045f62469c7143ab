"""Claude Code's UserPromptSubmit through the real daemon's hook endpoint and the command form:
a new prompt is a `user_turn` of the session's run, so a Bash call denied before the prompt runs
again after it ("after a block, UserPromptSubmit with a new prompt_id and the same call -> not
denied")."""
from __future__ import annotations

import json

import pytest

from tests.client.python.hooks import payloads
from tests.e2e.test_hooks_http import claude_loop, hook_command
from tests.e2e.test_hooks_http import daemon_args, send  # noqa: F401 - the hook tests' shared fixtures

pytestmark = pytest.mark.daemon


def is_denied(answer: dict) -> bool:
    return answer.get("hookSpecificOutput", {}).get("permissionDecision") == "deny"


def test_a_new_prompt_lifts_the_block(send, run_id):
    answers = claude_loop(send, run_id)  # 21 identical Bash calls: the 21st is denied
    assert [False] * 20 + [True] == [is_denied(a) for a in answers]
    assert is_denied(send(payloads.claude_pre_tool_use(run_id, "toolu_again"))), "the block is sticky"

    prompt = payloads.claude_user_prompt_submit(run_id, "I fixed the build, run it again", "prompt-2")
    assert {} == send(prompt)

    after = send(payloads.claude_pre_tool_use(run_id, "toolu_after"))
    assert {} == after, "the same call after a new prompt is not denied"


def test_a_prompt_without_prompt_id_is_a_user_turn_too(send, run_id):
    claude_loop(send, run_id)
    assert {} == send(payloads.claude_user_prompt_submit(run_id, "try again"))
    assert not is_denied(send(payloads.claude_pre_tool_use(run_id, "toolu_after")))


def test_the_command_form_passes_the_prompt_through(daemon, send, run_id):
    claude_loop(send, run_id)
    code, out, err = hook_command(daemon, "claude-code",
                                  payloads.claude_user_prompt_submit(run_id, "run the tests", "prompt-3"))
    assert (0, {}) == (code, json.loads(out)), err
    assert not is_denied(send(payloads.claude_pre_tool_use(run_id, "toolu_after")))
