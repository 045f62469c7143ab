"""known_poll_no_progress: polling tools returning the same state (warns at W, blocks at C)."""
from __future__ import annotations

from ..settings import LoopDetectionSettings
from ..verdicts import Detector, Level
from ..hostpolls import HOST_POLL_WAITS
from .base import CallContext, Detection

DETECTOR = Detector.KNOWN_POLL_NO_PROGRESS


def detect(context: CallContext, settings: LoopDetectionSettings) -> Detection | None:
    if not context.known_poll or not settings.known_poll_no_progress:
        return None
    streak = context.counts.no_progress_streak
    tool_name = context.tool_name
    wait = HOST_POLL_WAITS.get(tool_name)
    if wait is not None and streak >= settings.critical_threshold:
        return Detection(
            DETECTOR, Level.CRITICAL, streak,
            f"CRITICAL: {context.spelled} was polled {streak} times with the same arguments and no progress: its "
            f"output never changed, so this poll was not run. Do not poll again at once: make {wait}; if the "
            "output still has not changed after it, report the process as stuck or failed.",
            f"poll:{context.result_key}", evidence=context.streak_evidence(streak),
        )
    if wait is not None and streak >= settings.warning_threshold:
        return Detection(
            DETECTOR, Level.WARNING, streak,
            f"WARNING: {context.spelled} was polled {streak} times with the same arguments and no progress: its "
            f"output has not changed. Polling again at once will not change it: make {wait} instead, or "
            "report the process as stuck.",
            f"poll:{context.result_key}", evidence=context.streak_evidence(streak),
        )
    if streak >= settings.critical_threshold:
        return Detection(
            DETECTOR, Level.CRITICAL, streak,
            f"CRITICAL: {context.spelled} was polled {streak} times with the same arguments and no "
            "progress: the state never changed, so this poll was not run. Stop polling and "
            "report the process as stuck or failed.",
            f"poll:{context.result_key}", evidence=context.streak_evidence(streak),
        )
    if streak >= settings.warning_threshold:
        return Detection(
            DETECTOR, Level.WARNING, streak,
            f"WARNING: {context.spelled} was polled {streak} times with the same arguments and no "
            "progress: the state has not changed. Wait longer between checks, or report the task "
            "as failed if the process is stuck.",
            f"poll:{context.result_key}", evidence=context.streak_evidence(streak),
        )
    return None
