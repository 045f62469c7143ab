"""The event format shared by every reader of events: JSONL traces, replay, `check`, hooks.

One event is a JSON object (a dict in Python):

    {"run_id": "r1", "seq": 3, "kind": "tool_outcome", "tool_name": "read",
     "tool_call_id": "c1", "params": {...} | "params_json": "...",
     "result": ... | "result_json": "..." | "error": "...", "duration_ms": 120,
     "agent_id": "...", "session_id": "...", "parent_run_id": "...", "accepts_ask": false}

plus, by kind: `user_turn` {"prompt_id"}; `usage` {"input_tokens", "output_tokens", "cost_usd",
"model"}; `approval` {"tool_call_id" | "decision_id", "approved", "scope": "once" | "always",
"ttl_seconds"}; `model_output` {"text" | "text_digest", "output_kind": "message" | "thought" |
"final_answer", "stop_hook_active", "usage": {"input_tokens", "output_tokens", "cost_usd",
"model"}} (its usage spelled out in the record as a usage event's fields).

`parse_event` is the only parser of that format. It checks types and spells the event out as an
`EventRecord` with JSON kept as text, exactly what the wire (and the engine) take, so the gRPC
client and the daemon's in-process replay build their events from the same record.

`EventKind` is the one place the event kinds are named.
"""
from __future__ import annotations

import enum
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._event_extra import ENVELOPE_EXTRA, KIND_EXTRA


class EventKind(str, enum.Enum):
    """The events a runner sends (the `kind` oneof of loopwarden.v1.Event)."""

    TOOL_CALL = "tool_call"
    TOOL_OUTCOME = "tool_outcome"
    COMPACTION_RETRY = "compaction_retry"
    RUN_END = "run_end"
    USER_TURN = "user_turn"
    USAGE = "usage"
    APPROVAL = "approval"
    MODEL_OUTPUT = "model_output"


EVENT_KINDS: tuple[str, ...] = tuple(kind.value for kind in EventKind)


class EventFormatError(ValueError):
    """An event dict that is not of the format; the message names the field."""


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One event, spelled out: the Event envelope's fields and every kind message's, once per name
    (generated from the proto; each names the messages that carry it). JSON is kept as text
    (`params_json` empty means {}); a tool outcome has at most one of `result_json` / `error`;
    `tool_class` and `scope` are spelled as the config spells them (TOOL_CLASSES,
    APPROVAL_SCOPES). `kind` is None when the dict named no kind we know: such an event is still
    sent (the daemon answers it with REJECT missing_event_kind), and `raw_kind` keeps what it said
    so a tool can report it."""

    kind: EventKind | None
    # generated:event-record:begin (proto/loopwarden/v1/loopwarden.proto: edit there, then `make tables`)
    run_id: str = ""  # Event
    agent_id: str = ""  # Event
    session_id: str = ""  # Event
    seq: int = 0  # Event
    parent_run_id: str = ""  # Event
    accepts_ask: bool = False  # Event
    tool_name: str = ""  # ToolCall, ToolOutcome
    tool_call_id: str = ""  # ToolCall, ToolOutcome, Approval
    params_json: str = ""  # ToolCall, ToolOutcome
    tool_class: str = ""  # ToolCall
    batch_id: str = ""  # ToolCall
    result_json: str | None = None  # ToolOutcome
    error: str | None = None  # ToolOutcome
    duration_ms: int = 0  # ToolOutcome
    prompt_id: str = ""  # UserTurn
    input_tokens: int = 0  # Usage, ModelOutput.usage
    output_tokens: int = 0  # Usage, ModelOutput.usage
    cost_usd: float = 0.0  # Usage, ModelOutput.usage
    model: str = ""  # Usage, ModelOutput.usage
    decision_id: str = ""  # Approval
    approved: bool = False  # Approval
    scope: str = ""  # Approval
    ttl_seconds: int = 0  # Approval
    text: str = ""  # ModelOutput
    text_digest: str = ""  # ModelOutput
    output_kind: str = ""  # ModelOutput
    stop_hook_active: bool = False  # ModelOutput
    # generated:event-record:end
    raw_kind: str = ""


# A tool call's `tool_class`: what its caller knows the tool does ("" = nobody said).
TOOL_CLASSES = ("", "readOnly", "mutating", "poll")

# An approval's `scope` ("" = once).
APPROVAL_SCOPES = ("", "once", "always")

# A model output's `output_kind` ("" = message).
OUTPUT_KINDS = ("", "message", "thought", "final_answer")


def json_text(value: Any) -> str:
    """A JSON value as compact text (non-JSON values, e.g. datetimes, as their str)."""
    return json.dumps(value, default=str)


def _string(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise EventFormatError(f"{key} must be a string, got {type(value).__name__}")
    return value


def _optional_string(data: Mapping[str, Any], key: str) -> str | None:
    return _string(data, key) if data.get(key) is not None else None


def _seq(data: Mapping[str, Any]) -> int:
    value = data.get("seq", 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise EventFormatError(f"seq must be a non-negative integer, got {value!r}")
    if not 0 <= value < 2**64:
        raise EventFormatError(f"seq must be a non-negative 64-bit integer, got {value}")
    return value


def _bool(data: Mapping[str, Any], key: str) -> bool:
    value = data.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise EventFormatError(f"{key} must be true or false, got {value!r}")
    return value


def _count(data: Mapping[str, Any], key: str, bits: int = 64) -> int:
    """A non-negative integer of at most `bits` bits (0 when absent)."""
    value = data.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**bits:
        raise EventFormatError(f"{key} must be a non-negative {bits}-bit integer, got {value!r}")
    return value


def _cost(data: Mapping[str, Any]) -> float:
    value = data.get("cost_usd")
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise EventFormatError(f"cost_usd must be a finite non-negative number, got {value!r}")
    return float(value)


def _number(data: Mapping[str, Any], key: str) -> float:
    """A finite number (0.0 when absent)."""
    value = data.get(key)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise EventFormatError(f"{key} must be a finite number, got {value!r}")
    return float(value)


# How a generic field (_event_extra.py) is read, by its proto type.
_READERS: dict[str, Callable[[Mapping[str, Any], str], Any]] = {
    "string": _string, "bool": _bool, "uint32": lambda data, key: _count(data, key, 32), "uint64": _count,
    "double": _number, "float": _number}


def _generic(data: Mapping[str, Any], fields: Mapping[str, str]) -> dict[str, Any]:
    return {name: _READERS[type_](data, name) for name, type_ in fields.items()}


def _params_json(data: Mapping[str, Any]) -> str:
    text = _optional_string(data, "params_json")
    if text is not None:
        return text
    params = data.get("params")
    return "" if params is None else json_text(params)


def parse_event(data: Mapping[str, Any]) -> EventRecord:
    """One event dict as an EventRecord; EventFormatError names the field that is off."""
    if not isinstance(data, Mapping):
        raise EventFormatError(f"an event must be a JSON object, got {type(data).__name__}")
    raw_kind = data.get("kind")
    if raw_kind is not None and not isinstance(raw_kind, str):
        raise EventFormatError(f"kind must be a string, got {type(raw_kind).__name__}")
    try:
        kind: EventKind | None = EventKind(raw_kind) if raw_kind else None
    except ValueError:
        kind = None
    common: dict[str, Any] = {
        "run_id": _string(data, "run_id"), "seq": _seq(data),
        "agent_id": _string(data, "agent_id"), "session_id": _string(data, "session_id"),
        "raw_kind": raw_kind or "", "parent_run_id": _string(data, "parent_run_id"),
        "accepts_ask": _bool(data, "accepts_ask"), **_generic(data, ENVELOPE_EXTRA),
        **_generic(data, KIND_EXTRA[kind.value] if kind is not None else {}),
    }
    if kind is EventKind.TOOL_CALL:
        tool_class = _string(data, "tool_class")
        if tool_class not in TOOL_CLASSES:
            raise EventFormatError(
                f"tool_class must be one of {', '.join(TOOL_CLASSES)} (or absent), got {tool_class!r}")
        return EventRecord(kind, tool_name=_string(data, "tool_name"), tool_call_id=_string(data, "tool_call_id"),
                           params_json=_params_json(data), tool_class=tool_class, **common)
    if kind is EventKind.TOOL_OUTCOME:
        error = _optional_string(data, "error")
        result_json = None
        if error is None:
            result_json = _optional_string(data, "result_json")
            if result_json is None and "result" in data:
                result_json = json_text(data["result"])
        return EventRecord(kind, tool_name=_string(data, "tool_name"), tool_call_id=_string(data, "tool_call_id"),
                           params_json=_params_json(data), result_json=result_json, error=error,
                           duration_ms=_count(data, "duration_ms"), **common)
    if kind is EventKind.USER_TURN:
        return EventRecord(kind, prompt_id=_string(data, "prompt_id"), **common)
    if kind is EventKind.USAGE:
        return EventRecord(kind, input_tokens=_count(data, "input_tokens"), output_tokens=_count(data, "output_tokens"),
                           cost_usd=_cost(data), model=_string(data, "model"), **common)
    if kind is EventKind.APPROVAL:
        return _approval(data, common)
    if kind is EventKind.MODEL_OUTPUT:
        return _model_output(data, common)
    return EventRecord(kind, **common)


def _model_output(data: Mapping[str, Any], common: dict) -> EventRecord:
    output_kind = _string(data, "output_kind")
    if output_kind not in OUTPUT_KINDS:
        raise EventFormatError(
            f"output_kind must be one of {', '.join(OUTPUT_KINDS[1:])} (or absent), got {output_kind!r}")
    usage = data.get("usage")
    if usage is None:
        usage = {}
    if not isinstance(usage, Mapping):
        raise EventFormatError(f"usage must be an object of input_tokens, output_tokens, cost_usd, model, "
                               f"got {type(usage).__name__}")
    return EventRecord(EventKind.MODEL_OUTPUT, text=_string(data, "text"), text_digest=_string(data, "text_digest"),
                       output_kind=output_kind, stop_hook_active=_bool(data, "stop_hook_active"),
                       input_tokens=_count(usage, "input_tokens"), output_tokens=_count(usage, "output_tokens"),
                       cost_usd=_cost(usage), model=_string(usage, "model"), **common)


def _approval(data: Mapping[str, Any], common: dict) -> EventRecord:
    if "approved" not in data:
        raise EventFormatError("approved is required in an approval: true (run the call) or false (do not)")
    scope = _string(data, "scope")
    if scope not in APPROVAL_SCOPES:
        raise EventFormatError(f"scope must be 'once' or 'always' (or absent), got {scope!r}")
    tool_call_id, decision_id = _string(data, "tool_call_id"), _string(data, "decision_id")
    if not tool_call_id and not decision_id:
        raise EventFormatError("an approval names the asked call: set tool_call_id or decision_id")
    return EventRecord(EventKind.APPROVAL, tool_call_id=tool_call_id, decision_id=decision_id,
                       approved=_bool(data, "approved"), scope=scope, ttl_seconds=_count(data, "ttl_seconds", 32),
                       **common)


def describe_kind_problem(record: EventRecord) -> str:
    """Why a record has no kind, in words for a person ("" when it has one)."""
    if record.kind is not None:
        return ""
    if record.raw_kind:
        return f"unknown event kind {record.raw_kind!r}: expected one of {', '.join(EVENT_KINDS)}"
    return f"event has no kind: set one of {', '.join(EVENT_KINDS)}"
