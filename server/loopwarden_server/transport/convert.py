"""The core's typed views as the contract spells them (InspectRun)."""
from __future__ import annotations

from loopwarden.v1 import loopwarden_pb2 as pb

from ..config.detection import LoopDetectionSettings
from ..core import RunView


def effective_config(settings: LoopDetectionSettings) -> pb.EffectiveConfig:
    message = pb.EffectiveConfig(
        history_size=settings.history_size, warning_threshold=settings.warning_threshold,
        critical_threshold=settings.critical_threshold,
        unknown_tool_threshold=settings.unknown_tool_threshold,
        global_circuit_breaker_threshold=settings.global_circuit_breaker_threshold,
        generic_repeat=settings.generic_repeat, known_poll_no_progress=settings.known_poll_no_progress,
        ping_pong=settings.ping_pong, post_compaction_window_size=settings.compaction_window_size,
        abort_after_blocks=settings.abort_after_blocks,
        run_wide_breaker_threshold=settings.run_wide_breaker_threshold, shadow_mode=settings.shadow,
        argument_churn_warn_at=settings.argument_churn_warn_at, argument_churn_block_at=settings.argument_churn_block_at,
        error_repeat_threshold=settings.error_repeat_threshold, preset=settings.preset,
    )
    if settings.enabled is not None:
        message.enabled = settings.enabled
    return message


def inspect_response(view: RunView, settings: LoopDetectionSettings) -> pb.InspectRunResponse:
    """A held run's view (the core's) with the agent's effective settings (the config's)."""
    return pb.InspectRunResponse(
        run_id=view.run_id, agent_id=view.agent_id,
        records=[pb.RunRecord(seq=r.seq, tool_name=r.tool_name, args_hash=r.args_hash, tool_call_id=r.tool_call_id,
                              result_hash=r.result_hash, unknown_tool_name=r.unknown_tool_name)
                 for r in view.records],
        guard=pb.GuardState(armed=view.guard_armed, window_size=view.guard_window_size, observed=view.guard_observed),
        blocks=view.blocks, aborted=view.aborted, abort_error_code=view.abort_error_code,
        effective_config=effective_config(settings), events_evaluated=view.events_evaluated,
        recent_verdicts=[pb.Verdict.FromString(raw) for raw in view.recent_verdicts], agent_label=view.agent_label,
    )
