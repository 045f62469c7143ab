"""Every conformance scenario through the compiled core (raw protobuf in and out), as the daemon
runs it."""
from __future__ import annotations

import json

import pytest
from google.protobuf.json_format import MessageToDict

from tests.conformance.scenarios import check, expand, load_variants
from tests.core.harness import CoreEngine, pb_event

VARIANTS = load_variants()

_FIELDS = ("seq", "run_id", "action", "detector", "level", "count", "message", "warning_key", "announce",
           "paired_tool_name", "error_code", "tool_name")


def _as_dict(verdict) -> dict:
    raw = MessageToDict(verdict, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    out = {name: raw.get(name) for name in _FIELDS}
    out["seq"] = int(out["seq"] or 0)
    return out


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.id for v in VARIANTS])
def test_conformance_variant_on_the_core(variant):
    """The core gives every verdict the shared scenario expects."""
    engine = CoreEngine(json.dumps(variant.config))
    for event in expand(variant):
        message = pb_event({
            "run_id": event.run_id, "agent_id": event.agent_id, "seq": event.seq, "kind": event.kind,
            "tool_name": event.tool_name, "params_json": event.params_json, "tool_call_id": event.tool_call_id,
            "result_json": event.result_json, "error": event.error, "prompt_id": event.prompt_id,
            "parent_run_id": event.parent_run_id, "accepts_ask": event.accepts_ask, "duration_ms": event.duration_ms,
            "usage": event.usage, "approval": event.approval,
        })
        (verdict,) = engine.evaluate([message])
        check(event.expect, _as_dict(verdict), f"{variant.id} seq {event.seq}")
