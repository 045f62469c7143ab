"""Claude Code's sub-agents through the real daemon's hook endpoint: a hook with
`agent_id` is an event of the child run `<session_id>/<agent_id>` of the session's run, so
sub-agents never count each other's calls, and a stuck one warns the main agent (`child_stopped`).

These await the run-tree work (`trees`): without it the daemon refuses a child's events on the
session's routed request (run_id_mismatch), and the calls run unguarded.
"""
from __future__ import annotations

import json

import pytest

from loopwarden import LoopwardenClient
from loopwarden.hooks import child_run_id
from tests.client.python.hooks import payloads
from tests.e2e.test_hooks_http import CRITICAL, hook_command
from tests.e2e.test_hooks_http import daemon_args, send  # noqa: F401 - the hook tests' shared fixtures

pytestmark = pytest.mark.daemon

README = {"file_path": "/home/dev/demo/README.md"}
README_TEXT = {"type": "text", "file": {"filePath": "/home/dev/demo/README.md", "content": "# demo\n"}}


def read(session: str, event: str, tool_use_id: str, agent_id: str) -> dict:
    """Claude Code's Read of README.md inside sub-agent `agent_id` (PreToolUse / PostToolUse)."""
    body = {**payloads._claude_base(session, event), "tool_name": "Read", "tool_input": README,
            "tool_use_id": tool_use_id}
    if event == "PostToolUse":
        body = {**body, "tool_response": README_TEXT, "duration_ms": 3}
    return payloads.in_subagent(body, agent_id, "Explore")


def denied(answer: dict) -> bool:
    return answer.get("hookSpecificOutput", {}).get("permissionDecision") == "deny"


def test_three_subagents_reading_one_file_8_times_each_are_never_warned_or_denied(send, run_id):
    """The issue's report: on one shared history the third sub-agent's 7th read was denied. As
    child runs, 3 x 8 identical reads, interleaved, get nothing but empty answers."""
    agents = ("a1", "a2", "a3")
    answers = [send(payloads.claude_subagent_start(run_id, agent, "Explore")) for agent in agents]
    for index in range(8):
        for agent in agents:
            answers.append(send(read(run_id, "PreToolUse", f"toolu_{agent}_{index}", agent)))
            answers.append(send(read(run_id, "PostToolUse", f"toolu_{agent}_{index}", agent)))
    answers += [send(payloads.claude_subagent_stop(run_id, agent, "Explore")) for agent in agents]

    assert [{}] * len(answers) == answers


def test_a_stuck_subagent_is_denied_at_21_and_the_main_agent_is_told(send, run_id):
    """The 4th sub-agent's 21st identical Bash call is denied; the main agent's next call is
    answered with the child_stopped warning naming the sub-agent's run, for the model and the user."""
    child = child_run_id(run_id, "a4")
    send(payloads.claude_subagent_start(run_id, "a4"))
    answers = []
    for index in range(1, CRITICAL + 2):
        answers.append(send(payloads.in_subagent(payloads.claude_pre_tool_use(run_id, f"toolu_{index}"), "a4")))
        if not denied(answers[-1]):
            send(payloads.in_subagent(payloads.claude_post_tool_use(run_id, f"toolu_{index}"), "a4"))
    assert [False] * CRITICAL + [True] == [denied(a) for a in answers]
    assert {} == send(payloads.claude_subagent_stop(run_id, "a4"))

    main = send(payloads.claude_pre_tool_use(run_id, "toolu_main", "git status"))

    assert not denied(main)
    assert child in main["hookSpecificOutput"]["additionalContext"]
    assert child in main["systemMessage"]


def test_a_subagents_calls_do_not_count_toward_the_main_agents(send, run_id):
    """20 identical calls in a sub-agent, then the same call 20 times in the main thread: no deny."""
    answers = []
    for index in range(CRITICAL):
        answers.append(send(payloads.in_subagent(payloads.claude_pre_tool_use(run_id, f"toolu_s{index}"), "a1")))
        send(payloads.in_subagent(payloads.claude_post_tool_use(run_id, f"toolu_s{index}"), "a1"))
    for index in range(CRITICAL):
        answers.append(send(payloads.claude_pre_tool_use(run_id, f"toolu_m{index}")))
        send(payloads.claude_post_tool_use(run_id, f"toolu_m{index}"))

    assert not any(denied(a) for a in answers)


def test_the_command_form_sends_a_subagents_calls_to_its_child_run(daemon, run_id):
    """`loopwarden hook claude-code`: SubagentStart creates the child run, its calls are recorded
    there (InspectRun of `<session>/<agent_id>`), not in the session's run."""
    for body in (payloads.claude_subagent_start(run_id, "a1"),
                 payloads.in_subagent(payloads.claude_pre_tool_use(run_id, "toolu_1"), "a1")):
        code, out, err = hook_command(daemon, "claude-code", body)
        assert (0, {}) == (code, json.loads(out)), err

    with LoopwardenClient(daemon.grpc_target) as client:
        child = client.inspect(child_run_id(run_id, "a1"))

    assert ["Bash"] == [record.tool_name for record in child.records], "shown as Claude Code spelled it"
    assert child.records[0].args_hash.startswith("exec:"), "matched under its normalised name"
