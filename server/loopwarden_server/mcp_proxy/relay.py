"""JSON-RPC between the MCP client and the MCP server, relayed message by message.

Everything passes through unchanged, in both directions and in order: requests, responses,
notifications (list_changed, progress, logging, cancellation), the server's own requests to the
client (sampling, elicitation, roots) and their answers, resources, prompts, and methods this
proxy has never heard of. Negotiation is the two ends' own: the proxy is not a party to it.
Only `tools/call` and `tasks/get` are looked at (see guard.py):

- client -> server: a `tools/call` is asked about first; a refusal is answered to the client
  with the same request id and never reaches the server. A cancellation of a call in flight is
  that call's outcome ("cancelled") and is forwarded.
- a `tasks/get` (MCP Tasks polling) is judged like a call of the tool `tasks/get` (a name no MCP
  tool can have: tool names allow no `/`), with the request's params as its arguments: a known
  host poll (docs/extensions.md, "Host polls"), so a task polled without change is warned, then
  refused with a JSON-RPC error carrying the block message (a Task result cannot carry one).
- server -> client: the response to a guarded call is reported as its outcome before it is
  passed on (so the client's next call is judged on a history that holds it), and an announced
  warning is added to its content for the model.
- a `tools/list` answer is read (never changed) for each tool's ToolAnnotations: the class they
  give (readOnly, mutating) is sent with that tool's calls; a config `toolRules` class wins.

NOTE: the relay reads one message at a time from each side, so a call is judged before any later
message of the client is forwarded, and an outcome is recorded before the client can see it.
Over Streamable HTTP the transport needs to know which of the client's requests a server
message belongs to (which response stream carries it): a progress notification belongs to the
request that gave its progress token, anything else the server sends to the request in flight
when there is exactly one, and to the session's standalone stream otherwise.

When the server exits (a crash, or it just ends) while the client is still there, every request
it had not answered gets a JSON-RPC error at once (CONNECTION_CLOSED, "the MCP server exited"),
a guarded call's outcome being that error; so does every later request of the session when
`keep_session` is set (Streamable HTTP: the client ends the session, a new one starts a new
server), otherwise the relay ends (stdio: the proxy exits non-zero, see cli.py). When the client
goes away first (its input ends, or its side closes under a send), the relay ends and the caller
stops the server.
"""
from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Any, TextIO

import anyio
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import CONNECTION_CLOSED, ErrorData, JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from .guard import TASKS_GET, ProxyGuard, ToolCall, tool_classes

log = logging.getLogger("loopwarden.mcp_proxy")
# The JSON-RPC error code of a refused tasks/get (implementation-defined server error range).
REFUSED = -32000
# What a request gets once the server behind the proxy has exited (a direct client would see the
# connection close; this is the same condition, said in the one way a proxy still can).
SERVER_EXITED = "the MCP server behind loopwarden exited"
# How long, after a stdio client closed its input, the server may take to answer what it was asked.
HALF_CLOSE_GRACE_SECONDS = 30.0
# A send to a side that has gone away.
_GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


class _ClientGone(Exception):
    """The client's side closed under a send: the session is over."""


@dataclass(slots=True)
class _Guarded:
    call: ToolCall
    warning: str = ""


class Relay:
    def __init__(self, guard: ProxyGuard, *, call_id_prefix: str = "", keep_session: bool = False,
                 stderr: TextIO = sys.stderr) -> None:
        self._guard = guard
        self._prefix = call_id_prefix  # keeps the call ids of several sessions of one run apart
        self._keep_session = keep_session  # after the server exits, refuse requests until the client ends
        self._stderr = stderr
        self._guarded: dict[Any, _Guarded] = {}  # the client's tools/call requests the server has
        self._in_flight: set[Any] = set()  # every client request the server has not answered yet
        self._progress: dict[Any, Any] = {}  # progress token -> the request that gave it
        self._listing: set[Any] = set()  # the client's tools/list requests not answered yet
        self._classes: dict[str, str] = {}  # tool name -> class its ToolAnnotations gave
        self._client_done = False
        self.server_exited = False  # the server went away while the client was still there

    async def run(self, client_read, client_write, server_read, server_write) -> None:
        """Relay until the client ends (or, without `keep_session`, until the server exits);
        `server_exited` then says whether the server went first."""
        server_done = anyio.Event()
        async with anyio.create_task_group() as group:
            async def client_side() -> None:
                try:
                    await self._from_client(client_read, client_write, server_write)
                except (_ClientGone, *_GONE):  # a terminated transport closes its read side under us
                    pass
                self._client_done = True
                # Over stdio a client may close its input and still read the answers (a half close):
                # what it asked is answered first, for up to HALF_CLOSE_GRACE_SECONDS. An HTTP session
                # that ended has no one left to read them. The caller then stops the server.
                if not self._keep_session:
                    with anyio.move_on_after(HALF_CLOSE_GRACE_SECONDS):
                        while self._in_flight and not server_done.is_set():
                            await anyio.sleep(0.02)
                group.cancel_scope.cancel()

            async def server_side() -> None:
                try:
                    await server_relay()
                finally:
                    server_done.set()

            async def server_relay() -> None:
                try:
                    await self._from_server(server_read, client_write)
                except _GONE:
                    pass  # the server's side closed: as good as its end of output
                except _ClientGone:
                    self._client_done = True
                    group.cancel_scope.cancel()
                    return
                if self._client_done:
                    return
                self.server_exited = True
                await self._fail_pending(client_write)
                if not self._keep_session:
                    group.cancel_scope.cancel()

            group.start_soon(client_side)
            group.start_soon(server_side)

    async def _to_client(self, client_write, item: SessionMessage) -> None:
        try:
            await client_write.send(item)
        except _GONE:
            raise _ClientGone() from None

    def _exited_error(self, request_id: Any) -> SessionMessage:
        return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(
            code=CONNECTION_CLOSED, message=f"{SERVER_EXITED}; this request was not answered")))

    async def _fail_pending(self, client_write) -> None:
        """The server is gone: each request it had not answered gets an error now; a guarded
        call's outcome is that error."""
        pending = sorted(self._in_flight, key=str)
        print(f"loopwarden mcp-proxy: {SERVER_EXITED}; {len(pending)} pending request(s) and every later one "
              f"{'of this session ' if self._keep_session else ''}get an error", file=self._stderr, flush=True)
        for request_id in pending:
            self._settle(request_id)
            self._listing.discard(request_id)
            guarded = self._guarded.pop(request_id, None)
            if guarded is not None:
                await self._guard.after(guarded.call, error=SERVER_EXITED)
            await self._to_client(client_write, self._exited_error(request_id))

    def _unreadable(self, side: str, exc: Exception) -> None:
        print(f"loopwarden mcp-proxy: dropped an unreadable message from the {side}: {exc}", file=self._stderr,
              flush=True)

    async def _from_client(self, client_read, client_write, server_write) -> None:
        async for item in client_read:
            if isinstance(item, Exception):
                self._unreadable("client", item)
                continue
            message = item.message
            if self.server_exited:
                if isinstance(message, JSONRPCRequest):
                    await self._to_client(client_write, self._exited_error(message.id))
                continue
            if isinstance(message, JSONRPCRequest):
                if message.method == "tools/list":
                    self._listing.add(message.id)
                if message.method == "tools/call":
                    call = ToolCall.of(f"{self._prefix}{message.id}", message.params, self._classes)
                    before = await self._guard.before(call)
                    if before.refusal is not None:
                        await self._to_client(client_write, SessionMessage(JSONRPCResponse(
                            jsonrpc="2.0", id=message.id, result=before.refusal)))
                        continue
                    self._guarded[message.id] = _Guarded(call, before.warning)
                elif message.method == TASKS_GET:
                    call = ToolCall.task_poll(f"{self._prefix}{message.id}", message.params)
                    before = await self._guard.before(call)
                    if before.refusal is not None:
                        text = " ".join(c.get("text", "") for c in before.refusal.get("content", []))
                        await self._to_client(client_write, SessionMessage(JSONRPCError(
                            jsonrpc="2.0", id=message.id, error=ErrorData(code=REFUSED, message=text))))
                        continue
                    self._guarded[message.id] = _Guarded(call, before.warning)
                if self.server_exited:  # it went while the call was being judged
                    guarded = self._guarded.pop(message.id, None)
                    if guarded is not None:
                        await self._guard.after(guarded.call, error=SERVER_EXITED)
                    await self._to_client(client_write, self._exited_error(message.id))
                    continue
                self._in_flight.add(message.id)
                token = ((message.params or {}).get("_meta") or {}).get("progressToken")
                if token is not None:
                    self._progress[token] = message.id
            elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
                request_id = (message.params or {}).get("requestId")
                self._settle(request_id)
                guarded = self._guarded.pop(request_id, None)
                if guarded is not None:
                    await self._guard.after(guarded.call, error="cancelled by the client")
            try:
                await server_write.send(item)
            except _GONE:
                pass  # the server is gone: its side fails this request with the others pending

    async def _from_server(self, server_read, client_write) -> None:
        async for item in server_read:
            if isinstance(item, Exception):
                self._unreadable("server", item)
                continue
            message = item.message
            if isinstance(message, JSONRPCResponse | JSONRPCError):
                self._settle(message.id)
                if message.id in self._listing:
                    self._listing.discard(message.id)
                    if isinstance(message, JSONRPCResponse):  # each page adds its tools' classes
                        self._classes.update(tool_classes(message.result))
                guarded = self._guarded.pop(message.id, None)
                if guarded is not None:
                    item = await self._outcome(guarded, message)
            await self._to_client(client_write, self._routed(item))

    async def _outcome(self, guarded: _Guarded, message: JSONRPCResponse | JSONRPCError) -> SessionMessage:
        if isinstance(message, JSONRPCError):
            await self._guard.after(guarded.call, error=message.error.message)
            return SessionMessage(message)
        await self._guard.after(guarded.call, result=message.result)
        content = message.result.get("content")
        if guarded.warning and isinstance(content, list):
            result = {**message.result, "content": [*content, {"type": "text", "text": guarded.warning}]}
            return SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result))
        return SessionMessage(message)

    def _settle(self, request_id: Any) -> None:
        self._in_flight.discard(request_id)
        for token in [token for token, owner in self._progress.items() if owner == request_id]:
            del self._progress[token]

    def _routed(self, item: SessionMessage) -> SessionMessage:
        """The message with the client request it belongs to, for transports that route by it."""
        message = item.message
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            return item
        related = None
        if isinstance(message, JSONRPCNotification) and message.method == "notifications/progress":
            related = self._progress.get((message.params or {}).get("progressToken"))
        elif len(self._in_flight) == 1:
            related = next(iter(self._in_flight))
        if related is None:
            return item
        return SessionMessage(message, metadata=ServerMessageMetadata(related_request_id=related))
