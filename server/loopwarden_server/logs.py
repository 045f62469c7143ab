"""Structured logs: one JSON object per line on stderr.

The decision log is the one on the per-event path: a request's decision lines are made into
records together (`log_batch`) and the stderr handler writes them in one write per request
(`JsonLineHandler.held`), not one write and flush per line. Each line is still one record
through the logger's handlers, so levels, filters and any other handler see what they saw.
"""
from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
import time
from collections.abc import Iterable, Iterator

import orjson

# Attributes every LogRecord has; anything else passed via `extra=` is a structured field.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


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
        try:
            # NOTE: orjson, ~10x the stdlib encoder: decision log lines are on the per-event path.
            return orjson.dumps(line, default=str).decode()
        except TypeError:  # an integer beyond 64 bits or a lone surrogate: the stdlib spells it
            return json.dumps(line, ensure_ascii=False, default=str)


class JsonLineHandler(logging.StreamHandler):
    """A stream handler of JSON lines that can hold one thread's lines and write them at once."""

    def __init__(self, stream=None) -> None:
        super().__init__(stream)
        self.setFormatter(JsonLineFormatter())
        self._held: list[str] | None = None
        self._holder = 0

    def emit(self, record: logging.LogRecord) -> None:
        if self._held is None or self._holder != threading.get_ident():
            super().emit(record)
            return
        try:
            self._held.append(self.format(record))
        except Exception:  # noqa: BLE001 - as StreamHandler.emit does
            self.handleError(record)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Lines this thread emits inside the block are written when it ends, in one write."""
        if self._held is not None:  # nested, or another thread holds: write as usual
            yield
            return
        self._held, self._holder = [], threading.get_ident()
        try:
            yield
        finally:
            lines, self._held = self._held, None
            if lines:
                self.acquire()
                try:
                    self.stream.write(self.terminator.join(lines) + self.terminator)
                    self.flush()
                except Exception:  # noqa: BLE001 - a broken stderr must not fail a request
                    pass
                finally:
                    self.release()


_handler: JsonLineHandler | None = None


def log_batch(logger: logging.Logger, lines: Iterable[tuple[int, str, dict]]) -> None:
    """(level, message, extra) lines as records of `logger`, as `logger.log` makes them but for
    the caller lookup (no field of a JSON line names the caller), and, when the daemon's stderr
    handler is configured, written in one write."""
    enabled, handle, make, name = logger.isEnabledFor, logger.handle, logger.makeRecord, logger.name
    with _handler.held() if _handler is not None else contextlib.nullcontext():
        for level, message, extra in lines:
            if enabled(level):
                handle(make(name, level, "(unknown file)", 0, message, (), None, "(unknown function)", extra))


def configure(level: str, stream=None) -> None:
    """JSON lines on `stream` (stderr) from every logger at `level` and above."""
    global _handler
    _handler = JsonLineHandler(sys.stderr if stream is None else stream)
    root = logging.getLogger()
    root.handlers[:] = [_handler]
    root.setLevel(level)
