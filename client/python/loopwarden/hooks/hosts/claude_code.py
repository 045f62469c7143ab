"""Claude Code's hooks: the shapes of the Claude Agent SDK's sdk.d.ts (`PreToolUseHookInput`,
`PostToolUseHookInput`, `PostToolUseFailureHookInput`, `PostToolBatchHookInput`,
`PreCompactHookInput`, `SessionEndHookInput`, `UserPromptSubmitHookInput`, `StopHookInput`,
`SubagentStart`/`Stop`, `PermissionDenied`, and the answer `SyncHookJSONOutput`).

Claude Code ends batches (`PostToolBatch` fires once every call of a model turn has resolved),
names sub-agents (`agent_id`, `agent_type`), and can hold a call for the person
(`permissionDecision: "ask"`; the asked call's later PostToolUse is the person's "yes",
`PermissionDenied` a "no"). Its answer: `hookSpecificOutput` (`permissionDecision` "deny" / "ask"
with `permissionDecisionReason`, or `additionalContext` for the model), `systemMessage` for the
person, and `continue: false` with a `stopReason` to end the session. loopwarden never answers
`permissionDecision: "allow"`, which would skip the host's own permission rules and prompts.

`Stop` and `SubagentStop` carry the model's final answer (`last_assistant_message`) and whether a
stop hook already kept the turn going (`stop_hook_active`). There a stop hook's `decision: "block"`
and its `additionalContext` both KEEP the session going, so loopwarden answers neither: a stop
loop is ended with `continue: false` and a warning is only shown (`systemMessage`). Claude Code
2.1.332 ignores `continue: false` at PreCompact and PostCompact, so a compaction storm's abort ends
the session at its next tool call or stop.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ...hookinstall.spec import ALL_TOOLS, Event, HookConfig
from ..host import HookHost, HookInput, Reply, Stage, duration_ms, flag, string

STAGES: Mapping[str, Stage] = {
    "PreToolUse": Stage.BEFORE_TOOL, "PostToolUse": Stage.AFTER_TOOL, "PostToolUseFailure": Stage.TOOL_FAILED,
    "PostToolBatch": Stage.BATCH_END, "PreCompact": Stage.COMPACT, "SessionEnd": Stage.SESSION_END,
    "UserPromptSubmit": Stage.USER_PROMPT, "SubagentStart": Stage.SUBAGENT_START,
    "SubagentStop": Stage.SUBAGENT_STOP, "PermissionDenied": Stage.PERMISSION_DENIED, "Stop": Stage.STOP,
}


class ClaudeCode(HookHost):
    name = "claude-code"
    title = "Claude Code"
    stages = STAGES
    ends_batches = True
    reports_subagents = True
    can_ask = True
    # The field naming the prompt a UserPromptSubmit starts.
    prompt_key: ClassVar[str] = "prompt_id"

    install = HookConfig(
        project_file=".claude/settings.json", user_dir_env="CLAUDE_CONFIG_DIR", user_dir=".claude",
        user_file="settings.json",
        events=(
            Event("PreToolUse", ALL_TOOLS, before_tool=True),
            Event("PostToolUse", ALL_TOOLS),
            Event("PostToolUseFailure", ALL_TOOLS),
            Event("PostToolBatch", compiled_only=True),
            Event("PreCompact"),
            Event("UserPromptSubmit"),
            Event("SessionEnd"),
            Event("SubagentStart"),
            Event("SubagentStop"),
            Event("PermissionDenied", ALL_TOOLS),
            Event("Stop"),  # the final answer, and a stop hook keeping the turn going
        ),
        # A hook that cannot run blocks the call, as an exit code 2 would (Claude Agent SDK types).
        fail_closed_key=("onFailure", "block"),
        plugins_key="enabledPlugins",
    )

    def read(self, hook_event_name: str, payload: Mapping[str, Any]) -> HookInput:
        stage = self.stages[hook_event_name]
        fields: dict[str, Any] = {
            "session_id": string(payload, "session_id"),
            "subagent": string(payload, "agent_id", required=False),
            "agent_type": string(payload, "agent_type", required=False),
        }
        if stage is Stage.USER_PROMPT:
            fields["prompt_id"] = string(payload, self.prompt_key, required=False)
        elif stage in (Stage.STOP, Stage.SUBAGENT_STOP):
            # last_assistant_message is optional (none: the turn ended on no text) and may be null.
            fields.update(output_text=string(payload, "last_assistant_message", required=False),
                          output_kind="final_answer", stop_hook_active=flag(payload, "stop_hook_active"))
        elif stage in (Stage.BEFORE_TOOL, Stage.AFTER_TOOL, Stage.TOOL_FAILED, Stage.PERMISSION_DENIED):
            fields["tool_use_id"] = string(payload, "tool_use_id", required=False)
            if stage is not Stage.PERMISSION_DENIED:
                fields.update(tool_name=string(payload, "tool_name"), tool_input=payload.get("tool_input", {}))
            if stage is Stage.AFTER_TOOL:
                fields["tool_response"] = payload.get("tool_response")
            elif stage is Stage.TOOL_FAILED:
                fields["error"] = string(payload, "error")
            if stage in (Stage.AFTER_TOOL, Stage.TOOL_FAILED):
                fields["duration_ms"] = duration_ms(payload.get("duration_ms"))
        return HookInput(stage, **fields)

    def accepts_ask(self, tool_use_id: str) -> bool:
        return True  # every PreToolUse of Claude Code can be asked

    def render(self, reply: Reply, hook_event_name: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if reply.deny is not None:
            out["hookSpecificOutput"] = {"hookEventName": hook_event_name, "permissionDecision": "deny",
                                         "permissionDecisionReason": reply.deny}
        elif reply.ask is not None:
            out["hookSpecificOutput"] = {"hookEventName": hook_event_name, "permissionDecision": "ask",
                                         "permissionDecisionReason": reply.ask}
        elif reply.context:
            out["hookSpecificOutput"] = {"hookEventName": hook_event_name, "additionalContext": reply.context}
        if reply.stop is not None and (self.stops_before_tool or not self.is_before_tool(hook_event_name)):
            out.update({"continue": False, "stopReason": reply.stop})  # the reason is the person's note
        elif reply.note:
            out["systemMessage"] = reply.note
        return out


HOST = ClaudeCode()
