"""What a hook host is to loopwarden: the interface every host module (`hooks/hosts/`) implements.

A host reads its own hook input into a `HookInput` (the host-neutral facts: which stage of the
agent loop the hook is at, the session, the call and its result) and writes a `Reply` (what the
model, the person and the session are to get) in its own output format. Its capabilities say
what it can do: end batches, name sub-agents, ask the person, stop the session from a
before-tool hook. Everything else — the event a stage becomes, which verdict gets which reply, the
asked calls, the batches — is host-neutral (protocol, driver) and written once.

This module imports nothing of loopwarden's at run time, so host modules and the protocol both
build on it.
"""
from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from ..hookinstall.spec import HookConfig


class Stage(enum.Enum):
    """Where in the agent loop a hook fires, whatever its host calls it."""

    BEFORE_TOOL = "before_tool"  # a call is about to run: the one stage a deny applies to
    AFTER_TOOL = "after_tool"  # a call ran and returned a result
    TOOL_FAILED = "tool_failed"  # a call ran and failed with an error
    BATCH_END = "batch_end"  # every call of a model turn has resolved
    COMPACT = "compact"  # the host compacts its context
    MODEL_OUTPUT = "model_output"  # the model wrote a message or a thought; the turn goes on
    STOP = "stop"  # the turn is about to end on the model's final answer (a stop hook)
    USER_PROMPT = "user_prompt"  # a person sent a new prompt: a user turn
    SESSION_END = "session_end"
    SUBAGENT_START = "subagent_start"
    SUBAGENT_STOP = "subagent_stop"  # a sub-agent ends on its final answer
    PERMISSION_DENIED = "permission_denied"  # the host reports a call it denied


# What kind of model output a hook saw (ModelOutput.output_kind, by its event-format name).
OutputKind = Literal["message", "thought", "final_answer"]


class HookPayloadError(ValueError):
    """A hook input that is not what the host documents; the message names the field."""


@dataclass(frozen=True, slots=True)
class HookInput:
    """One hook input as its host read it: strings checked, under the host's own field names."""

    stage: Stage
    session_id: str
    subagent: str = ""  # the sub-agent that made the hook (hosts that report sub-agents)
    agent_type: str = ""
    prompt_id: str = ""
    tool_name: str = ""
    tool_input: Any = None  # a JSON value (None: the host sent none)
    tool_use_id: str = ""
    tool_response: Any = None  # a JSON value
    error: str = ""
    duration_ms: int = 0
    # What the model wrote (MODEL_OUTPUT, STOP, SUBAGENT_STOP): its text, or instead a stable name
    # of it (`output_digest`, compared for equality only) where the host hands over no text.
    output_text: str = ""
    output_digest: str = ""
    output_kind: OutputKind = "message"
    # A stop hook already kept this turn going at least once (Claude Code and Codex
    # `stop_hook_active`, Gemini CLI's AfterAgent retry, Cursor's `loop_count` > 0).
    stop_hook_active: bool = False


@dataclass(frozen=True, slots=True)
class Reply:
    """What a hook's answer says, before a host spells it: refuse the call (`deny`, the reason the
    model reads), hold it for the person (`ask`), `context` for the model, a `note` for the person,
    `stop` the session with a reason. Empty: the host's default (the call runs, nothing shown)."""

    deny: str | None = None
    ask: str | None = None
    context: str = ""
    note: str = ""
    stop: str | None = None

    def __bool__(self) -> bool:
        return any((self.deny is not None, self.ask is not None, self.context, self.note, self.stop is not None))


class HookHost:
    """One agent host's hook protocol. A host module defines a subclass and one instance, `HOST`,
    which `hooks/hosts/__init__.py` registers."""

    name: ClassVar[str]  # the endpoint path segment (`/v1/hooks/NAME`) and the command argument
    title: ClassVar[str]  # as people write it
    # The events this host has that loopwarden reads, by the host's own names.
    stages: ClassVar[Mapping[str, Stage]]
    # Capabilities. ends_batches: the host says when a model turn's calls have all resolved.
    # reports_subagents: its inputs name the sub-agent that made them (child runs). can_ask: it can
    # hold a call for the person and reports the person's "yes" by the call's id. stops_before_tool:
    # its before-tool answer can end the session (else an abort there only denies the call).
    ends_batches: ClassVar[bool] = False
    reports_subagents: ClassVar[bool] = False
    can_ask: ClassVar[bool] = False
    stops_before_tool: ClassVar[bool] = True
    # Where the host keeps its hook config, for `loopwarden install-hooks` (None: not installable).
    install: ClassVar[HookConfig | None] = None

    @property
    def integration(self) -> str:
        """The `integration` metric label of events that came through this host's hooks."""
        return self.name.replace("-", "_")

    @property
    def has_user_turns(self) -> bool:
        """The host says when a person sends a new prompt (which lifts the session's blocks); a
        host without it can only lift them with a new session."""
        return Stage.USER_PROMPT in self.stages.values()

    def stage_of(self, hook_event_name: str) -> Stage | None:
        return self.stages.get(hook_event_name)

    def is_before_tool(self, hook_event_name: str) -> bool:
        """The host's name of a before-a-tool-runs event (the one a deny applies to)."""
        return self.stage_of(hook_event_name) is Stage.BEFORE_TOOL

    @property
    def before_tool_events(self) -> tuple[str, ...]:
        return tuple(name for name, stage in self.stages.items() if stage is Stage.BEFORE_TOOL)

    def event_name(self, payload: Mapping[str, Any]) -> str:
        """The hook's event name in its input."""
        return string(payload, "hook_event_name")

    def read(self, hook_event_name: str, payload: Mapping[str, Any]) -> HookInput:
        """The input of one of this host's `stages` events. HookPayloadError names a missing field."""
        raise NotImplementedError

    def accepts_ask(self, tool_use_id: str) -> bool:
        """Whether this before-tool call may be answered ASK: the host can ask and names the call."""
        return self.can_ask and bool(tool_use_id)

    def render(self, reply: Reply, hook_event_name: str) -> dict[str, Any]:
        """The hook's JSON output saying `reply`, for the host's event `hook_event_name`."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<hook host {self.name}>"


def string(payload: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    """A string field of a hook input; HookPayloadError names it when it is missing or not a string."""
    value = payload.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        got = "nothing" if value is None else type(value).__name__
        raise HookPayloadError(f"{key} must be a string, got {got}")
    return value


def duration_ms(value: Any, key: str = "duration_ms") -> int:
    """An optional duration of a finished call in milliseconds (ToolOutcome.duration_ms)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 2**63:
        raise HookPayloadError(f"{key} must be a non-negative number of milliseconds, got {value!r}")
    return round(value)


def flag(payload: Mapping[str, Any], key: str) -> bool:
    """An optional boolean field of a hook input (absent: false); HookPayloadError names it when it
    is not a boolean."""
    value = payload.get(key, False)
    if not isinstance(value, bool):
        raise HookPayloadError(f"{key} must be a boolean, got {type(value).__name__}")
    return value


def json_value(payload: Mapping[str, Any], key: str) -> Any:
    """A JSON value a host may send as an object or as its JSON text (Cursor's MCP hooks send
    `tool_input` and `result_json` as strings): the object, so both spellings hash alike."""
    value = payload.get(key)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
