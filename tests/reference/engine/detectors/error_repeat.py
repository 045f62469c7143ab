"""error_repeat (opt-in): the same tool with the same arguments failing with the identical error
again and again. The reference only warns such a call at W and blocks it at C; a small model
retrying a failing call rarely recovers after a few identical errors.

Its count is the no-progress streak of this call when that streak's result is an error (the
newest completed records of this tool + args, skipping other calls, that all failed with the same
error text). Blocks at `threshold`, warns one earlier.
"""
from __future__ import annotations

from ..settings import LoopDetectionSettings
from ..state import ERROR
from ..verdicts import Detector, Level
from .base import CallContext, Detection

DETECTOR = Detector.ERROR_REPEAT


def detect(context: CallContext, settings: LoopDetectionSettings) -> Detection | None:
    threshold = settings.error_repeat_threshold
    if not threshold:
        return None
    counts = context.counts
    streak = counts.no_progress_streak
    if counts.result_key is None or counts.result_key[0] != ERROR or streak < threshold - 1:
        return None
    key = f"error:{context.result_key}"
    if streak >= threshold:
        return Detection(
            DETECTOR, Level.CRITICAL, streak,
            f"CRITICAL: {context.spelled} failed {streak} times in a row with identical arguments and the "
            "identical error, so this call was not run. Fix what the error says before calling it "
            "again, or report the task as failed.",
            key, evidence=context.streak_evidence(streak),
        )
    return Detection(
        DETECTOR, Level.WARNING, streak,
        f"WARNING: {context.spelled} failed {streak} times in a row with identical arguments and the "
        "identical error. Read the error and change the call: one more identical failure and it "
        "will be blocked.",
        key, evidence=context.streak_evidence(streak),
    )
