"""The five rolling detectors and their precedence (spec section 5).

Every count is over *prior* records: the call being decided is not yet in history.
"""
from __future__ import annotations

from dataclasses import dataclass

from .settings import LoopDetectionSettings
from .state import DIGEST, PENDING, History, args_hash_text, result_hash_text
from .verdicts import Detector, Level


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


@dataclass(slots=True)
class PingPong:
    count: int
    paired_tool_name: str = ""
    paired_args_digest: bytes = b""
    no_progress_evidence: bool = False


NO_PING_PONG = PingPong(0)


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


def ping_pong(history: History, tool_name: str, args_digest: bytes) -> PingPong:
    """An alternating tail last, other, last, … that the current call would extend."""
    size = len(history)
    if size < 2:
        return NO_PING_PONG
    args, tools = history.args, history.tools
    last_tool = tools[-1]
    # The current call must be the pattern `other`: cheap rejections first.
    if last_tool == tool_name and args.startswith(args_digest, (size - 1) * DIGEST):
        return NO_PING_PONG
    last = bytes(args[-DIGEST:])
    other_index = -1
    for index in range(size - 2, -1, -1):
        if tools[index] != last_tool or not args.startswith(last, index * DIGEST):
            other_index = index
            break
    if other_index < 0 or tools[other_index] != tool_name or not args.startswith(args_digest, other_index * DIGEST):
        return NO_PING_PONG

    tail = 0
    for index in range(size - 1, -1, -1):
        want_tool, want = (last_tool, last) if tail % 2 == 0 else (tool_name, args_digest)
        if tools[index] != want_tool or not args.startswith(want, index * DIGEST):
            break
        tail += 1
    if tail < 2:
        return NO_PING_PONG

    # No progress only when every tail record has a result and each side's results agree.
    status, results = history.status, history.results
    side_results: list[bytes | None] = [None, None]
    evidence = True
    for offset in range(tail):
        index = size - 1 - offset
        if status[index] == PENDING:
            evidence = False
            break
        key = bytes((status[index],)) + results[index * DIGEST:(index + 1) * DIGEST]
        side = offset % 2
        if side_results[side] is None:
            side_results[side] = key
        elif side_results[side] != key:
            evidence = False
            break
    return PingPong(tail + 1, last_tool, last, evidence)


def _streak_indexes(history: History, tool_name: str, args_digest: bytes, count: int) -> tuple[int, ...]:
    """The `count` newest completed records of this call (the streak), oldest first."""
    found = [index for index in history.matches(tool_name, args_digest) if history.status[index] != PENDING]
    return tuple(reversed(found[:count]))


def _recent_indexes(history: History, tool_name: str, args_digest: bytes) -> tuple[int, ...]:
    return tuple(reversed(list(history.matches(tool_name, args_digest))))


def _completed_indexes(history: History, count: int) -> tuple[int, ...]:
    status = history.status
    found = [index for index in range(len(status) - 1, -1, -1) if status[index] != PENDING][:count]
    return tuple(reversed(found))


def _result_text(key: bytes | None) -> str:
    """A CallCounts.result_key (status byte + digest) in the spec's spelling."""
    return "none" if key is None else result_hash_text(key[0], key[1:])


def detect(
    history: History,
    tool_name: str,
    args_digest: bytes,
    known_poll: bool,
    settings: LoopDetectionSettings,
    no_new_triple_streak: int = 0,
) -> Detection | None:
    """The first matching row of the precedence table, or None.

    The run-wide breaker (an opt-in extension) sits right after the global circuit breaker.
    """
    size = len(history)
    unknown_count, missing_tool = unknown_tool_streak(history, tool_name)
    if unknown_count >= settings.unknown_tool_threshold:
        missing = missing_tool or tool_name
        return Detection(
            Detector.UNKNOWN_TOOL_REPEAT, Level.CRITICAL, unknown_count,
            f"Blocked: the tool {missing} is not available here and has been tried "
            f"{unknown_count} times. Stop calling it and answer without it.",
            f"unknown-tool:{tool_name}:{missing}", evidence=tuple(range(size - unknown_count, size)),
        )

    counts = call_counts(history, tool_name, args_digest)
    streak = counts.no_progress_streak
    args_hash = args_hash_text(tool_name, args_digest)
    result_key = f"{tool_name}:{args_hash}:{_result_text(counts.result_key)}"
    if streak >= settings.global_circuit_breaker_threshold:
        return Detection(
            Detector.GLOBAL_CIRCUIT_BREAKER, Level.CRITICAL, streak,
            f"Blocked by the circuit breaker: {tool_name} returned the identical result "
            f"{streak} times in a row for the same arguments, so this call was not run. "
            "Stop this loop and report that the task cannot be completed this way.",
            f"global:{result_key}", evidence=_streak_indexes(history, tool_name, args_digest, streak),
        )

    run_wide = settings.run_wide_breaker_threshold
    if run_wide and no_new_triple_streak >= run_wide:
        return Detection(
            Detector.RUN_WIDE_NO_PROGRESS, Level.CRITICAL, no_new_triple_streak,
            f"Blocked: the last {no_new_triple_streak} completed tool calls of this run, across all "
            "tools and arguments, only repeated calls and results already seen, so this call was "
            "not run. Stop cycling through the same actions; change approach or report the task "
            "as failed.",
            f"run-wide:{run_wide}", evidence=_completed_indexes(history, no_new_triple_streak),
        )

    if known_poll and settings.known_poll_no_progress:
        if streak >= settings.critical_threshold:
            return Detection(
                Detector.KNOWN_POLL_NO_PROGRESS, Level.CRITICAL, streak,
                f"Blocked: {tool_name} was polled {streak} times with the same arguments "
                "and the state never changed, so this poll was not run. Stop polling and "
                "report the process as stuck or failed.",
                f"poll:{result_key}", evidence=_streak_indexes(history, tool_name, args_digest, streak),
            )
        if streak >= settings.warning_threshold:
            return Detection(
                Detector.KNOWN_POLL_NO_PROGRESS, Level.WARNING, streak,
                f"Warning: {tool_name} was polled {streak} times with the same arguments "
                "and the state has not changed. Wait longer between checks, or report the task "
                "as failed if the process is stuck.",
                f"poll:{result_key}", evidence=_streak_indexes(history, tool_name, args_digest, streak),
            )

    if settings.ping_pong:
        pong = ping_pong(history, tool_name, args_digest)
        if pong.count >= settings.warning_threshold:
            paired_hash = args_hash_text(pong.paired_tool_name, pong.paired_args_digest)
            pair_key = "pingpong:" + "|".join(sorted((args_hash, paired_hash)))
            if pong.count >= settings.critical_threshold and pong.no_progress_evidence:
                return Detection(
                    Detector.PING_PONG, Level.CRITICAL, pong.count,
                    f"Blocked: you have alternated between {tool_name} and "
                    f"{pong.paired_tool_name} for {pong.count} consecutive calls and both keep "
                    "returning the same results, so this call was not run. Stop switching "
                    "between them; try a different approach or report the task as failed.",
                    pair_key, pong.paired_tool_name, tuple(range(size - pong.count + 1, size)),
                )
            return Detection(
                Detector.PING_PONG, Level.WARNING, pong.count,
                f"Warning: you have alternated between {tool_name} and {pong.paired_tool_name} "
                f"for {pong.count} consecutive calls. This looks like a ping-pong loop: stop "
                "switching between the two, or report the task as failed.",
                pair_key, pong.paired_tool_name, tuple(range(size - pong.count + 1, size)),
            )

    if not known_poll and settings.generic_repeat:
        if streak >= settings.critical_threshold:
            return Detection(
                Detector.GENERIC_REPEAT, Level.CRITICAL, streak,
                f"Blocked: {tool_name} was called {streak} times with identical arguments "
                "and returned the identical result every time, so this call was not run. Do not "
                "retry it; change approach or report that the task failed.",
                f"generic:{result_key}", evidence=_streak_indexes(history, tool_name, args_digest, streak),
            )
        repeats = counts.recent_count
        if repeats >= settings.warning_threshold:
            return Detection(
                Detector.GENERIC_REPEAT, Level.WARNING, repeats,
                f"Warning: {tool_name} has been called {repeats} times with identical arguments. "
                "If the result is not changing, stop repeating this call: try something else "
                "or report the task as failed.",
                f"generic:{tool_name}:{args_hash}", evidence=_recent_indexes(history, tool_name, args_digest),
            )
    return None
