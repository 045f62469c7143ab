"""Structured logs: one JSON object per line on stderr."""
from __future__ import annotations

import json
import logging
import sys
import time

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


def configure(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLineFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
