"""Codex's, Gemini CLI's and Cursor's sub-agents and user turns through the real daemon, by each
of the three ways a hook reaches it: the HTTP endpoint, the compiled
`loopwarden-hook` (which posts to that endpoint) and `loopwarden hook` (gRPC).

- Codex: a hook with `agent_id` (a thread-spawned sub-agent's; codex-rs/core/src/hook_runtime.rs)
  is an event of the child run `<session_id>/<agent_id>`: a stuck sub-agent is denied, its sibling
  is never warned, and the main agent's next call carries `child_stopped`. Codex cannot ask, so the
  deny tells the model to ask the user; a `UserPromptSubmit` (a new turn) lifts the block.
- Gemini CLI and Cursor: a new prompt (`BeforeAgent`, `beforeSubmitPrompt`) lifts a block. A
  Cursor sub-agent's hooks come from a conversation of its own: it is a run of its own, so its loop
  is denied without touching its sibling's or its parent's calls.

Payloads: tests/client/python/hooks/payloads.py (Codex's hook schemas) and dialect_payloads.py
(Gemini CLI's bundled reference, Cursor's hooks reference).
"""
from __future__ import annotations

import json

import pytest

from loopwarden.hooks import child_run_id
from loopwarden.hooks.protocol import ASK_THE_USER
from tests.client.python.hooks import dialect_payloads as p
from tests.client.python.hooks import payloads
from tests.e2e.test_hook_binary import binary_sender
from tests.e2e.test_hooks_http import CRITICAL, hook_command, hook_sender
from tests.e2e.test_hooks_http import daemon_args  # noqa: F401 - the hook tests' shared daemon

pytestmark = pytest.mark.daemon

SENDERS = ("endpoint", "loopwarden-hook", "loopwarden hook")


def senders(daemon, dialect: str, form: str):
    """(send, repeat): functions posting one hook input of `dialect` the way `form` does and
    returning its answer. `repeat` is for the many repetitions that build a loop up: the same as
    `send`, except for `loopwarden hook`, whose one Python process per hook costs up to a second on
    a loaded machine; there the endpoint (the same mapping, the same daemon) answers the
    repetitions and the command the hooks that decide (a sub-agent's start, the denied call, the
    prompt, the calls after it)."""
    endpoint = hook_sender(daemon, dialect)
    if form == "endpoint":
        return endpoint, endpoint
    if form == "loopwarden-hook":
        binary = binary_sender(daemon, dialect)
        return binary, binary

    def command(body: dict) -> dict:
        code, out, err = hook_command(daemon, dialect, body)
        assert 0 == code, err
        return json.loads(out)

    return command, endpoint


def codex_denial(answer: dict) -> str:
    """The reason of a Codex deny ("" when the call may run)."""
    specific = answer.get("hookSpecificOutput", {})
    return specific.get("permissionDecisionReason", "") if specific.get("permissionDecision") == "deny" else ""


def codex_call(send, session: str, call: str, agent: str = "", command: str = payloads.COMMAND) -> dict:
    """One Codex Bash call (PreToolUse, and its PostToolUse when it may run), in sub-agent `agent`
    when given; the PreToolUse answer."""
    def inside(body: dict) -> dict:
        return payloads.in_codex_subagent(body, agent) if agent else body

    answer = send(inside(payloads.codex_pre_tool_use(session, call, command)))
    if not codex_denial(answer):
        assert {} == send(inside(payloads.codex_post_tool_use(session, call, command)))
    return answer


@pytest.mark.parametrize("form", SENDERS)
def test_a_stuck_codex_subagent_is_denied_alone_and_the_main_agent_is_told(daemon, run_id, form):
    """Sub-agent th-1 repeats one Bash call 21 times; sibling th-2 runs the same call 5 times before
    and 5 after. th-1's 21st call is denied with the instruction to ask the user, th-2 gets nothing
    but empty answers, and the main agent's next call carries the child_stopped warning."""
    send, repeat = senders(daemon, "codex", form)
    for agent in ("th-1", "th-2"):
        assert {} == send(payloads.codex_subagent_start(run_id, agent))

    sibling = [codex_call(repeat, run_id, f"s{index}", "th-2") for index in range(5)]
    stuck = [codex_call(repeat, run_id, f"c{index}", "th-1") for index in range(1, CRITICAL + 1)]
    stuck.append(codex_call(send, run_id, f"c{CRITICAL + 1}", "th-1"))
    sibling += [codex_call(repeat, run_id, f"s{index}", "th-2") for index in range(5, 9)]
    sibling.append(codex_call(send, run_id, "s9", "th-2"))
    assert {} == send(payloads.codex_subagent_stop(run_id, "th-1"))
    main = codex_call(send, run_id, "m1", command="git status")

    assert [""] * CRITICAL == [codex_denial(a) for a in stuck[:CRITICAL]]
    assert codex_denial(stuck[-1]).startswith("CRITICAL: ") and codex_denial(stuck[-1]).endswith(ASK_THE_USER)
    assert [{}] * 10 == sibling, "the sibling is never warned"
    assert not codex_denial(main)
    assert child_run_id(run_id, "th-1") in main["hookSpecificOutput"]["additionalContext"]
    assert child_run_id(run_id, "th-1") in main["systemMessage"]


def test_codex_subagent_calls_are_recorded_in_the_child_run(daemon, client, run_id):
    """InspectRun: the child run `<session>/<agent_id>` holds the sub-agent's call, its parent is the
    session's run, and the session's run lists it as a child without holding its call."""
    send, _ = senders(daemon, "codex", "loopwarden hook")
    send(payloads.codex_subagent_start(run_id, "th-1", "worker"))
    codex_call(send, run_id, "c1", "th-1")
    codex_call(send, run_id, "m1", command="git status")

    child, parent = client.inspect(child_run_id(run_id, "th-1")), client.inspect(run_id)

    assert (run_id, ["Bash"]) == (child.parent_run_id, [record.tool_name for record in child.records])
    assert [child_run_id(run_id, "th-1")] == list(parent.children)
    assert 1 == len(parent.records), "only the main agent's call"


@pytest.mark.parametrize("form", SENDERS)
def test_a_new_codex_prompt_lifts_the_block(daemon, run_id, form):
    """21 identical calls: the 21st is denied (and stays denied); UserPromptSubmit of the next turn
    is a user_turn, after which the same call runs."""
    send, repeat = senders(daemon, "codex", form)
    answers = [codex_call(repeat, run_id, f"c{index}") for index in range(1, CRITICAL + 1)]
    answers.append(codex_call(send, run_id, f"c{CRITICAL + 1}"))
    assert codex_denial(answers[-1]) and codex_denial(codex_call(send, run_id, "again")), "the block is sticky"

    assert {} == send(payloads.codex_user_prompt_submit(run_id, "I fixed the build, run it again", "turn-2"))

    assert {} == codex_call(send, run_id, "after")


def test_a_prompt_inside_a_codex_subagent_lifts_its_block(daemon, run_id):
    """A UserPromptSubmit with agent_id (Codex runs it for user input to any thread, with the
    sub-agent's identity: hook_runtime.rs inspect_pending_input) is a user_turn of the child run,
    after which the child's blocked call runs again."""
    send, _ = senders(daemon, "codex", "endpoint")
    answers = [codex_call(send, run_id, f"c{index}", "th-1") for index in range(1, CRITICAL + 2)]
    assert codex_denial(answers[-1])

    prompt = payloads.in_codex_subagent(payloads.codex_user_prompt_submit(run_id, "try the other mirror"), "th-1")
    assert {} == send(prompt)

    assert {} == codex_call(send, run_id, "after", "th-1")


# Gemini CLI and Cursor: the call before and after a tool, how a deny reads, and the new prompt.
DIALECTS = {
    "gemini-cli": dict(before=lambda run, i: p.gemini_before_tool(run), after=lambda run, i: p.gemini_after_tool(run),
                       denial=lambda a: a.get("reason", "") if a.get("decision") == "deny" else "",
                       prompt=p.gemini_before_agent),
    "cursor": dict(before=lambda run, i: p.cursor_pre_tool_use(run, f"tu-{i}"),
                   after=lambda run, i: p.cursor_post_tool_use(run, f"tu-{i}"),
                   denial=lambda a: a.get("agent_message", "") if a.get("permission") == "deny" else "",
                   prompt=p.cursor_before_submit_prompt),
}


def dialect_loop(send, dialect: str, run: str, calls: int = CRITICAL + 1) -> list[dict]:
    host = DIALECTS[dialect]
    answers = []
    for index in range(1, calls + 1):
        answers.append(send(host["before"](run, index)))
        if not host["denial"](answers[-1]):
            assert {} == send(host["after"](run, index))
    return answers


@pytest.mark.parametrize("form", SENDERS)
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_new_prompt_lifts_the_block(daemon, run_id, dialect, form):
    host, (send, repeat) = DIALECTS[dialect], senders(daemon, dialect, form)
    answers = dialect_loop(repeat, dialect, run_id, CRITICAL)
    answers.append(send(host["before"](run_id, CRITICAL + 1)))
    assert [False] * CRITICAL + [True] == [bool(host["denial"](a)) for a in answers]

    assert {} == send(host["prompt"](run_id))

    assert not host["denial"](send(host["before"](run_id, 99)))


def test_a_gemini_cli_deny_tells_the_model_to_ask_the_user(daemon, run_id):
    """Gemini CLI's input names no call, so it is never asked: the deny's reason, which the model
    reads as the tool's error, ends with the instruction to ask the user."""
    answers = dialect_loop(hook_sender(daemon, "gemini-cli"), "gemini-cli", run_id)

    assert answers[-1]["reason"].startswith("CRITICAL: ") and answers[-1]["reason"].endswith(ASK_THE_USER)


def cursor_call(send, conversation: str, call: str) -> dict:
    """One Cursor Shell call (preToolUse, and its postToolUse when it may run); the preToolUse answer."""
    answer = send(p.cursor_pre_tool_use(conversation, call))
    if not DIALECTS["cursor"]["denial"](answer):
        assert {} == send(p.cursor_post_tool_use(conversation, call))
    return answer


@pytest.mark.parametrize("form", ("endpoint", "loopwarden hook"))
def test_a_cursor_subagent_is_a_run_of_its_own(daemon, client, run_id, form):
    """A Cursor Task sub-agent's hooks carry its own conversation_id (none names the parent): its 21
    identical calls are denied in its own run, while its sibling's 10 and its parent's 5 identical
    calls, interleaved, run with nothing to say."""
    send, repeat = senders(daemon, "cursor", form)
    parent, stuck, sibling = run_id, f"{run_id}-sub-1", f"{run_id}-sub-2"
    # The parent's Task call starts the sub-agents: subagentStart fires in the parent's conversation
    # (subagent_id is that Task call's id) and names no child conversation, so it maps to nothing.
    assert {} == send({**p._cursor_base(parent, "subagentStart"), "subagent_id": "call-task-1",
                       "subagent_type": "explore", "parent_conversation_id": parent})

    answers: dict[str, list[dict]] = {parent: [], stuck: [], sibling: []}
    for index in range(1, CRITICAL + 2):
        for conversation, calls in ((parent, 5), (stuck, CRITICAL + 1), (sibling, 10)):
            if index <= calls:  # each conversation's last call through `send`
                post = send if index == calls else repeat
                answers[conversation].append(cursor_call(post, conversation, f"{conversation}-{index}"))

    denials = [DIALECTS["cursor"]["denial"](a) for a in answers[stuck]]
    assert [""] * CRITICAL == denials[:CRITICAL] and denials[-1].startswith("CRITICAL: ")
    assert [{}] * 10 == answers[sibling], "the sibling is never warned"
    assert [{}] * 5 == answers[parent]
    assert ("", 5) == (client.inspect(stuck).parent_run_id, len(client.inspect(parent).records))
