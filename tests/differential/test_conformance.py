"""Every worked example of the spec (the shared conformance data) on the reference engine, the
oracle that states the spec's behaviour, and on the core: each engine gives every verdict the
scenario expects, and the two give the same verdict, field by field, for every event."""
from __future__ import annotations

import dataclasses
import json

import pytest

from loopwarden_server.config import load_config_text
from tests.conformance.scenarios import ConcreteEvent, Variant, check, expand, load_variants
from tests.differential.pairing import reference_verdict, verdict_as_proto_dict
from tests.engine.test_engine_conformance import run_variant_on_engine
from tests.reference.engine import (
    CompactionRetry, ErrorCode, RunEnd, ToolCall, ToolOutcome, UserTurn, Verdict, evaluate, new_run_state,
)
from tests.reference.engine.verdicts import reject

# Run trees, budgets and ASK are the core's alone: the oracle has none of them.
VARIANTS = [v for v in load_variants() if not v.requires]


def _engine_event(event: ConcreteEvent):
    if event.kind == "tool_call":
        return ToolCall(event.tool_name, event.params_json, event.tool_call_id, event.seq)
    if event.kind == "tool_outcome":
        return ToolOutcome(event.tool_name, event.params_json, event.tool_call_id,
                           event.result_json, event.error, event.seq)
    if event.kind == "compaction_retry":
        return CompactionRetry(event.seq)
    if event.kind == "run_end":
        return RunEnd(event.seq)
    if event.kind == "user_turn":
        return UserTurn(event.prompt_id, event.seq)
    return None


def run_variant_on_reference(variant: Variant, config_dict: dict) -> list[Verdict | None]:
    """Feed one variant through the reference's `evaluate` with the given config, checking each
    verdict; None for an event the envelope refused before any engine saw it."""
    config = load_config_text(json.dumps(config_dict))
    states = {}
    verdicts = []
    for event in expand(variant):
        run_id = event.run_id.strip()
        engine_event = _engine_event(event)
        # The envelope checks (run id, event kind) belong to the daemon; mirror them minimally
        # here so the shared reject cases also hold for the engine-level run.
        if not run_id:
            verdict = reject(ErrorCode.MISSING_RUN_ID, "run_id is required")
        elif engine_event is None:
            verdict = reject(ErrorCode.MISSING_EVENT_KIND, "event has no kind")
        else:
            settings = config.settings_for(event.agent_id)
            state = states.setdefault(run_id, new_run_state(settings))
            verdict = evaluate(state, engine_event, settings, config.tool_catalog)
        check(event.expect, verdict_as_proto_dict(verdict, event.seq, run_id), f"{variant.id} seq {event.seq}")
        # guard_armed is the reference service's logging hint; the core's verdict has no such field.
        verdicts.append(None if engine_event is None or not run_id else dataclasses.replace(verdict, guard_armed=False))
    return verdicts


def assert_both_engines_agree(variant: Variant, config_dict: dict) -> None:
    expected = run_variant_on_reference(variant, config_dict)
    actual = [reference_verdict(v) for v in run_variant_on_engine(variant, config_dict)]
    for seq, (core, reference) in enumerate(zip(actual, expected, strict=True), 1):
        # The envelope's refusals above are this test's stand-in, worded by neither engine.
        assert reference is None or core == reference, f"{variant.id} event {seq}: the core and the reference differ"


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.id for v in VARIANTS])
def test_conformance_variant(variant):
    """Both engines give every verdict the shared scenario expects, and the same verdicts."""
    assert_both_engines_agree(variant, variant.config)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if not v.extension], ids=lambda v: v.id)
def test_conformance_is_unchanged_with_the_opt_in_detectors_explicitly_off(variant):
    """Every spec example gives the same verdicts with argumentChurn and errorRepeat explicitly off."""
    config = {**variant.config, "loopwarden": {"argumentChurn": {"enabled": False}, "errorRepeat": {"enabled": False}}}
    assert_both_engines_agree(variant, config)
