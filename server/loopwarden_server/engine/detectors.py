"""The five rolling detectors and their precedence (spec section 5).

Every count is over *prior* records: the call being decided is not yet in history.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .settings import LoopDetectionSettings
from .state import Record
from .verdicts import Detector, Level


@dataclass(frozen=True, slots=True)
class Detection:
    detector: Detector
    level: Level
    count: int
    message: str
    warning_key: str
    paired_tool_name: str = ""


@dataclass(frozen=True, slots=True)
class NoProgressStreak:
    count: int
    result_hash: str | None


@dataclass(frozen=True, slots=True)
class PingPong:
    count: int
    paired_tool_name: str = ""
    paired_args_hash: str = ""
    no_progress_evidence: bool = False


NO_PING_PONG = PingPong(0)


def no_progress_streak(records: Sequence[Record], args_hash: str) -> NoProgressStreak:
    """Newest first: completed records of this call, counted while their result stays the same.

    The args hash embeds the tool name, so matching it matches the tool too.
    """
    streak = 0
    latest: str | None = None
    for record in reversed(records):
        if record.args_hash != args_hash or record.result_hash is None:
            continue
        if latest is None:
            latest = record.result_hash
        elif record.result_hash != latest:
            break
        streak += 1
    return NoProgressStreak(streak, latest)


def recent_count(records: Sequence[Record], args_hash: str) -> int:
    return sum(1 for record in records if record.args_hash == args_hash)


def unknown_tool_streak(records: Sequence[Record], tool_name: str) -> tuple[int, str | None]:
    """Consecutive newest records of this tool that failed naming the same missing tool."""
    streak = 0
    missing: str | None = None
    for record in reversed(records):
        if record.tool_name != tool_name or record.unknown_tool_name is None:
            break
        if missing is None:
            missing = record.unknown_tool_name
        elif record.unknown_tool_name != missing:
            break
        streak += 1
    return streak, missing


def ping_pong(records: Sequence[Record], args_hash: str) -> PingPong:
    """An alternating tail last, other, last, … that the current call would extend."""
    if not records:
        return NO_PING_PONG
    last = records[-1]
    other: Record | None = None
    for index in range(len(records) - 2, -1, -1):
        if records[index].args_hash != last.args_hash:
            other = records[index]
            break
    if other is None or args_hash != other.args_hash:
        return NO_PING_PONG

    tail: list[Record] = []
    for record in reversed(records):
        expected = last.args_hash if len(tail) % 2 == 0 else other.args_hash
        if record.args_hash != expected:
            break
        tail.append(record)
    if len(tail) < 2:
        return NO_PING_PONG

    # No progress only when every tail record has a result and each side's results agree.
    side_results: dict[str, str] = {}
    evidence = True
    for record in tail:
        if record.result_hash is None:
            evidence = False
            break
        seen = side_results.setdefault(record.args_hash, record.result_hash)
        if seen != record.result_hash:
            evidence = False
            break
    return PingPong(
        count=len(tail) + 1,
        paired_tool_name=last.tool_name,
        paired_args_hash=last.args_hash,
        no_progress_evidence=evidence and len(side_results) == 2,
    )


def detect(
    records: Sequence[Record],
    tool_name: str,
    args_hash: str,
    known_poll: bool,
    settings: LoopDetectionSettings,
) -> Detection | None:
    """The first matching row of the precedence table, or None."""
    unknown_count, missing_tool = unknown_tool_streak(records, tool_name)
    if unknown_count >= settings.unknown_tool_threshold:
        missing = missing_tool or tool_name
        return Detection(
            Detector.UNKNOWN_TOOL_REPEAT, Level.CRITICAL, unknown_count,
            f"Blocked: the tool {missing} is not available here and has been tried "
            f"{unknown_count} times. Stop calling it and answer without it.",
            f"unknown-tool:{tool_name}:{missing}",
        )

    streak = no_progress_streak(records, args_hash)
    result_key = f"{tool_name}:{args_hash}:{streak.result_hash or 'none'}"
    if streak.count >= settings.global_circuit_breaker_threshold:
        return Detection(
            Detector.GLOBAL_CIRCUIT_BREAKER, Level.CRITICAL, streak.count,
            f"Blocked by the circuit breaker: {tool_name} returned the identical result "
            f"{streak.count} times in a row for the same arguments, so this call was not run. "
            "Stop this loop and report that the task cannot be completed this way.",
            f"global:{result_key}",
        )

    if known_poll and settings.known_poll_no_progress:
        if streak.count >= settings.critical_threshold:
            return Detection(
                Detector.KNOWN_POLL_NO_PROGRESS, Level.CRITICAL, streak.count,
                f"Blocked: {tool_name} was polled {streak.count} times with the same arguments "
                "and the state never changed, so this poll was not run. Stop polling and "
                "report the process as stuck or failed.",
                f"poll:{result_key}",
            )
        if streak.count >= settings.warning_threshold:
            return Detection(
                Detector.KNOWN_POLL_NO_PROGRESS, Level.WARNING, streak.count,
                f"Warning: {tool_name} was polled {streak.count} times with the same arguments "
                "and the state has not changed. Wait longer between checks, or report the task "
                "as failed if the process is stuck.",
                f"poll:{result_key}",
            )

    if settings.ping_pong:
        pong = ping_pong(records, args_hash)
        if pong.count >= settings.warning_threshold:
            pair_key = "pingpong:" + "|".join(sorted((args_hash, pong.paired_args_hash)))
            if pong.count >= settings.critical_threshold and pong.no_progress_evidence:
                return Detection(
                    Detector.PING_PONG, Level.CRITICAL, pong.count,
                    f"Blocked: you have alternated between {tool_name} and "
                    f"{pong.paired_tool_name} for {pong.count} consecutive calls and both keep "
                    "returning the same results, so this call was not run. Stop switching "
                    "between them; try a different approach or report the task as failed.",
                    pair_key, pong.paired_tool_name,
                )
            return Detection(
                Detector.PING_PONG, Level.WARNING, pong.count,
                f"Warning: you have alternated between {tool_name} and {pong.paired_tool_name} "
                f"for {pong.count} consecutive calls. This looks like a ping-pong loop: stop "
                "switching between the two, or report the task as failed.",
                pair_key, pong.paired_tool_name,
            )

    if not known_poll and settings.generic_repeat:
        if streak.count >= settings.critical_threshold:
            return Detection(
                Detector.GENERIC_REPEAT, Level.CRITICAL, streak.count,
                f"Blocked: {tool_name} was called {streak.count} times with identical arguments "
                "and returned the identical result every time, so this call was not run. Do not "
                "retry it; change approach or report that the task failed.",
                f"generic:{result_key}",
            )
        repeats = recent_count(records, args_hash)
        if repeats >= settings.warning_threshold:
            return Detection(
                Detector.GENERIC_REPEAT, Level.WARNING, repeats,
                f"Warning: {tool_name} has been called {repeats} times with identical arguments. "
                "If the result is not changing, stop repeating this call: try something else "
                "or report the task as failed.",
                f"generic:{tool_name}:{args_hash}",
            )
    return None
