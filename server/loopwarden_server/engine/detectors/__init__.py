"""The rolling detectors and their precedence (spec section 5).

`PRECEDENCE` is the order of the precedence table: the first detector that answers decides the
call. Adding a detector is one module (with `DETECTOR` and `detect(context, settings)`), its
`Detector` enum value, a line here and a test class.
"""
from __future__ import annotations

from ..settings import LoopDetectionSettings
from ..state import History
from . import generic_repeat, global_breaker, known_poll, ping_pong, run_wide, unknown_tool
from .base import CallContext, CallCounts, Detection, call_counts

PRECEDENCE = (
    unknown_tool,
    global_breaker,
    run_wide,  # the opt-in run-wide breaker sits right after the global circuit breaker
    known_poll,
    ping_pong,
    generic_repeat,
)


def detect(
    history: History,
    tool_name: str,
    args_digest: bytes,
    known_poll: bool,
    settings: LoopDetectionSettings,
    no_new_triple_streak: int = 0,
) -> Detection | None:
    """The first matching row of the precedence table, or None."""
    context = CallContext(history, tool_name, args_digest, known_poll, no_new_triple_streak)
    for detector in PRECEDENCE:
        detection = detector.detect(context, settings)
        if detection is not None:
            return detection
    return None


__all__ = ["PRECEDENCE", "CallContext", "CallCounts", "Detection", "call_counts", "detect"]
