"""Gemini CLI's hooks (its docs/hooks/reference.md and HookEventName in @google/gemini-cli 0.61.0):
BeforeTool, AfterTool, BeforeAgent (a new prompt), SessionEnd, AfterModel (what the model wrote)
and AfterAgent (the turn's final answer).

Gemini CLI names no call (no tool call id, so it is never asked: its denials tell the model to ask
the person), has no failure event (a failed call is an AfterTool whose `tool_response` carries
`error`), and names no sub-agent: 0.61.0 runs its sub-agents' tools through the session's hooks,
so they count in the session's run. Its answer: `decision: "deny"` with `reason` (the model reads
it as the tool's error), `continue: false` with `stopReason` (ends the agent loop, before or after
a tool), `systemMessage` for the person. It reads `hookSpecificOutput.additionalContext` after a
tool only, so a warning before one reaches the person (systemMessage); it is passed as context too.

AfterModel fires for every streamed chunk of a response (packages/core geminiChat: the hook runs
once per chunk), its `llm_response.text` the chunk's text without thoughts: each chunk with text
is one model message (a chunk of no text, a thought or a function call, is not judged).
`continue: false` there ends the agent loop. AfterAgent fires once a turn has its final answer
(`prompt_response`, with `stop_hook_active` when an AfterAgent hook already asked for a retry):
its `decision: "deny"` retries the turn, which loopwarden never asks for; `continue: false`
ends the session.

PreCompress is not read: 0.61.0 fires it before every model request, ahead of the check whether
the history is long enough to compress (ChatCompressionService.compress), so it does not say that
a compaction happened, and taken as one, every turn would count as a compaction (and arm the
post-compaction guard). Gemini CLI's compactions are not seen.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ...hookinstall.spec import HOOK_TIMEOUT_SECONDS, Event, HookConfig
from ..host import HookHost, HookInput, HookPayloadError, Reply, Stage, flag, string

STAGES: Mapping[str, Stage] = {"BeforeTool": Stage.BEFORE_TOOL, "AfterTool": Stage.AFTER_TOOL,
                               "BeforeAgent": Stage.USER_PROMPT,
                               "SessionEnd": Stage.SESSION_END, "AfterModel": Stage.MODEL_OUTPUT,
                               "AfterAgent": Stage.STOP}

# Gemini CLI's shell tool ends what the model reads with the process ids of the call (its
# packages/core/src/tools/shell.ts: "Background PIDs: …", "Process Group PGID: N"), new every call:
# kept, they would make every repetition of a command a different outcome, and an identical shell
# loop would be warned but never blocked. Only those trailing lines go; the output stays.
SHELL_TOOL = "run_shell_command"
_PROCESS_ID_LINE = re.compile(r"(?:Process Group PGID|Background PIDs): [0-9, ]+")
# Gemini CLI may wrap tool output for the model (`<untrusted_context>` … `</untrusted_context>`):
# the id lines sit before such closing tags.
_CLOSING_TAG = re.compile(r"\s*</[A-Za-z_]+>\s*")


def without_process_ids(content: str) -> str:
    lines = content.split("\n")
    end = len(lines)
    while end > 1 and (not lines[end - 1].strip() or _CLOSING_TAG.fullmatch(lines[end - 1])):
        end -= 1
    start = end
    while start > 1 and _PROCESS_ID_LINE.fullmatch(lines[start - 1]):
        start -= 1
    return "\n".join(lines[:start] + lines[end:])


class GeminiCli(HookHost):
    name = "gemini-cli"
    title = "Gemini CLI"
    stages = STAGES

    install = HookConfig(
        project_file=".gemini/settings.json", user_dir_env=None, user_dir=".gemini", user_file="settings.json",
        events=(
            Event("BeforeTool", ".*", before_tool=True),
            Event("AfterTool", ".*"),
            Event("BeforeAgent"),
            Event("SessionEnd"),
            Event("AfterModel"),  # every streamed chunk of the model's text
            Event("AfterAgent"),  # the turn's final answer
        ),
        timeout=HOOK_TIMEOUT_SECONDS * 1000,  # Gemini CLI's hook timeout is in milliseconds
    )

    def read(self, hook_event_name: str, payload: Mapping[str, Any]) -> HookInput:
        stage = self.stages[hook_event_name]
        session_id = string(payload, "session_id")
        if stage is Stage.MODEL_OUTPUT:
            response = payload.get("llm_response")
            if not isinstance(response, Mapping):
                raise HookPayloadError("llm_response must be an object")
            return HookInput(stage, session_id, output_text=string(response, "text", required=False))
        if stage is Stage.STOP:
            return HookInput(stage, session_id, output_text=string(payload, "prompt_response", required=False),
                             output_kind="final_answer", stop_hook_active=flag(payload, "stop_hook_active"))
        if stage not in (Stage.BEFORE_TOOL, Stage.AFTER_TOOL):
            return HookInput(stage, session_id)
        tool = {"tool_name": string(payload, "tool_name"), "tool_input": payload.get("tool_input", {})}
        if stage is Stage.BEFORE_TOOL:
            return HookInput(stage, session_id, **tool)
        response = payload.get("tool_response")
        error = response.get("error") if isinstance(response, Mapping) else None
        if error:  # a failed call: its error is the outcome
            message = error.get("message") if isinstance(error, Mapping) else error
            return HookInput(Stage.TOOL_FAILED, session_id, error=str(message or error), **tool)
        # What the model reads of the result (returnDisplay is the terminal's copy).
        content = response.get("llmContent") if isinstance(response, Mapping) else response
        if tool["tool_name"] == SHELL_TOOL and isinstance(content, str):
            content = without_process_ids(content)
        return HookInput(stage, session_id, tool_response=content, **tool)

    def render(self, reply: Reply, hook_event_name: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        refusal = reply.deny if reply.deny is not None else reply.ask  # Gemini CLI cannot ask: a deny
        if refusal is not None:
            out.update(decision="deny", reason=refusal)
        if reply.context:
            out["hookSpecificOutput"] = {"additionalContext": reply.context}
        if reply.stop is not None:
            out.update({"continue": False, "stopReason": reply.stop})
        elif reply.note:
            out["systemMessage"] = reply.note
        return out


HOST = GeminiCli()
