"""The run-wide no-progress breaker (an opt-in extension): all of it, tracking and detection.

The reference's "global" breaker counts one tool + args, so an agent that rotates tools or
arguments never trips it. This one remembers every (tool, args, result) triple of the run and
counts how many completed calls in a row brought none new; at K (`runWideBreaker.threshold`)
the next call is blocked (critical).
"""
from __future__ import annotations

import hashlib

from ..settings import LoopDetectionSettings
from ..state import MAX_SEEN_TRIPLES, PENDING, RunState
from ..verdicts import Detector, Level
from .base import CallContext, Detection

DETECTOR = Detector.RUN_WIDE_NO_PROGRESS


def track_outcome(state: RunState, tool_name: str, call_digest: bytes, status: int, result_digest: bytes) -> None:
    """After a completed call: is its triple new to the run?"""
    # A stable key (not hash(), which is salted per process) so snapshots stay meaningful.
    key = int.from_bytes(hashlib.sha256(
        tool_name.encode("utf-8", "surrogatepass") + call_digest + bytes((status,)) + result_digest).digest()[:8], "big")
    seen = state.seen_triples
    if seen is None:
        seen = state.seen_triples = set()
    if key in seen:
        state.no_new_streak += 1
        return
    state.no_new_streak = 0
    if len(seen) < MAX_SEEN_TRIPLES:
        seen.add(key)


def detect(context: CallContext, settings: LoopDetectionSettings) -> Detection | None:
    threshold = settings.run_wide_breaker_threshold
    streak = context.no_new_triple_streak
    if not threshold or streak < threshold:
        return None
    status = context.history.status
    completed = [index for index in range(len(status) - 1, -1, -1) if status[index] != PENDING][:streak]
    return Detection(
        DETECTOR, Level.CRITICAL, streak,
        f"CRITICAL: run-wide breaker: the last {streak} completed tool calls of this run, across "
        "all tools and arguments, made no progress (they only repeated calls and results already "
        "seen), so this call was not run. Stop cycling through the same actions; change approach "
        "or report the task as failed.",
        f"run-wide:{threshold}", evidence=tuple(reversed(completed)),
    )
