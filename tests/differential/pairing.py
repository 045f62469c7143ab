"""The reference engine beside the core, for tests/engine's runs: every event a `Run` feeds the
core is evaluated by the reference engine too, and its verdict and the run's state must equal the
core's after every event. The engine tests' own assertions then hold for the reference as well,
and anything they do not assert (a message, evidence, a hash) is compared all the same.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import loopwarden_core
from loopwarden.eventformat import EventKind

from tests.engine.driver import GuardSeen, RecordSeen, Run, StateSeen
from tests.reference.engine import (
    Action, CompactionRetry, Detector, Level, RunEnd, RunState, ToolCall, ToolOutcome, Verdict, evaluate,
    new_run_state,
)

PROTO_ACTION = {"allow": "ACTION_ALLOW", "warn": "ACTION_WARN", "block": "ACTION_BLOCK",
                "abort": "ACTION_ABORT", "reject": "ACTION_REJECT", "ask": "ACTION_ASK"}


def reference_verdict(core_verdict: loopwarden_core.Verdict) -> Verdict:
    """A loopwarden_core.Verdict as the reference spells it (enums), to compare field by field."""
    return Verdict(
        action=Action(core_verdict.action), detector=Detector(core_verdict.detector or "none"),
        level=Level(core_verdict.level or "none"), count=core_verdict.count, message=core_verdict.message,
        warning_key=core_verdict.warning_key, announce=core_verdict.announce,
        paired_tool_name=core_verdict.paired_tool_name, error_code=core_verdict.error_code,
        tool_name=core_verdict.tool_name, evidence_seqs=tuple(core_verdict.evidence_seqs),
        evidence_call_ids=tuple(core_verdict.evidence_call_ids),
        shadow_action=None if core_verdict.shadow_action is None else Action(core_verdict.shadow_action),
    )


def verdict_as_proto_dict(verdict: Verdict, seq: int, run_id: str) -> dict:
    """The reference's verdict spelled like the proto, as the conformance data expects it."""
    detector = "DETECTOR_UNSPECIFIED" if verdict.detector.value == "none" else "DETECTOR_" + verdict.detector.value.upper()
    level = "LEVEL_UNSPECIFIED" if verdict.level.value == "none" else "LEVEL_" + verdict.level.value.upper()
    return {
        "seq": seq, "run_id": run_id, "action": PROTO_ACTION[verdict.action.value],
        "detector": detector, "level": level, "count": verdict.count, "message": verdict.message,
        "warning_key": verdict.warning_key, "announce": verdict.announce,
        "paired_tool_name": verdict.paired_tool_name, "error_code": verdict.error_code,
        "tool_name": verdict.tool_name,
    }


def reference_state(state: RunState) -> StateSeen:
    """The reference run's state as InspectRun shows the core's."""
    guard = None if state.guard is None else GuardSeen(state.guard.window_size, state.guard.observed)
    return StateSeen([RecordSeen(r.seq, r.tool_name, r.args_hash, r.tool_call_id, r.result_hash) for r in state.records],
                     state.blocks, None if state.abort is None else state.abort.error_code, guard)


def reference_event(kind: EventKind, seq: int, fields: dict[str, Any]) -> Any:
    if kind is EventKind.TOOL_CALL:
        return ToolCall(fields["tool_name"], fields["params_json"], fields["tool_call_id"], seq)
    if kind is EventKind.TOOL_OUTCOME:
        return ToolOutcome(fields["tool_name"], fields["params_json"], fields["tool_call_id"],
                           fields["result_json"], fields["error"], seq)
    if kind is EventKind.COMPACTION_RETRY:
        return CompactionRetry(seq)
    if kind is EventKind.RUN_END:
        return RunEnd(seq)
    raise AssertionError(f"the reference engine has no {kind} events")


class ReferencePairing:
    """One Run's twin on the reference engine (tests/engine/driver.py's `pairing` hook)."""

    def __init__(self, run: Run) -> None:
        self.state = new_run_state(run.settings)

    def __call__(self, run: Run, kind: EventKind, fields: dict[str, Any], verdict: loopwarden_core.Verdict) -> None:
        expected = evaluate(self.state, reference_event(kind, run.seq, fields), run.settings, run.catalog,
                            max_json_depth=run.limits.max_json_depth)
        # guard_armed is the reference service's logging hint; the core's verdict has no such field.
        expected = dataclasses.replace(expected, guard_armed=False)
        assert reference_verdict(verdict) == expected, f"{run.run_id} seq {run.seq}: the core and the reference differ"
        assert run.state == reference_state(self.state), f"{run.run_id} seq {run.seq}: the runs' states differ"
