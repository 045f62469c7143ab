"""What every detector sees (a `CallContext`) and what it answers (a `Detection`).

A detector is a module with `DETECTOR` (its enum value) and `detect(context, settings)`, which
returns a Detection or None. Every count is over *prior* records: the call being decided is not
yet in history.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..settings import LoopDetectionSettings
from ..state import DIGEST, PENDING, History, args_hash_text, result_hash_text
from ..verdicts import Detector, Level


# NOTE: not frozen: a frozen dataclass's __init__ goes through object.__setattr__ per field, which
# costs microseconds on the per-event path. Instances are never mutated after construction.
@dataclass(slots=True)
class Detection:
    detector: Detector
    level: Level
    count: int
    message: str
    warning_key: str
    paired_tool_name: str = ""
    evidence: tuple[int, ...] = ()  # history indexes of the records that formed the pattern


@dataclass(slots=True)
class CallCounts:
    """What history says about this exact call (tool + args)."""

    no_progress_streak: int  # newest completed matches that share the newest result
    result_key: bytes | None  # status byte + digest of that result
    recent_count: int  # every record of this call, pending or completed


def call_counts(history: History, tool_name: str, args_digest: bytes) -> CallCounts:
    """One newest-first pass over the records of this call.

    The streak skips pending records and stops at the first completed one whose result differs
    from the newest; the recent count keeps counting past that point.
    """
    status, results = history.status, history.results
    streak = recent = 0
    latest: bytes | None = None
    streak_open = True
    for index in history.matches(tool_name, args_digest):
        recent += 1
        if not streak_open or status[index] == PENDING:
            continue
        key = bytes((status[index],)) + results[index * DIGEST:(index + 1) * DIGEST]
        if latest is None:
            latest = key
        elif key != latest:
            streak_open = False
            continue
        streak += 1
    return CallCounts(streak, latest, recent)


class CallContext:
    """The call being decided and the run's history, with the per-call counts several detectors
    share computed once, on first use."""

    __slots__ = ("history", "tool_name", "spelled", "args_digest", "known_poll", "no_new_triple_streak", "_counts")

    def __init__(self, history: History, tool_name: str, args_digest: bytes, known_poll: bool,
                 no_new_triple_streak: int = 0, spelled: str | None = None) -> None:
        self.history = history
        # The normalised name (matching, keys) and the host's spelling of it (messages).
        self.tool_name = tool_name
        self.spelled = tool_name if spelled is None else spelled
        self.args_digest = args_digest
        self.known_poll = known_poll
        self.no_new_triple_streak = no_new_triple_streak
        self._counts: CallCounts | None = None

    @property
    def counts(self) -> CallCounts:
        if self._counts is None:
            self._counts = call_counts(self.history, self.tool_name, self.args_digest)
        return self._counts

    @property
    def args_hash(self) -> str:
        return args_hash_text(self.tool_name, self.args_digest)

    @property
    def result_key(self) -> str:
        """`tool:argsHash:resultHash` of the current streak (the spec's warning-key spelling)."""
        key = self.counts.result_key
        result = "none" if key is None else result_hash_text(key[0], key[1:])
        return f"{self.tool_name}:{self.args_hash}:{result}"

    def streak_evidence(self, count: int) -> tuple[int, ...]:
        """The `count` newest completed records of this call (the streak), oldest first."""
        history = self.history
        found = [index for index in history.matches(self.tool_name, self.args_digest)
                 if history.status[index] != PENDING]
        return tuple(reversed(found[:count]))

    def recent_evidence(self) -> tuple[int, ...]:
        return tuple(reversed(list(self.history.matches(self.tool_name, self.args_digest))))


__all__ = ["CallContext", "CallCounts", "Detection", "LoopDetectionSettings", "call_counts"]
