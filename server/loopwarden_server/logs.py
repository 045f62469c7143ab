"""Structured logs: one JSON object per line on stderr.

The decision log is the one on the per-event path: `log_batch` takes a request's decision lines
together. While logging is as the daemon configures it (its JSON handler on the root logger and
nothing else in the decision logger's way: no other handler, filter or record factory), the
lines are formatted straight from their fields, exactly as `JsonLineFormatter` formats the
record `logger.log` would make, and written in one write per request: no LogRecord, no caller
lookup, no write and flush per line. Any other set-up (a test's handler, OpenTelemetry's record
factory) gets one record per line through the logger, as before.
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


def _dumps(line: dict) -> str:
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
    if (root.handlers != [handler] or root.filters or handler.filters or type(handler.formatter) is not JsonLineFormatter
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


def configure(level: str, stream=None) -> None:
    """JSON lines on `stream` (stderr) from every logger at `level` and above."""
    global _handler
    _handler = JsonLineHandler(sys.stderr if stream is None else stream)
    root = logging.getLogger()
    root.handlers[:] = [_handler]
    root.setLevel(level)
