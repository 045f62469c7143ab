"""The Claude Code hook JSON of the tests, type-checked against the published Claude Agent SDK.

Every hook input the tests send (payloads.py) and every answer loopwarden gives (each action, and
the unavailable answers) is written into a TypeScript file as a value of the SDK's own type
(`PreToolUseHookInput`, …, `SyncHookJSONOutput`) and compiled with `tsc --strict --noEmit`, so a
field the SDK does not know, a missing one or a wrong literal fails here. The SDK and TypeScript
come from npm at pinned versions (scripts/install-claude-agent-sdk.sh, cached in .cache/).
"""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import tempfile

import pytest

from loopwarden import Action, Verdict
from loopwarden.hooks import host, answer, parse, unavailable_answer, unchecked_answer
from loopwarden.hooks.protocol import unremembered_ask_answer

from . import payloads

# Runs node and tsc over the Claude Agent SDK's types: make test, not make test-fast (pytest.ini).
pytestmark = pytest.mark.node

REPO = pathlib.Path(__file__).resolve().parents[4]
PREFIX = REPO / ".cache" / "claude-agent-sdk"

INPUTS = {
    "PreToolUseHookInput": [payloads.claude_pre_tool_use("s-1", "toolu_1")],
    "PostToolUseHookInput": [payloads.claude_post_tool_use("s-1", "toolu_1")],
    "PostToolUseFailureHookInput": [payloads.claude_post_tool_use_failure("s-1", "toolu_1", "exit status 1")],
    "PostToolBatchHookInput": [payloads.claude_post_tool_batch("s-1")],
    "PreCompactHookInput": [payloads.claude_pre_compact("s-1")],
    "SessionEndHookInput": [payloads.claude_session_end("s-1")],
    "UserPromptSubmitHookInput": [payloads.claude_user_prompt_submit("s-1", "run the tests", "prompt-1"),
                                  payloads.claude_user_prompt_submit("s-1", "again")],
    "SessionStartHookInput": [payloads.claude_session_start("s-1")],
    "SubagentStartHookInput": [payloads.claude_subagent_start("s-1", "a1", "Explore")],
    "SubagentStopHookInput": [payloads.claude_subagent_stop("s-1", "a1", "Explore")],
    "PermissionDeniedHookInput": [payloads.claude_permission_denied("s-1", "toolu_1")],
    "StopHookInput": [payloads.claude_stop("s-1"), payloads.claude_stop("s-1", None, stop_hook_active=True)],
}
INPUTS["SubagentStopHookInput"].append(payloads.claude_subagent_stop("s-1", "a2", message=None, stop_hook_active=True))
INPUTS["PreToolUseHookInput"].append(payloads.in_subagent(payloads.claude_pre_tool_use("s-1", "toolu_2"), "a1"))


def _answers() -> list[dict]:
    out = []
    for build in (payloads.claude_pre_tool_use, payloads.claude_post_tool_use):
        request = parse(host("claude-code"), build("s-1", "toolu_1"))
        for action in Action:
            for announce in (False, True):
                out.append(answer(request, Verdict(0, "s-1", action, message=f"{action.value}: message",
                                                   announce=announce, error_code="compaction_loop_persisted")))
        for fail_closed in (False, True):
            out.append(unavailable_answer(request, "loopwarden is busy", fail_closed=fail_closed))
            # an input over --hooks-max-body-bytes, of which only the event name was read (or none)
            for name in (request.hook_event_name, ""):
                out.append(unchecked_answer(host("claude-code"), name, "the hook input is too large",
                                            fail_closed=fail_closed))
    # What the model wrote: the answers to a Stop and a SubagentStop, for every action.
    for stop in (payloads.claude_stop("s-1", stop_hook_active=True), payloads.claude_subagent_stop("s-1", "a1")):
        request = parse(host("claude-code"), stop)
        for action in Action:
            out.append(answer(request, Verdict(0, "s-1", action, message=f"{action.value}: message", announce=True,
                                               error_code="stop_hook_loop")))
    start = parse(host("claude-code"), payloads.claude_subagent_start("s-1", "a1"))
    out.append(answer(start, Verdict(0, "s-1/a1", Action.ABORT, message="too many children",
                                     error_code="too_many_children")))
    out.append(unremembered_ask_answer(Verdict(0, "s-1", Action.ASK, message="ask"), "no state dir", host("claude-code")))
    return out


@pytest.fixture(scope="module")
def tsc() -> pathlib.Path:
    subprocess.run(["bash", str(REPO / "scripts" / "install-claude-agent-sdk.sh")], check=True, timeout=600)
    return PREFIX / "node_modules" / ".bin" / "tsc"


def _check(tsc: pathlib.Path, source: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(dir=PREFIX) as tmp:  # inside PREFIX: node_modules resolves
        path = pathlib.Path(tmp) / "hooks.ts"
        path.write_text(source)
        return subprocess.run([str(tsc), "--strict", "--noEmit", "--skipLibCheck", "--module", "nodenext",
                               "--moduleResolution", "nodenext", "--target", "es2022", str(path)],
                              capture_output=True, text=True, timeout=120)


def _source(values: dict[str, list]) -> str:
    names = sorted(values)
    lines = [f"import type {{ {', '.join(names)} }} from \"@anthropic-ai/claude-agent-sdk\";"]
    for name in names:
        for index, value in enumerate(values[name]):
            lines.append(f"export const {name[0].lower()}{name[1:]}{index}: {name} = {json.dumps(value, indent=1)};")
    return "\n".join(lines) + "\n"


def guide_settings() -> list[dict]:
    """The Claude Code settings JSON the Claude Code guide (docs/integrations/claude-code.md) tells users to paste."""
    guide = (REPO / "docs" / "integrations" / "claude-code.md").read_text(encoding="utf-8")
    blocks = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", guide, re.S)]
    return [block for block in blocks if "claude-code" in json.dumps(block)]


class TestAgainstTheSdk:
    def test_the_hook_inputs_the_tests_send_are_the_sdks_types(self, tsc):
        """Each Claude Code hook input of the tests compiles as the SDK's input type of its event."""
        result = _check(tsc, _source(INPUTS))

        assert 0 == result.returncode, result.stdout + result.stderr

    def test_every_answer_loopwarden_gives_is_a_sync_hook_output(self, tsc):
        """Answers for every action (announced or not) and the unavailable answers are SyncHookJSONOutput."""
        result = _check(tsc, _source({"SyncHookJSONOutput": _answers()}))

        assert 0 == result.returncode, result.stdout + result.stderr

    def test_the_guides_claude_code_settings_are_the_sdks_settings_type(self, tsc):
        """The settings.json blocks of the Claude Code guide (HTTP and command hooks, and the fail-closed
        PreToolUse with onFailure) compile as the SDK's Settings."""
        settings = guide_settings()

        result = _check(tsc, _source({"Settings": settings}))

        assert 4 == len(settings)  # HTTP, HTTP fail-closed, loopwarden-hook, loopwarden hook
        assert 0 == result.returncode, result.stdout + result.stderr
        commands = [hook["command"] for block in settings for matchers in block["hooks"].values()
                    for matcher in matchers for hook in matcher["hooks"] if hook["type"] == "command"]
        assert any("/loopwarden-hook claude-code" in command for command in commands)
        # Claude Code runs command hooks with its own PATH: a bare name may be "not found" (exit 127).
        assert all(command.startswith("/") for command in commands), commands

    def test_the_check_catches_a_field_the_sdk_does_not_know(self, tsc):
        """The check is real: an input with a made-up field, and a made-up decision, fail to compile."""
        bad_input = {**payloads.claude_pre_tool_use("s-1", "toolu_1"), "tool_args": {}}
        bad_answer = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "refuse"}}

        result = _check(tsc, _source({"PreToolUseHookInput": [bad_input], "SyncHookJSONOutput": [bad_answer]}))

        assert 0 != result.returncode
        assert "tool_args" in result.stdout and "refuse" in result.stdout
