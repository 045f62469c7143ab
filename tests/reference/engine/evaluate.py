"""The engine's single entry point: one event in, one verdict out, run state updated in place.

Pure: no clock, no I/O, no globals. The caller (the daemon's service layer) owns the RunState,
resolves the settings for the run's agent, and validates the envelope (run id, sizes).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from . import compaction_guard
from .detectors import detect, run_wide
from .events import CompactionRetry, Event, RunEnd, ToolCall, ToolOutcome, UserTurn
from .external_content import MARKER as WRAPPER_MARKER
from .fingerprints import args_digest, is_known_poll, outcome_fingerprint
from .jsonvalues import JsonDecodeError, JsonTooDeep, decode_json
from .settings import DEFAULT_TOOL_CATALOG, LoopDetectionSettings, ToolCatalog
from .state import MAX_ANNOUNCED_KEYS, PENDING, History, RunState
from .toolnames import normalize_tool_name
from .verdicts import ALLOW, Action, ErrorCode, Level, Verdict, reject


class _InvalidEvent(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# Deeper documents are rejected (json_too_deep): no real tool call nests this far, and the
# parser's own recursion limit must never be what stops a hostile payload.
DEFAULT_MAX_JSON_DEPTH = 64


def _decode(text: str, field: str, code: ErrorCode, max_depth: int) -> Any:
    try:
        return decode_json(text, max_depth)
    except JsonTooDeep as exc:
        raise _InvalidEvent(ErrorCode.JSON_TOO_DEEP, f"{field} {exc}") from None
    except JsonDecodeError as exc:
        raise _InvalidEvent(code, f"{field} is not valid JSON: {exc}") from None


def _decode_params(params_json: str, max_depth: int) -> Any:
    # An empty params_json is the contract's spelling of {}.
    if not params_json or params_json.isspace():
        return {}
    return _decode(params_json, "params_json", ErrorCode.INVALID_PARAMS_JSON, max_depth)


def new_run_state(settings: LoopDetectionSettings) -> RunState:
    return RunState(History(settings.history_size))


def evaluate(
    state: RunState,
    event: Event,
    settings: LoopDetectionSettings,
    catalog: ToolCatalog = DEFAULT_TOOL_CATALOG,
    *,
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
) -> Verdict:
    """Decide one event of a run and update the run's state.

    A malformed event yields a REJECT verdict and leaves the state untouched.
    """
    try:
        if isinstance(event, ToolCall):
            return _on_tool_call(state, event, settings, catalog, max_json_depth)
        if isinstance(event, ToolOutcome):
            return _on_tool_outcome(state, event, settings, catalog, max_json_depth)
        if isinstance(event, CompactionRetry):
            return _still_aborted(state) or compaction_guard.arm(state, settings)
        if isinstance(event, RunEnd):
            return ALLOW
        if isinstance(event, UserTurn):
            return _still_aborted(state) or _user_turn(state, settings)
    except _InvalidEvent as invalid:
        return reject(invalid.code, invalid.message)
    return reject(ErrorCode.MISSING_EVENT_KIND, f"unsupported event type {type(event).__name__}")


def _user_turn(state: RunState, settings: LoopDetectionSettings) -> Verdict:
    """A new instruction (loopwarden.userTurnResets): forget the repeat streaks, the warnings
    announced and the blocks' count; the post-compaction guard stays (an abort is gated before)."""
    if settings.user_turn_resets:
        state.history = History(state.history.capacity)
        state.announced = None
        state.blocks = 0
        state.seen_triples = None
        state.no_new_streak = 0
    return ALLOW


def _still_aborted(state: RunState, tool_name: str = "") -> Verdict | None:
    if state.abort is None:
        return None
    return replace(state.abort, tool_name=tool_name or state.abort.tool_name)


def _gate(state: RunState, settings: LoopDetectionSettings, tool_name: str) -> Verdict | None:
    """Before a call or outcome is looked at: an aborted run stays aborted, and with detection
    switched off (enabled: false) nothing is recorded. Otherwise apply the current historySize."""
    aborted = _still_aborted(state, tool_name)
    if aborted is not None:
        return aborted
    if not settings.recording_on:
        return Verdict(action=Action.ALLOW, tool_name=tool_name)
    state.resize(settings.history_size)
    return None


def _spelling(raw: str, tool_name: str) -> str:
    """The name as the host sent it, trimmed (a blank one: the normalised name): what messages,
    verdicts and InspectRun show, while matching, keys and hashes use the normalised name."""
    return raw.strip() or tool_name


def _on_tool_call(
    state: RunState, event: ToolCall, settings: LoopDetectionSettings, catalog: ToolCatalog, max_depth: int
) -> Verdict:
    tool_name = normalize_tool_name(event.tool_name)
    spelled = _spelling(event.tool_name, tool_name)
    params = _decode_params(event.params_json, max_depth)
    gated = _gate(state, settings, spelled)
    if gated is not None:
        return gated
    call_digest = args_digest(tool_name, params)

    history = state.history
    detection = None
    if settings.rolling_detectors_on:
        known_poll = is_known_poll(tool_name, params, catalog)
        detection = detect(history, tool_name, call_digest, known_poll, settings, state.no_new_streak, spelled)

    if detection is not None and detection.level is Level.CRITICAL:
        state.blocks += 1
        seqs, call_ids = _evidence(history, detection.evidence)
        verdict = Verdict(
            action=Action.BLOCK, detector=detection.detector, level=detection.level, count=detection.count,
            message=detection.message, warning_key=detection.warning_key, announce=True,
            paired_tool_name=detection.paired_tool_name, tool_name=spelled,
            evidence_seqs=seqs, evidence_call_ids=call_ids,
        )
        if settings.abort_after_blocks and state.blocks >= settings.abort_after_blocks:
            verdict = _escalate(verdict, state.blocks)
        if settings.shadow:
            # Not enforced: the call runs, so it is recorded like any allowed call.
            history.append(event.seq, tool_name, call_digest, event.tool_call_id, spelled=spelled)
            return _shadowed(verdict)
        if verdict.action is Action.ABORT:
            state.abort = verdict
        # Not recorded: the next identical call meets the same history and is blocked again.
        return verdict

    if detection is None:
        history.append(event.seq, tool_name, call_digest, event.tool_call_id, spelled=spelled)
        return Verdict(action=Action.ALLOW, tool_name=spelled)
    seqs, call_ids = _evidence(history, detection.evidence)
    history.append(event.seq, tool_name, call_digest, event.tool_call_id, spelled=spelled)
    return Verdict(
        action=Action.WARN, detector=detection.detector, level=detection.level, count=detection.count,
        message=detection.message, warning_key=detection.warning_key,
        announce=_announce(state, detection.warning_key, detection.count),
        paired_tool_name=detection.paired_tool_name, tool_name=spelled,
        evidence_seqs=seqs, evidence_call_ids=call_ids,
    )


def _evidence(history: History, indexes: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    seqs, call_ids = history.seqs, history.call_ids
    return tuple(seqs[i] for i in indexes), tuple(call_ids[i] for i in indexes if call_ids[i])


def _escalate(block: Verdict, blocks: int) -> Verdict:
    """abortAfterBlocks: the block that reaches the limit ends the run instead."""
    return replace(
        block, action=Action.ABORT, error_code=ErrorCode.TOOL_LOOP_PERSISTED.value,
        message=f"CRITICAL: run aborted: this is block {blocks} of the run ({block.detector.value} on "
                f"{block.tool_name}), so the loop persisted and the run is over (tool_loop_persisted). "
                f"Last block: {block.message.removeprefix('CRITICAL: ')}",
    )


def _shadowed(verdict: Verdict) -> Verdict:
    """Shadow mode: report the BLOCK/ABORT, enforce nothing."""
    return replace(verdict, action=Action.ALLOW, shadow_action=verdict.action, announce=True)


def _announce(state: RunState, warning_key: str, count: int) -> bool:
    """First warning for a key, then once more each time its count enters a new decade."""
    decade = count // 10
    announced = state.announced
    if announced is None:
        announced = state.announced = {}
    previous = announced.get(warning_key)
    if previous is not None and decade <= previous:
        return False
    if previous is None and len(announced) >= MAX_ANNOUNCED_KEYS:
        del announced[next(iter(announced))]
    announced[warning_key] = decade
    return True


def _on_tool_outcome(
    state: RunState, event: ToolOutcome, settings: LoopDetectionSettings, catalog: ToolCatalog, max_depth: int
) -> Verdict:
    tool_name = normalize_tool_name(event.tool_name)
    spelled = _spelling(event.tool_name, tool_name)
    params = _decode_params(event.params_json, max_depth)
    has_result = event.error is None and event.result_json is not None and event.result_json != ""
    result = (
        _decode(event.result_json, "result_json", ErrorCode.INVALID_RESULT_JSON, max_depth)
        if has_result
        else None
    )
    gated = _gate(state, settings, spelled)
    if gated is not None:
        return gated

    raw = event.error if event.error is not None else event.result_json
    fingerprint = outcome_fingerprint(
        tool_name, params, result, event.error, catalog, has_result=has_result,
        wrapped=raw is not None and WRAPPER_MARKER in raw,
    )
    if fingerprint.status == PENDING:
        return Verdict(action=Action.ALLOW, tool_name=spelled)
    call_digest = args_digest(tool_name, params)
    _record_outcome(state.history, event, tool_name, call_digest, fingerprint.status, fingerprint.digest,
                    fingerprint.unknown_tool_name, spelled)
    if settings.run_wide_breaker_threshold:
        run_wide.track_outcome(state, tool_name, call_digest, fingerprint.status, fingerprint.digest)
    abort = compaction_guard.observe_outcome(state, tool_name, call_digest, fingerprint.status, fingerprint.digest,
                                             fingerprint.result_hash, event.seq, spelled)
    if abort is not None:
        if settings.shadow:
            return _shadowed(abort)
        state.abort = abort
        return abort
    return Verdict(action=Action.ALLOW, tool_name=spelled)


def _record_outcome(
    history: History,
    event: ToolOutcome,
    tool_name: str,
    call_digest: bytes,
    status: int,
    result_digest: bytes,
    unknown_tool_name: str | None,
    spelled: str | None = None,
) -> None:
    """Fill the newest matching pending call, or append a completed record."""
    call_id = event.tool_call_id
    for index in history.matches(tool_name, call_digest):
        if history.status[index] != PENDING:
            continue
        if call_id and history.call_ids[index] != call_id:
            continue
        history.set_result(index, status, result_digest, unknown_tool_name)
        return
    history.append(event.seq, tool_name, call_digest, call_id, status, result_digest, unknown_tool_name, spelled)
