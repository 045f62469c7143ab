"""--listen: the proxy as a Streamable HTTP MCP server at http://HOST:PORT/mcp.

Each MCP session (one `initialize` without a session id) gets a server child of its own and a
relay between the SDK's Streamable HTTP transport and the child's stdio; every session of the
proxy is the same run. The transport answers requests of a session it does not know with 404,
as the specification says, and Host/Origin are checked against the listening address
(DNS-rebinding protection).
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TextIO
from uuid import uuid4

import anyio
import uvicorn
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.transport_security import TransportSecuritySettings

from .guard import ProxyGuard
from .relay import Relay

PATH = "/mcp"


async def _reply(send, status: int, message: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def serve_http(host: str, port: int, server: StdioServerParameters, guard: ProxyGuard, *,
                     on_listening: Callable[[str], None], stderr: TextIO = sys.stderr) -> None:
    sessions: dict[str, StreamableHTTPServerTransport] = {}
    bound: list[str] = []
    counter = iter(range(1, 2**62))

    async with anyio.create_task_group() as group:
        async def run_session(transport: StreamableHTTPServerTransport, *, task_status=anyio.TASK_STATUS_IGNORED):
            try:
                async with transport.connect() as (client_read, client_write), \
                        stdio_client(server, errlog=stderr) as (server_read, server_write):
                    task_status.started()
                    await Relay(guard, call_id_prefix=f"s{next(counter)}:", stderr=stderr).run(
                        client_read, client_write, server_read, server_write)
            finally:
                sessions.pop(transport.mcp_session_id or "", None)

        async def app(scope, receive, send) -> None:
            if scope["type"] != "http":
                return
            if scope["path"].rstrip("/") != PATH:
                await _reply(send, 404, f"the MCP endpoint is {PATH}")
                return
            session_id = dict(scope["headers"]).get(MCP_SESSION_ID_HEADER.encode())
            if session_id is None:
                transport = StreamableHTTPServerTransport(
                    mcp_session_id=uuid4().hex, security_settings=TransportSecuritySettings(
                        allowed_hosts=bound, allowed_origins=[f"http://{address}" for address in bound]))
                sessions[transport.mcp_session_id] = transport
                await group.start(run_session, transport)
            else:
                transport = sessions.get(session_id.decode("latin-1"))
                if transport is None:
                    await _reply(send, 404, "Session not found")
                    return
            await transport.handle_request(scope, receive, send)

        http = uvicorn.Server(uvicorn.Config(app, host=host, port=port, lifespan="off", log_level="warning",
                                             access_log=False))
        group.start_soon(http.serve)
        while not http.started:
            await anyio.sleep(0.01)
        actual = http.servers[0].sockets[0].getsockname()[1]
        bound.extend([f"{host}:{actual}", f"localhost:{actual}"])
        on_listening(f"http://{host}:{actual}{PATH}")
        while not http.should_exit:
            await anyio.sleep(0.1)
        group.cancel_scope.cancel()
