"""Trace importers: files of agent runs -> event dicts in our JSONL event format.

Every importer yields the same shape, one dict per event, in the order a runner would have sent
them: `{"run_id", "seq", "kind": "tool_call" | "tool_outcome" | "compaction_retry" | "user_turn" | "run_end",
"tool_name", "tool_call_id", "params" | "params_json", "result" | "error"}` (the format of
the repository's `traces/*.jsonl` and `loopwarden.eventformat`). Online and offline replay both
read those dicts with `loopwarden.eventformat.parse_event`; neither needs to know where they came
from.

Supported shapes:
- `events`: our JSONL event format, one event per line (`.gz` files are read transparently).
- `openai`: OpenAI-style chat conversations. A JSON file holding a list of conversations, or JSONL
  with one conversation per line; a conversation is a list of messages or an object with
  `messages` (or τ-bench's `traj`) and an optional `run_id` / `id`. Assistant messages carry
  `tool_calls` (`id`, `function.name`, `function.arguments` as a JSON string) and `tool` messages
  answer them by `tool_call_id`; the legacy `function_call` / `function` pair works too.
"""
from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from ..eventformat import EventKind

FORMATS = ("events", "openai")

# A tool message starting with this is the tool's failure, not its result (the same rule the
# τ-bench trace in the repository's traces/ was converted with).
ERROR_PREFIX = "Error:"


class TraceError(ValueError):
    """A trace that cannot be read; the message names the file and where in it."""


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One event dict and where it came from (`file:line` or `file:conversation N`)."""

    data: dict[str, Any]
    origin: str


def open_text(path: str | os.PathLike[str]) -> TextIO:
    """A trace file as text; gzip when the name ends in `.gz`."""
    source = os.fspath(path)
    if source.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(source, "rb"), encoding="utf-8")
    return open(source, encoding="utf-8")


def read_trace(path: str | os.PathLike[str], trace_format: str = "events") -> Iterator[TraceEvent]:
    """Every event of a trace file, in file order."""
    if trace_format == "events":
        return read_event_lines(path)
    if trace_format == "openai":
        return read_openai_conversations(path)
    raise TraceError(f"unknown trace format {trace_format!r}: expected one of {', '.join(FORMATS)}")


# ---------------------------------------------------------------------------------------------
# Our event format


def read_event_lines(path: str | os.PathLike[str]) -> Iterator[TraceEvent]:
    source = os.fspath(path)
    with open_text(source) as lines:
        for line_number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            origin = f"{source}:{line_number}"
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise TraceError(f"{origin}: not JSON: {exc}") from None
            if not isinstance(data, dict):
                raise TraceError(f"{origin}: an event must be a JSON object, got {type(data).__name__}")
            yield TraceEvent(data, origin)


# ---------------------------------------------------------------------------------------------
# OpenAI-style chat conversations


def read_openai_conversations(path: str | os.PathLike[str]) -> Iterator[TraceEvent]:
    source = os.fspath(path)
    stem = os.path.basename(source).split(".")[0] or "conversation"
    for index, (conversation, where) in enumerate(_conversations(source)):
        origin = f"{source}:{where}"
        run_id = _conversation_run_id(conversation, f"{stem}-{index}", origin)
        for data in conversation_events(_conversation_messages(conversation, origin), run_id, origin=origin):
            yield TraceEvent(data, origin)


def _conversations(source: str) -> Iterator[tuple[Any, str]]:
    """(conversation, where) pairs: a JSON document holding a list, or JSONL with one per line."""
    with open_text(source) as handle:
        text = handle.read()
    try:
        document = json.loads(text)
    except ValueError:
        document = None  # not one JSON document: JSONL
    else:
        if isinstance(document, list) and not _is_message_list(document):
            for index, conversation in enumerate(document):
                yield conversation, f"conversation {index}"
            return
        # A single conversation (one JSONL line, or a file holding just one).
        yield document, "conversation 0"
        return
    for line_number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line), f"{line_number}"
        except ValueError as exc:
            raise TraceError(f"{source}:{line_number}: not JSON: {exc}") from None


def _is_message_list(value: list) -> bool:
    """A list of messages (one conversation) rather than a list of conversations."""
    return bool(value) and all(isinstance(item, dict) and "role" in item for item in value)


def _conversation_messages(conversation: Any, origin: str) -> list:
    if isinstance(conversation, list):
        return conversation
    if isinstance(conversation, dict):
        for key in ("messages", "traj"):
            if isinstance(conversation.get(key), list):
                return conversation[key]
    raise TraceError(f"{origin}: a conversation is a list of messages or an object with a `messages` list")


def _conversation_run_id(conversation: Any, default: str, origin: str) -> str:
    if not isinstance(conversation, dict):
        return default
    for key in ("run_id", "id"):
        value = conversation.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise TraceError(f"{origin}: `{key}` must be a string")
        if str(value).strip():
            return str(value)
    return default


def conversation_events(messages: Iterable[Any], run_id: str, *, origin: str = "conversation") -> list[dict[str, Any]]:
    """One conversation's tool calls and tool results as event dicts, numbered from seq 1, ending with run_end.

    An assistant message's calls are announced before their results, as a runner executing
    parallel calls would; a call that never got an answer stays a bare tool_call.
    """
    events: list[dict[str, Any]] = []
    calls: dict[str, tuple[str, dict[str, Any]]] = {}  # tool_call_id -> (tool name, params fields)
    legacy: list[tuple[str, str, dict[str, Any]]] = []  # unanswered function_call: (id, name, params)

    def emit(kind: EventKind, **fields: Any) -> None:
        events.append({"run_id": run_id, "seq": len(events) + 1, "kind": kind.value, **fields})

    for position, message in enumerate(messages):
        where = f"{origin}: message {position}"
        if not isinstance(message, dict):
            raise TraceError(f"{where}: a message must be a JSON object")
        role = message.get("role")
        if role == "assistant":
            for index, call in enumerate(message.get("tool_calls") or ()):
                call_id, name, params = _tool_call(call, f"{where}: tool_calls[{index}]")
                if call_id:
                    calls[call_id] = (name, params)
                emit(EventKind.TOOL_CALL, tool_name=name, tool_call_id=call_id, **params)
            if message.get("function_call"):
                call_id = f"{run_id}:function_call:{position}"
                _, name, params = _tool_call({"function": message["function_call"]}, f"{where}: function_call")
                legacy.append((call_id, name, params))
                emit(EventKind.TOOL_CALL, tool_name=name, tool_call_id=call_id, **params)
        elif role == "tool":
            answered = message.get("tool_call_id")
            if not isinstance(answered, str) or answered not in calls:
                raise TraceError(f"{where}: tool message answers no earlier tool call (tool_call_id {answered!r})")
            name, params = calls[answered]
            emit(EventKind.TOOL_OUTCOME, tool_name=name, tool_call_id=answered, **params,
                 **_outcome(message.get("content"), where))
        elif role == "function":
            named = message.get("name")
            match = next((i for i in range(len(legacy) - 1, -1, -1) if legacy[i][1] == named), None)
            if match is None:
                raise TraceError(f"{where}: function message answers no earlier function_call named {named!r}")
            call_id, name, params = legacy.pop(match)
            emit(EventKind.TOOL_OUTCOME, tool_name=name, tool_call_id=call_id, **params,
                 **_outcome(message.get("content"), where))
    emit(EventKind.RUN_END)
    return events


def _tool_call(call: Any, where: str) -> tuple[str, str, dict[str, Any]]:
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        raise TraceError(f"{where}: a tool call needs a `function` object")
    function = call["function"]
    name = function.get("name")
    if not isinstance(name, str):
        raise TraceError(f"{where}: function.name must be a string")
    call_id = call.get("id") or ""
    if not isinstance(call_id, str):
        raise TraceError(f"{where}: id must be a string")
    arguments = function.get("arguments")
    if arguments is None:
        params: dict[str, Any] = {}
    elif isinstance(arguments, str):
        # Kept as text: the engine parses it exactly as the daemon would, invalid JSON included.
        params = {"params_json": arguments}
    else:
        params = {"params": arguments}
    return call_id, name, params


def _outcome(content: Any, where: str) -> dict[str, Any]:
    text = _content_text(content, where)
    if text.startswith(ERROR_PREFIX):
        return {"error": text}
    return {"result": {"content": [{"type": "text", "text": text}], "details": {}}}


def _content_text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # Content parts: the text parts, joined (images and the like carry no comparable text).
        return "\n".join(part.get("text", "") for part in content
                         if isinstance(part, Mapping) and part.get("type") == "text")
    raise TraceError(f"{where}: content must be a string or a list of content parts")
