"""Thin helpers over the generated stubs for integration tests (the real wire, no mocks)."""
from __future__ import annotations

import queue

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.conformance.messages import approval_message, usage_message
from tests.conformance.scenarios import ConcreteEvent

SERVICE = "loopwarden.v1.LoopDetectionService"


class Stream:
    """One Evaluate stream driven in lock-step: send a request, read its response."""

    def __init__(self, channel: grpc.Channel, metadata=()) -> None:
        self._requests: queue.Queue = queue.Queue()
        self._responses = pb_grpc.LoopDetectionServiceStub(channel).Evaluate(
            iter(self._requests.get, None), metadata=metadata)

    def send(self, *events: pb.Event) -> list[pb.Verdict]:
        self._requests.put(pb.EvaluateRequest(events=list(events)))
        return list(next(self._responses).verdicts)

    def one(self, event: pb.Event) -> pb.Verdict:
        (verdict,) = self.send(event)
        return verdict

    def close(self) -> None:
        self._requests.put(None)
        # Drain to the end so the server sees a clean half-close.
        for _ in self._responses:
            pass

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.close()
        else:
            self._responses.cancel()


def channel(target: str) -> grpc.Channel:
    return grpc.insecure_channel(target)


def health_status(target: str, service: str = "") -> str:
    with grpc.insecure_channel(target) as ch:
        response = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
    return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)


def event_message(event: ConcreteEvent) -> pb.Event:
    message = pb.Event(run_id=event.run_id, agent_id=event.agent_id, seq=event.seq,
                       parent_run_id=event.parent_run_id, accepts_ask=event.accepts_ask)
    if event.kind == "tool_call":
        message.tool_call.CopyFrom(pb.ToolCall(tool_name=event.tool_name, tool_call_id=event.tool_call_id,
                                               params_json=event.params_json))
    elif event.kind == "tool_outcome":
        outcome = pb.ToolOutcome(tool_name=event.tool_name, tool_call_id=event.tool_call_id,
                                 params_json=event.params_json, duration_ms=event.duration_ms)
        if event.error is not None:
            outcome.error = event.error
        elif event.result_json is not None:
            outcome.result_json = event.result_json
        message.tool_outcome.CopyFrom(outcome)
    elif event.kind == "compaction_retry":
        message.compaction_retry.SetInParent()
    elif event.kind == "run_end":
        message.run_end.SetInParent()
    elif event.kind == "user_turn":
        message.user_turn.prompt_id = event.prompt_id
        message.user_turn.SetInParent()
    elif event.kind == "usage":
        message.usage.CopyFrom(usage_message(event.usage or {}))
    elif event.kind == "approval":
        message.approval.CopyFrom(approval_message(event.approval or {}))
    return message


def verdict_dict(verdict: pb.Verdict) -> dict:
    """A verdict with enum names, the shape the conformance expectations use."""
    return {
        "seq": verdict.seq, "run_id": verdict.run_id, "action": pb.Action.Name(verdict.action),
        "detector": pb.Detector.Name(verdict.detector), "level": pb.Level.Name(verdict.level),
        "count": verdict.count, "message": verdict.message, "warning_key": verdict.warning_key,
        "announce": verdict.announce, "paired_tool_name": verdict.paired_tool_name,
        "error_code": verdict.error_code, "tool_name": verdict.tool_name,
    }


def call(run_id: str, tool: str, params_json: str = "{}", tool_call_id: str = "", **fields) -> pb.Event:
    return pb.Event(run_id=run_id, tool_call=pb.ToolCall(tool_name=tool, params_json=params_json,
                                                         tool_call_id=tool_call_id), **fields)


def outcome(run_id: str, tool: str, params_json: str = "{}", result_json: str | None = None,
            error: str | None = None, tool_call_id: str = "", **fields) -> pb.Event:
    body = pb.ToolOutcome(tool_name=tool, params_json=params_json, tool_call_id=tool_call_id)
    if error is not None:
        body.error = error
    elif result_json is not None:
        body.result_json = result_json
    return pb.Event(run_id=run_id, tool_outcome=body, **fields)


def compaction(run_id: str, **fields) -> pb.Event:
    return pb.Event(run_id=run_id, compaction_retry=pb.CompactionRetry(), **fields)


def run_end(run_id: str, **fields) -> pb.Event:
    return pb.Event(run_id=run_id, run_end=pb.RunEnd(), **fields)


SAME = '{"content":[{"type":"text","text":"same"}],"details":{}}'
