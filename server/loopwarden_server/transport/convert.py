"""The core's typed views as the contract spells them (InspectRun, the exemption RPCs)."""
from __future__ import annotations

from typing import Any

from loopwarden.v1 import loopwarden_pb2 as pb

from ..config.detection import LoopDetectionSettings
from ..config.tables import SETTINGS
from ..config.tool_rules import ToolRules
from ..core import ExemptionView, OutputStreaksView, RecordView, RunView, TotalsView


# resolved field -> EffectiveConfig field, from the one table (the proto's fields are generated too).
_WIRE = tuple((row.field, row.proto_name) for row in SETTINGS if row.proto_name)


_TOOL_CLASS = {"": pb.TOOL_CLASS_UNSPECIFIED, "readOnly": pb.TOOL_CLASS_READ_ONLY,
               "mutating": pb.TOOL_CLASS_MUTATING, "poll": pb.TOOL_CLASS_POLL}


def _wire(value: object) -> Any:
    if isinstance(value, ToolRules):
        return [pb.ToolRule(tool=r.tool, tool_class=_TOOL_CLASS[r.tool_class],
                            ignore_args=[p.text for p in r.ignore_args], keep_args=[p.text for p in r.keep_args],
                            ignore_result=[p.text for p in r.ignore_result]) for r in value.rules]
    return value


def effective_config(settings: LoopDetectionSettings) -> pb.EffectiveConfig:
    # `enabled` is optional on the wire: None (unset) stays unset.
    return pb.EffectiveConfig(**{wire: _wire(value) for name, wire in _WIRE
                                 if (value := getattr(settings, name)) is not None})


def exemption(view: ExemptionView) -> pb.Exemption:
    return pb.Exemption(id=view.id, agent_id=view.agent_id, tool_name=view.tool_name, args_hash=view.args_hash,
                        created_at=view.created_at, expires_at=view.expires_at, run_id=view.run_id)


# generated:run-record:begin (proto/loopwarden/v1/loopwarden.proto: edit there, then `make tables`)
def run_record(view: RecordView) -> pb.RunRecord:
    """The core's view of one record as RunRecord: every field as it is."""
    return pb.RunRecord(seq=view.seq, tool_name=view.tool_name, args_hash=view.args_hash,
                        tool_call_id=view.tool_call_id, result_hash=view.result_hash,
                        unknown_tool_name=view.unknown_tool_name)
# generated:run-record:end


def inspect_response(view: RunView, settings: LoopDetectionSettings) -> pb.InspectRunResponse:
    """A held run's view (the core's) with the agent's effective settings (the config's)."""
    return pb.InspectRunResponse(
        run_id=view.run_id, agent_id=view.agent_id,
        records=[run_record(r) for r in view.records],
        guard=pb.GuardState(armed=view.guard_armed, window_size=view.guard_window_size, observed=view.guard_observed),
        blocks=view.blocks, aborted=view.aborted, abort_error_code=view.abort_error_code,
        effective_config=effective_config(settings), events_evaluated=view.events_evaluated,
        recent_verdicts=[pb.Verdict.FromString(raw) for raw in view.recent_verdicts], agent_label=view.agent_label,
        parent_run_id=view.parent_run_id, children=view.children, root_run_id=view.root_run_id, depth=view.depth,
        tree_totals=_totals(view.tree_totals), run_totals=_totals(view.run_totals),
        output_streaks=_output_streaks(view.output_streaks),
    )


def _output_streaks(view: OutputStreaksView | None) -> pb.OutputStreaks | None:
    if view is None:
        return None
    return pb.OutputStreaks(messages=view.messages, thoughts=view.thoughts, final_answers=view.final_answers,
                            compactions=view.compactions, stop_continuations=view.stop_continuations,
                            final_answer_turns=view.final_answer_turns)


def _totals(view: TotalsView | None) -> pb.Totals | None:
    if view is None:
        return None
    return pb.Totals(tool_calls=view.tool_calls, tool_ms=view.tool_ms, input_tokens=view.input_tokens,
                     output_tokens=view.output_tokens, cost_usd=view.cost_usd, wall_seconds=view.wall_seconds,
                     runs=view.runs)
