"""Gemini CLI and Cursor hook inputs, as their references document them: one builder per event.

Gemini CLI: `@google/gemini-cli` 0.61.0, bundle/docs/hooks/reference.md (base input: session_id,
transcript_path, cwd, hook_event_name, timestamp; BeforeTool/AfterTool: tool_name, tool_input,
AfterTool's tool_response {llmContent, returnDisplay, error?}; PreCompress: trigger; BeforeAgent:
prompt; SessionEnd: reason; AfterModel: llm_request, llm_response {text?, candidates, usageMetadata?}
as its hookTranslator writes it; AfterAgent: prompt, prompt_response, stop_hook_active). Cursor:
cursor.com/docs/agent/hooks (common input: conversation_id,
generation_id, model, hook_event_name, cursor_version, workspace_roots, user_email,
transcript_path; preToolUse/postToolUse/postToolUseFailure: tool_name, tool_input, tool_use_id,
tool_output / error_message; beforeShellExecution: command, cwd; beforeMCPExecution: tool_name,
tool_input as JSON text; preCompact, beforeSubmitPrompt: prompt, sessionEnd; afterAgentResponse:
text; afterAgentThought: text, duration_ms; stop: status, loop_count).
"""
from __future__ import annotations

import json
from typing import Any

GEMINI_SHELL = "run_shell_command"
GEMINI_INPUT = {"command": "ls -la", "description": "List the files"}
GEMINI_RESPONSE = {"llmContent": "total 0\n", "returnDisplay": "total 0\n"}
CURSOR_SHELL = "Shell"
CURSOR_INPUT = {"command": "ls -la"}
CURSOR_OUTPUT = json.dumps({"output": "total 0\n", "exitCode": 0})


def _gemini_base(session_id: str, event: str) -> dict[str, Any]:
    return {"session_id": session_id, "transcript_path": f"/home/dev/.gemini/tmp/demo/chats/{session_id}.json",
            "cwd": "/home/dev/demo", "hook_event_name": event, "timestamp": "2026-12-02T07:00:00.000Z"}


def gemini_before_tool(session_id: str, tool_input: dict | None = None) -> dict[str, Any]:
    return {**_gemini_base(session_id, "BeforeTool"), "tool_name": GEMINI_SHELL,
            "tool_input": GEMINI_INPUT if tool_input is None else tool_input}


def gemini_after_tool(session_id: str, response: dict | None = None) -> dict[str, Any]:
    return {**_gemini_base(session_id, "AfterTool"), "tool_name": GEMINI_SHELL, "tool_input": GEMINI_INPUT,
            "tool_response": GEMINI_RESPONSE if response is None else response}


def gemini_pre_compress(session_id: str) -> dict[str, Any]:
    return {**_gemini_base(session_id, "PreCompress"), "trigger": "auto"}


def gemini_after_model(session_id: str, text: str | None = "Working on it.", *, thought: str = "") -> dict[str, Any]:
    """One streamed chunk of the model's response: `text` its text without thoughts (None: a chunk
    of no text, e.g. a function call), `thought` a thought part of the same chunk."""
    parts = [part for part in (thought, text) if part]
    response: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
                                                "index": 0}],
                                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                                                  "totalTokenCount": 15}}
    if text is not None:
        response["text"] = text
    request = {"model": "gemini-2.5-pro", "messages": [{"role": "user", "content": "say done"}],
               "config": {"temperature": 1}}
    return {**_gemini_base(session_id, "AfterModel"), "llm_request": request, "llm_response": response}


def gemini_after_agent(session_id: str, response: str = "All done.", *, stop_hook_active: bool = False,
                       prompt: str = "say done") -> dict[str, Any]:
    return {**_gemini_base(session_id, "AfterAgent"), "prompt": prompt, "prompt_response": response,
            "stop_hook_active": stop_hook_active}


def gemini_before_agent(session_id: str, prompt: str = "try again") -> dict[str, Any]:
    return {**_gemini_base(session_id, "BeforeAgent"), "prompt": prompt}


def gemini_session_end(session_id: str) -> dict[str, Any]:
    return {**_gemini_base(session_id, "SessionEnd"), "reason": "exit"}


def _cursor_base(conversation_id: str, event: str) -> dict[str, Any]:
    return {"conversation_id": conversation_id, "generation_id": f"gen-{conversation_id}", "model": "default",
            "hook_event_name": event, "cursor_version": "2.4.0", "workspace_roots": ["/home/dev/demo"],
            "user_email": None, "transcript_path": None}


def cursor_pre_tool_use(conversation_id: str, tool_use_id: str, tool_input: dict | None = None) -> dict[str, Any]:
    return {**_cursor_base(conversation_id, "preToolUse"), "tool_name": CURSOR_SHELL,
            "tool_input": CURSOR_INPUT if tool_input is None else tool_input, "tool_use_id": tool_use_id,
            "cwd": "/home/dev/demo", "agent_message": ""}


def cursor_post_tool_use(conversation_id: str, tool_use_id: str) -> dict[str, Any]:
    return {**_cursor_base(conversation_id, "postToolUse"), "tool_name": CURSOR_SHELL, "tool_input": CURSOR_INPUT,
            "tool_output": CURSOR_OUTPUT, "tool_use_id": tool_use_id, "cwd": "/home/dev/demo", "duration": 12}


def cursor_post_tool_use_failure(conversation_id: str, tool_use_id: str, error: str) -> dict[str, Any]:
    return {**_cursor_base(conversation_id, "postToolUseFailure"), "tool_name": CURSOR_SHELL,
            "tool_input": CURSOR_INPUT, "tool_use_id": tool_use_id, "cwd": "/home/dev/demo",
            "error_message": error, "failure_type": "error", "duration": 12}


def cursor_before_shell_execution(conversation_id: str, command: str = "ls -la") -> dict[str, Any]:
    return {**_cursor_base(conversation_id, "beforeShellExecution"), "command": command, "cwd": "/home/dev/demo"}


def cursor_before_mcp_execution(conversation_id: str) -> dict[str, Any]:
    return {**_cursor_base(conversation_id, "beforeMCPExecution"), "tool_name": "get_issue",
            "tool_input": json.dumps({"owner": "acme", "repo": "app", "number": 7}), "url": "http://127.0.0.1:3000/mcp"}


def cursor_pre_compact(conversation_id: str) -> dict[str, Any]:
    return {**_cursor_base(conversation_id, "preCompact"), "trigger": "auto", "context_usage_percent": 91}


def cursor_before_submit_prompt(conversation_id: str, prompt: str = "try again") -> dict[str, Any]:
    return {**_cursor_base(conversation_id, "beforeSubmitPrompt"), "prompt": prompt, "attachments": []}


def cursor_session_end(conversation_id: str) -> dict[str, Any]:
    return {**_cursor_base(conversation_id, "sessionEnd"), "session_id": conversation_id,
            "reason": "completed", "duration_ms": 1000}


def cursor_stop(conversation_id: str, loop_count: int = 0, generation_id: str | None = None) -> dict[str, Any]:
    body = {**_cursor_base(conversation_id, "stop"), "status": "completed", "loop_count": loop_count}
    return body if generation_id is None else {**body, "generation_id": generation_id}


def cursor_after_agent_response(conversation_id: str, text: str = "Working on it.") -> dict[str, Any]:
    return {**_cursor_base(conversation_id, "afterAgentResponse"), "text": text}


def cursor_after_agent_thought(conversation_id: str, text: str = "Let me think.") -> dict[str, Any]:
    return {**_cursor_base(conversation_id, "afterAgentThought"), "text": text, "duration_ms": 500}
