"""unknown_tool_repeat: retries of a tool that does not exist (blocks at U)."""
from __future__ import annotations

from ..settings import LoopDetectionSettings
from ..state import History
from ..verdicts import Detector, Level
from .base import CallContext, Detection

DETECTOR = Detector.UNKNOWN_TOOL_REPEAT


def unknown_tool_streak(history: History, tool_name: str) -> tuple[int, str | None]:
    """Consecutive newest records of this tool that failed naming the same missing tool."""
    unknown = history.unknown
    if unknown is None:
        return 0, None
    tools = history.tools
    streak = 0
    missing: str | None = None
    for index in range(len(tools) - 1, -1, -1):
        name = unknown[index]
        if tools[index] != tool_name or name is None:
            break
        if missing is None:
            missing = name
        elif name != missing:
            break
        streak += 1
    return streak, missing


def detect(context: CallContext, settings: LoopDetectionSettings) -> Detection | None:
    count, missing_tool = unknown_tool_streak(context.history, context.tool_name)
    if count < settings.unknown_tool_threshold:
        return None
    missing = missing_tool or context.tool_name
    named = missing_tool or context.spelled  # the key folds the spelling, the message keeps it
    size = len(context.history)
    return Detection(
        DETECTOR, Level.CRITICAL, count,
        f"CRITICAL: unavailable tool {named}: it does not exist here and has been tried "
        f"{count} times, so this call was not run. Stop calling it and answer without it.",
        f"unknown-tool:{context.tool_name}:{missing}", evidence=tuple(range(size - count, size)),
    )
