"""generic_repeat: the same tool with the same arguments again and again (warns at W repeats;
blocks once C identical outcomes show nothing changes). Known polls are the poll detector's."""
from __future__ import annotations

from ..settings import LoopDetectionSettings
from ..verdicts import Detector, Level
from .base import CallContext, Detection

DETECTOR = Detector.GENERIC_REPEAT


def detect(context: CallContext, settings: LoopDetectionSettings) -> Detection | None:
    if context.known_poll or not settings.generic_repeat:
        return None
    counts = context.counts
    tool_name = context.tool_name
    streak = counts.no_progress_streak
    if streak >= settings.critical_threshold:
        return Detection(
            DETECTOR, Level.CRITICAL, streak,
            f"CRITICAL: {context.spelled} was called {streak} times with identical arguments and "
            "identical outcomes, so this call was not run: repeating it cannot make progress. Do not "
            "retry it; change approach or report that the task failed.",
            f"generic:{context.result_key}", evidence=context.streak_evidence(streak),
        )
    repeats = counts.recent_count
    if repeats >= settings.warning_threshold:
        return Detection(
            DETECTOR, Level.WARNING, repeats,
            f"WARNING: {context.spelled} has been called {repeats} times with identical arguments. "
            "If the result is not changing, stop repeating this call: try something else "
            "or report the task as failed.",
            f"generic:{tool_name}:{context.args_hash}", evidence=context.recent_evidence(),
        )
    return None
