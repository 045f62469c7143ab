"""Agent hooks (Claude Code, Codex): their payloads as loopwarden events, verdicts as their answers.

`protocol` is the pure mapping; the daemon's HTTP endpoints and `loopwarden hook` (`cli`) share it.
"""
from .protocol import (
    INTEGRATION_HEADER, Dialect, HookPayloadError, HookRequest, VerdictLike, answer, parse, unavailable_answer,
)

__all__ = ["INTEGRATION_HEADER", "Dialect", "HookPayloadError", "HookRequest", "VerdictLike", "answer", "parse",
           "unavailable_answer"]
