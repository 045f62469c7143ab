"""Every worked example of the spec (as shared conformance data) through the core's entry point
for one event (`CoreService.decide`, as the offline replay and the MCP proxy call it).
tests/differential/test_conformance.py runs the same examples on the reference engine too."""
from __future__ import annotations

import json

import loopwarden_core
import pytest
from loopwarden.eventformat import EventKind, EventRecord
from prometheus_client import CollectorRegistry

from loopwarden_server.config import load_config_text
from loopwarden_server.core import CoreService
from loopwarden_server.metrics import Metrics
from loopwarden_server.settings import Limits
from tests.conformance.scenarios import ConcreteEvent, Variant, check, expand, load_variants

VARIANTS = load_variants()
KINDS = {kind.value: kind for kind in EventKind}


def as_proto_dict(verdict: loopwarden_core.Verdict, seq: int, run_id: str) -> dict:
    """The core's verdict spelled like the proto, as the conformance data expects it."""
    return {
        "seq": seq, "run_id": run_id, "action": "ACTION_" + verdict.action.upper(),
        "detector": "DETECTOR_" + (verdict.detector.upper() or "UNSPECIFIED"),
        "level": "LEVEL_" + (verdict.level.upper() or "UNSPECIFIED"), "count": verdict.count,
        "message": verdict.message, "warning_key": verdict.warning_key, "announce": verdict.announce,
        "paired_tool_name": verdict.paired_tool_name, "error_code": verdict.error_code,
        "tool_name": verdict.tool_name,
    }


def event_record(event: ConcreteEvent) -> EventRecord:
    usage, approval = event.usage or {}, event.approval or {}
    return EventRecord(
        None if event.kind is None else KINDS[event.kind], run_id=event.run_id, seq=event.seq,
        agent_id=event.agent_id, tool_name=event.tool_name, tool_call_id=event.tool_call_id or approval.get("tool_call_id", ""),
        params_json=event.params_json, result_json=event.result_json, error=event.error, prompt_id=event.prompt_id,
        parent_run_id=event.parent_run_id, accepts_ask=event.accepts_ask, duration_ms=event.duration_ms,
        input_tokens=usage.get("input_tokens", 0), output_tokens=usage.get("output_tokens", 0),
        cost_usd=usage.get("cost_usd", 0.0), model=usage.get("model", ""), decision_id=approval.get("decision_id", ""),
        approved=approval.get("approved", False), scope=approval.get("scope", ""),
        ttl_seconds=approval.get("ttl_seconds", 0))


def run_variant_on_engine(variant: Variant, config_dict: dict) -> list[loopwarden_core.Verdict]:
    """Feed one variant through the core with the given config file content, checking each verdict."""
    core = CoreService(load_config_text(json.dumps(config_dict)), Metrics(CollectorRegistry()), Limits(),
                       max_runs=1000, idle_ttl_seconds=3600.0, clock=lambda: 0.0)
    verdicts = []
    for event in expand(variant):
        answer = core.decide(event_record(event))
        assert answer.verdict is not None, answer.refusal
        check(event.expect, as_proto_dict(answer.verdict, event.seq, event.run_id.strip()),
              f"{variant.id} seq {event.seq}")
        verdicts.append(answer.verdict)
    return verdicts


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.id for v in VARIANTS])
def test_conformance_variant(variant):
    """The core gives every verdict the shared scenario expects."""
    run_variant_on_engine(variant, variant.config)


def test_every_spec_example_has_a_scenario():
    """Examples 1-20 of examples.md each have a conformance file (21 is config-only)."""
    names = {v.scenario.split("_")[0] for v in VARIANTS}
    assert {f"ex{n:02d}" for n in range(1, 21)} <= names
