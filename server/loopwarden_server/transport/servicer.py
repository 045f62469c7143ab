"""LoopDetectionService over grpc.aio, answered by the compiled core.

The handlers have no (de)serializers for Evaluate and Check, so grpc hands them the message bytes
and writes the bytes they return: protobuf is decoded and encoded in the core, once per request,
with no Python object per event.

Errors that concern one event are REJECT verdicts inside the stream; only stream-level failures
end an RPC, with a status from the single table below. No reply ever carries exception text or a
file path: an unexpected failure is logged with an id and answered INTERNAL naming that id.

Evaluate reads and writes through the context (not an async generator) so the stream's idle
timer can close a stream that sends nothing: one timer per stream, re-armed lazily (the timer
callback checks the time of the last message instead of being rescheduled per message).

Routing: an RPC for one run carries `x-loopwarden-run-id` (ROUTING_HEADER), which a router
hashes to pick the run's replica. A stream opened with it serves that run alone: an event for
another run is REJECTed `run_id_mismatch`, so a multiplexed stream a router pinned to one
replica cannot silently split a run's history. With a shared state store (`loader`), the core
answers a request naming runs it does not hold with their ids and the decoded request; the
handler awaits their load (statestore/loader.py) and resumes the request, so it is decoded once, the
per-event path has no await, and every event is evaluated with its run's history.

With tracing on, the core lists the decisions worth a span event in its summary (typed, so
nothing is decoded again here).
"""
from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import NoReturn, cast

import grpc
from loopwarden.v1 import loopwarden_pb2 as pb

from ..core import Answer, CoreService, Summary
from ..lifecycle import Lifecycle
from ..metrics import Metrics
from ..statestore.loader import RunLoader
from ..tenancy import TenantShares
from ..tracing import VERDICT_EVENT, core_verdict_attributes
from .auth import Identity
from .convert import exemption, inspect_response
from .decode import TOO_MANY_EVENTS, UNDECODABLE, Refusal, undecodable

log = logging.getLogger("loopwarden.transport")

# The one mapping from stream-level failures to gRPC status codes.
STREAM_FAILURES = {
    "draining": (grpc.StatusCode.UNAVAILABLE, "loopwarden is shutting down; reconnect to another instance"),
    "restoring": (grpc.StatusCode.UNAVAILABLE, "loopwarden is starting: it is restoring its stored runs (health "
                                              "says NOT_SERVING until it is done); retry shortly"),
    "unknown_run": (grpc.StatusCode.NOT_FOUND, "no state is held for run {run_id!r}"),
    "missing_run_id": (grpc.StatusCode.INVALID_ARGUMENT, "run_id is required"),
    "missing_event": (grpc.StatusCode.INVALID_ARGUMENT, "event is required"),
    "missing_exemption_id": (grpc.StatusCode.INVALID_ARGUMENT, "id is required (an exemption id from ListExemptions)"),
    "unknown_exemption": (grpc.StatusCode.NOT_FOUND, "no exemption {exemption_id!r} is held for this tenant "
                                                     "(revoked, expired, or never granted)"),
    "too_many_streams": (grpc.StatusCode.RESOURCE_EXHAUSTED, "too many open Evaluate streams (limit {limit})"),
    "tenant_streams": (grpc.StatusCode.RESOURCE_EXHAUSTED,
                       "this tenant holds its share of open Evaluate streams ({share} of {limit}, shared by "
                       "{tenants} tenants; loopwarden.tenantMaxStreams); close one or retry later"),
    "idle": (grpc.StatusCode.DEADLINE_EXCEEDED,
             "this Evaluate stream sent nothing for {seconds:g} s (--stream-idle-timeout) and was closed; "
             "open a new stream"),
    "internal": (grpc.StatusCode.INTERNAL, "loopwarden failed on this request (error {error_id}); "
                                          "the daemon log has the details under that id"),
}

ROUTING_HEADER = "x-loopwarden-run-id"


def _routed_run_id(context: grpc.aio.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == ROUTING_HEADER:
            return value.strip() if isinstance(value, str) else ""
    return ""


# context.abort raises grpc.aio.AbortError, always; grpc is untyped, so mypy cannot see that the
# two functions below never return (their type: ignore), and their callers' checks narrow after them.
async def _fail(context: grpc.aio.ServicerContext, failure: str, **fields) -> NoReturn:  # type: ignore[misc]
    code, template = STREAM_FAILURES[failure]
    await context.abort(code, template.format(**fields))


async def _admit(context: grpc.aio.ServicerContext, lifecycle: Lifecycle) -> None:
    """Refuse an RPC while the daemon drains or is still restoring stored runs."""
    if lifecycle.draining:
        await _fail(context, "draining")
    if lifecycle.restoring:
        await _fail(context, "restoring")


async def _refuse(context: grpc.aio.ServicerContext, metrics: Metrics,  # type: ignore[misc]
                  refusal: Refusal) -> NoReturn:
    metrics.rejected_requests.labels(refusal.reason).inc()
    await context.abort(refusal.code, refusal.message)


async def _internal(context: grpc.aio.ServicerContext, rpc: str) -> NoReturn:
    error_id = os.urandom(4).hex()
    log.exception("unexpected failure in an RPC", extra={"rpc": rpc, "error_id": error_id})
    await _fail(context, "internal", error_id=error_id)


class _IdleTimer:
    """Cancels the stream's task when no message arrived for `seconds`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self._loop = asyncio.get_running_loop()
        self._task = cast(asyncio.Task, asyncio.current_task())  # made in the stream's own task
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


def _refusal(reason: str, max_events: int) -> Refusal:
    if reason == TOO_MANY_EVENTS:
        return Refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, TOO_MANY_EVENTS,
                       f"too_many_events: a request may carry at most {max_events} events "
                       "(--max-events-per-request); none of this request's events was evaluated")
    return undecodable("request")


class LoopDetectionServicer:
    def __init__(self, core: CoreService, metrics: Metrics, lifecycle: Lifecycle, identity: Identity,
                 stream_idle_timeout_seconds: float, loader: RunLoader | None = None,
                 current_span: Callable | None = None, verdict_event: Callable | None = None,
                 shares: TenantShares | None = None) -> None:
        self._core = core
        # Two or more tenants: each holds at most its share of the streams (None: one pool).
        self._shares = shares
        self._loader = loader
        # Tracing on: the current span, to add one event per decision other than a plain ALLOW.
        self._current_span = current_span
        # (name, attributes) of a decision's span event: `loopwarden.verdict`, or the GenAI opt-in's form.
        self._verdict_event = verdict_event or (lambda verdict: (VERDICT_EVENT, core_verdict_attributes(verdict)))
        self._metrics = metrics
        self._lifecycle = lifecycle
        self._identity = identity
        self._idle_seconds = stream_idle_timeout_seconds

    async def Evaluate(self, _request_iterator, context: grpc.aio.ServicerContext) -> None:
        """Admission (draining, the stream cap), the stream gauge, the idle timer and the
        stream-level failures around `_serve_stream`, which reads and answers the requests."""
        lifecycle, metrics = self._lifecycle, self._metrics
        await _admit(context, lifecycle)
        max_streams = self._core.limits.max_streams
        if lifecycle.active_streams >= max_streams:
            await _fail(context, "too_many_streams", limit=str(max_streams))
        caller = self._identity.caller(context)
        tenant = caller.tenant
        shares = self._shares
        if shares is not None and not shares.admit_stream(tenant):
            metrics.rejected_requests.labels("tenant_streams").inc()
            await _fail(context, "tenant_streams", share=shares.stream_share, limit=max_streams,
                        tenants=shares.tenant_count)
        metrics.active_streams.inc()
        lifecycle.active_streams += 1
        timer = _IdleTimer(self._idle_seconds)
        try:
            await self._serve_stream(context, timer, tenant, caller.agent_only)
        except asyncio.CancelledError:
            if not timer.fired:
                raise
            metrics.idle_streams_closed.inc()
            await _fail(context, "idle", seconds=self._idle_seconds)
        except grpc.aio.AbortError:
            raise
        except Exception:  # noqa: BLE001 - answered INTERNAL with an id, logged in full
            await _internal(context, "Evaluate")
        finally:
            timer.cancel()
            if shares is not None:
                shares.release_stream(tenant)
            lifecycle.active_streams -= 1
            metrics.active_streams.dec()

    def _reporting(self) -> bool:
        return self._current_span is not None and self._current_span().is_recording()

    async def _serve_stream(self, context: grpc.aio.ServicerContext, timer: _IdleTimer, tenant: str,
                            agent_only: bool) -> None:
        evaluate = self._core.evaluate
        routed = _routed_run_id(context)
        lazy = self._loader is not None
        loop_time = asyncio.get_running_loop().time
        read, write = context.read, context.write
        while True:
            request = await read()
            if request is grpc.aio.EOF:
                return
            timer.last = loop_time()
            report = self._reporting()
            answer = evaluate(request, tenant, routed, lazy=lazy, report=report, agent_only=agent_only)
            if lazy:
                answer = await self._core.loaded(answer, cast(RunLoader, self._loader), tenant, routed, report=report)
            if answer.refusal:
                await _refuse(context, self._metrics,
                              _refusal(answer.refusal, self._core.limits.max_events_per_request))
            if report:
                self._trace(answer)
            await write(answer.response)

    async def Check(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            await _admit(context, self._lifecycle)
            caller, routed = self._identity.caller(context), _routed_run_id(context)
            tenant = caller.tenant
            lazy, report = self._loader is not None, self._reporting()
            answer = self._core.check(request, tenant, routed, lazy=lazy, report=report, agent_only=caller.agent_only)
            if lazy:
                answer = await self._core.loaded(answer, cast(RunLoader, self._loader), tenant, routed, report=report)
            if answer.refusal == "missing_event":
                await _fail(context, "missing_event")
            if answer.refusal:
                await _refuse(context, self._metrics, _refusal(UNDECODABLE, 0))
            if report:
                self._trace(answer)
            return cast(bytes, answer.response)  # answered: every refusal aborted above
        except grpc.aio.AbortError:
            raise
        except Exception:  # noqa: BLE001
            await _internal(context, "Check")

    def _trace(self, answer: Answer) -> None:
        """Only when reporting: tracing is on (a current span) and the answer was asked for a summary."""
        span = cast(Callable, self._current_span)()
        for verdict in cast(Summary, answer.summary).reported:
            span.add_event(*self._verdict_event(verdict))

    async def InspectRun(self, request, context: grpc.aio.ServicerContext) -> pb.InspectRunResponse:
        try:
            if self._lifecycle.restoring:  # read-only, so a drain still answers; a half restore does not
                await _fail(context, "restoring")
            if type(request) is Refusal:
                await _refuse(context, self._metrics, request)
            run_id = request.run_id.strip()
            if not run_id:
                await _fail(context, "missing_run_id")
            tenant = self._identity.tenant(context)
            if self._loader is not None and not self._core.held(tenant, run_id):
                await self._loader.ensure_loaded(tenant, [run_id])
            view = self._core.inspect(run_id, tenant)
            if view is None:
                await _fail(context, "unknown_run", run_id=run_id)
            response = inspect_response(view, self._core.config.settings_for(view.agent_id))
            response.exemptions.extend(exemption(e) for e in self._core.run_exemptions(run_id, tenant))
            return response
        except grpc.aio.AbortError:
            raise
        except Exception:  # noqa: BLE001
            await _internal(context, "InspectRun")

    async def ListExemptions(self, request, context: grpc.aio.ServicerContext) -> pb.ListExemptionsResponse:
        """The caller's tenant's standing exemptions, newest first (a shared store's table is
        read first, so another replica's answers are seen)."""
        try:
            if self._lifecycle.restoring:  # read-only, so a drain still answers; a half restore does not
                await _fail(context, "restoring")
            if type(request) is Refusal:
                await _refuse(context, self._metrics, request)
            tenant = self._identity.tenant(context)
            if self._loader is not None:
                await self._loader.load_exemptions(tenant)
            views = self._core.list_exemptions(tenant, request.agent_id.strip(), request.tool_name.strip())
            return pb.ListExemptionsResponse(exemptions=[exemption(v) for v in views])
        except grpc.aio.AbortError:
            raise
        except Exception:  # noqa: BLE001
            await _internal(context, "ListExemptions")

    async def RevokeExemption(self, request, context: grpc.aio.ServicerContext) -> pb.RevokeExemptionResponse:
        """Withdraw one of the caller's tenant's exemptions; NOT_FOUND for an id it does not hold."""
        try:
            if self._lifecycle.restoring:  # read-only, so a drain still answers; a half restore does not
                await _fail(context, "restoring")
            if type(request) is Refusal:
                await _refuse(context, self._metrics, request)
            exemption_id = request.id.strip()
            if not exemption_id:
                await _fail(context, "missing_exemption_id")
            tenant = self._identity.tenant(context)
            if self._loader is not None:
                await self._loader.load_exemptions(tenant)
            revoked = self._core.revoke_exemption(exemption_id, tenant)
            if revoked is None:
                await _fail(context, "unknown_exemption", exemption_id=exemption_id)
            return pb.RevokeExemptionResponse(revoked=exemption(revoked))
        except grpc.aio.AbortError:
            raise
        except Exception:  # noqa: BLE001
            await _internal(context, "RevokeExemption")
