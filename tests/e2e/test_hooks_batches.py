"""Claude Code's parallel batches through the real daemon's hook endpoint under
`{loopwarden: {preset: "fast"}}`: every PreToolUse between two PostToolBatch hooks of a session
is sent with one batch id, so a turn's fan-out of distinct searches is one step of argumentChurn,
not twenty."""
from __future__ import annotations

import pytest

from tests.client.python.hooks import payloads
from tests.e2e.test_hooks_http import claude_code_sender, hooks_address, post
from tests.e2e.test_hooks_http import daemon_args  # noqa: F401 - the hook tests' shared fixtures

pytestmark = pytest.mark.daemon

CONFIG = '{loopwarden: {preset: "fast"}}'
EMPTY = {"content": [{"type": "text", "text": ""}]}  # every search finds nothing


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


def search(session: str, event: str, index: int) -> dict:
    """A flight search of its own (distinct arguments) as Claude Code's PreToolUse / PostToolUse."""
    body = {**payloads._claude_base(session, event), "tool_name": "mcp__flights__search",
            "tool_input": {"origin": "SFO", "destination": "JFK", "flexible_days": index},
            "tool_use_id": f"toolu_{session}_{index}"}
    return body if event == "PreToolUse" else {**body, "tool_response": EMPTY}


def fan_out(send, session: str, first: int, calls: int, *, batch_end: bool) -> list[dict]:
    """One model turn: `calls` distinct searches, two at a time in parallel (PreToolUse, PreToolUse,
    then their PostToolUse), then PostToolBatch; the PreToolUse answers."""
    answers = []
    for pair in range(first, first + calls, 2):
        answers += [send(search(session, "PreToolUse", i)) for i in (pair, pair + 1)]
        for i in (pair, pair + 1):
            assert {} == send(search(session, "PostToolUse", i))
    if batch_end:
        posts = [search(session, "PostToolUse", i) for i in range(first, first + calls)]
        assert {} == send(payloads.claude_post_tool_batch(session, posts))
    return answers


def denied(answers: list[dict]) -> list[dict]:
    return [a for a in answers if a.get("hookSpecificOutput", {}).get("permissionDecision") == "deny"]


@pytest.fixture
def send(daemon):
    return claude_code_sender(daemon)


def test_three_fan_outs_of_20_distinct_searches_and_a_61st_are_never_denied(send, run_id):
    answers = []
    for turn in range(3):
        answers += fan_out(send, run_id, turn * 20, 20, batch_end=True)
    answers.append(send(search(run_id, "PreToolUse", 60)))

    assert 61 == len(answers)
    assert [] == denied(answers)


def test_without_batch_ends_the_same_fan_outs_are_churn(daemon, run_id):
    """The same pattern through the Codex endpoint (Codex has no PostToolBatch, so no batch ids):
    each pair of parallel calls is a step of argumentChurn, and fast blocks the run in turn 2."""
    address = hooks_address(daemon)
    answers = []
    for index in range(0, 60, 2):
        for i in (index, index + 1):
            pre = payloads.codex_pre_tool_use(run_id, f"call_{i}", f"grep -r {i} .")
            answers.append(post(address, "/v1/hooks/codex", pre)[1])
        if denied(answers):
            break
        for i in (index, index + 1):
            post(address, "/v1/hooks/codex", payloads.codex_post_tool_use(run_id, f"call_{i}", f"grep -r {i} ."))

    assert denied(answers) and len(answers) <= 40
    assert "argument" in denied(answers)[0]["hookSpecificOutput"]["permissionDecisionReason"]


@pytest.mark.parametrize("batch_ends", [True, False], ids=["with-batch-ends", "host-without-batch-ends"])
def test_a_loop_inside_batches_is_still_denied(send, run_id, batch_ends):
    """Batches do not hide a loop: one identical Bash call per turn is denied as soon as without
    batches (fast: at the 3rd identical outcome). A host that never sends PostToolBatch: the repeat ends the session's first
    batch, so the loop is not one endless batch."""
    answers = []
    for turn in range(30):
        answers.append(send(payloads.claude_pre_tool_use(run_id, f"toolu_{turn}")))
        if denied(answers[-1:]):
            break
        assert {} == send(payloads.claude_post_tool_use(run_id, f"toolu_{turn}"))
        if batch_ends:
            assert {} == send(payloads.claude_post_tool_batch(run_id))

    assert denied(answers) == answers[-1:]
    assert 4 == len(answers)
