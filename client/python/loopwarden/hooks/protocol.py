"""Agent hook payloads <-> loopwarden events and verdicts, for Claude Code, Codex, Gemini CLI and Cursor.

Pure mapping, shared by the daemon's HTTP endpoints (`POST /v1/hooks/claude-code`, `/codex`,
`/gemini-cli`, `/cursor`) and the command form (`loopwarden hook claude-code|codex|gemini-cli|cursor`):
`parse` turns one hook input into the event to evaluate, `answer` turns the verdict into the hook's
JSON output.

The shapes follow the hosts' own definitions: Claude Code's `PreToolUseHookInput`,
`PostToolUseHookInput`, `PostToolUseFailureHookInput`, `PostToolBatchHookInput`,
`PreCompactHookInput`, `SessionEndHookInput`, `UserPromptSubmitHookInput` and `SyncHookJSONOutput`
(the Claude Agent SDK's sdk.d.ts), and Codex's hook schemas (codex-rs/hooks/schema/generated:
pre-tool-use, post-tool-use, pre-compact, user-prompt-submit, subagent-start) and its hook runtime
(codex-rs/core/src/hook_runtime.rs).

Claude Code's `PostToolBatch` fires once after every call of a model turn has resolved: it is no
event to evaluate (its answer is `{}`) but the end of a parallel batch. `parse` only reads which
batch scope a hook belongs to (`HookRequest.session_id`, `.subagent`); grouping the calls of one
batch under one `ToolCall.batch_id` needs state across hooks, so it is the daemon's endpoint's job
(loopwarden_server.hook_batches), not this stateless mapping's. Codex has no such event.

`UserPromptSubmit` (a person sent a new prompt; Claude Code's `prompt_id` or Codex's `turn_id`, the
turn the prompt starts, is carried along as the prompt id) is a `user_turn` of the session's run:
the run starts fresh for loop detection, so a call blocked before the prompt runs again after it.
Its answer is always `{}` (loopwarden never holds up a prompt; an aborted run's next tool call is
still denied). Codex has the event, so a user turn is never inferred from a change of `turn_id`.

Sub-agents are child runs (run trees): a Claude Code or Codex hook input with `agent_id` (a call
made inside a sub-agent; Codex's is the child thread's id, openai/codex #22882, and its `session_id`
is the root session's for every thread, #22268) is an event of the run `<session_id>/<agent_id>`
(`child_run_id`) whose `parent_run_id` is the session's run, so each sub-agent keeps its own history
and a stuck one warns its parent (`child_stopped`). Both hosts' session ids are UUIDs (no "/"), so a
child's run id is never another session's. The child's `session_id` field (logs and inspection only)
carries the sub-agent's `agent_type`, the one thing its run id does not say; the config agent stays
the hook's (`?agent=` / `--agent`) for the whole tree. `SubagentStart` creates the child (a
`user_turn` of it: no tool call counted) and Claude Code's `SubagentStop` ends it (`run_end`); both
are answered `{}`. Codex's `SubagentStop` ends one turn of the sub-agent, which `send_input` can
start again, so it ends nothing: a Codex child run is freed with the idle TTL, as Codex's session
runs are (Codex has no SessionEnd). A Codex `UserPromptSubmit` with `agent_id` (user input to the
sub-agent's thread: hook_runtime.rs runs it with the sub-agent's identity) is a user turn of the
child. Every event of a session is routed by the tree's root, the session's run
(`HookRequest.root_run_id`).

ASK: Claude Code can hold a call for the person (`permissionDecision: "ask"`), so its PreToolUse
events carry `accepts_ask`; an ASK verdict is answered `permissionDecision: "ask"` with the
verdict's message as `permissionDecisionReason` (shown in the prompt). Codex has no ask (its parser
refuses `permissionDecision: "ask"`): its events never carry `accepts_ask`, and every denial of a
call that could not be asked (Codex's, Gemini CLI's, Cursor's per-kind hooks') ends with
ASK_THE_USER, which tells the model to put the question to the person; the person's reply is a new
prompt, a user turn that lifts the block. Claude Code's answer to an ask is no hook of its own: the
asked call's later `PostToolUse` (or `PostToolUseFailure`: it ran) means "approved once", and
`PermissionDenied` (a denial Claude Code reports) "denied". Many denials reach no hook (a headless
session's unanswerable ask, dontAsk, an interactive "No"), so an ask the run has visibly moved on
from (its batch ended, the same call asked again, a new prompt) is declined too. Which calls were
asked needs memory across hooks, so the caller keeps it (the daemon's endpoint in memory,
loopwarden_server.hook_asks; `loopwarden hook` on disk, asked_calls) and asks
`HookRequest.approval` and `HookRequest.declined` for the events to send ahead of the hook's own.

Both hosts:

- run the call unless a hook denies it, so an ALLOW answers `{}`: loopwarden never says
  `permissionDecision: "allow"`, which would skip the host's own permission rules and prompts;
- show `additionalContext` to the model and `systemMessage` to the user, which is how an
  announced warning reaches both (unannounced warnings stay silent: spec section 6). Codex's
  `codex exec` prints no hook message at all, so there only the model gets it: Codex has no
  channel for it (docs/integrations/codex.md, "What `codex exec` shows you");
- take `permissionDecision: "deny"` with `permissionDecisionReason` as a denied call whose reason
  the model reads: that is a BLOCK, and the blocked call is reported as its own outcome, as the
  tool guard does;
- take `permissionDecision: "ask"` (Claude Code only) as "ask the person before running it": ASK;
- stop the session on `continue: false` with a `stopReason`. Codex refuses `continue`/`stopReason`
  in a PreToolUse answer (the whole answer would be dropped as invalid), so an ABORT there only
  denies the call; every later call of the run is denied the same way, and the PostToolUse that
  reports the loop's outcome stops the session.

Gemini CLI and Cursor hooks follow the same pattern under other names. `parse` translates their
input into its Claude Code twin (Gemini CLI: BeforeTool, AfterTool, PreCompress, BeforeAgent,
SessionEnd; Cursor: preToolUse / beforeShellExecution / beforeMCPExecution, postToolUse /
afterShellExecution / afterMCPExecution, postToolUseFailure, preCompact, beforeSubmitPrompt,
sessionEnd) and `answer` writes the verdict in the host's own output (Gemini CLI: `decision` /
`reason` / `continue` / `systemMessage`; Cursor: `permission` / `agent_message` / `user_message`,
`additional_context` after a tool). Cursor can ask (`permission: "ask"`) when its input names the
call (`tool_use_id`, the generic tool hooks), whose later postToolUse is the person's "yes";
Gemini CLI's hook input names no call, so it is never asked: its denials tell the model to ask the
person, as Codex's do. Cursor's before-tool answer has no `continue`, so an ABORT there denies, as
Codex's. Neither has child runs: Gemini CLI 0.61.0 runs its sub-agents' tools through the session's
hooks with nothing naming the sub-agent (so they count in the session's run), and a Cursor
sub-agent's hooks come from a conversation of its own (its own run) that names no parent; their
subagentStart/subagentStop, fired in the parent's conversation, do not name the child's.
"""
from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..eventformat import EventKind, EventRecord, json_text
from .reduction import DEFAULT_LIMIT_BYTES, Reduction, bounded_json, bounded_text

INTEGRATION_HEADER = "x-loopwarden-integration"
# Appended to every denial (BLOCK, or an ASK, which the engine gives such events as the BLOCK) of a
# call whose hook cannot ask the person: the model is told to put the question to the person
# itself. Their reply is a new prompt, a user turn, which lifts the block for the same call.
ASK_THE_USER = ("If this call still has to run, ask the user whether it should, and try it again only after "
                "they reply.")


class Dialect(str, enum.Enum):
    """A host's hook protocol; the value is the endpoint path segment and the command argument."""

    CLAUDE_CODE = "claude-code"
    CODEX = "codex"
    GEMINI_CLI = "gemini-cli"
    CURSOR = "cursor"

    @property
    def integration(self) -> str:
        """The `integration` metric label of events that came through this host's hooks."""
        return self.value.replace("-", "_")

    @property
    def ends_batches(self) -> bool:
        """The host says when a model turn's tool calls have all resolved (Claude Code's
        PostToolBatch); Codex has no such hook."""
        return self is Dialect.CLAUDE_CODE

    @property
    def reports_subagents(self) -> bool:
        """The host's hook inputs name the sub-agent that made them (`agent_id`): Claude Code's and
        Codex's. Gemini CLI's name none; a Cursor sub-agent's hooks come from a conversation of its
        own (its own run) that names no parent."""
        return self in (Dialect.CLAUDE_CODE, Dialect.CODEX)

    @property
    def can_ask(self) -> bool:
        """The host can hold a call for the person and reports the person's "yes" by the call's
        id (Claude Code's tool_use_id, Cursor's): loopwarden may answer ASK."""
        return self in (Dialect.CLAUDE_CODE, Dialect.CURSOR)


class HookPayloadError(ValueError):
    """A hook input that is not what the host documents; the message names the field."""


class VerdictLike(Protocol):
    """What `answer` reads of a verdict: the client's `loopwarden.Verdict` and the daemon's own.
    Read-only members, so a frozen dataclass's fields satisfy them."""

    @property
    def action(self) -> Any: ...  # an Action enum (str values "allow" … "reject") or the plain string
    @property
    def message(self) -> str: ...
    @property
    def announce(self) -> bool: ...
    @property
    def error_code(self) -> str: ...
    @property
    def detector(self) -> str: ...  # these two: the blocked result (runner.blocked_tool_result)
    @property
    def count(self) -> int: ...


PRE_TOOL_USE = "PreToolUse"
POST_TOOL_USE = "PostToolUse"
POST_TOOL_USE_FAILURE = "PostToolUseFailure"
POST_TOOL_BATCH = "PostToolBatch"
PRE_COMPACT = "PreCompact"
SESSION_END = "SessionEnd"
USER_PROMPT_SUBMIT = "UserPromptSubmit"
SUBAGENT_START = "SubagentStart"
SUBAGENT_STOP = "SubagentStop"
PERMISSION_DENIED = "PermissionDenied"

# The hook events each host has that loopwarden reads (Codex has no failure event, no batch end,
# no session end and no ask; its SubagentStop ends a sub-agent's turn, not the sub-agent).
_EVENTS = {
    Dialect.CLAUDE_CODE: frozenset({PRE_TOOL_USE, POST_TOOL_USE, POST_TOOL_USE_FAILURE, POST_TOOL_BATCH, PRE_COMPACT,
                                    SESSION_END, USER_PROMPT_SUBMIT, SUBAGENT_START, SUBAGENT_STOP,
                                    PERMISSION_DENIED}),
    Dialect.CODEX: frozenset({PRE_TOOL_USE, POST_TOOL_USE, PRE_COMPACT, USER_PROMPT_SUBMIT, SUBAGENT_START}),
}
# Hooks after which an asked call is settled: it ran (the person approved it), or it was denied.
_SETTLES_ASK = {POST_TOOL_USE: True, POST_TOOL_USE_FAILURE: True, PERMISSION_DENIED: False}


def host_seq(kind: EventKind, tool_use_id: str) -> int:
    """The seq of an event of a call the host names (`tool_use_id`): the call, its outcome, the
    approval of its ask. Every delivery of one host event carries the same seq and
    the same content, which is the contract's retry: Claude Code running both the plugin's hooks
    and the ones `install-hooks` wrote, Cursor running Claude Code's hooks beside its own, or a hook
    retried after a timeout is answered with the first delivery's verdict and counted once. 0 (no
    dedup) for an event of no named call: a prompt's id is no such name (Codex keeps a turn's id for
    a prompt that steers the running turn, a new user turn all the same), and a user turn delivered
    twice only starts the run fresh twice."""
    if not tool_use_id:
        return 0
    digest = hashlib.blake2b(f"{kind.value}\0{tool_use_id}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") or 1


def child_run_id(session_id: str, agent_id: str) -> str:
    """The run of a Claude Code or Codex sub-agent: a child of the session's run."""
    return f"{session_id}/{agent_id}"


@dataclass(frozen=True, slots=True)
class HookRun:
    """The run a hook belongs to: the session's, or a sub-agent's child run of it."""

    run_id: str
    parent_run_id: str = ""
    agent_id: str = ""  # the config agent (the hook's ?agent= / --agent)
    session_id: str = ""  # Event.session_id: the session id; a sub-agent's agent_type

    def event(self, kind: EventKind, **fields: Any) -> EventRecord:
        seq = host_seq(kind, fields.get("tool_call_id", ""))
        return EventRecord(kind, run_id=self.run_id, parent_run_id=self.parent_run_id, agent_id=self.agent_id,
                           session_id=self.session_id, seq=seq, **fields)


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
    run: HookRun | None = None  # the run of the hook's event (None: a hook of no run)
    tool_call_id: str = ""  # a tool hook's tool_use_id
    reduced: tuple[Reduction, ...] = ()  # fields over the event limits, judged by their stand-in (reduction)
    host_event_name: str = ""  # Gemini CLI's / Cursor's own name when hook_event_name is its Claude Code twin

    @property
    def before_tool(self) -> bool:
        return self.hook_event_name == PRE_TOOL_USE

    @property
    def root_run_id(self) -> str:
        """The run tree's root, the session's run: the routing header of all the session's events."""
        return self.session_id

    @property
    def ends_subagent(self) -> bool:
        return self.hook_event_name == SUBAGENT_STOP and self.event is not None

    @property
    def settles_ask(self) -> bool | None:
        """After this hook an asked call of its tool_use_id is settled: True (it ran: approved),
        False (denied), None (this hook says nothing about it)."""
        if not self.dialect.can_ask or not self.tool_call_id or self.run is None:
            return None  # Codex and Gemini CLI are never asked
        return _SETTLES_ASK.get(self.hook_event_name)

    @property
    def call(self) -> tuple[str, str] | None:
        """A PreToolUse's call as the host named it, (tool name, input as JSON text): what tells
        the same call asked again under another tool_use_id."""
        if not self.before_tool or self.event is None:
            return None
        return self.event.tool_name, self.event.params_json

    @property
    def declines_every_ask(self) -> bool:
        """After this hook no earlier ask of its run can still be answered: the run's batch
        ended (a call that ran sent its PostToolUse first) or a new prompt came."""
        return self.ends_batch or (self.event is not None and self.event.kind is EventKind.USER_TURN)

    def asked(self, verdict: VerdictLike) -> bool:
        """The verdict on this PreToolUse holds the call for the person: remember its tool_use_id,
        whose later PostToolUse or PermissionDenied is the person's answer."""
        return self.before_tool and bool(self.tool_call_id) and _action(verdict) == "ask"

    def approval(self, approved: bool) -> EventRecord:
        """The approval event of this hook's asked call (once: the next critical asks again), to be
        sent ahead of the hook's own event."""
        if self.run is None or not self.tool_call_id:
            raise ValueError(f"{self.hook_event_name} names no call to approve")
        return self.run.event(EventKind.APPROVAL, tool_call_id=self.tool_call_id, approved=approved, scope="once")

    def declined(self, tool_call_ids: Sequence[str]) -> tuple[EventRecord, ...]:
        """The approvals that deny asks of this hook's run its host never answered (the caller
        knows which: its asks that this hook shows the run has moved on from), to be sent ahead of
        the hook's own event."""
        if self.run is None:
            return ()
        return tuple(self.run.event(EventKind.APPROVAL, tool_call_id=call, approved=False, scope="once")
                     for call in tool_call_ids)

    def events(self, *approvals: EventRecord | None) -> tuple[EventRecord, ...]:
        """What to send for this hook, in order: the approvals of asked calls (when the caller
        knows the calls were asked), then the hook's own event."""
        return tuple(event for event in (*approvals, self.event) if event is not None)

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
        return EventRecord(EventKind.TOOL_OUTCOME, run_id=call.run_id, parent_run_id=call.parent_run_id,
                           agent_id=call.agent_id, session_id=call.session_id,
                           seq=host_seq(EventKind.TOOL_OUTCOME, call.tool_call_id), tool_name=call.tool_name,
                           tool_call_id=call.tool_call_id, params_json=call.params_json,
                           result_json=json_text(blocked_tool_result(verdict)))


def _string(payload: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    value = payload.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        got = "nothing" if value is None else type(value).__name__
        raise HookPayloadError(f"{key} must be a string, got {got}")
    return value


def _duration_ms(payload: Mapping[str, Any]) -> int:
    """Claude Code's optional `duration_ms` of a finished call (ToolOutcome.duration_ms)."""
    value = payload.get("duration_ms")
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 2**63:
        raise HookPayloadError(f"duration_ms must be a non-negative number of milliseconds, got {value!r}")
    return round(value)


def _run(dialect: Dialect, payload: Mapping[str, Any], name: str, session_id: str, agent_id: str) -> HookRun:
    """The session's run, or for a sub-agent's hook (Claude Code's or Codex's `agent_id`) its child
    run. SessionEnd ends the session, whoever sends it."""
    subagent = _string(payload, "agent_id", required=False) if dialect.reports_subagents else ""
    if name in (SUBAGENT_START, SUBAGENT_STOP) and not subagent.strip():
        raise HookPayloadError(f"agent_id must not be blank in {name}: it names the sub-agent")
    if not subagent.strip() or name == SESSION_END:
        return HookRun(session_id, agent_id=agent_id, session_id=session_id)
    agent_type = _string(payload, "agent_type", required=False)
    return HookRun(child_run_id(session_id, subagent), parent_run_id=session_id, agent_id=agent_id,
                   session_id=agent_type or session_id)


# Gemini CLI's hook events (its docs/hooks/reference.md and HookEventName in @google/gemini-cli
# 0.61.0) and their Claude Code twins. Gemini CLI has no tool call id, no failure event (a failed
# call is an AfterTool whose tool_response carries `error`) and no sub-agents.
_GEMINI_EVENTS = {"BeforeTool": PRE_TOOL_USE, "AfterTool": POST_TOOL_USE, "PreCompress": PRE_COMPACT,
                  "BeforeAgent": USER_PROMPT_SUBMIT, "SessionEnd": SESSION_END}
GEMINI_BEFORE_TOOL = "BeforeTool"

# Cursor's agent hooks (cursor.com/docs/agent/hooks, `.cursor/hooks.json` version 1). The generic
# preToolUse/postToolUse/postToolUseFailure cover every tool; beforeShellExecution/afterShellExecution
# and beforeMCPExecution/afterMCPExecution are the older per-kind pair. A hooks.json should name one
# family, not both: a call reported by both would count twice.
CURSOR_SHELL_TOOL = "Shell"  # the name Cursor's generic tool hooks give the shell tool
_CURSOR_EVENTS = {"preToolUse": PRE_TOOL_USE, "beforeShellExecution": PRE_TOOL_USE, "beforeMCPExecution": PRE_TOOL_USE,
                  "postToolUse": POST_TOOL_USE, "afterShellExecution": POST_TOOL_USE,
                  "afterMCPExecution": POST_TOOL_USE, "postToolUseFailure": POST_TOOL_USE_FAILURE,
                  "preCompact": PRE_COMPACT, "beforeSubmitPrompt": USER_PROMPT_SUBMIT, "sessionEnd": SESSION_END}
CURSOR_BEFORE_TOOL = frozenset(name for name, twin in _CURSOR_EVENTS.items() if twin == PRE_TOOL_USE)


def _json_object(payload: Mapping[str, Any], key: str) -> Any:
    """A JSON value the host may send as an object or as its JSON text (Cursor's MCP hooks send
    `tool_input` and `result_json` as strings): the object, so both spellings hash alike."""
    import json

    value = payload.get(key)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _gemini(name: str, payload: Mapping[str, Any]) -> dict[str, Any] | None:
    twin = _GEMINI_EVENTS.get(name)
    if twin is None:
        return None
    out: dict[str, Any] = {"hook_event_name": twin, "session_id": payload.get("session_id")}
    if twin == USER_PROMPT_SUBMIT or twin in (PRE_COMPACT, SESSION_END):
        return out
    out.update(tool_name=payload.get("tool_name"), tool_input=payload.get("tool_input", {}))
    if twin == POST_TOOL_USE:
        response = payload.get("tool_response")
        error = response.get("error") if isinstance(response, Mapping) else None
        if error:  # a failed call: its error is the outcome, as Claude Code's PostToolUseFailure
            message = error.get("message") if isinstance(error, Mapping) else error
            out.update(hook_event_name=POST_TOOL_USE_FAILURE, error=str(message or error))
        else:  # what the model reads of the result (returnDisplay is the terminal's copy)
            content = response.get("llmContent") if isinstance(response, Mapping) else response
            if payload.get("tool_name") == GEMINI_SHELL_TOOL and isinstance(content, str):
                content = _without_process_ids(content)
            out["tool_response"] = content
    return out


# Gemini CLI's shell tool ends what the model reads with the process ids of the call (its
# packages/core/src/tools/shell.ts: "Background PIDs: …", "Process Group PGID: N"), new every call:
# kept, they would make every repetition of a command a different outcome, and an identical shell
# loop would be warned but never blocked. Only those trailing lines go; the output stays.
GEMINI_SHELL_TOOL = "run_shell_command"
_PROCESS_ID_LINE = re.compile(r"(?:Process Group PGID|Background PIDs): [0-9, ]+")
# Gemini CLI may wrap tool output for the model (`<untrusted_context>` … `</untrusted_context>`):
# the id lines sit before such closing tags.
_CLOSING_TAG = re.compile(r"\s*</[A-Za-z_]+>\s*")


def _without_process_ids(content: str) -> str:
    lines = content.split("\n")
    end = len(lines)
    while end > 1 and (not lines[end - 1].strip() or _CLOSING_TAG.fullmatch(lines[end - 1])):
        end -= 1
    start = end
    while start > 1 and _PROCESS_ID_LINE.fullmatch(lines[start - 1]):
        start -= 1
    return "\n".join(lines[:start] + lines[end:])


def _cursor(name: str, payload: Mapping[str, Any]) -> dict[str, Any] | None:
    twin = _CURSOR_EVENTS.get(name)
    if twin is None:
        return None  # stop, subagentStart/Stop, beforeReadFile, afterFileEdit, ...: not evaluated
    # Every Cursor hook input carries conversation_id, the agent conversation (the run).
    out: dict[str, Any] = {"hook_event_name": twin, "session_id": _string(payload, "conversation_id")}
    if twin in (USER_PROMPT_SUBMIT, PRE_COMPACT, SESSION_END):
        return out
    if name in ("beforeShellExecution", "afterShellExecution"):
        # The shell pair has no tool_name/tool_input: the command is the call.
        out.update(tool_name=CURSOR_SHELL_TOOL, tool_input={"command": _string(payload, "command")})
        if name == "afterShellExecution":
            out["tool_response"] = payload.get("output")
        return out
    out.update(tool_name=payload.get("tool_name"), tool_input=_json_object(payload, "tool_input") or {},
               tool_use_id=payload.get("tool_use_id"))
    if payload.get("duration") is not None:
        out["duration_ms"] = payload.get("duration")
    if name == "postToolUse":
        out["tool_response"] = _json_object(payload, "tool_output")
    elif name == "afterMCPExecution":
        out["tool_response"] = _json_object(payload, "result_json")
    elif name == "postToolUseFailure":
        out["error"] = _string(payload, "error_message")
    return out


_TRANSLATE = {Dialect.GEMINI_CLI: _gemini, Dialect.CURSOR: _cursor}


def parse(dialect: Dialect, payload: Any, *, agent_id: str = "", max_params_bytes: int = DEFAULT_LIMIT_BYTES,
          max_result_bytes: int = DEFAULT_LIMIT_BYTES) -> HookRequest:
    """Read one hook input (the decoded JSON). The run is the hook's `session_id`, or a
    sub-agent's child run of it. A `tool_input` over `max_params_bytes`, or a `tool_response` or
    `error` over `max_result_bytes` (the daemon's event limits), is reduced to its stand-in
    (reduction), named in `HookRequest.reduced`.

    HookPayloadError names the field when a mapped event lacks what its host always sends."""
    if not isinstance(payload, Mapping):
        raise HookPayloadError(f"the hook input must be a JSON object, got {type(payload).__name__}")
    if dialect in _TRANSLATE:
        host_name = _string(payload, "hook_event_name")
        translated = _TRANSLATE[dialect](host_name, payload)
        if translated is None:
            return HookRequest(dialect, host_name)
        request = parse(Dialect.CLAUDE_CODE, translated,
                        agent_id=agent_id, max_params_bytes=max_params_bytes, max_result_bytes=max_result_bytes)
        accepts_ask = dialect.can_ask and bool(request.tool_call_id)
        if request.event is not None and request.event.kind is EventKind.TOOL_CALL:
            request = replace(request, event=replace(request.event, accepts_ask=accepts_ask))
        return replace(request, dialect=dialect, host_event_name=host_name)
    name = _string(payload, "hook_event_name")
    if name not in _EVENTS[dialect]:
        return HookRequest(dialect, name)
    session_id = _string(payload, "session_id")
    if not session_id.strip():
        raise HookPayloadError("session_id must not be blank: it names the run")
    run = _run(dialect, payload, name, session_id, agent_id)
    subagent = _string(payload, "agent_id", required=False) if dialect.reports_subagents else ""
    scope: dict[str, Any] = {"session_id": session_id, "subagent": subagent, "run": run}
    if name == POST_TOOL_BATCH:
        return HookRequest(dialect, name, **scope)
    if name == PRE_COMPACT:
        return HookRequest(dialect, name, run.event(EventKind.COMPACTION_RETRY), **scope)
    if name in (SESSION_END, SUBAGENT_STOP):
        return HookRequest(dialect, name, run.event(EventKind.RUN_END), **scope)
    if name == SUBAGENT_START:
        # Creates the child run (its parent set) without counting a tool call; a sub-agent started
        # again under the same agent_id gets a new instruction, which a user turn is.
        return HookRequest(dialect, name, run.event(EventKind.USER_TURN), **scope)
    if name == USER_PROMPT_SUBMIT:
        # Codex's turn_id names the turn the prompt starts (a prompt steering a running turn keeps
        # its id): the prompt id Claude Code spells prompt_id.
        prompt_id = _string(payload, "turn_id" if dialect is Dialect.CODEX else "prompt_id", required=False)
        return HookRequest(dialect, name, run.event(EventKind.USER_TURN, prompt_id=prompt_id), **scope)
    tool_call_id = _string(payload, "tool_use_id", required=False)
    scope["tool_call_id"] = tool_call_id
    if name == PERMISSION_DENIED:
        return HookRequest(dialect, name, **scope)  # an approval, when the call was asked; else nothing
    params_json, params_reduced = bounded_json("tool_input", json_text(payload.get("tool_input", {})),
                                               max_params_bytes)
    tool = {"tool_name": _string(payload, "tool_name"), "tool_call_id": tool_call_id, "params_json": params_json}
    scope["reduced"] = tuple(r for r in (params_reduced,) if r is not None)
    if name == PRE_TOOL_USE:
        accepts_ask = dialect is Dialect.CLAUDE_CODE  # Claude Code can ask the person; Codex cannot
        return HookRequest(dialect, name, run.event(EventKind.TOOL_CALL, **tool, accepts_ask=accepts_ask), **scope)
    duration_ms = _duration_ms(payload)
    if name == POST_TOOL_USE:
        outcome, reduced = bounded_json("tool_response", json_text(payload.get("tool_response")), max_result_bytes)
        outcome_fields = {"result_json": outcome}
    else:
        error, reduced = bounded_text("error", _string(payload, "error"), max_result_bytes)
        outcome_fields = {"error": error}
    scope["reduced"] += tuple(r for r in (reduced,) if r is not None)
    return HookRequest(dialect, name, run.event(EventKind.TOOL_OUTCOME, **tool, duration_ms=duration_ms,
                                                **outcome_fields), **scope)


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


def answer(request: HookRequest, verdict: VerdictLike | None, *, fail_closed: bool = False) -> dict[str, Any]:
    """The hook's JSON output for the verdict on `request.event` (None: the hook had no event).

    A REJECT (the daemon refused the event: tool_input nested too deep, a NaN, an over-long id)
    judged nothing, so it is answered like a daemon that could not decide (`refused_answer`): the
    call runs with the reason shown, or is denied when `fail_closed`."""
    if verdict is not None and _action(verdict) == "reject" and request.event is not None:
        return refused_answer(request.dialect, request.host_event_name or request.hook_event_name,
                              refusal_reason(verdict), fail_closed=fail_closed)
    return _in_host_format(request.dialect, request.before_tool, request.hook_event_name,
                           _claude_answer(request, verdict))


def refusal_reason(verdict: VerdictLike) -> str:
    """What the user (and, denied, the model) is told about a REJECT: the daemon's message and code."""
    return f"the daemon refused this hook event: {_message(verdict) or 'no reason given'}"


# The hook's event name in a body that could not be parsed (hosts send it near the top).
_EVENT_NAME = re.compile(rb'"hook_event_name"\s*:\s*"([A-Za-z]{1,64})"')


def event_name_in(raw: bytes) -> str:
    """The hook's event name as read from raw input that could not be parsed ("" if absent)."""
    found = _EVENT_NAME.search(raw)
    return found.group(1).decode() if found else ""


def refused_answer(dialect: Dialect, hook_event_name: str, reason: str, *, fail_closed: bool) -> dict[str, Any]:
    """The answer to a hook event loopwarden could not judge although the daemon answered (it
    refused the event, or the input could not be read as the host's hook JSON): before a tool, the
    call is denied when fail-closed, else it runs with the reason shown to the user; any other
    event tells the user it was not checked. `hook_event_name` is the host's own name."""
    return unchecked_answer(dialect, hook_event_name, reason, fail_closed=fail_closed)


def _claude_answer(request: HookRequest, verdict: VerdictLike | None) -> dict[str, Any]:
    if verdict is None or request.hook_event_name in (USER_PROMPT_SUBMIT, SUBAGENT_STOP, PERMISSION_DENIED):
        # A new prompt is never held up (an aborted run's next call is denied); a sub-agent is
        # never kept running; a denial is only reported.
        return {}
    action = _action(verdict)
    message = _message(verdict)
    if request.hook_event_name == SUBAGENT_START:
        # The child was refused (tree_too_deep, too_many_children): the sub-agent is told at once;
        # its calls are denied.
        if action != "abort":
            return {}
        return {"hookSpecificOutput": {"hookEventName": SUBAGENT_START, "additionalContext": message},
                "systemMessage": f"loopwarden: {message}"}
    if not request.before_tool:
        # PostToolUse(Failure), PreCompact: only an ABORT has something to say.
        return {"continue": False, "stopReason": message} if action == "abort" else {}
    if action == "ask" and request.event is not None and request.event.accepts_ask:
        return {"hookSpecificOutput": {"hookEventName": PRE_TOOL_USE, "permissionDecision": "ask",
                                       "permissionDecisionReason": message}}
    if action in ("ask", "block"):  # an ASK here is one this hook cannot ask: the BLOCK it stands for
        can_ask = request.event is not None and request.event.accepts_ask
        return {"hookSpecificOutput": _deny(message if can_ask else f"{message} {ASK_THE_USER}")}
    if action == "abort":
        if request.dialect in (Dialect.CODEX, Dialect.CURSOR):  # no continue/stopReason before a tool
            return {"hookSpecificOutput": _deny(message), "systemMessage": f"loopwarden: {message}"}
        return {"hookSpecificOutput": _deny(message), "continue": False, "stopReason": message}
    if action == "warn" and verdict.announce:
        return {"hookSpecificOutput": {"hookEventName": PRE_TOOL_USE, "additionalContext": message},
                "systemMessage": f"loopwarden: {message}"}
    return {}  # ALLOW, an unannounced WARN (a REJECT never gets here: `answer` says it was not checked)


def unremembered_ask_answer(verdict: VerdictLike, reason: str,
                            dialect: Dialect = Dialect.CLAUDE_CODE) -> dict[str, Any]:
    """The answer to an ASK whose call cannot be remembered for the person's answer (the command
    form's state dir is unusable): the call is denied, as it would be without ASK, since an
    approval that could not be reported would later count as a denial anyway."""
    return _in_host_format(dialect, True, PRE_TOOL_USE, {"hookSpecificOutput": _deny(
        f"{_message(verdict)} (loopwarden could not keep this question open for you: {reason}; the call was "
        "denied instead)")})


def unchecked_answer(dialect: Dialect, hook_event_name: str, reason: str, *, fail_closed: bool) -> dict[str, Any]:
    """The answer to a hook input the daemon will not read (over `--hooks-max-body-bytes`), of
    which only the event's name is known: a PreToolUse gets the unavailable answer (the call runs
    with a note to the user, or is denied when fail-closed); any other event (its call has already
    run, or the name could not be read) tells the user that it was not checked."""
    if is_before_tool(dialect, hook_event_name):
        return unavailable_answer(HookRequest(dialect, PRE_TOOL_USE), reason, fail_closed=fail_closed)
    return _in_host_format(dialect, False, hook_event_name,
                           {"systemMessage": f"loopwarden: {reason}; this hook event was not checked."})


def is_before_tool(dialect: Dialect, hook_event_name: str) -> bool:
    """The host's name of its before-a-tool-runs event (the one a deny applies to)."""
    if dialect is Dialect.GEMINI_CLI:
        return hook_event_name == GEMINI_BEFORE_TOOL
    if dialect is Dialect.CURSOR:
        return hook_event_name in CURSOR_BEFORE_TOOL
    return hook_event_name == PRE_TOOL_USE


def unavailable_answer(request: HookRequest, reason: str, *, fail_closed: bool) -> dict[str, Any]:
    """The answer when the daemon could not decide (unreachable, busy, draining): the call runs
    (the user is told it was not checked) unless the operator chose fail-closed."""
    if not request.before_tool:
        return {}
    out: dict[str, Any]
    if fail_closed:
        out = {"hookSpecificOutput": _deny(
            f"loopwarden could not check this call ({reason}) and is set to fail closed, so it was not run.")}
    else:
        out = {"systemMessage": f"loopwarden: {reason}; this call ran without a loop check."}
    return _in_host_format(request.dialect, True, PRE_TOOL_USE, out)


def _in_host_format(dialect: Dialect, before_tool: bool, hook_event_name: str, out: dict[str, Any]) -> dict[str, Any]:
    """Claude Code's answer (which Codex shares) in Gemini CLI's or Cursor's own output format."""
    if dialect in (Dialect.CLAUDE_CODE, Dialect.CODEX) or not out:
        return out
    specific = out.get("hookSpecificOutput", {})
    decision = specific.get("permissionDecision")
    reason = specific.get("permissionDecisionReason", "")
    context = specific.get("additionalContext", "")
    note = out.get("systemMessage", "")
    stop = out.get("stopReason", "") if out.get("continue") is False else ""
    if dialect is Dialect.GEMINI_CLI:
        # BeforeTool: decision "deny" + reason (the model reads it as the tool's error); continue:
        # false + stopReason ends the agent loop (BeforeTool and AfterTool); systemMessage is the
        # user's. Gemini CLI 0.61.0 reads hookSpecificOutput.additionalContext after a tool only, so
        # a warning before one reaches the user (systemMessage); it is passed as context as well.
        gemini: dict[str, Any] = {}
        if decision in ("deny", "ask"):
            gemini.update(decision="deny", reason=reason)
        if context:
            gemini["hookSpecificOutput"] = {"additionalContext": context}
        if stop:
            gemini.update({"continue": False, "stopReason": stop})
        if note:
            gemini["systemMessage"] = note
        return gemini
    # Cursor: before a tool, `permission` ("deny" / "ask"; never "allow", which would skip Cursor's
    # own approval rules) with `agent_message` for the model and `user_message` for the person.
    # After a tool, `additional_context` reaches the model; a compaction can only tell the user.
    if before_tool:
        cursor: dict[str, Any] = {}
        if decision in ("deny", "ask"):
            cursor.update(permission=decision, agent_message=reason, user_message=f"loopwarden: {reason}")
        elif context:
            cursor.update(agent_message=context, user_message=note or f"loopwarden: {context}")
        elif note:
            cursor["user_message"] = note
        return cursor
    message = stop or context or note
    if not message:
        return {}
    if _CURSOR_EVENTS.get(hook_event_name, hook_event_name) in (POST_TOOL_USE, POST_TOOL_USE_FAILURE):
        return {"additional_context": message}
    return {"user_message": message if message.startswith("loopwarden") else f"loopwarden: {message}"}
