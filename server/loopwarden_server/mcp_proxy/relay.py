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
- with `max_event_bytes` (Streamable HTTP, --max-sse-event-bytes): an answer whose server-sent
  event would be larger than that is not passed on, since the client would refuse the event and
  fail the request with nothing to say why ("SSE stream failed: Server-sent event exceeded the
  1048576 byte limit.", the MCP Python SDK's client). A tools/call gets an `isError` result
  saying the tool ran and its result was too large (its outcome was reported whole), any other
  request a JSON-RPC error saying the same.

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
import secrets
import sys
from dataclasses import dataclass
from typing import Any, TextIO, cast

import anyio
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import (CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_PARAMS, ErrorData, JSONRPCError, JSONRPCNotification,
                       JSONRPCRequest, JSONRPCResponse)

from loopwarden import Verdict

from .guard import TASKS_GET, Before, ProxyGuard, SessionRun, ToolCall, tool_classes
from .session_meta import (ASK_SCHEMA, RUN_ID, MetaError, accepts_elicitation, hashable_id, meta_of, parent_run_id,
                           progress_token, user_turn, wants_always)

log = logging.getLogger("loopwarden.mcp_proxy")
# The JSON-RPC error code of a refused tasks/get (implementation-defined server error range).
REFUSED = -32000
# What a request gets once the server behind the proxy has exited (a direct client would see the
# connection close; this is the same condition, said in the one way a proxy still can).
SERVER_EXITED = "the MCP server behind loopwarden exited"
# How long, after a stdio client closed its input, the server may take to answer what it was asked.
HALF_CLOSE_GRACE_SECONDS = 30.0
# How long a call held for a person waits for their answer; past it the ASK counts as declined
# (the daemon's own loopwarden.askTimeoutSeconds default, after which it would deny it anyway).
ASK_WAIT_SECONDS = 300.0
# The id prefix of the proxy's own requests to the client (elicitations): never the server's.
ASK_ID_PREFIX = "loopwarden-ask-"
# What an answer's server-sent event holds besides its JSON (the SDK's transport writes
# `event: message` and `data: <json>`, with no id without an event store); the clients count
# every field line's bytes, without line ends, towards their limit.
SSE_EVENT_OVERHEAD = len(b"event: message") + len(b"data: ")
# A send to a side that has gone away.
_GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


class _ClientGone(Exception):
    """The client's side closed under a send: the session is over."""


@dataclass(slots=True)
class _Guarded:
    call: ToolCall
    warning: str = ""


@dataclass(slots=True)
class _Held:
    """A tools/call held for a person: its elicitation's id, the answer once it came, and the
    scope that ends the wait when the client cancels the call."""

    ask_id: str
    scope: anyio.CancelScope
    answered: anyio.Event
    answer: Any = None  # the client's ElicitResult (a dict), or None: an error or no answer


# This process's token in every call id it reports. A proxy restarted with the same --run-id
# numbers its events (seq) from 1 again, and its client numbers its requests from 1 again: with
# the bare request ids, each new call would repeat an old event's seq and content, and the daemon
# would answer it as a retry with the verdict it gave before (so the loop's calls would run again).
# With the token, a restarted proxy's calls are new events and the run's loop goes on counting.
PROCESS_TOKEN = secrets.token_hex(4)


class Relay:
    def __init__(self, guard: ProxyGuard, run: SessionRun, *, call_id_prefix: str = "", keep_session: bool = False,
                 stderr: TextIO = sys.stderr, max_event_bytes: int | None = None) -> None:
        self._guard = guard
        self._max_event_bytes = max_event_bytes  # the largest answer the client takes as one event
        self._run = run  # this session's run
        # Keeps the call ids of several sessions of one run apart, and of this process from an
        # earlier one's (PROCESS_TOKEN).
        self._prefix = f"{PROCESS_TOKEN}:{call_id_prefix}"
        self._keep_session = keep_session  # after the server exits, refuse requests until the client ends
        self._stderr = stderr
        self._guarded: dict[Any, _Guarded] = {}  # the client's tools/call requests the server has
        self._in_flight: set[Any] = set()  # every client request the server has not answered yet
        self._progress: dict[Any, Any] = {}  # progress token -> the request that gave it
        self._listing: set[Any] = set()  # the client's tools/list requests not answered yet
        self._classes: dict[str, str] = {}  # tool name -> class its ToolAnnotations gave
        self._initializing: set[Any] = set()  # the client's initialize request (its answer gets the run id)
        self._held: dict[Any, _Held] = {}  # tools/call request id -> the call held for a person
        self._asks: dict[str, _Held] = {}  # elicitation id -> the held call it asks about
        self._ask_numbers = iter(range(1, 2**62))
        self._group: Any = None  # the relay's task group, where held calls wait (set by run)
        self._server_write: Any = None  # the server's write stream (set by run)
        self._client_done = False
        self.server_exited = False  # the server went away while the client was still there

    async def run(self, client_read, client_write, server_read, server_write) -> None:
        """Relay until the client ends (or, without `keep_session`, until the server exits);
        `server_exited` then says whether the server went first."""
        server_done = anyio.Event()
        async with anyio.create_task_group() as group:
            self._group = group
            self._server_write = server_write
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
                await self._guard.after(self._run, guarded.call, error=SERVER_EXITED)
            await self._to_client(client_write, self._exited_error(request_id))

    def _unreadable(self, side: str, exc: Exception) -> None:
        print(f"loopwarden mcp-proxy: dropped an unreadable message from the {side}: {exc}", file=self._stderr,
              flush=True)

    def _error(self, request_id: Any, code: int, text: str) -> SessionMessage:
        return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=text)))

    async def _from_client(self, client_read, client_write, server_write) -> None:
        async for item in client_read:
            if isinstance(item, Exception):
                self._unreadable("client", item)
                continue
            message = item.message
            try:
                forward = await self._client_message(item, client_write)
            except MetaError as exc:
                if isinstance(message, JSONRPCRequest):
                    await self._to_client(client_write, self._error(message.id, INVALID_PARAMS, str(exc)))
                else:
                    self._unreadable("client", exc)
                continue
            except (_ClientGone, *_GONE):
                raise
            except Exception as exc:  # one message the proxy cannot handle fails alone
                log.exception("mcp-proxy: a client message failed")
                print(f"loopwarden mcp-proxy: a client message failed ({type(exc).__name__}: {exc}); "
                      "the session goes on", file=self._stderr, flush=True)
                if isinstance(message, JSONRPCRequest):
                    await self._to_client(client_write, self._error(
                        message.id, INTERNAL_ERROR, f"loopwarden mcp-proxy could not handle this request: {exc}"))
                continue
            if not forward:
                continue
            try:
                await server_write.send(item)
            except _GONE:
                pass  # the server is gone: its side fails this request with the others pending

    async def _client_message(self, item: SessionMessage, client_write) -> bool:
        """Handle one message of the client; whether it goes on to the server."""
        message = item.message
        if isinstance(message, JSONRPCResponse | JSONRPCError) and isinstance(message.id, str) \
                and message.id in self._asks:
            held = self._asks.pop(message.id)  # a person's answer to the proxy's own question
            held.answer = message.result if isinstance(message, JSONRPCResponse) else None
            held.answered.set()
            return False
        if self.server_exited:
            if isinstance(message, JSONRPCRequest):
                await self._to_client(client_write, self._exited_error(message.id))
            return False
        if isinstance(message, JSONRPCRequest):
            meta = meta_of(message.params)
            token = progress_token(meta)
            if message.method == "initialize":
                self._run.accepts_ask = accepts_elicitation(message.params)
                self._set_parent(parent_run_id(meta))
                self._initializing.add(message.id)
                self._track(message.id, token)
            elif message.method == "tools/call":
                parent, turn = parent_run_id(meta), user_turn(meta)  # both checked before either is used
                self._set_parent(parent)
                if turn:
                    await self._guard.user_turn(self._run)
                call = ToolCall.of(f"{self._prefix}{message.id}", message.params, self._classes)
                before = await self._guard.before(self._run, call)
                if before.ask is not None:
                    self._hold(item, call, before.ask, token, client_write)
                    return False
                if not await self._judged(message, call, before, token, client_write):
                    return False
            elif message.method == TASKS_GET:
                call = ToolCall.task_poll(f"{self._prefix}{message.id}", message.params)
                before = await self._guard.before(self._run, call, can_hold=False)
                if before.refusal is not None:
                    text = " ".join(c.get("text", "") for c in before.refusal.get("content", []))
                    await self._to_client(client_write, self._error(message.id, REFUSED, text))
                    return False
                if not await self._judged(message, call, before, token, client_write):
                    return False
            else:
                self._track(message.id, token)
            if message.method == "tools/list":
                self._listing.add(message.id)
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            params = message.params or {}
            request_id = hashable_id(params.get("requestId"))
            if request_id is None:
                raise MetaError("params.requestId of notifications/cancelled must be a string or an integer")
            waiting = self._held.pop(request_id, None)
            if waiting is not None:  # cancelled while a person was asked: it never reached the server
                waiting.scope.cancel()
                return False
            self._settle(request_id)
            guarded = self._guarded.pop(request_id, None)
            if guarded is not None:
                await self._guard.after(self._run, guarded.call, error="cancelled by the client")
        return True

    def _set_parent(self, parent: str) -> None:
        if not parent or parent == self._run.parent_run_id:
            return
        if self._run.parent_run_id:
            raise MetaError(f"this session's run {self._run.run_id!r} is already a child of "
                            f"{self._run.parent_run_id!r}; _meta['io.loopwarden/parentRunId'] cannot name another")
        if parent == self._run.run_id:
            raise MetaError(f"_meta['io.loopwarden/parentRunId'] names this session's own run {parent!r}")
        self._run.parent_run_id = parent

    def _track(self, request_id: Any, token: Any) -> None:
        self._in_flight.add(request_id)
        if token is not None:
            self._progress[token] = request_id

    async def _judged(self, message: JSONRPCRequest, call: ToolCall, before: Before, token: Any,
                      client_write) -> bool:
        """A judged call: answered with its refusal (False) or remembered and sent on (True)."""
        if before.error:
            await self._to_client(client_write, self._error(message.id, INVALID_PARAMS, before.error))
            return False
        if before.refusal is not None:
            await self._to_client(client_write, SessionMessage(JSONRPCResponse(
                jsonrpc="2.0", id=message.id, result=before.refusal)))
            return False
        self._guarded[message.id] = _Guarded(call, before.warning)
        if self.server_exited:  # it went while the call was being judged
            del self._guarded[message.id]
            await self._guard.after(self._run, call, error=SERVER_EXITED)
            await self._to_client(client_write, self._exited_error(message.id))
            return False
        self._track(message.id, token)
        return True

    def _hold(self, item: SessionMessage, call: ToolCall, asked: Verdict, token: Any, client_write) -> None:
        """An ASK: the call waits in a task of its own while the client is asked (its answer comes
        in through the same reader that must go on reading)."""
        held = _Held(f"{ASK_ID_PREFIX}{next(self._ask_numbers)}", anyio.CancelScope(), anyio.Event())
        self._held[cast(JSONRPCRequest, item.message).id] = held  # a tools/call request
        self._group.start_soon(self._ask_person, item, call, asked, token, held, client_write)

    async def _ask_person(self, item: SessionMessage, call: ToolCall, asked: Verdict, token: Any, held: _Held,
                          client_write) -> None:
        try:
            await self._ask_and_go_on(item, call, asked, token, held, client_write)
        except (_ClientGone, *_GONE):
            pass  # the client went away while it was asked: the relay ends with it

    async def _ask_and_go_on(self, item: SessionMessage, call: ToolCall, asked: Verdict, token: Any, held: _Held,
                             client_write) -> None:
        """Ask the person; then the call runs (approved) or is answered with a refusal."""
        message = cast(JSONRPCRequest, item.message)  # only a tools/call request is held
        request = JSONRPCRequest(jsonrpc="2.0", id=held.ask_id, method="elicitation/create",
                                 params={"message": asked.message, "requestedSchema": ASK_SCHEMA})
        with held.scope:
            self._asks[held.ask_id] = held
            # Related to the held call, so that Streamable HTTP sends it on that call's stream.
            await self._to_client(client_write, SessionMessage(request, metadata=ServerMessageMetadata(
                related_request_id=message.id)))
            with anyio.move_on_after(ASK_WAIT_SECONDS):
                await held.answered.wait()
        if self._asks.pop(held.ask_id, None) is not None:  # unanswered: the client may stop asking
            await self._to_client(client_write, SessionMessage(JSONRPCNotification(
                jsonrpc="2.0", method="notifications/cancelled",
                params={"requestId": held.ask_id,
                        "reason": "the call it asked about was cancelled or waited too long"})))
        cancelled = self._held.pop(message.id, None) is None
        approved, always = wants_always(held.answer)
        before = await self._guard.answered(self._run, call, asked, approved=approved and not cancelled,
                                            always=always)
        if cancelled:
            return
        if before.refusal is None and self._client_done:
            return
        if await self._judged(message, call, before, token, client_write):
            try:
                await self._server_write.send(item)
            except _GONE:
                pass  # the server is gone: its side fails this request with the others pending

    async def _from_server(self, server_read, client_write) -> None:
        async for item in server_read:
            if isinstance(item, Exception):
                self._unreadable("server", item)
                continue
            message = item.message
            guarded = None
            if isinstance(message, JSONRPCResponse | JSONRPCError):
                self._settle(message.id)
                if message.id in self._initializing:
                    self._initializing.discard(message.id)
                    if isinstance(message, JSONRPCResponse):
                        item = self._with_run_id(message)
                if message.id in self._listing:
                    self._listing.discard(message.id)
                    if isinstance(message, JSONRPCResponse):  # each page adds its tools' classes
                        self._classes.update(tool_classes(message.result))
                guarded = self._guarded.pop(message.id, None)
                if guarded is not None:
                    try:
                        item = await self._outcome(guarded, message)
                    except Exception as exc:  # the answer still reaches the client
                        log.exception("mcp-proxy: reporting a call's outcome failed")
                        print(f"loopwarden mcp-proxy: the outcome of call {guarded.call.call_id} was not reported "
                              f"({type(exc).__name__}: {exc}); its answer is passed on", file=self._stderr, flush=True)
                item = self._fitted(item, guarded)
            await self._to_client(client_write, self._routed(item))

    def _fitted(self, item: SessionMessage, guarded: _Guarded | None) -> SessionMessage:
        """The answer `item`, or, when its server-sent event would be over `max_event_bytes`, the
        error that says so: a tools/call's `isError` result (with the call's announced warning),
        any other request's JSON-RPC error."""
        message = item.message
        if self._max_event_bytes is None or not isinstance(message, JSONRPCResponse | JSONRPCError):
            return item
        size = SSE_EVENT_OVERHEAD + len(message.model_dump_json(by_alias=True, exclude_unset=True).encode())
        if size <= self._max_event_bytes:
            return item
        if guarded is not None and guarded.call.name == TASKS_GET:
            guarded = None  # a poll's answer is a task, not a tool's result: an error it is
        what = f"tools/call '{guarded.call.name}'" if guarded is not None else "request"
        print(f"loopwarden mcp-proxy: the answer to {what} (id {message.id!r}) is {size} bytes as a server-sent "
              f"event, over --max-sse-event-bytes {self._max_event_bytes}: the client gets an error instead",
              file=self._stderr, flush=True)
        said = (f"as one server-sent event the answer is {size} bytes, over the {self._max_event_bytes}-byte limit "
                "of this session's client (loopwarden mcp-proxy --max-sse-event-bytes; the MCP Python SDK's client "
                "refuses larger events by default), so it was not passed on")
        if guarded is None or message.id is None:
            return self._error(message.id, INTERNAL_ERROR, f"loopwarden mcp-proxy: {said}")
        content = [{"type": "text", "text": f"loopwarden mcp-proxy: the tool ran, but {said}. Ask for a smaller "
                                            "result (a part, a page, a filter) instead of repeating the call."}]
        if guarded.warning:
            content.append({"type": "text", "text": guarded.warning})
        return SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=message.id,
                                              result={"content": content, "isError": True}))

    def _with_run_id(self, message: JSONRPCResponse) -> SessionMessage:
        """The server's answer to initialize, with the session's run id in its `_meta` (for the
        client to name as the parent of its sub-agents' sessions)."""
        meta = message.result.get("_meta")
        meta = {**(meta if isinstance(meta, dict) else {}), RUN_ID: self._run.run_id}
        return SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=message.id, result={**message.result, "_meta": meta}))

    async def _outcome(self, guarded: _Guarded, message: JSONRPCResponse | JSONRPCError) -> SessionMessage:
        if isinstance(message, JSONRPCError):
            await self._guard.after(self._run, guarded.call, error=message.error.message)
            return SessionMessage(message)
        await self._guard.after(self._run, guarded.call, result=message.result)
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
            token = hashable_id((message.params or {}).get("progressToken"))  # anything else has no owner
            related = self._progress.get(token) if token is not None else None
        elif len(self._in_flight) == 1:
            related = next(iter(self._in_flight))
        if related is None:
            return item
        return SessionMessage(message, metadata=ServerMessageMetadata(related_request_id=related))
