"""global_circuit_breaker: a hard stop for any no-progress streak that grows too long (G)."""
from __future__ import annotations

from ..settings import LoopDetectionSettings
from ..verdicts import Detector, Level
from .base import CallContext, Detection

DETECTOR = Detector.GLOBAL_CIRCUIT_BREAKER


def detect(context: CallContext, settings: LoopDetectionSettings) -> Detection | None:
    streak = context.counts.no_progress_streak
    if streak < settings.global_circuit_breaker_threshold:
        return None
    return Detection(
        DETECTOR, Level.CRITICAL, streak,
        f"CRITICAL: global circuit breaker: {context.spelled} returned the identical result "
        f"{streak} times in a row for the same arguments, so this call was not run. "
        "Stop this loop and report that the task cannot be completed this way.",
        f"global:{context.result_key}", evidence=context.streak_evidence(streak),
    )
