"""Evaluate and Check over the compiled core: raw request bytes in, raw response bytes out.

The handlers have no (de)serializers, so grpc hands them the message bytes and writes the bytes
they return: protobuf is decoded and encoded in the core, once per request, with no Python
object per event. Everything per RPC stays as in servicer.py (draining, the stream limit, the
idle timer, the tenant from the transport, the routing header, refusals and internal errors
with the same statuses and messages); InspectRun reads the core's run through its own view.

With a shared state store (`loader`), the core answers a request naming runs it does not hold
with their ids instead of verdicts; the handler awaits their load (keeper.py) and asks again, so
the per-event path still has no await and every event is evaluated with its run's history.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc
from loopwarden.v1 import loopwarden_pb2 as pb

from loopwarden._wire import event_from_record, verdict_from_message
from loopwarden.eventformat import EventRecord
from loopwarden.types import Verdict

from ..core_engine import CoreService
from ..integration import current_integration
from ..lifecycle import Lifecycle
from ..metrics import Metrics
from ..statestore.keeper import StateKeeper
from ..tracing import VERDICT_EVENT, reported_verdict_attributes
from .auth import Identity
from .convert import effective_config
from .decode import TOO_MANY_EVENTS, UNDECODABLE, Refusal, _undecodable, message_decoder
from .servicer import _fail, _IdleTimer, _internal, _refuse, _routed_run_id, serve_evaluate_stream


def inspect_response(view: tuple) -> pb.InspectRunResponse:
    """The core's view of a run (CoreService.inspect) as the contract spells it."""
    run, agent_id, records, guard, blocks, aborted, abort_code, events, recent, settings, agent_label = view
    return pb.InspectRunResponse(
        run_id=run, agent_id=agent_id,
        records=[pb.RunRecord(seq=seq, tool_name=tool, args_hash=args, tool_call_id=call_id,
                              result_hash=result, unknown_tool_name=unknown)
                 for seq, tool, args, call_id, result, unknown in records],
        guard=pb.GuardState(armed=guard[0], window_size=guard[1], observed=guard[2]),
        blocks=blocks, aborted=aborted, abort_error_code=abort_code,
        effective_config=effective_config(settings), events_evaluated=events,
        recent_verdicts=[pb.Verdict.FromString(raw) for raw in recent], agent_label=agent_label,
    )


def _refusal(reason: str, max_events: int) -> Refusal:
    if reason == TOO_MANY_EVENTS:
        return Refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, TOO_MANY_EVENTS,
                       f"too_many_events: a request may carry at most {max_events} events "
                       "(--max-events-per-request); none of this request's events was evaluated")
    return _undecodable("request")


class CoreHandlers:
    def __init__(self, core: CoreService, metrics: Metrics, lifecycle: Lifecycle, identity: Identity,
                 stream_idle_timeout_seconds: float, loader: StateKeeper | None = None,
                 current_span: Callable | None = None) -> None:
        self._core = core
        self._loader = loader
        # Tracing on: the span events tracing.TracedService adds in the Python engine, from the
        # request and response bytes (decoded only when the RPC's span is recording).
        self._current_span = current_span
        self._metrics = metrics
        self._lifecycle = lifecycle
        self._identity = identity
        self._idle_seconds = stream_idle_timeout_seconds

    async def Evaluate(self, _request_iterator, context: grpc.aio.ServicerContext) -> None:
        await serve_evaluate_stream(context, lifecycle=self._lifecycle, metrics=self._metrics,
                                    max_streams=self._core.limits.max_streams, idle_seconds=self._idle_seconds,
                                    serve=self._serve_stream)

    async def _serve_stream(self, context: grpc.aio.ServicerContext, timer: _IdleTimer) -> None:
        evaluate = self._core.evaluate
        tenant = self._identity.tenant(context)
        routed = _routed_run_id(context)
        loader = self._loader
        lazy = loader is not None
        loop_time = asyncio.get_running_loop().time
        read, write = context.read, context.write
        while True:
            request = await read()
            if request is grpc.aio.EOF:
                return
            timer.last = loop_time()
            response = evaluate(request, tenant, routed, lazy)
            if type(response) is list:  # runs to load from the shared store first
                await loader.ensure_loaded(tenant, response)
                response = evaluate(request, tenant, routed)
            if type(response) is str:
                await _refuse(context, self._metrics, _refusal(response, self._core.limits.max_events_per_request))
            if self._current_span is not None:
                self._trace(request, response, check=False)
            await write(response)

    async def Check(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            if self._lifecycle.draining:
                await _fail(context, "draining")
            tenant, routed = self._identity.tenant(context), _routed_run_id(context)
            response = self._core.check(request, tenant, routed, self._loader is not None)
            if type(response) is list:
                await self._loader.ensure_loaded(tenant, response)
                response = self._core.check(request, tenant, routed)
            if response == "missing_event":
                await _fail(context, "missing_event")
            if type(response) is str:
                await _refuse(context, self._metrics, _refusal(UNDECODABLE, 0))
            if self._current_span is not None:
                self._trace(request, response, check=True)
            return response
        except grpc.aio.AbortError:
            raise
        except Exception:  # noqa: BLE001
            await _internal(context, "Check")

    def _trace(self, request: bytes, response: bytes, *, check: bool) -> None:
        span = self._current_span()
        if not span.is_recording():
            return
        if check:
            events, verdicts = [pb.CheckRequest.FromString(request).event], [pb.CheckResponse.FromString(response).verdict]
        else:
            events, verdicts = pb.EvaluateRequest.FromString(request).events, pb.EvaluateResponse.FromString(response).verdicts
        for event, message in zip(events, verdicts):
            if message.action != pb.ACTION_ALLOW or message.decision_id:
                span.add_event(VERDICT_EVENT, reported_verdict_attributes(verdict_from_message(message), event.agent_id))

    async def InspectRun(self, request, context: grpc.aio.ServicerContext) -> pb.InspectRunResponse:
        try:
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
            return inspect_response(view)
        except grpc.aio.AbortError:
            raise
        except Exception:  # noqa: BLE001
            await _internal(context, "InspectRun")


class CoreHookEvaluator:
    """The hook endpoints' engine when the core runs (hooks_http.HookEvaluator): the record as a
    CheckRequest, evaluated by the core like a gRPC Check, its verdict read back for the answer."""

    def __init__(self, core: CoreService, loader: StateKeeper | None = None) -> None:
        self._core = core
        self._loader = loader

    async def evaluate(self, record: EventRecord, integration: str, tenant: str) -> Verdict:
        request = pb.CheckRequest(event=event_from_record(record)).SerializeToString()
        token = current_integration.set(integration)  # the verdict counter's integration label
        try:
            response = self._core.check(request, tenant, "", self._loader is not None)
            if type(response) is list:
                await self._loader.ensure_loaded(tenant, response)
                response = self._core.check(request, tenant)
        finally:
            current_integration.reset(token)
        if type(response) is not bytes:  # a request built here is always decodable and has its event
            raise RuntimeError(f"the core refused a hook's CheckRequest: {response}")
        return verdict_from_message(pb.CheckResponse.FromString(response).verdict)


def register_core_handlers(handlers: CoreHandlers, server: grpc.aio.Server) -> None:
    """The service's methods on the core: Evaluate and Check with identity (de)serializers."""
    from . import SERVICE_NAME

    methods = {
        "Evaluate": grpc.stream_stream_rpc_method_handler(handlers.Evaluate),
        "Check": grpc.unary_unary_rpc_method_handler(handlers.Check),
        "InspectRun": grpc.unary_unary_rpc_method_handler(
            handlers.InspectRun, request_deserializer=message_decoder(pb.InspectRunRequest, "request"),
            response_serializer=pb.InspectRunResponse.SerializeToString),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, methods),))
