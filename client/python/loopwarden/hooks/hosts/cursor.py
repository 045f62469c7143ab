"""Cursor's agent hooks (cursor.com/docs/agent/hooks, `.cursor/hooks.json` version 1).

The generic preToolUse / postToolUse / postToolUseFailure cover every tool;
beforeShellExecution / afterShellExecution and beforeMCPExecution / afterMCPExecution are the
older per-kind pair. A hooks.json should name one family, not both: a call reported by both would
count twice. Every input carries `conversation_id`, the agent conversation (the run); a Cursor
sub-agent's hooks come from a conversation of its own that names no parent, so it is a run of its
own. Cursor can ask (`permission: "ask"`) when its input names the call (`tool_use_id`, the
generic tool hooks): the call's later postToolUse is the person's "yes".

Its answer before a tool: `permission` ("deny" / "ask"; never "allow", which would skip Cursor's
own approval rules) with `agent_message` for the model and `user_message` for the person; it has
no `continue` there, so an abort only denies. After a tool, `additional_context` reaches the
model; a compaction or a prompt can only tell the person (`user_message`).

What the model wrote: afterAgentResponse (`text`, a message) and afterAgentThought (`text`, a
thought) are fire-and-forget, their answers unread; `stop` (the agent loop ends; `loop_count`,
how many times a stop hook's `followup_message` already kept it going) carries no text, so it is
judged as a final answer named by its `generation_id` (never equal to another turn's), with
`stop_hook_active` when `loop_count` > 0. Its answer has only `followup_message`, which would keep
the loop going: loopwarden answers `{}` there, so a stop loop's abort takes effect at the
conversation's next tool call (denied), and Cursor's own `loop_limit` bounds the loop meanwhile.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...hookinstall.spec import Event, HookConfig
from ..host import (
    HookHost, HookInput, HookPayloadError, OutputKind, Reply, Stage, duration_ms, json_value, string,
)

STAGES: Mapping[str, Stage] = {
    "preToolUse": Stage.BEFORE_TOOL, "beforeShellExecution": Stage.BEFORE_TOOL,
    "beforeMCPExecution": Stage.BEFORE_TOOL, "postToolUse": Stage.AFTER_TOOL,
    "afterShellExecution": Stage.AFTER_TOOL, "afterMCPExecution": Stage.AFTER_TOOL,
    "postToolUseFailure": Stage.TOOL_FAILED, "preCompact": Stage.COMPACT,
    "beforeSubmitPrompt": Stage.USER_PROMPT, "sessionEnd": Stage.SESSION_END,
    "afterAgentResponse": Stage.MODEL_OUTPUT, "afterAgentThought": Stage.MODEL_OUTPUT, "stop": Stage.STOP,
}
SHELL_TOOL = "Shell"  # the name Cursor's generic tool hooks give the shell tool


class Cursor(HookHost):
    name = "cursor"
    title = "Cursor"
    stages = STAGES
    can_ask = True
    stops_before_tool = False

    install = HookConfig(
        project_file=".cursor/hooks.json", user_dir_env=None, user_dir=".cursor", user_file="hooks.json",
        events=(
            Event("preToolUse", before_tool=True),
            Event("postToolUse"),
            Event("postToolUseFailure"),
            Event("preCompact"),
            Event("beforeSubmitPrompt"),
            Event("sessionEnd"),
            Event("afterAgentResponse"),
            Event("afterAgentThought"),
            Event("stop"),
        ),
        grouped=False,
        timeout=None,  # the entry's documented fields are `command` (and failClosed)
        skeleton={"version": 1},
        fail_closed_key=("failClosed", True),
    )

    def read(self, hook_event_name: str, payload: Mapping[str, Any]) -> HookInput:
        stage = self.stages[hook_event_name]
        session_id = string(payload, "conversation_id")
        if stage is Stage.MODEL_OUTPUT:
            kind: OutputKind = "thought" if hook_event_name == "afterAgentThought" else "message"
            return HookInput(stage, session_id, output_text=string(payload, "text"), output_kind=kind)
        if stage is Stage.STOP:
            loops = payload.get("loop_count", 0)
            if isinstance(loops, bool) or not isinstance(loops, int) or loops < 0:
                raise HookPayloadError(f"loop_count must be a non-negative integer, got {loops!r}")
            generation = string(payload, "generation_id", required=False)
            # No text: the turn is named by its generation (or its place in the loop without one).
            digest = f"cursor-generation:{generation}" if generation else f"cursor-stop:{session_id}:{loops}"
            return HookInput(stage, session_id, output_digest=digest, output_kind="final_answer",
                             stop_hook_active=loops > 0)
        if stage not in (Stage.BEFORE_TOOL, Stage.AFTER_TOOL, Stage.TOOL_FAILED):
            return HookInput(stage, session_id)
        if hook_event_name in ("beforeShellExecution", "afterShellExecution"):
            # The shell pair has no tool_name/tool_input: the command is the call.
            command = {"command": string(payload, "command")}
            return HookInput(stage, session_id, tool_name=SHELL_TOOL, tool_input=command,
                             tool_response=payload.get("output") if stage is Stage.AFTER_TOOL else None)
        fields: dict[str, Any] = {"tool_name": string(payload, "tool_name"),
                                  "tool_input": json_value(payload, "tool_input") or {},
                                  "tool_use_id": string(payload, "tool_use_id", required=False),
                                  "duration_ms": duration_ms(payload.get("duration"), "duration")}
        if hook_event_name == "postToolUse":
            fields["tool_response"] = json_value(payload, "tool_output")
        elif hook_event_name == "afterMCPExecution":
            fields["tool_response"] = json_value(payload, "result_json")
        elif stage is Stage.TOOL_FAILED:
            fields["error"] = string(payload, "error_message")
        return HookInput(stage, session_id, **fields)

    def render(self, reply: Reply, hook_event_name: str) -> dict[str, Any]:
        stage = self.stage_of(hook_event_name)
        if stage is Stage.BEFORE_TOOL:
            out: dict[str, Any] = {}
            if reply.deny is not None or reply.ask is not None:
                decision, reason = ("deny", reply.deny) if reply.deny is not None else ("ask", reply.ask)
                out.update(permission=decision, agent_message=reason, user_message=f"loopwarden: {reason}")
            elif reply.context:
                out.update(agent_message=reply.context, user_message=reply.note or f"loopwarden: {reply.context}")
            elif reply.note:
                out["user_message"] = reply.note
            return out
        if stage in (Stage.MODEL_OUTPUT, Stage.STOP):
            return {}  # unread after a response or a thought; at stop, only a follow-up (keep going)
        message = reply.stop or reply.context or reply.note
        if not message:
            return {}
        if stage in (Stage.AFTER_TOOL, Stage.TOOL_FAILED):
            return {"additional_context": message}
        return {"user_message": message if message.startswith("loopwarden") else f"loopwarden: {message}"}


HOST = Cursor()
