"""Logs on stderr: one JSON object per line, or one short line for a person (`--log-format text`,
the default when stderr is a terminal).

The decision log is the one on the per-event path: `log_batch` takes a request's decision lines
together. While logging is as the daemon configures it (its JSON handler on the root logger and
nothing else in the decision logger's way: no other handler, filter or record factory), the
lines are formatted straight from their fields, exactly as `JsonLineFormatter` formats the
record `logger.log` would make, and written in one write per request: no LogRecord, no caller
lookup, no write and flush per line. Any other set-up (a test's handler, OpenTelemetry's record
factory, the text format) gets one record per line through the logger, as before.
"""
from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterable

import orjson

# Attributes every LogRecord has; anything else passed via `extra=` is a structured field.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


def _timestamp(created: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int((created - int(created)) * 1000):03d}Z"


def _dumps(line: object) -> str:
    try:
        # NOTE: orjson, ~10x the stdlib encoder: decision log lines are on the per-event path.
        return orjson.dumps(line, default=str).decode()
    except TypeError:  # an integer beyond 64 bits or a lone surrogate: the stdlib spells it
        return json.dumps(line, ensure_ascii=False, default=str)


class JsonLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return _dumps(line)


# Extras a text line leaves out: long, nested or only of use to a machine reading the JSON.
_TEXT_SKIPPED = {"config_summary", "pid", "taskName"}


def _text_value(value: object) -> str:
    text = value if isinstance(value, str) else _dumps(value)
    if not text or any(c.isspace() or c in '"=' for c in text):
        return json.dumps(text, ensure_ascii=False)
    return text


class TextLineFormatter(logging.Formatter):
    """One short line for a person: local time, level, message, then the record's scalar extras
    that say something (set, non-empty) as key=value."""

    def format(self, record: logging.LogRecord) -> str:
        clock = time.strftime("%H:%M:%S", time.localtime(record.created)) + f".{int(record.msecs):03d}"
        parts = [clock, f"{record.levelname:<7}", record.getMessage()]
        for key, value in vars(record).items():
            if key in _STANDARD or key.startswith("_") or key in _TEXT_SKIPPED:
                continue
            if value is None or value == "" or value is False or isinstance(value, (dict, list, tuple, set)):
                continue
            parts.append(f"{key}={_text_value(value)}")
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


FORMATS = ("json", "text")


class JsonLineHandler(logging.StreamHandler):
    """The daemon's stderr handler: JSON lines, and a request's decision lines in one write."""

    def __init__(self, stream=None) -> None:
        super().__init__(stream)
        self.setFormatter(JsonLineFormatter())

    def write_lines(self, lines: list[str]) -> None:
        self.acquire()
        try:
            self.stream.write(self.terminator.join(lines) + self.terminator)
            self.flush()
        except Exception:  # noqa: BLE001 - as StreamHandler.emit: a broken stderr must not fail a request
            pass
        finally:
            self.release()


_handler: JsonLineHandler | None = None


def _direct(logger: logging.Logger) -> JsonLineHandler | None:
    """The daemon's handler when it alone sees `logger`'s records, unchanged on the way: no
    filter, no other handler, the stock record factory and formatter."""
    handler = _handler
    if handler is None or logger.disabled or logger.filters or logger.handlers or not logger.propagate:
        return None
    root = logging.root
    parent = logger.parent
    while parent is not None and parent is not root:  # loopwarden.decisions -> loopwarden -> root
        if parent.handlers or parent.filters or not parent.propagate:
            return None
        parent = parent.parent
    if (root.handlers != [handler] or root.filters or handler.filters
            or type(handler.formatter) is not JsonLineFormatter
            or logging.getLogRecordFactory() is not logging.LogRecord):
        return None
    return handler


def log_batch(logger: logging.Logger, lines: Iterable[tuple[int, str, dict]]) -> None:
    """(level, message, extra) lines of one request, as `logger.log(level, message, extra=extra)`
    each would log them (see the module docstring)."""
    handler = _direct(logger)
    if handler is None:
        enabled, handle, make, name = logger.isEnabledFor, logger.handle, logger.makeRecord, logger.name
        for level, message, extra in lines:
            if enabled(level):
                handle(make(name, level, "(unknown file)", 0, message, (), None, "(unknown function)", extra))
        return
    now = time.time()
    ts, name, floor = _timestamp(now), logger.name, handler.level
    texts = []
    for level, message, extra in lines:
        if level >= floor and logger.isEnabledFor(level):
            line = {"ts": ts, "level": logging.getLevelName(level).lower(), "logger": name, "msg": message}
            line.update(extra)
            texts.append(_dumps(line))
    if texts:
        handler.write_lines(texts)


def resolve_format(log_format: str | None, stream) -> str:
    """`json` or `text`: as asked, else text when `stream` is a terminal (a person reads it) and
    JSON when it is not (a file, a pipe, a container runtime: a program reads it)."""
    if log_format is not None:
        return log_format
    try:
        return "text" if stream.isatty() else "json"
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return "json"


def configure(level: str, stream=None, log_format: str | None = None) -> str:
    """Every logger at `level` and above on `stream` (stderr), in `log_format` (None: see
    `resolve_format`); returns the format used."""
    global _handler
    stream = sys.stderr if stream is None else stream
    chosen = resolve_format(log_format, stream)
    _handler = JsonLineHandler(stream)
    if chosen == "text":
        _handler.setFormatter(TextLineFormatter())
    root = logging.getLogger()
    root.handlers[:] = [_handler]
    root.setLevel(level)
    return chosen
