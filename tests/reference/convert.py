"""protobuf <-> the reference service's types (the daemon's own transport speaks to the core)."""
from __future__ import annotations

from loopwarden.v1 import loopwarden_pb2 as pb

from loopwarden_server.transport.convert import effective_config

from .engine import Action, CompactionRetry, Detector, Level, RunEnd, ToolCall, ToolOutcome, UserTurn, Verdict
from .service import Decision, EventInput, RunView

_ACTION = {
    Action.ALLOW: pb.ACTION_ALLOW, Action.WARN: pb.ACTION_WARN, Action.BLOCK: pb.ACTION_BLOCK,
    Action.ABORT: pb.ACTION_ABORT, Action.REJECT: pb.ACTION_REJECT,
}
_DETECTOR = {
    Detector.NONE: pb.DETECTOR_UNSPECIFIED,
    Detector.GENERIC_REPEAT: pb.DETECTOR_GENERIC_REPEAT,
    Detector.KNOWN_POLL_NO_PROGRESS: pb.DETECTOR_KNOWN_POLL_NO_PROGRESS,
    Detector.PING_PONG: pb.DETECTOR_PING_PONG,
    Detector.UNKNOWN_TOOL_REPEAT: pb.DETECTOR_UNKNOWN_TOOL_REPEAT,
    Detector.GLOBAL_CIRCUIT_BREAKER: pb.DETECTOR_GLOBAL_CIRCUIT_BREAKER,
    Detector.POST_COMPACTION_GUARD: pb.DETECTOR_POST_COMPACTION_GUARD,
    Detector.RUN_WIDE_NO_PROGRESS: pb.DETECTOR_RUN_WIDE_NO_PROGRESS,
    Detector.ARGUMENT_CHURN: pb.DETECTOR_ARGUMENT_CHURN,
    Detector.ERROR_REPEAT: pb.DETECTOR_ERROR_REPEAT,
    Detector.DUPLICATE_SIDE_EFFECT: pb.DETECTOR_DUPLICATE_SIDE_EFFECT,
    Detector.CYCLE: pb.DETECTOR_CYCLE,
    Detector.FAILURE_CASCADE: pb.DETECTOR_FAILURE_CASCADE,
}
_LEVEL = {Level.NONE: pb.LEVEL_UNSPECIFIED, Level.WARNING: pb.LEVEL_WARNING, Level.CRITICAL: pb.LEVEL_CRITICAL}


def event_input(event: pb.Event, tenant: str = "") -> EventInput:
    kind = event.WhichOneof("kind")
    seq = event.seq
    if kind == "tool_call":
        call = event.tool_call
        payload = ToolCall(call.tool_name, call.params_json, call.tool_call_id, seq)
    elif kind == "tool_outcome":
        outcome = event.tool_outcome
        which = outcome.WhichOneof("outcome")
        payload = ToolOutcome(
            outcome.tool_name, outcome.params_json, outcome.tool_call_id,
            outcome.result_json if which == "result_json" else None,
            outcome.error if which == "error" else None, seq,
        )
    elif kind == "compaction_retry":
        payload = CompactionRetry(seq)
    elif kind == "run_end":
        payload = RunEnd(seq)
    elif kind == "user_turn":
        payload = UserTurn(event.user_turn.prompt_id, seq)
    else:
        payload = None
    return EventInput(event.run_id, payload, event.agent_id, event.session_id, seq, tenant)


def verdict_message(decision: Decision) -> pb.Verdict:
    verdict: Verdict = decision.verdict
    if verdict.action is Action.ALLOW and not verdict.message:
        # Most verdicts: skip the keyword handling of eight fields that are all empty.
        return pb.Verdict(seq=decision.seq, run_id=decision.run_id, action=pb.ACTION_ALLOW,
                          tool_name=verdict.tool_name)
    message = pb.Verdict(
        seq=decision.seq, run_id=decision.run_id, action=_ACTION[verdict.action],
        detector=_DETECTOR[verdict.detector], level=_LEVEL[verdict.level], count=verdict.count,
        message=verdict.message, warning_key=verdict.warning_key, announce=verdict.announce,
        paired_tool_name=verdict.paired_tool_name, error_code=verdict.error_code,
        tool_name=verdict.tool_name, decision_id=decision.decision_id,
    )
    if verdict.evidence_seqs:
        message.evidence.seqs.extend(verdict.evidence_seqs)
        message.evidence.tool_call_ids.extend(verdict.evidence_call_ids)
        message.evidence.loop_started_seq = verdict.loop_started_seq
    if verdict.shadow_action is not None:
        message.shadow = True
        message.shadow_action = _ACTION[verdict.shadow_action]
    return message


def inspect_response(view: RunView) -> pb.InspectRunResponse:
    return pb.InspectRunResponse(
        run_id=view.run_id,
        agent_id=view.agent_id,
        records=[
            pb.RunRecord(seq=r.seq, tool_name=r.tool_name, args_hash=r.args_hash, tool_call_id=r.tool_call_id,
                         result_hash=r.result_hash or "", unknown_tool_name=r.unknown_tool_name or "")
            for r in view.records
        ],
        guard=pb.GuardState(armed=view.guard_armed, window_size=view.guard_window_size,
                            observed=view.guard_observed),
        blocks=view.blocks,
        aborted=view.aborted,
        abort_error_code=view.abort_error_code,
        effective_config=effective_config(view.settings),
        events_evaluated=view.events_evaluated,
        recent_verdicts=[verdict_message(decision) for decision in view.recent_decisions],
        agent_label=view.agent_label,
    )
