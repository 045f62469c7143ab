"""argument_churn (opt-in): the same tool called with ever-new arguments that keep producing the
identical outcome, the evasion every per-(tool, args) count misses (a fresh nonce per call).

Its streak, over prior records, newest first: the completed calls of this tool (other tools and
pending calls are skipped) whose results all equal the newest one and whose argument hashes are
pairwise distinct; it stops at the first call of the tool with another result or a repeated
argument hash (a plain repeat is generic_repeat's). Warns at `warnAt`, blocks at `blockAt` when set.
"""
from __future__ import annotations

from ..settings import LoopDetectionSettings
from ..state import DIGEST, PENDING, History, result_hash_text
from ..verdicts import Detector, Level
from .base import CallContext, Detection

DETECTOR = Detector.ARGUMENT_CHURN


def churn_streak(history: History, tool_name: str) -> tuple[int, bytes | None, tuple[int, ...]]:
    """(streak, status byte + digest of the shared result, history indexes oldest first)."""
    tools, status, results, args = history.tools, history.status, history.results, history.args
    shared: bytes | None = None
    seen: set[bytes] = set()
    indexes: list[int] = []
    for index in range(len(tools) - 1, -1, -1):
        if tools[index] != tool_name or status[index] == PENDING:
            continue
        key = bytes((status[index],)) + results[index * DIGEST:(index + 1) * DIGEST]
        if shared is None:
            shared = key
        elif key != shared:
            break
        call = bytes(args[index * DIGEST:(index + 1) * DIGEST])
        if call in seen:
            break
        seen.add(call)
        indexes.append(index)
    return len(indexes), shared, tuple(reversed(indexes))


def detect(context: CallContext, settings: LoopDetectionSettings) -> Detection | None:
    warn_at, block_at = settings.argument_churn_warn_at, settings.argument_churn_block_at
    if not warn_at and not block_at:
        return None
    streak, shared, evidence = churn_streak(context.history, context.tool_name)
    tool_name = context.tool_name
    if shared is None:
        return None
    key = f"churn:{tool_name}:{result_hash_text(shared[0], shared[1:])}"
    if block_at and streak >= block_at:
        return Detection(
            DETECTOR, Level.CRITICAL, streak,
            f"CRITICAL: {context.spelled} was called {streak} times in a row with changing arguments and "
            "returned identical outcomes every time, so this call was not run: varying the arguments "
            "is not making progress. Change approach or report the task as failed.",
            key, evidence=evidence,
        )
    if warn_at and streak >= warn_at:
        return Detection(
            DETECTOR, Level.WARNING, streak,
            f"WARNING: {context.spelled} was called {streak} times in a row with changing arguments and "
            "returned identical outcomes every time. Varying the arguments is not making progress: "
            "try something else or report the task as failed.",
            key, evidence=evidence,
        )
    return None
