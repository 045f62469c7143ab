"""Bearer-token authentication for the gRPC port; health stays open for probes."""
from __future__ import annotations

import hmac
from collections.abc import Callable

import grpc

OPEN_PREFIXES = ("/grpc.health.v1.Health/",)


def _deny(message: str):
    async def deny(_request, context: grpc.aio.ServicerContext):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
    return deny


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):
    """Every RPC except health must carry `authorization: Bearer <token>`.

    The comparison is constant-time (hmac.compare_digest) so the token cannot be guessed byte by
    byte from response timing. `token` is asked for on every RPC so a rotated token file applies
    to the next call.
    """

    def __init__(self, token: Callable[[], bytes]) -> None:
        self._token = token

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(OPEN_PREFIXES):
            return handler
        supplied = ""
        for key, value in handler_call_details.invocation_metadata or ():
            if key == "authorization":
                supplied = value if isinstance(value, str) else value.decode("latin-1")
                break
        if hmac.compare_digest(supplied.encode("utf-8", "surrogateescape"), b"Bearer " + self._token()):
            return handler
        message = "missing bearer token" if not supplied else "invalid bearer token"
        deny = _deny(message)
        kwargs = {"request_deserializer": handler.request_deserializer,
                  "response_serializer": handler.response_serializer}
        if handler.request_streaming and handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(deny, **kwargs)
        if handler.request_streaming:
            return grpc.stream_unary_rpc_method_handler(deny, **kwargs)
        if handler.response_streaming:
            return grpc.unary_stream_rpc_method_handler(deny, **kwargs)
        return grpc.unary_unary_rpc_method_handler(deny, **kwargs)
