"""LoopDetectionService over grpc.aio.

Errors that concern one event are REJECT verdicts inside the stream; only stream-level failures
end an RPC, with a status from the single table below. No reply ever carries exception text or a
file path: an unexpected failure is logged with an id and answered INTERNAL naming that id.

Evaluate reads and writes through the context (not an async generator) so the stream's idle
timer can close a stream that sends nothing: one timer per stream, re-armed lazily (the timer
callback checks the time of the last message instead of being rescheduled per message).

Routing: an RPC for one run carries `x-loopwarden-run-id` (ROUTING_HEADER), which a router
hashes to pick the run's replica. A stream opened with it serves that run alone: an event for
another run is REJECTed `run_id_mismatch`, so a multiplexed stream a router pinned to one
replica cannot silently split a run's history. With a shared state store (`loader`), runs a
request names that are not in memory are loaded (awaited) before the synchronous service
evaluates; when every run is held, the per-event path has no await.
"""
from __future__ import annotations

import asyncio
import logging
import os

import grpc
from loopwarden.v1 import loopwarden_pb2 as pb

from ..lifecycle import Lifecycle
from ..metrics import Metrics
from ..service import LoopwardenService
from ..statestore.keeper import StateKeeper
from . import convert
from .auth import Identity
from .decode import Refusal

log = logging.getLogger("loopwarden.transport")

# The one mapping from stream-level failures to gRPC status codes.
STREAM_FAILURES = {
    "draining": (grpc.StatusCode.UNAVAILABLE, "loopwarden is shutting down; reconnect to another instance"),
    "unknown_run": (grpc.StatusCode.NOT_FOUND, "no state is held for run {run_id!r}"),
    "missing_run_id": (grpc.StatusCode.INVALID_ARGUMENT, "run_id is required"),
    "missing_event": (grpc.StatusCode.INVALID_ARGUMENT, "event is required"),
    "too_many_streams": (grpc.StatusCode.RESOURCE_EXHAUSTED, "too many open Evaluate streams (limit {limit})"),
    "idle": (grpc.StatusCode.DEADLINE_EXCEEDED,
             "this Evaluate stream sent nothing for {seconds:g} s (--stream-idle-timeout) and was closed; "
             "open a new stream"),
    "internal": (grpc.StatusCode.INTERNAL, "loopwarden failed on this request (error {error_id}); "
                                          "the daemon log has the details under that id"),
}

# Between the events of one request, let other RPCs (health first) run once a request has
# carried this many payload bytes: a request of max-size payloads must not hold the loop.
YIELD_EVERY_BYTES = 256 * 1024

ROUTING_HEADER = "x-loopwarden-run-id"


def _routed_run_id(context: grpc.aio.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == ROUTING_HEADER:
            return value.strip() if isinstance(value, str) else ""
    return ""


async def _fail(context: grpc.aio.ServicerContext, failure: str, **fields) -> None:
    code, template = STREAM_FAILURES[failure]
    await context.abort(code, template.format(**fields))


async def _refuse(context: grpc.aio.ServicerContext, metrics: Metrics, refusal: Refusal) -> None:
    metrics.rejected_requests.labels(refusal.reason).inc()
    await context.abort(refusal.code, refusal.message)


async def _internal(context: grpc.aio.ServicerContext, rpc: str) -> None:
    error_id = os.urandom(4).hex()
    log.exception("unexpected failure in an RPC", extra={"rpc": rpc, "error_id": error_id})
    await _fail(context, "internal", error_id=error_id)


def _payload_bytes(event: pb.Event) -> int:
    kind = event.WhichOneof("kind")
    if kind == "tool_call":
        return len(event.tool_call.params_json)
    if kind == "tool_outcome":
        outcome = event.tool_outcome
        return len(outcome.params_json) + len(outcome.result_json) + len(outcome.error)
    return 0


class _IdleTimer:
    """Cancels the stream's task when no message arrived for `seconds`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self.last = self._loop.time()
        self._handle = self._loop.call_later(seconds, self._check)

    def _check(self) -> None:
        remaining = self.last + self.seconds - self._loop.time()
        if remaining > 0:
            self._handle = self._loop.call_later(remaining, self._check)
            return
        self.fired = True
        self._task.cancel()

    def cancel(self) -> None:
        self._handle.cancel()


async def serve_evaluate_stream(context: grpc.aio.ServicerContext, *, lifecycle: Lifecycle, metrics: Metrics,
                                max_streams: int, idle_seconds: float, serve) -> None:
    """Everything around one Evaluate stream that does not depend on the engine, shared by both
    engines' handlers: admission (draining, the stream cap), the stream gauge, the idle timer,
    and the stream-level failures. `serve(context, timer)` reads and answers the requests."""
    if lifecycle.draining:
        await _fail(context, "draining")
    if lifecycle.active_streams >= max_streams:
        await _fail(context, "too_many_streams", limit=str(max_streams))
    metrics.active_streams.inc()
    lifecycle.active_streams += 1
    timer = _IdleTimer(idle_seconds)
    try:
        await serve(context, timer)
    except asyncio.CancelledError:
        if not timer.fired:
            raise
        metrics.idle_streams_closed.inc()
        await _fail(context, "idle", seconds=idle_seconds)
    except grpc.aio.AbortError:
        raise
    except Exception:  # noqa: BLE001 - answered INTERNAL with an id, logged in full
        await _internal(context, "Evaluate")
    finally:
        timer.cancel()
        lifecycle.active_streams -= 1
        metrics.active_streams.dec()


class LoopDetectionServicer:
    def __init__(self, service: LoopwardenService, metrics: Metrics, lifecycle: Lifecycle, identity: Identity,
                 stream_idle_timeout_seconds: float, loader: StateKeeper | None = None) -> None:
        self._loader = loader
        self._service = service
        self._metrics = metrics
        self._lifecycle = lifecycle
        self._identity = identity
        self._idle_seconds = stream_idle_timeout_seconds

    async def Evaluate(self, _request_iterator, context: grpc.aio.ServicerContext) -> None:
        await serve_evaluate_stream(context, lifecycle=self._lifecycle, metrics=self._metrics,
                                    max_streams=self._service.limits.max_streams, idle_seconds=self._idle_seconds,
                                    serve=self._serve_stream)

    async def _serve_stream(self, context: grpc.aio.ServicerContext, timer: _IdleTimer) -> None:
        evaluate, misrouted = self._service.evaluate, self._service.refuse_misrouted
        to_input, to_verdict = convert.event_input, convert.verdict_message
        tenant = self._identity.tenant(context)
        routed = _routed_run_id(context)
        loader = self._loader
        loop_time = asyncio.get_running_loop().time
        read, write = context.read, context.write
        while True:
            request = await read()
            if request is grpc.aio.EOF:
                return
            timer.last = loop_time()
            if type(request) is Refusal:
                await _refuse(context, self._metrics, request)
            if loader is not None:
                await self._load_missing(loader, tenant, request.events, routed)
            verdicts = []
            # Sizes per event only for a request big enough to need a yield (most are not).
            carried = 0 if request.ByteSize() >= YIELD_EVERY_BYTES else None
            for event in request.events:
                if routed and event.run_id.strip() != routed:
                    verdicts.append(to_verdict(misrouted(to_input(event, tenant), routed)))
                else:
                    verdicts.append(to_verdict(evaluate(to_input(event, tenant))))
                if carried is not None:
                    carried += _payload_bytes(event)
                    if carried >= YIELD_EVERY_BYTES:
                        carried = 0
                        await asyncio.sleep(0)
            await write(pb.EvaluateResponse(verdicts=verdicts))

    @staticmethod
    async def _load_missing(loader: StateKeeper, tenant: str, events, routed: str) -> None:
        run_ids = [event.run_id.strip() for event in events
                   if event.WhichOneof("kind") != "run_end" and (not routed or event.run_id.strip() == routed)]
        await loader.load_missing(tenant, run_ids)

    async def Check(self, request, context: grpc.aio.ServicerContext) -> pb.CheckResponse:
        try:
            if self._lifecycle.draining:
                await _fail(context, "draining")
            if type(request) is Refusal:
                await _refuse(context, self._metrics, request)
            if not request.HasField("event"):
                await _fail(context, "missing_event")
            tenant, routed = self._identity.tenant(context), _routed_run_id(context)
            event = convert.event_input(request.event, tenant)
            if routed and event.run_id.strip() != routed:
                decision = self._service.refuse_misrouted(event, routed)
            else:
                if self._loader is not None:
                    await self._load_missing(self._loader, tenant, (request.event,), routed)
                decision = self._service.evaluate(event)
            return pb.CheckResponse(verdict=convert.verdict_message(decision))
        except grpc.aio.AbortError:
            raise
        except Exception:  # noqa: BLE001
            await _internal(context, "Check")

    async def InspectRun(self, request, context: grpc.aio.ServicerContext) -> pb.InspectRunResponse:
        try:
            if type(request) is Refusal:
                await _refuse(context, self._metrics, request)
            run_id = request.run_id.strip()
            if not run_id:
                await _fail(context, "missing_run_id")
            tenant = self._identity.tenant(context)
            if self._loader is not None:
                await self._loader.load_missing(tenant, (run_id,))
            view = self._service.inspect(run_id, tenant)
            if view is None:
                await _fail(context, "unknown_run", run_id=run_id)
            return convert.inspect_response(view)
        except grpc.aio.AbortError:
            raise
        except Exception:  # noqa: BLE001
            await _internal(context, "InspectRun")
