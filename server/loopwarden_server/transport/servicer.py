"""LoopDetectionService over grpc.aio.

Errors that concern one event are REJECT verdicts inside the stream; only stream-level failures
end an RPC, with a status from the single table below.
"""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import grpc
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from ..engine import ErrorCode
from ..lifecycle import Lifecycle
from ..metrics import Metrics
from ..service import LoopwardenService
from . import convert

log = logging.getLogger("loopwarden.transport")

# The one mapping from stream-level failures to gRPC status codes.
STREAM_FAILURES = {
    "draining": (grpc.StatusCode.UNAVAILABLE, "loopwarden is shutting down; reconnect to another instance"),
    "unknown_run": (grpc.StatusCode.NOT_FOUND, "no state is held for run {run_id!r}"),
    "missing_run_id": (grpc.StatusCode.INVALID_ARGUMENT, "run_id is required"),
    "missing_event": (grpc.StatusCode.INVALID_ARGUMENT, "event is required"),
    "too_many_streams": (grpc.StatusCode.RESOURCE_EXHAUSTED, "too many open Evaluate streams (limit {limit})"),
}


async def _fail(context: grpc.aio.ServicerContext, failure: str, **fields: str) -> None:
    code, template = STREAM_FAILURES[failure]
    await context.abort(code, template.format(**fields))


class LoopDetectionServicer(pb_grpc.LoopDetectionServiceServicer):
    def __init__(self, service: LoopwardenService, metrics: Metrics, lifecycle: Lifecycle) -> None:
        self._service = service
        self._metrics = metrics
        self._lifecycle = lifecycle

    async def Evaluate(
        self, request_iterator: AsyncIterator[pb.EvaluateRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.EvaluateResponse]:
        if self._lifecycle.draining:
            await _fail(context, "draining")
        max_streams = self._service.limits.max_streams
        if self._lifecycle.active_streams >= max_streams:
            await _fail(context, "too_many_streams", limit=str(max_streams))
        evaluate = self._service.evaluate
        to_input, to_verdict = convert.event_input, convert.verdict_message
        max_events = self._service.limits.max_events_per_request
        self._metrics.active_streams.inc()
        self._lifecycle.active_streams += 1
        try:
            async for request in request_iterator:
                events = request.events
                if len(events) > max_events:
                    decisions = self._service.reject_all(
                        [to_input(event) for event in events], ErrorCode.TOO_MANY_EVENTS,
                        f"request carries {len(events)} events; the limit is {max_events} per request")
                    yield pb.EvaluateResponse(verdicts=[to_verdict(d) for d in decisions])
                    continue
                yield pb.EvaluateResponse(verdicts=[to_verdict(evaluate(to_input(event))) for event in events])
        finally:
            self._lifecycle.active_streams -= 1
            self._metrics.active_streams.dec()

    async def Check(self, request: pb.CheckRequest, context: grpc.aio.ServicerContext) -> pb.CheckResponse:
        if self._lifecycle.draining:
            await _fail(context, "draining")
        if not request.HasField("event"):
            await _fail(context, "missing_event")
        decision = self._service.evaluate(convert.event_input(request.event))
        return pb.CheckResponse(verdict=convert.verdict_message(decision))

    async def InspectRun(self, request: pb.InspectRunRequest, context: grpc.aio.ServicerContext) -> pb.InspectRunResponse:
        run_id = request.run_id.strip()
        if not run_id:
            await _fail(context, "missing_run_id")
        view = self._service.inspect(run_id)
        if view is None:
            await _fail(context, "unknown_run", run_id=run_id)
        return convert.inspect_response(view)
