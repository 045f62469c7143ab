"""The rolling detectors and their precedence (spec section 5).

`PRECEDENCE` is the order of the precedence table: the first detector that answers decides the
call. Adding a detector is one module (with `DETECTOR` and `detect(context, settings)`), its
`Detector` enum value, a line here and a test class.

`RANKED_AFTER` holds the opt-in detectors that catch what the reference misses (argument churn,
identical errors). They rank after the table: one of them decides a call only when no detector of
the table answered at its level or higher, so switching them on never replaces a verdict of the
table by one of the same or a lower level; it can only turn an ALLOW into a WARN or BLOCK, or a
WARN into a BLOCK.
"""
from __future__ import annotations

from ..settings import LoopDetectionSettings
from ..state import History
from ..verdicts import Level
from . import (
    argument_churn, error_repeat, generic_repeat, global_breaker, known_poll, ping_pong, run_wide, unknown_tool,
)
from .base import CallContext, CallCounts, Detection, call_counts

PRECEDENCE = (
    unknown_tool,
    global_breaker,
    run_wide,  # the opt-in run-wide breaker sits right after the global circuit breaker
    known_poll,
    ping_pong,
    generic_repeat,
)

RANKED_AFTER = (
    error_repeat,
    argument_churn,
)

_RANK = {Level.WARNING: 1, Level.CRITICAL: 2}


def detect(
    history: History,
    tool_name: str,
    args_digest: bytes,
    known_poll: bool,
    settings: LoopDetectionSettings,
    no_new_triple_streak: int = 0,
    spelled: str | None = None,
) -> Detection | None:
    """The first matching row of the precedence table, or None."""
    context = CallContext(history, tool_name, args_digest, known_poll, no_new_triple_streak, spelled)
    found = None
    for detector in PRECEDENCE:
        found = detector.detect(context, settings)
        if found is not None:
            break
    if not settings.ranked_after_on or (found is not None and found.level is Level.CRITICAL):
        return found
    rank = 0 if found is None else _RANK[found.level]
    for detector in RANKED_AFTER:
        detection = detector.detect(context, settings)
        if detection is not None and _RANK[detection.level] > rank:
            found, rank = detection, _RANK[detection.level]
            if detection.level is Level.CRITICAL:
                break
    return found


__all__ = ["PRECEDENCE", "RANKED_AFTER", "CallContext", "CallCounts", "Detection", "call_counts", "detect"]
