"""The interceptor that reads `x-loopwarden-integration` once per RPC (see ..integration)."""
from __future__ import annotations

import grpc

from ..integration import INTEGRATION_HEADER, current_integration, integration_label


def _header(metadata) -> str | None:
    for key, value in metadata or ():
        if key == INTEGRATION_HEADER:
            return value if isinstance(value, str) else value.decode("latin-1")
    return None


class IntegrationInterceptor(grpc.aio.ServerInterceptor):
    """Sets the RPC's integration label before its handler runs; the handler runs in the same task."""

    async def intercept_service(self, continuation, handler_call_details):
        current_integration.set(integration_label(_header(handler_call_details.invocation_metadata)))
        return await continuation(handler_call_details)
