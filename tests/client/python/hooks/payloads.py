"""The hook inputs the tests send, as Claude Code and Codex document them: one builder per event.

Claude Code's shapes are its SDK's `*HookInput` types (test_claude_code_types.py type-checks
every builder's output against them with tsc); Codex's follow its hook schemas
(codex-rs/hooks/schema/generated/*.command.input.schema.json: pre-tool-use, post-tool-use,
pre-compact, stop, user-prompt-submit, subagent-start, subagent-stop) and the optional `agent_id` /
`agent_type` its hook runtime adds to a thread-spawned sub-agent's hooks (codex-rs/core/src/
hook_runtime.rs, `thread_spawn_subagent_hook_context`; openai/codex #22882).
"""
from __future__ import annotations

from typing import Any

COMMAND = "ls -la"
BASH_RESPONSE = {"stdout": "total 0\n", "stderr": "", "interrupted": False, "isImage": False}


def _claude_base(session_id: str, event: str) -> dict[str, Any]:
    return {"session_id": session_id, "transcript_path": f"/home/dev/.claude/projects/demo/{session_id}.jsonl",
            "cwd": "/home/dev/demo", "permission_mode": "default", "hook_event_name": event}


def claude_pre_tool_use(session_id: str, tool_use_id: str, command: str = COMMAND) -> dict[str, Any]:
    return {**_claude_base(session_id, "PreToolUse"), "tool_name": "Bash",
            "tool_input": {"command": command, "description": "List the files"}, "tool_use_id": tool_use_id}


def claude_post_tool_use(session_id: str, tool_use_id: str, command: str = COMMAND,
                         response: Any = None) -> dict[str, Any]:
    return {**_claude_base(session_id, "PostToolUse"), "tool_name": "Bash",
            "tool_input": {"command": command, "description": "List the files"},
            "tool_response": BASH_RESPONSE if response is None else response, "tool_use_id": tool_use_id,
            "duration_ms": 12}


def claude_post_tool_use_failure(session_id: str, tool_use_id: str, error: str) -> dict[str, Any]:
    return {**_claude_base(session_id, "PostToolUseFailure"), "tool_name": "Bash",
            "tool_input": {"command": COMMAND, "description": "List the files"}, "tool_use_id": tool_use_id,
            "error": error}


def claude_post_tool_batch(session_id: str, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The end of a parallel batch: `calls` are the batch's PostToolUse inputs (default: one Bash call)."""
    calls = [claude_post_tool_use(session_id, "toolu_1")] if calls is None else calls
    return {**_claude_base(session_id, "PostToolBatch"), "tool_calls": [
        {key: call[key] for key in ("tool_name", "tool_input", "tool_use_id", "tool_response")} for call in calls]}


def claude_pre_compact(session_id: str) -> dict[str, Any]:
    return {**_claude_base(session_id, "PreCompact"), "trigger": "auto", "custom_instructions": None}


def claude_session_end(session_id: str) -> dict[str, Any]:
    return {**_claude_base(session_id, "SessionEnd"), "reason": "prompt_input_exit"}


def claude_user_prompt_submit(session_id: str, prompt: str, prompt_id: str | None = None) -> dict[str, Any]:
    """A new prompt from the person (Claude Code's UserPromptSubmitHookInput; `prompt_id` is the
    base input's optional field)."""
    body = {**_claude_base(session_id, "UserPromptSubmit"), "prompt": prompt, "source": "user"}
    return body if prompt_id is None else {**body, "prompt_id": prompt_id}


def in_subagent(payload: dict[str, Any], agent_id: str, agent_type: str = "general-purpose") -> dict[str, Any]:
    """A hook input as Claude Code sends it from inside a sub-agent (BaseHookInput's agent_id/agent_type)."""
    return {**payload, "agent_id": agent_id, "agent_type": agent_type}


def claude_subagent_start(session_id: str, agent_id: str, agent_type: str = "general-purpose") -> dict[str, Any]:
    return {**_claude_base(session_id, "SubagentStart"), "agent_id": agent_id, "agent_type": agent_type}


def claude_subagent_stop(session_id: str, agent_id: str, agent_type: str = "general-purpose", *,
                         message: str | None = "Done.", stop_hook_active: bool = False) -> dict[str, Any]:
    """A sub-agent ending on its final answer (`message`; None: the input has none)."""
    body = {**_claude_base(session_id, "SubagentStop"), "stop_hook_active": stop_hook_active, "agent_id": agent_id,
            "agent_transcript_path": f"/home/dev/.claude/projects/demo/{session_id}/subagents/{agent_id}.jsonl",
            "agent_type": agent_type}
    return body if message is None else {**body, "last_assistant_message": message}


def claude_stop(session_id: str, message: str | None = "All done.", *, stop_hook_active: bool = False) -> dict[str, Any]:
    """The turn about to end on the model's final answer (StopHookInput; `message` None: the input
    has no last_assistant_message), as Claude Code 2.1.332 sends it."""
    body = {**_claude_base(session_id, "Stop"), "stop_hook_active": stop_hook_active, "background_tasks": [],
            "session_crons": []}
    return body if message is None else {**body, "last_assistant_message": message}


def claude_permission_denied(session_id: str, tool_use_id: str, command: str = COMMAND,
                             reason: str = "The user denied this action") -> dict[str, Any]:
    """A denied call (auto mode, dontAsk, a headless session's unanswerable ask)."""
    return {**_claude_base(session_id, "PermissionDenied"), "tool_name": "Bash",
            "tool_input": {"command": command, "description": "List the files"}, "tool_use_id": tool_use_id,
            "reason": reason}


def claude_session_start(session_id: str) -> dict[str, Any]:
    """An event loopwarden does not map: answered with the empty answer."""
    return {**_claude_base(session_id, "SessionStart"), "source": "startup", "model": "claude-sonnet-4-5"}


def _codex_base(session_id: str, event: str, turn_id: str = "turn-1") -> dict[str, Any]:
    return {"session_id": session_id, "turn_id": turn_id, "transcript_path": None, "cwd": "/home/dev/demo",
            "hook_event_name": event, "model": "gpt-5-codex", "permission_mode": "default"}


def codex_pre_tool_use(session_id: str, tool_use_id: str, command: str = COMMAND) -> dict[str, Any]:
    return {**_codex_base(session_id, "PreToolUse"), "tool_name": "Bash", "tool_input": {"command": command},
            "tool_use_id": tool_use_id}


def codex_post_tool_use(session_id: str, tool_use_id: str, command: str = COMMAND) -> dict[str, Any]:
    return {**_codex_base(session_id, "PostToolUse"), "tool_name": "Bash", "tool_input": {"command": command},
            "tool_response": "total 0\n", "tool_use_id": tool_use_id}


def codex_pre_compact(session_id: str) -> dict[str, Any]:
    base = _codex_base(session_id, "PreCompact")
    del base["permission_mode"]  # the pre-compact input has none
    return {**base, "trigger": "auto"}


def codex_stop(session_id: str, message: str | None = "Done.", *, stop_hook_active: bool = False) -> dict[str, Any]:
    """A turn about to end on its final answer (stop.command.input: last_assistant_message is
    required and nullable)."""
    return {**_codex_base(session_id, "Stop"), "stop_hook_active": stop_hook_active,
            "last_assistant_message": message}


def codex_user_prompt_submit(session_id: str, prompt: str, turn_id: str = "turn-2") -> dict[str, Any]:
    """A prompt starting Codex turn `turn_id` (user-prompt-submit.command.input: prompt, turn_id)."""
    return {**_codex_base(session_id, "UserPromptSubmit", turn_id), "prompt": prompt}


def in_codex_subagent(payload: dict[str, Any], agent_id: str, agent_type: str = "explorer") -> dict[str, Any]:
    """A Codex hook input from inside a thread-spawned sub-agent: `agent_id` is the child thread's
    id, `agent_type` its role; `session_id` stays the root session's (openai/codex #22268)."""
    return {**payload, "agent_id": agent_id, "agent_type": agent_type}


def codex_subagent_start(session_id: str, agent_id: str, agent_type: str = "explorer") -> dict[str, Any]:
    return {**_codex_base(session_id, "SubagentStart"), "agent_id": agent_id, "agent_type": agent_type}


def codex_subagent_stop(session_id: str, agent_id: str, agent_type: str = "explorer", *,
                        stop_hook_active: bool = False) -> dict[str, Any]:
    """The end of one turn of a Codex sub-agent (it runs again on the parent's next send_input)."""
    return {**_codex_base(session_id, "SubagentStop"), "agent_id": agent_id, "agent_type": agent_type,
            "agent_transcript_path": f"/home/dev/.codex/sessions/{agent_id}.jsonl",
            "stop_hook_active": stop_hook_active, "last_assistant_message": "Done."}
