"""The interceptor that reads `x-loopwarden-integration` once per RPC (see ..integration)."""
from __future__ import annotations

import inspect

import grpc

from ..integration import GRPC, INTEGRATION_HEADER, current_integration, integration_label


def _header(metadata) -> str | None:
    for key, value in metadata or ():
        if key == INTEGRATION_HEADER:
            return value if isinstance(value, str) else value.decode("latin-1")
    return None


def _labelled(behavior, integration: str):
    """`behavior` (a handler coroutine or async generator) that first sets the RPC's label."""
    if inspect.isasyncgenfunction(behavior):
        async def stream(request, context):
            current_integration.set(integration)
            async for response in behavior(request, context):
                yield response
        return stream

    async def call(request, context):
        current_integration.set(integration)
        return await behavior(request, context)
    return call


class IntegrationInterceptor(grpc.aio.ServerInterceptor):
    """Sets the RPC's integration label inside its handler, before the handler runs.

    NOTE: set inside the handler's own behaviour, not in `intercept_service`: set there, it cost
    the OpenTelemetry interceptor (tracing.py) its span events (tests/daemon/test_tracing.py), and
    the handler's task is where the service reads it anyway. Without the header the default (grpc)
    applies and the handler is left as it is."""

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        integration = integration_label(_header(handler_call_details.invocation_metadata))
        if handler is None or integration == GRPC:
            return handler
        kwargs = {"request_deserializer": handler.request_deserializer,
                  "response_serializer": handler.response_serializer}
        if handler.request_streaming and handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(_labelled(handler.stream_stream, integration), **kwargs)
        if handler.request_streaming:
            return grpc.stream_unary_rpc_method_handler(_labelled(handler.stream_unary, integration), **kwargs)
        if handler.response_streaming:
            return grpc.unary_stream_rpc_method_handler(_labelled(handler.unary_stream, integration), **kwargs)
        return grpc.unary_unary_rpc_method_handler(_labelled(handler.unary_unary, integration), **kwargs)
