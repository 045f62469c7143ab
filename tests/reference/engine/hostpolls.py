"""Host poll presets (core/src/hostpolls.rs): other hosts' background-job polls, known polls by
default. The reference does not name these tools, so nothing it specifies changes."""
from __future__ import annotations

from typing import Any

# Normalised tool name -> the blocking wait its poll messages suggest instead.
HOST_POLL_WAITS = {
    "write_stdin": "one write_stdin call with empty chars and yield_time_ms 300000 (five minutes)",
    "taskoutput": "one TaskOutput call with block true and timeout 600000 (ten minutes)",
    "bashoutput": "one Bash call `sleep 110` (under two minutes), then a single BashOutput",
    "tasks/get": "one tasks/result request, which waits until the task finishes",
}

_VOLATILE_KEYS = frozenset({"chunk_id", "timestamp", "wall_time_seconds"})
_VOLATILE_LINES = ("Chunk ID:", "Wall time:")
_ASCII_SPACE = " \t\n\r\x0c"


def is_host_poll(tool_name: str, params: Any) -> bool:
    if tool_name not in HOST_POLL_WAITS:
        return False
    if tool_name == "write_stdin":
        # Empty input polls; with input it is a real terminal interaction.
        return isinstance(params, dict) and params.get("chars") in (None, "")
    return True


def without_bookkeeping(value: Any) -> Any:
    if isinstance(value, str):
        return _text_without_bookkeeping(value)
    if isinstance(value, list):
        return [without_bookkeeping(item) for item in value]
    if isinstance(value, dict):
        return {key: without_bookkeeping(nested) for key, nested in value.items() if key not in _VOLATILE_KEYS}
    return value


def _text_without_bookkeeping(text: str) -> str:
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    kept = []
    header = True
    for line in lines:
        trimmed = line.strip(_ASCII_SPACE)
        if header and trimmed.startswith(_VOLATILE_LINES):
            continue
        header = header and trimmed != "Output:"
        kept.append(line)
    rest = "".join(kept)
    cleaned = []
    while True:
        start = rest.find("<timestamp>")
        if start < 0:
            break
        end = rest.find("</timestamp>", start)
        if end < 0:
            break
        cleaned.append(rest[:start])
        rest = rest[end + len("</timestamp>"):]
    cleaned.append(rest)
    return "".join(cleaned)
