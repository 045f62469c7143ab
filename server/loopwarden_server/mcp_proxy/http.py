"""--listen: the proxy as a Streamable HTTP MCP server at http://HOST:PORT/mcp.

Each MCP session (one `initialize` without a session id) gets a server child of its own and a
relay between the SDK's Streamable HTTP transport and the child's stdio, and a run of its own
(`--run-id` ID gives ID-s1, ID-s2, …). The listener admits only what `listener_auth` allows (a
bearer token, a client certificate), and a POST body over MAX_MESSAGE_BYTES is answered 413
unread. The transport answers requests of a session it does not know with 404,
as the specification says, and Host/Origin are checked against the listening address
(DNS-rebinding protection).

Sessions come and go while the proxy stays: whatever ends one (the client's DELETE, a client
that vanished and left it idle for --session-idle-seconds, its server child exiting, an error in
its relay) ends that session alone: it is forgotten (its id answers 404), its transport
terminated and its server child stopped, each in the session's own task, so nothing of one
session can end another or the proxy. At most --max-sessions are open at once (a new one past
it is answered 503 before a server child starts). An answer that would be a server-sent event
over --max-sse-event-bytes (default 1 MiB, what the MCP Python SDK's client takes) is replaced by
an error saying so (relay.py), since the client would refuse the event and fail the request. This follows the SDK's own
StreamableHTTPSessionManager, which serves an in-process `Server` where this serves a relay to a child process.

The proxy speaks the session revisions of Streamable HTTP (initialize handshake, Mcp-Session-Id:
2024-11-05 to 2025-11-25, HANDSHAKE_PROTOCOL_VERSIONS). A request of the 2026-07-28 revision
(self-contained, no session) is answered UNSUPPORTED_PROTOCOL_VERSION naming those, before any
server is started: the SDK's client (mode "auto") then falls back to the handshake, where a
proxy that forwarded it would start a server child for every single request.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO
from uuid import uuid4

import anyio
import uvicorn
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import INTERNAL_ERROR, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from .guard import ProxyGuard, SessionRun
from .http_protocol import HeadersInTime
from .listener_auth import ListenerGate
from .relay import Relay
from .session_meta import ID_PREFIX_BYTES, MAX_MESSAGE_BYTES, invalid_message, too_large_error

PATH = "/mcp"
# A session nobody has sent a request to (and with no open GET stream) for this long is ended:
# a client that vanished without a DELETE does not keep its server child forever. The SDK's default
# (--session-idle-seconds).
SESSION_IDLE_SECONDS = 30 * 60
# Sessions open at once, so server children at once (--max-sessions): each session is a process,
# so this bounds the proxy's memory at about this many times one server's.
MAX_SESSIONS = 32
# The largest server-sent event a client takes (--max-sse-event-bytes): the MCP Python SDK's
# Streamable HTTP client refuses a larger one by default (`streamable_http_client`'s
# max_sse_event_size, 1 MiB, enforced by httpx2's EventSource), which fails the request whose
# answer it was. An answer over it is replaced by an error the client can read (Relay).
MAX_SSE_EVENT_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class SessionLimits:
    max_sessions: int = MAX_SESSIONS
    idle_seconds: float = SESSION_IDLE_SECONDS
    max_event_bytes: int | None = MAX_SSE_EVENT_BYTES  # None: no limit


async def _reply(send, status: int, message: str, *, code: int = -32600, data: dict | None = None,
                 extra_headers: Sequence[tuple[bytes, bytes]] = (), request_id=None) -> None:
    error = {"code": code, "message": message, **({"data": data} if data is not None else {})}
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *extra_headers]})
    await send({"type": "http.response.body", "body": body})


async def _bounded(receive, send):
    """A POST's body read whole up to MAX_MESSAGE_BYTES, handed on through a new `receive`; past
    it the request is answered 413 (with the request's id when its head names one) and None. A
    body that is JSON but no JSON-RPC message the proxy can relay (a list `id`, no `method`) is
    answered 400 with its JSON-RPC error (session_meta.invalid_message) and None: the transport
    would take some of them for a notification, answer 202 and never answer the request."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None  # the client went away mid-body
        body += message.get("body", b"")
        if len(body) > MAX_MESSAGE_BYTES:
            error = too_large_error(bytes(body[:ID_PREFIX_BYTES]), len(body))
            await _reply(send, 413, error["error"]["message"], request_id=error["id"])
            return None
        if not message.get("more_body", False):
            break
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        decoded = []  # the transport answers it (Parse error)
    invalid = invalid_message(decoded)
    if invalid is not None:
        await _reply(send, 400, invalid["error"]["message"], code=invalid["error"]["code"], request_id=invalid["id"])
        return None
    handed = False

    async def replay():
        nonlocal handed
        if not handed:
            handed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}
        return await receive()

    return replay


def _cause(exc: BaseException) -> str:
    """The innermost error of a task group's exception group: what actually went wrong."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


class _Sessions:
    """The open sessions of one listening proxy, each a task of `group`."""

    def __init__(self, group, server: StdioServerParameters, guard: ProxyGuard, bound: list[str],
                 stderr: TextIO, run_id: str, gate: ListenerGate | None, limits: SessionLimits) -> None:
        self._group = group
        self._limits = limits
        self._gate = gate
        self._run_id = run_id
        self._server = server
        self._guard = guard
        self._bound = bound
        self._stderr = stderr
        self._open: dict[str, StreamableHTTPServerTransport] = {}
        self._counter = iter(range(1, 2**62))

    def _say(self, text: str) -> None:
        print(f"loopwarden mcp-proxy: {text}", file=self._stderr, flush=True)

    async def _discard(self, transport: StreamableHTTPServerTransport) -> None:
        """Forget the session first (its id answers 404 from now on), then terminate its transport."""
        self._open.pop(transport.mcp_session_id or "", None)
        if not transport.is_terminated:
            with anyio.CancelScope(shield=True):
                await transport.terminate()

    async def _run(self, transport: StreamableHTTPServerTransport, number: int, *,
                   task_status=anyio.TASK_STATUS_IGNORED) -> None:
        """One session, start to end; nothing it raises leaves it."""
        started = False
        run = SessionRun(f"{self._run_id}-s{number}")  # each session its own run
        try:
            async with transport.connect() as (client_read, client_write), \
                    stdio_client(self._server, errlog=self._stderr) as (server_read, server_write):
                task_status.started()
                started = True
                relay = Relay(self._guard, run, keep_session=True, stderr=self._stderr,
                              max_event_bytes=self._limits.max_event_bytes)
                with transport.idle_scope or anyio.CancelScope() as idle:
                    await relay.run(client_read, client_write, server_read, server_write)
                if idle.cancelled_caught:
                    self._say(f"session {number} ended: idle for {self._limits.idle_seconds:g} s")
        except Exception as exc:  # one session's failure must not end the others
            if not started:
                raise  # the opening request reports it (the server could not be started)
            self._say(f"session {number} ended: {_cause(exc)}")
        finally:
            await self._discard(transport)
            if started:
                with anyio.CancelScope(shield=True):
                    await self._guard.end(run)

    async def _open_session(self, scope, receive, send) -> None:
        origins = [f"{scheme}://{address}" for address in self._bound for scheme in ("http", "https")]
        session_id = uuid4().hex
        transport = StreamableHTTPServerTransport(
            mcp_session_id=session_id, idle_timeout=self._limits.idle_seconds,
            security_settings=TransportSecuritySettings(allowed_hosts=self._bound, allowed_origins=origins))
        self._open[session_id] = transport
        status: list[int] = []

        async def watched(message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            try:
                await self._group.start(self._run, transport, next(self._counter))
            except Exception as exc:  # noqa: BLE001 - said to the client and on stderr; the proxy goes on
                self._say(f"cannot start the MCP server for a new session: {_cause(exc)}")
                await _reply(send, 502, f"loopwarden mcp-proxy cannot start the MCP server: {_cause(exc)}",
                             code=INTERNAL_ERROR)
                return
            await transport.handle_request(scope, receive, watched)
        finally:
            # Only an initialize can open a session: if this request was refused, nothing was opened.
            if not status or status[0] >= 400:
                await self._discard(transport)

    async def app(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope["headers"])
        refusal = self._gate.refusal(headers) if self._gate is not None else None
        if refusal is not None:
            await _reply(send, 401, refusal, extra_headers=[(b"www-authenticate", b'Bearer realm="loopwarden"')])
            return
        if scope["path"].rstrip("/") != PATH:
            await _reply(send, 404, f"the MCP endpoint is {PATH}")
            return
        if scope["method"] == "POST":
            receive = await _bounded(receive, send)
            if receive is None:
                return
        session_id = headers.get(MCP_SESSION_ID_HEADER.encode())
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER.lower().encode())
        if session_id is None and version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS:
            await _reply(send, 400, "Unsupported protocol version", code=UNSUPPORTED_PROTOCOL_VERSION,
                         data={"supported": list(HANDSHAKE_PROTOCOL_VERSIONS), "requested": version.decode("latin-1")})
            return
        if session_id is None:
            if len(self._open) >= self._limits.max_sessions:
                # Refused before a server child is started: the cap holds under any flood.
                self._say(f"refused a new session: {len(self._open)} open, at most {self._limits.max_sessions} "
                          "(--max-sessions)")
                await _reply(send, 503, f"loopwarden mcp-proxy serves at most {self._limits.max_sessions} sessions "
                             "at once; end one (DELETE) or retry later", extra_headers=[(b"retry-after", b"5")])
                return
            await self._open_session(scope, receive, send)
            return
        transport = self._open.get(session_id.decode("latin-1"))
        if transport is None:
            await _reply(send, 404, "Session not found")
            return
        await transport.handle_request(scope, receive, send)
        if transport.is_terminated:  # the client's DELETE: forget it now, not when its task winds down
            await self._discard(transport)


async def serve_http(host: str, port: int, server: StdioServerParameters, guard: ProxyGuard, *, run_id: str,
                     on_listening: Callable[[str], None], stderr: TextIO = sys.stderr,
                     gate: ListenerGate | None = None, limits: SessionLimits = SessionLimits()) -> None:
    bound: list[str] = []
    async with anyio.create_task_group() as group:
        sessions = _Sessions(group, server, guard, bound, stderr, run_id, gate, limits)
        config = uvicorn.Config(sessions.app, host=host, port=port, lifespan="off", interface="asgi3",
                                log_level="warning", access_log=False, http=HeadersInTime)
        config.load()
        if gate is not None:
            config.ssl = gate.ssl_context()  # the hook listener's renewing context, not uvicorn's fixed one
        http = uvicorn.Server(config)
        group.start_soon(http.serve)
        while not http.started:
            await anyio.sleep(0.01)
        actual = http.servers[0].sockets[0].getsockname()[1]
        bound.extend([f"{host}:{actual}", f"localhost:{actual}"])
        on_listening(f"{gate.scheme if gate is not None else 'http'}://{host}:{actual}{PATH}")
        while not http.should_exit:
            await anyio.sleep(0.1)
        group.cancel_scope.cancel()
