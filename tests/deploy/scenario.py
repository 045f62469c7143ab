"""Drives a real daemon to produce exactly one warning, one block and one guard abort.

Config: {tools:{loopDetection:{enabled:true}}} (defaults W=10, C=20, guard window 3).
Run A repeats `read {"path":"/x"}` with an identical result: the 11th call is warned (announced),
the 21st is blocked by generic_repeat. Run B compacts, then repeats `gateway {"action":"lookup"}`
with an identical result three times: the 3rd outcome aborts the run (compaction_loop_persisted).
Last, one event without a run id is rejected (through Check), so the rejected-events counter has
a sample as well.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import grpc

from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

CONFIG = "{tools:{loopDetection:{enabled:true}}}"
SAME_RESULT = json.dumps({"content": [{"type": "text", "text": "same"}], "details": {}})
RPC_TIMEOUT_SECONDS = 30

# What the scenario leaves in the daemon's counters (agent label "default": no agent id is sent).
EXPECTED_WARNINGS = {("generic_repeat", "default"): 1}
EXPECTED_BLOCKS = {("generic_repeat", "default"): 1}
EXPECTED_GUARD_ABORTS = {"default": 1}


@dataclass(frozen=True)
class ScenarioResult:
    verdicts: list[pb.Verdict]
    warn: pb.Verdict
    block: pb.Verdict
    abort: pb.Verdict
    reject: pb.Verdict


def _events() -> Iterator[pb.Event]:
    seq = 0

    def event(run_id: str, **kind: object) -> pb.Event:
        nonlocal seq
        seq += 1
        return pb.Event(run_id=run_id, seq=seq, **kind)

    read_params = json.dumps({"path": "/x"})
    for _ in range(20):
        yield event("run-a", tool_call=pb.ToolCall(tool_name="read", params_json=read_params))
        yield event("run-a", tool_outcome=pb.ToolOutcome(tool_name="read", params_json=read_params, result_json=SAME_RESULT))
    yield event("run-a", tool_call=pb.ToolCall(tool_name="read", params_json=read_params))  # the 21st: blocked

    gateway_params = json.dumps({"action": "lookup"})
    yield event("run-b", compaction_retry=pb.CompactionRetry())
    for _ in range(3):
        yield event("run-b", tool_call=pb.ToolCall(tool_name="gateway", params_json=gateway_params))
        yield event(
            "run-b",
            tool_outcome=pb.ToolOutcome(tool_name="gateway", params_json=gateway_params, result_json=SAME_RESULT),
        )


def drive(grpc_target: str) -> ScenarioResult:
    """Send the scenario over one Evaluate stream, one event per request, and check the verdicts."""
    assert grpc_target.startswith("127.0.0.1:"), grpc_target
    events = list(_events())
    with grpc.insecure_channel(grpc_target) as channel:
        grpc.channel_ready_future(channel).result(timeout=RPC_TIMEOUT_SECONDS)
        stub = pb_grpc.LoopDetectionServiceStub(channel)
        responses = stub.Evaluate(
            (pb.EvaluateRequest(events=[event]) for event in events), timeout=RPC_TIMEOUT_SECONDS
        )
        verdicts = [verdict for response in responses for verdict in response.verdicts]
        no_run_id = pb.Event(run_id="  ", seq=1000, tool_call=pb.ToolCall(tool_name="read", params_json="{}"))
        reject = stub.Check(pb.CheckRequest(event=no_run_id), timeout=RPC_TIMEOUT_SECONDS).verdict
    assert len(verdicts) == len(events), f"{len(events)} events, {len(verdicts)} verdicts"

    by_seq = {verdict.seq: verdict for verdict in verdicts}
    warn = by_seq[21]  # run A's 11th tool call (odd seqs are calls)
    block = by_seq[41]  # run A's 21st tool call
    abort = by_seq[len(events)]  # run B's 3rd outcome
    assert (warn.action, warn.detector, warn.announce) == (pb.ACTION_WARN, pb.DETECTOR_GENERIC_REPEAT, True), warn
    assert (block.action, block.detector) == (pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT), block
    assert (abort.action, abort.error_code) == (pb.ACTION_ABORT, "compaction_loop_persisted"), abort
    announced_warnings = [v for v in verdicts if v.action == pb.ACTION_WARN and v.announce]
    assert len(announced_warnings) == 1, announced_warnings
    assert [v.seq for v in verdicts if v.action == pb.ACTION_BLOCK] == [41]
    assert [v.seq for v in verdicts if v.action == pb.ACTION_ABORT] == [len(events)]
    assert reject.action == pb.ACTION_REJECT and reject.error_code, reject
    return ScenarioResult(verdicts=verdicts, warn=warn, block=block, abort=abort, reject=reject)
