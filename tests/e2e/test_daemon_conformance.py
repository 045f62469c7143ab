"""Every worked example of the spec through the real daemon, over Evaluate streams and Check."""
from __future__ import annotations

import json

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.conformance.scenarios import check, expand, load_variants
from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import Stream, channel, event_message, verdict_dict

pytestmark = pytest.mark.daemon

VARIANTS = load_variants()
# A daemon lacking a feature a scenario requires may refuse its config: no daemon for it (the
# variant's test says why it is skipped).
CONFIGS = sorted({json.dumps(v.config, sort_keys=True) for v in VARIANTS})


@pytest.fixture(scope="module")
def daemons():
    """One daemon per distinct scenario config, shared by the variants that use it."""
    from contextlib import ExitStack
    with ExitStack() as stack:
        yield {config: stack.enter_context(running_daemon(config)) for config in CONFIGS}


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.id for v in VARIANTS])
def test_conformance_over_evaluate_stream(daemons, variant):
    """The daemon answers each scenario event with the expected verdict, seq and run id echoed."""
    daemon = daemons[json.dumps(variant.config, sort_keys=True)]
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        for event in expand(variant):
            verdict = verdict_dict(stream.one(event_message(event)))
            where = f"{variant.id} seq {event.seq}"
            assert (event.seq, event.run_id.strip()) == (verdict["seq"], verdict["run_id"]), where
            check(event.expect, verdict, where)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.scenario in (
    "ex07_generic_block", "ex13_unknown_tool", "ex17_guard_abort", "ex23_reject_bad_events")], ids=lambda v: v.id)
def test_conformance_over_unary_check(daemons, variant):
    """Check gives the same decision as a one-event Evaluate, run by run."""
    daemon = daemons[json.dumps(variant.config, sort_keys=True)]
    with channel(daemon.grpc_target) as ch:
        stub = pb_grpc.LoopDetectionServiceStub(ch)
        for event in expand(variant):
            message = event_message(event)
            message.run_id = message.run_id.replace(variant.id, variant.id + "/check", 1)
            verdict = verdict_dict(stub.Check(pb.CheckRequest(event=message), timeout=10).verdict)
            check(event.expect, verdict, f"check {variant.id} seq {event.seq}")
