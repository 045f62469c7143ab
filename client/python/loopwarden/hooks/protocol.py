"""Agent hook payloads <-> loopwarden events and verdicts, for Claude Code and Codex.

Pure mapping, shared by the daemon's HTTP endpoints (`POST /v1/hooks/claude-code`, `/codex`)
and the command form (`loopwarden hook claude-code|codex`): `parse` turns one hook input into
the event to evaluate, `answer` turns the verdict into the hook's JSON output.

The shapes follow the hosts' own definitions: Claude Code's `PreToolUseHookInput`,
`PostToolUseHookInput`, `PostToolUseFailureHookInput`, `PostToolBatchHookInput`,
`PreCompactHookInput`, `SessionEndHookInput`, `UserPromptSubmitHookInput` and `SyncHookJSONOutput` (the Claude Agent SDK's
sdk.d.ts), and Codex's hook schemas (codex-rs/hooks: pre-tool-use, post-tool-use, pre-compact).

Claude Code's `PostToolBatch` fires once after every call of a model turn has resolved: it is no
event to evaluate (its answer is `{}`) but the end of a parallel batch. `parse` only reads which
batch scope a hook belongs to (`HookRequest.session_id`, `.subagent`); grouping the calls of one
batch under one `ToolCall.batch_id` needs state across hooks, so it is the daemon's endpoint's job
(loopwarden_server.hook_batches), not this stateless mapping's. Codex has no such event.

Claude Code's `UserPromptSubmit` (a person sent a new prompt; its `prompt_id`, when present, is
carried along) is a `user_turn` of the session's run: the run starts fresh for loop detection, so
a call blocked before the prompt runs again after it. Its answer is always `{}` (loopwarden never
holds up a prompt; an aborted run's next tool call is still denied).

Both hosts:

- run the call unless a hook denies it, so an ALLOW answers `{}`: loopwarden never says
  `permissionDecision: "allow"`, which would skip the host's own permission rules and prompts;
- show `additionalContext` to the model and `systemMessage` to the user, which is how an
  announced warning reaches both (unannounced warnings stay silent: spec section 6);
- take `permissionDecision: "deny"` with `permissionDecisionReason` as a denied call whose reason
  the model reads: that is a BLOCK, and the blocked call is reported as its own outcome, as the
  tool guard does;
- stop the session on `continue: false` with a `stopReason`. Codex refuses `continue`/`stopReason`
  in a PreToolUse answer (the whole answer would be dropped as invalid), so an ABORT there only
  denies the call; every later call of the run is denied the same way, and the PostToolUse that
  reports the loop's outcome stops the session.
"""
from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..eventformat import EventKind, EventRecord, json_text

INTEGRATION_HEADER = "x-loopwarden-integration"


class Dialect(str, enum.Enum):
    """A host's hook protocol; the value is the endpoint path segment and the command argument."""

    CLAUDE_CODE = "claude-code"
    CODEX = "codex"

    @property
    def integration(self) -> str:
        """The `integration` metric label of events that came through this host's hooks."""
        return self.value.replace("-", "_")

    @property
    def ends_batches(self) -> bool:
        """The host says when a model turn's tool calls have all resolved (Claude Code's
        PostToolBatch); Codex has no such hook."""
        return self is Dialect.CLAUDE_CODE


class HookPayloadError(ValueError):
    """A hook input that is not what the host documents; the message names the field."""


class VerdictLike(Protocol):
    """What `answer` reads of a verdict: the client's `loopwarden.Verdict` and the daemon's own."""

    action: Any  # an Action enum (str values "allow" … "reject") or the plain string
    message: str
    announce: bool
    error_code: str


PRE_TOOL_USE = "PreToolUse"
POST_TOOL_USE = "PostToolUse"
POST_TOOL_USE_FAILURE = "PostToolUseFailure"
POST_TOOL_BATCH = "PostToolBatch"
PRE_COMPACT = "PreCompact"
SESSION_END = "SessionEnd"
USER_PROMPT_SUBMIT = "UserPromptSubmit"

# The hook events each host has that loopwarden reads (Codex has no failure event, no batch end and
# no session end).
_EVENTS = {
    Dialect.CLAUDE_CODE: frozenset({PRE_TOOL_USE, POST_TOOL_USE, POST_TOOL_USE_FAILURE, POST_TOOL_BATCH, PRE_COMPACT,
                                    SESSION_END, USER_PROMPT_SUBMIT}),
    Dialect.CODEX: frozenset({PRE_TOOL_USE, POST_TOOL_USE, PRE_COMPACT}),
}


@dataclass(frozen=True, slots=True)
class HookRequest:
    """One hook input, read: the event to evaluate (None: an event loopwarden does not evaluate,
    which gets the empty answer). `session_id` and `subagent` (Claude Code's `agent_id`, present
    only inside a subagent, whose turns are batches of their own) say whose batch the hook is in."""

    dialect: Dialect
    hook_event_name: str
    event: EventRecord | None = None
    session_id: str = ""
    subagent: str = ""

    @property
    def before_tool(self) -> bool:
        return self.hook_event_name == PRE_TOOL_USE

    @property
    def ends_batch(self) -> bool:
        """Claude Code's PostToolBatch: every call issued since the last one has resolved."""
        return self.hook_event_name == POST_TOOL_BATCH and self.dialect.ends_batches

    @property
    def ends_session(self) -> bool:
        return self.hook_event_name == SESSION_END and self.event is not None

    def in_batch(self, batch_id: str) -> HookRequest:
        """This PreToolUse with its call sent under `batch_id` (ToolCall.batch_id)."""
        if not self.before_tool or self.event is None:
            raise ValueError(f"only a PreToolUse call joins a batch, not {self.hook_event_name}")
        return replace(self, event=replace(self.event, batch_id=batch_id))

    def blocked_outcome(self, verdict: VerdictLike) -> EventRecord | None:
        """After a BLOCK of this call: the outcome to report, the blocked result the model got
        instead (spec section 6), so the run's history holds the blocked call like the guard's."""
        if not self.before_tool or self.event is None or _action(verdict) != "block":
            return None
        from ..runner import blocked_tool_result  # the one spelling of the blocked result

        call = self.event
        return EventRecord(EventKind.TOOL_OUTCOME, run_id=call.run_id, agent_id=call.agent_id,
                           session_id=call.session_id, tool_name=call.tool_name, tool_call_id=call.tool_call_id,
                           params_json=call.params_json, result_json=json_text(blocked_tool_result(verdict)))


def _string(payload: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    value = payload.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        got = "nothing" if value is None else type(value).__name__
        raise HookPayloadError(f"{key} must be a string, got {got}")
    return value


def parse(dialect: Dialect, payload: Any, *, agent_id: str = "") -> HookRequest:
    """Read one hook input (the decoded JSON). The run is the hook's `session_id`.

    HookPayloadError names the field when a mapped event lacks what its host always sends."""
    if not isinstance(payload, Mapping):
        raise HookPayloadError(f"the hook input must be a JSON object, got {type(payload).__name__}")
    name = _string(payload, "hook_event_name")
    if name not in _EVENTS[dialect]:
        return HookRequest(dialect, name)
    session_id = _string(payload, "session_id")
    if not session_id.strip():
        raise HookPayloadError("session_id must not be blank: it names the run")
    common = {"run_id": session_id, "agent_id": agent_id, "session_id": session_id}
    subagent = _string(payload, "agent_id", required=False) if dialect is Dialect.CLAUDE_CODE else ""
    scope = {"session_id": session_id, "subagent": subagent}
    if name == POST_TOOL_BATCH:
        return HookRequest(dialect, name, **scope)
    if name == PRE_COMPACT:
        return HookRequest(dialect, name, EventRecord(EventKind.COMPACTION_RETRY, **common), **scope)
    if name == SESSION_END:
        return HookRequest(dialect, name, EventRecord(EventKind.RUN_END, **common), **scope)
    if name == USER_PROMPT_SUBMIT:
        prompt_id = _string(payload, "prompt_id", required=False)
        return HookRequest(dialect, name, EventRecord(EventKind.USER_TURN, **common, prompt_id=prompt_id), **scope)
    tool = {"tool_name": _string(payload, "tool_name"),
            "tool_call_id": _string(payload, "tool_use_id", required=False),
            "params_json": json_text(payload.get("tool_input", {}))}
    if name == PRE_TOOL_USE:
        return HookRequest(dialect, name, EventRecord(EventKind.TOOL_CALL, **common, **tool), **scope)
    if name == POST_TOOL_USE:
        return HookRequest(dialect, name, EventRecord(EventKind.TOOL_OUTCOME, **common, **tool,
                                                      result_json=json_text(payload.get("tool_response"))), **scope)
    return HookRequest(dialect, name, EventRecord(EventKind.TOOL_OUTCOME, **common, **tool,
                                                  error=_string(payload, "error")), **scope)


def _action(verdict: VerdictLike) -> str:
    return str(getattr(verdict.action, "value", verdict.action))


def _message(verdict: VerdictLike) -> str:
    """The verdict's message for the model and the user; an abort also names its error code."""
    message = verdict.message or verdict.error_code
    if verdict.error_code and verdict.error_code not in message:
        message = f"{message} ({verdict.error_code})"
    return message


def _deny(reason: str) -> dict[str, Any]:
    return {"hookEventName": PRE_TOOL_USE, "permissionDecision": "deny", "permissionDecisionReason": reason}


def answer(request: HookRequest, verdict: VerdictLike) -> dict[str, Any]:
    """The hook's JSON output for the verdict on `request.event`."""
    action = _action(verdict)
    message = _message(verdict)
    if request.hook_event_name == USER_PROMPT_SUBMIT:
        return {}  # a new prompt is never held up (an aborted run's next call is denied)
    if not request.before_tool:
        # PostToolUse(Failure), PreCompact: only an ABORT has something to say.
        return {"continue": False, "stopReason": message} if action == "abort" else {}
    if action == "block":
        return {"hookSpecificOutput": _deny(message)}
    if action == "abort":
        if request.dialect is Dialect.CODEX:
            return {"hookSpecificOutput": _deny(message), "systemMessage": f"loopwarden: {message}"}
        return {"hookSpecificOutput": _deny(message), "continue": False, "stopReason": message}
    if action == "warn" and verdict.announce:
        return {"hookSpecificOutput": {"hookEventName": PRE_TOOL_USE, "additionalContext": message},
                "systemMessage": f"loopwarden: {message}"}
    return {}  # ALLOW, an unannounced WARN, a REJECT (the call runs unguarded)


def unavailable_answer(request: HookRequest, reason: str, *, fail_closed: bool) -> dict[str, Any]:
    """The answer when the daemon could not decide (unreachable, busy, draining): the call runs
    (the user is told it was not checked) unless the operator chose fail-closed."""
    if not request.before_tool:
        return {}
    if fail_closed:
        return {"hookSpecificOutput": _deny(
            f"loopwarden could not check this call ({reason}) and is set to fail closed, so it was not run.")}
    return {"systemMessage": f"loopwarden: {reason}; this call ran without a loop check."}
