"""ping_pong: two call patterns alternating (warns at W; blocks at C if both sides' results are stable).

Opt-in (`loopwarden.pingPongNeedsAnswers`): a side whose every result was empty (no text, no
details: a `think` note, a silent acknowledgement) proves nothing about progress, so such an
alternation only warns; its other side's repeats are generic_repeat's and errorRepeat's to judge
(their streaks skip the calls in between).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..jsonvalues import digest_bytes
from ..settings import LoopDetectionSettings
from ..state import DIGEST, PENDING, RESULT, History, args_hash_text
from ..verdicts import Detector, Level
from .base import CallContext, Detection

DETECTOR = Detector.PING_PONG

# Result keys (status byte + digest) of outcomes that say nothing: the default hash of an empty
# OpenClaw result, and empty plain values.
SILENT_RESULTS = frozenset(
    bytes((RESULT,)) + digest_bytes(value) for value in ({"details": {}, "text": ""}, "", None, {}, [])
)


@dataclass(slots=True)
class PingPong:
    count: int
    paired_tool_name: str = ""
    paired_args_digest: bytes = b""
    no_progress_evidence: bool = False
    silent_side: bool = False  # one side's results were all empty (see module docstring)


NO_PING_PONG = PingPong(0)


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
    silent = evidence and (side_results[0] in SILENT_RESULTS or side_results[1] in SILENT_RESULTS)
    return PingPong(tail + 1, last_tool, last, evidence, silent)


def detect(context: CallContext, settings: LoopDetectionSettings) -> Detection | None:
    if not settings.ping_pong:
        return None
    pong = ping_pong(context.history, context.tool_name, context.args_digest)
    if pong.count < settings.warning_threshold:
        return None
    tool_name = context.spelled  # messages name both tools as their calls spelled them
    paired = context.history.spelling_at(len(context.history) - 1)
    paired_hash = args_hash_text(pong.paired_tool_name, pong.paired_args_digest)
    pair_key = "pingpong:" + "|".join(sorted((context.args_hash, paired_hash)))
    size = len(context.history)
    evidence = tuple(range(size - pong.count + 1, size))
    if pong.count >= settings.critical_threshold and pong.no_progress_evidence and not (
            pong.silent_side and settings.ping_pong_needs_answers):
        return Detection(
            DETECTOR, Level.CRITICAL, pong.count,
            f"CRITICAL: ping-pong loop: you have alternated between {tool_name} and "
            f"{paired} for {pong.count} consecutive calls and both keep "
            "returning the same results, so this call was not run. Stop switching "
            "between them; try a different approach or report the task as failed.",
            pair_key, paired, evidence,
        )
    return Detection(
        DETECTOR, Level.WARNING, pong.count,
        f"WARNING: you have alternated between {tool_name} and {paired} "
        f"for {pong.count} consecutive calls. This looks like a ping-pong loop: stop "
        "switching between the two, or report the task as failed.",
        pair_key, paired, evidence,
    )
