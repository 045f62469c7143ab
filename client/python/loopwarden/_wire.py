"""Conversions between the client's plain types and the generated protobuf messages."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from google.protobuf.json_format import MessageToDict

from ._event_extra import (ENVELOPE_EXTRA, KIND_EXTRA, ApprovalExtra, CompactionRetryExtra, ModelOutputExtra,
                           RunEndExtra, ToolCallExtra, ToolOutcomeExtra, UsageExtra, UserTurnExtra)
from .eventformat import EventKind, EventRecord, json_text, parse_event
from .types import Action, Exemption, OutputStreaks, RunInspection, RunRecord, Totals, Verdict
from .v1 import loopwarden_pb2 as pb

MISSING: Any = object()

_ACTIONS: dict[int, Action] = {
    pb.ACTION_ALLOW: Action.ALLOW, pb.ACTION_WARN: Action.WARN, pb.ACTION_BLOCK: Action.BLOCK,
    pb.ACTION_ABORT: Action.ABORT, pb.ACTION_REJECT: Action.REJECT, pb.ACTION_ASK: Action.ASK}


def action_of(value: int) -> Action:
    """The client's Action for a wire value; one this client does not know (a newer daemon's) is
    BLOCK: not running a call is the safe reading, and a runner never crashes on it."""
    return _ACTIONS.get(value, Action.BLOCK)


# Approval.scope by its spelling in the client ("" = once).
APPROVAL_SCOPES = {"": pb.APPROVAL_SCOPE_UNSPECIFIED, "once": pb.APPROVAL_SCOPE_ONCE,
                   "always": pb.APPROVAL_SCOPE_ALWAYS}


def _approval_scope(scope: str) -> pb.ApprovalScope:
    if scope not in APPROVAL_SCOPES:
        raise ValueError(f"scope must be 'once' or 'always', got {scope!r}")
    return APPROVAL_SCOPES[scope]


def _envelope(run_id: str, agent_id: str, session_id: str, seq: int, parent_run_id: str,
              accepts_ask: bool, extra: Mapping[str, Any]) -> pb.Event:
    return pb.Event(run_id=run_id, agent_id=agent_id, session_id=session_id, seq=seq, parent_run_id=parent_run_id,
                    accepts_ask=accepts_ask, **{k: v for k, v in extra.items() if k in ENVELOPE_EXTRA})


def _own(kind: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of `extra` (a builder's generic keywords, _event_extra.py) that are the kind
    message's own; a name that is neither its own nor Event's is a TypeError, as for any keyword."""
    own = KIND_EXTRA[kind]
    for name in extra:
        if name not in own and name not in ENVELOPE_EXTRA:
            raise TypeError(f"{kind}_event() got an unexpected keyword argument {name!r}")
    return {k: v for k, v in extra.items() if k in own}


def _params_text(params: Any, params_json: str | None) -> str:
    if params_json is not None:
        return params_json
    return "" if params is None else json_text(params)


# ToolCall.tool_class by the config's spelling of a class ("" = unspecified).
TOOL_CLASSES = {"": pb.TOOL_CLASS_UNSPECIFIED, "readOnly": pb.TOOL_CLASS_READ_ONLY,
                "mutating": pb.TOOL_CLASS_MUTATING, "poll": pb.TOOL_CLASS_POLL}


def _tool_class(name: str) -> pb.ToolClass:
    if name not in TOOL_CLASSES:
        raise ValueError(f"tool_class must be one of {', '.join(repr(c) for c in TOOL_CLASSES)}, got {name!r}")
    return TOOL_CLASSES[name]


def tool_call_event(run_id: str, tool_name: str, params: Any = None, *, params_json: str | None = None,
                    tool_call_id: str = "", agent_id: str = "", session_id: str = "", seq: int = 0,
                    tool_class: str = "", batch_id: str = "", parent_run_id: str = "",
                    accepts_ask: bool = False, **extra: Unpack[ToolCallExtra]) -> pb.Event:
    event = _envelope(run_id, agent_id, session_id, seq, parent_run_id, accepts_ask, extra)
    event.tool_call.CopyFrom(pb.ToolCall(tool_name=tool_name, tool_call_id=tool_call_id,
                                         params_json=_params_text(params, params_json),
                                         tool_class=_tool_class(tool_class), batch_id=batch_id,
                                         **_own("tool_call", extra)))
    return event


def tool_outcome_event(run_id: str, tool_name: str, params: Any = None, *, result: Any = MISSING,
                       result_json: str | None = None, error: str | None = None, params_json: str | None = None,
                       tool_call_id: str = "", agent_id: str = "", session_id: str = "", seq: int = 0,
                       duration_ms: int = 0, parent_run_id: str = "", accepts_ask: bool = False,
                       **extra: Unpack[ToolOutcomeExtra]) -> pb.Event:
    outcome = pb.ToolOutcome(tool_name=tool_name, tool_call_id=tool_call_id,
                             params_json=_params_text(params, params_json), duration_ms=duration_ms,
                             **_own("tool_outcome", extra))
    if error is not None:
        outcome.error = error
    elif result_json is not None:
        outcome.result_json = result_json
    elif result is not MISSING:
        outcome.result_json = json_text(result)
    event = _envelope(run_id, agent_id, session_id, seq, parent_run_id, accepts_ask, extra)
    event.tool_outcome.CopyFrom(outcome)
    return event


def compaction_retry_event(run_id: str, *, agent_id: str = "", session_id: str = "", seq: int = 0,
                           parent_run_id: str = "", accepts_ask: bool = False,
                           **extra: Unpack[CompactionRetryExtra]) -> pb.Event:
    event = _envelope(run_id, agent_id, session_id, seq, parent_run_id, accepts_ask, extra)
    event.compaction_retry.CopyFrom(pb.CompactionRetry(**_own("compaction_retry", extra)))
    return event


def user_turn_event(run_id: str, *, prompt_id: str = "", agent_id: str = "", session_id: str = "",
                    seq: int = 0, parent_run_id: str = "", accepts_ask: bool = False,
                    **extra: Unpack[UserTurnExtra]) -> pb.Event:
    event = _envelope(run_id, agent_id, session_id, seq, parent_run_id, accepts_ask, extra)
    event.user_turn.CopyFrom(pb.UserTurn(prompt_id=prompt_id, **_own("user_turn", extra)))
    return event


def usage_event(run_id: str, *, input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0, model: str = "",
                agent_id: str = "", session_id: str = "", seq: int = 0, parent_run_id: str = "",
                accepts_ask: bool = False, **extra: Unpack[UsageExtra]) -> pb.Event:
    """What one model response cost, for the tree's token and cost budgets."""
    event = _envelope(run_id, agent_id, session_id, seq, parent_run_id, accepts_ask, extra)
    event.usage.CopyFrom(pb.Usage(input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd,
                                  model=model, **_own("usage", extra)))
    return event


def approval_event(run_id: str, *, approved: bool, tool_call_id: str = "", decision_id: str = "", scope: str = "once",
                   ttl_seconds: int = 0, agent_id: str = "", session_id: str = "", seq: int = 0,
                   parent_run_id: str = "", accepts_ask: bool = False, **extra: Unpack[ApprovalExtra]) -> pb.Event:
    """A human's answer to an ASK, naming the asked call by tool_call_id or the ASK's decision_id.
    scope "once": this call only; "always": a standing exemption (for ttl_seconds, 0: the daemon's
    loopwarden.exemptionTtlSeconds)."""
    if not tool_call_id and not decision_id:
        raise ValueError("an approval names the asked call: pass tool_call_id or decision_id")
    event = _envelope(run_id, agent_id, session_id, seq, parent_run_id, accepts_ask, extra)
    event.approval.CopyFrom(pb.Approval(tool_call_id=tool_call_id, decision_id=decision_id, approved=approved,
                                        scope=_approval_scope(scope), ttl_seconds=ttl_seconds,
                                        **_own("approval", extra)))
    return event


# ModelOutput.output_kind by its spelling in the client ("" = message).
OUTPUT_KINDS = {"": pb.OUTPUT_KIND_UNSPECIFIED, "message": pb.OUTPUT_KIND_MESSAGE, "thought": pb.OUTPUT_KIND_THOUGHT,
                "final_answer": pb.OUTPUT_KIND_FINAL_ANSWER}


def _output_kind(name: str) -> pb.OutputKind:
    if name not in OUTPUT_KINDS:
        raise ValueError(f"output_kind must be 'message', 'thought' or 'final_answer', got {name!r}")
    return OUTPUT_KINDS[name]


def model_output_event(run_id: str, text: str = "", *, text_digest: str = "", output_kind: str = "message",
                       stop_hook_active: bool = False, input_tokens: int = 0, output_tokens: int = 0,
                       cost_usd: float = 0.0, model: str = "", agent_id: str = "", session_id: str = "", seq: int = 0,
                       parent_run_id: str = "", accepts_ask: bool = False,
                       **extra: Unpack[ModelOutputExtra]) -> pb.Event:
    """What the model said: `text` (or, instead, `text_digest`, your own digest of it), its
    `output_kind` ("message", "thought", "final_answer"), `stop_hook_active` when a stop hook
    already kept the turn going; the response's cost (tokens, dollars, model), when given, is
    spent into the budgets as a usage event's is."""
    event = _envelope(run_id, agent_id, session_id, seq, parent_run_id, accepts_ask, extra)
    output = pb.ModelOutput(text=text, text_digest=text_digest, output_kind=_output_kind(output_kind),
                            stop_hook_active=stop_hook_active, **_own("model_output", extra))
    usage = pb.Usage(input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd, model=model)
    if usage != pb.Usage():
        output.usage.CopyFrom(usage)
    event.model_output.CopyFrom(output)
    return event


def run_end_event(run_id: str, *, agent_id: str = "", session_id: str = "", seq: int = 0, parent_run_id: str = "",
                  accepts_ask: bool = False, **extra: Unpack[RunEndExtra]) -> pb.Event:
    event = _envelope(run_id, agent_id, session_id, seq, parent_run_id, accepts_ask, extra)
    event.run_end.CopyFrom(pb.RunEnd(**_own("run_end", extra)))
    return event


def event_from_record(record: EventRecord) -> pb.Event:
    # The builders' own arguments, and the generic fields (_event_extra.py) of the envelope and the kind.
    generic = [*ENVELOPE_EXTRA, *(KIND_EXTRA[record.kind.value] if record.kind is not None else ())]
    common: dict[str, Any] = {"agent_id": record.agent_id, "session_id": record.session_id, "seq": record.seq,
              "parent_run_id": record.parent_run_id, "accepts_ask": record.accepts_ask,
              **{name: getattr(record, name) for name in generic}}
    if record.kind is EventKind.TOOL_CALL:
        return tool_call_event(record.run_id, record.tool_name, params_json=record.params_json,
                               tool_call_id=record.tool_call_id, tool_class=record.tool_class,
                               batch_id=record.batch_id, **common)
    if record.kind is EventKind.TOOL_OUTCOME:
        return tool_outcome_event(record.run_id, record.tool_name, params_json=record.params_json,
                                  result_json=record.result_json, error=record.error,
                                  tool_call_id=record.tool_call_id, duration_ms=record.duration_ms, **common)
    if record.kind is EventKind.COMPACTION_RETRY:
        return compaction_retry_event(record.run_id, **common)
    if record.kind is EventKind.RUN_END:
        return run_end_event(record.run_id, **common)
    if record.kind is EventKind.USER_TURN:
        return user_turn_event(record.run_id, prompt_id=record.prompt_id, **common)
    if record.kind is EventKind.USAGE:
        return usage_event(record.run_id, input_tokens=record.input_tokens, output_tokens=record.output_tokens,
                           cost_usd=record.cost_usd, model=record.model, **common)
    if record.kind is EventKind.APPROVAL:
        return approval_event(record.run_id, approved=record.approved, tool_call_id=record.tool_call_id,
                              decision_id=record.decision_id, scope=record.scope, ttl_seconds=record.ttl_seconds,
                              **common)
    if record.kind is EventKind.MODEL_OUTPUT:
        return model_output_event(record.run_id, record.text, text_digest=record.text_digest,
                                  output_kind=record.output_kind, stop_hook_active=record.stop_hook_active,
                                  input_tokens=record.input_tokens, output_tokens=record.output_tokens,
                                  cost_usd=record.cost_usd, model=record.model, **common)
    return pb.Event(run_id=record.run_id, **common)  # no kind: the daemon answers REJECT


def event_from_dict(data: Mapping[str, Any]) -> pb.Event:
    """One event of our dict/JSONL format (see loopwarden.eventformat) as an Event."""
    return event_from_record(parse_event(data))


def verdict_from_message(message: pb.Verdict) -> Verdict:
    detector = pb.Detector.Name(message.detector).removeprefix("DETECTOR_").lower()
    level = pb.Level.Name(message.level).removeprefix("LEVEL_").lower()
    return Verdict(
        seq=message.seq, run_id=message.run_id, action=action_of(message.action),
        detector="" if detector == "unspecified" else detector, level="" if level == "unspecified" else level,
        count=message.count, message=message.message, warning_key=message.warning_key, announce=message.announce,
        paired_tool_name=message.paired_tool_name, error_code=message.error_code, tool_name=message.tool_name,
        decision_id=message.decision_id, evidence_seqs=tuple(message.evidence.seqs),
        evidence_call_ids=tuple(message.evidence.tool_call_ids), loop_started_seq=message.evidence.loop_started_seq,
        shadow=message.shadow, shadow_action=action_of(message.shadow_action) if message.shadow else None,
    )


def exemption_from_message(message: pb.Exemption) -> Exemption:
    return Exemption(id=message.id, agent_id=message.agent_id, tool_name=message.tool_name,
                     args_hash=message.args_hash, created_at=message.created_at, expires_at=message.expires_at,
                     run_id=message.run_id)


# generated:run-record:begin (proto/loopwarden/v1/loopwarden.proto: edit there, then `make tables`)
def run_record_from_message(message: pb.RunRecord) -> RunRecord:
    return RunRecord(seq=message.seq, tool_name=message.tool_name, args_hash=message.args_hash,
                     tool_call_id=message.tool_call_id, result_hash=message.result_hash,
                     unknown_tool_name=message.unknown_tool_name)
# generated:run-record:end


def inspection_from_message(message: pb.InspectRunResponse) -> RunInspection:
    return RunInspection(
        run_id=message.run_id, agent_id=message.agent_id,
        records=[run_record_from_message(r) for r in message.records],
        guard_armed=message.guard.armed, guard_window_size=message.guard.window_size,
        guard_observed=message.guard.observed, blocks=message.blocks, aborted=message.aborted,
        abort_error_code=message.abort_error_code,
        effective_config=MessageToDict(message.effective_config, preserving_proto_field_name=True,
                                       always_print_fields_with_no_presence=True),
        events_evaluated=message.events_evaluated,
        recent_verdicts=[verdict_from_message(v) for v in message.recent_verdicts],
        agent_label=message.agent_label,
        parent_run_id=message.parent_run_id, children=list(message.children), root_run_id=message.root_run_id,
        depth=message.depth, tree_totals=totals_from_message(message.tree_totals),
        run_totals=totals_from_message(message.run_totals),
        exemptions=[exemption_from_message(e) for e in message.exemptions],
        output_streaks=output_streaks_from_message(message.output_streaks),
    )


def output_streaks_from_message(message: pb.OutputStreaks) -> OutputStreaks:
    return OutputStreaks(messages=message.messages, thoughts=message.thoughts, final_answers=message.final_answers,
                         compactions=message.compactions, stop_continuations=message.stop_continuations,
                         final_answer_turns=message.final_answer_turns)


def totals_from_message(message: pb.Totals) -> Totals:
    return Totals(tool_calls=message.tool_calls, tool_ms=message.tool_ms, input_tokens=message.input_tokens,
                  output_tokens=message.output_tokens, cost_usd=message.cost_usd, wall_seconds=message.wall_seconds,
                  runs=message.runs)
