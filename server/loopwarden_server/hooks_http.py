"""The agent-hook endpoints' HTTP listener (`--hooks-listen`): hosts' `type: "http"` hooks (Claude
Code) and hook commands (`loopwarden-hook HOST`) POST to `/v1/hooks/HOST`.

This module is the HTTP edge only: the socket, TLS (certificates reloaded on renewal), aiohttp,
reading bodies within their limits and time, and connection limits. Who the caller is and their
share of the endpoint is hook_auth's; what a request means and its answer is hook_endpoint's.

HTTP is served by aiohttp on a thread of its own with its own asyncio loop: reading connections,
parsing requests and hook JSON, and writing answers never queue ahead of the gRPC loop's work, so
one tenant's flood of hooks does not stall another tenant's gRPC calls or the health checks (it
competes for the interpreter, not for the loop; bench/hook_flood.py). Each request's events are
evaluated on the daemon's loop. The listening socket has a backlog of BACKLOG (the kernel caps it
at net.core.somaxconn), so a burst of connections waits to be accepted instead of being reset; for
Claude Code a reset lets the call run unchecked. Past MAX_CONNECTIONS open connections, answers
close their connection instead of keeping it alive. A connection that has not sent a whole request
head within HEADER_TIMEOUT_SECONDS is closed (a slow-header client holds nothing for long), and so
is a kept-alive one idle that long; a body not sent within BODY_TIMEOUT_SECONDS gets the
"unavailable" answer. A hook input up to `--hooks-max-body-bytes` is read whole; a larger one is
not read: it gets a 200 in the host's format saying the call was not checked (a deny under
`--hooks-fail-closed`).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import TYPE_CHECKING, cast

from aiohttp import web

from loopwarden.hooks import HookHost
from loopwarden.daemon_limits import MAX_OUTPUT_TEXT_BYTES, MAX_PARAMS_BYTES, MAX_RESULT_BYTES

from .filewatch import FileWatch
from .hook_endpoint import (
    ANSWER_TIMEOUT_SECONDS, BODY_TIMEOUT_SECONDS, EVENT_NAME_PREFIX_BYTES, CoreHookEvaluator, HookEvaluator,
    HooksEndpoint,
)
from .lifecycle import Lifecycle, StartupError, address_in_use, split_address
from .metrics import Metrics
from .settings import Security

if TYPE_CHECKING:
    from .transport.auth import TokenTable

log = logging.getLogger("loopwarden.hooks")

__all__ = ["BODY_TIMEOUT_SECONDS", "CoreHookEvaluator", "HooksEndpoint", "HooksListener", "hooks_listener"]

BACKLOG = 1024  # connections the kernel queues before they are accepted
MAX_CONNECTIONS = 1024  # open connections past which answers close theirs instead of keeping it alive
# aiohttp's keep-alive timer runs from a connection's start until a request head is complete, and
# between requests: one figure is both the header timeout and the idle timeout.
HEADER_TIMEOUT_SECONDS = 10.0
READ_CHUNK_BYTES = 256 * 1024


class _TlsContexts:
    """The server's TLS context, rebuilt when the certificate, key or client CA files change
    (checked at most once a second, on a new handshake): renewals apply to new handshakes. The
    listener's context hands each handshake to the current one (its SNI callback)."""

    def __init__(self, security: Security) -> None:
        self._security = security
        self._context = self._load()  # raises OSError/ssl.SSLError: no start without them
        self._watch = FileWatch(tuple(p for p in (security.tls_cert, security.tls_key, security.tls_client_ca) if p),
                                clock=time.monotonic, interval=1.0)

    def _load(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cast(str, self._security.tls_cert), self._security.tls_key)  # made with TLS on
        if self._security.tls_client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self._security.tls_client_ca)
        return context

    def current(self) -> ssl.SSLContext:
        if self._watch.changed():
            try:
                self._context = self._load()
                log.info("hooks listener: TLS certificates reloaded", extra={"cert": self._security.tls_cert})
            except (OSError, ssl.SSLError) as exc:
                log.error("hooks listener: TLS files changed but cannot be loaded; the previous certificates "
                          "stay in force", extra={"error": str(exc)})
            self._watch.loaded()
        return self._context

    def listener_context(self) -> ssl.SSLContext:
        listener = self._load()

        def switch(ssl_object: ssl.SSLObject, _server_name: str | None, _context: ssl.SSLContext) -> None:
            current = self.current()
            if current is not listener:
                ssl_object.context = current

        listener.sni_callback = switch
        return listener


def _common_name(certificate: dict | None) -> str:
    """The client certificate's subject CN (mTLS), else ""."""
    for rdn in (certificate or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return ""


async def _read_body(request: web.BaseRequest, limit: int) -> tuple[bytes, bool]:
    """The body, or (its first bytes, True) when it is longer than `limit`: what is past them is
    left unread (aiohttp reads and drops it before closing, so the answer is not lost to a reset)."""
    length = request.content_length
    if length is not None and length > limit:
        return await request.content.read(EVENT_NAME_PREFIX_BYTES), True
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await request.content.read(READ_CHUNK_BYTES)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:  # chunked, without a Content-Length
            return b"".join(chunks)[:EVENT_NAME_PREFIX_BYTES], True


class _HttpFront:
    """The aiohttp request handler: the method, the body and the caller's credentials read from the
    request, the answer from the endpoint, sent as JSON."""

    def __init__(self, endpoint: HooksEndpoint) -> None:
        self._endpoint = endpoint
        self.server: web.Server | None = None

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.method != "POST":
            return self._json(HTTPStatus.METHOD_NOT_ALLOWED, {"error": "hook endpoints take POST"}, Allow="POST")
        authorization = request.headers.get("Authorization", "")
        common_name = _common_name(request.transport.get_extra_info("peercert") if request.transport else None)
        routed = self._endpoint.route(request.path_qs, authorization, common_name)
        if not isinstance(routed[0], HookHost):
            return self._json(*routed)
        fail_closed = self._endpoint.fail_closed(request.path_qs)
        try:
            body, over = await asyncio.wait_for(_read_body(request, self._endpoint.max_body_bytes),
                                                BODY_TIMEOUT_SECONDS)
        except TimeoutError:
            response = self._json(HTTPStatus.OK, self._endpoint.slow_body(routed[0], fail_closed=fail_closed))
            response.force_close()  # the rest of a body that never came is not waited for
            return response
        if over:
            return self._json(HTTPStatus.OK, self._endpoint.too_large(routed[0], body, request.content_length,
                                                                      fail_closed=fail_closed))
        status, answer_body = await self._endpoint.respond(request.path_qs, body, authorization, common_name)
        return self._json(status, answer_body)

    def _json(self, status: int, body: dict, **headers: str) -> web.Response:
        response = web.Response(status=status, body=json.dumps(body).encode(), content_type="application/json",
                                headers={"Server": "loopwarden", **headers})
        if self.server is not None and len(self.server.connections) > MAX_CONNECTIONS:
            response.force_close()  # too many open connections: this one is not kept alive
        return response


class HooksListener:
    """The HTTP listener: its socket bound (and listening, so early connections queue) with the
    daemon's other ports, served by aiohttp on a thread and loop of its own once the daemon has
    started."""

    def __init__(self, listen: str, endpoint: HooksEndpoint, security: Security, port_hint: str | None = None) -> None:
        self._listen = listen
        self.endpoint = endpoint
        self._security = security
        self._port_hint = port_hint  # what moves a busy port where the daemon was started (`make serve`)
        self._socket: socket.socket | None = None
        self._tls: _TlsContexts | None = None
        self._runner: web.ServerRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the hook thread's
        self._thread: threading.Thread | None = None

    def bind(self) -> str:
        """Bind the port; the bound HOST:PORT. StartupError says what failed."""
        try:
            self._tls = _TlsContexts(self._security) if self._security.tls else None
        except (OSError, ssl.SSLError) as exc:
            raise StartupError(f"--hooks-listen: cannot load TLS files (--tls-cert/--tls-key): {exc}") from None
        host, port = split_address(self._listen)
        try:
            family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
                sock.listen(BACKLOG)
            except OSError:
                sock.close()
                raise
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise address_in_use(self._listen, "--hooks-listen", "LOOPWARDEN_HOOKS_LISTEN",
                                     self._port_hint) from None
            raise StartupError(f"cannot serve hooks on {self._listen}: {exc.strerror or exc}") from None
        sock.setblocking(False)
        self._socket = sock
        return f"{host}:{sock.getsockname()[1]}"

    async def start(self) -> None:
        """Serve from a thread of its own; returns once the listener accepts (or raises what
        stopped it). Evaluations come back to this, the daemon's, loop."""
        assert self._socket is not None
        self.endpoint.evaluate_on(asyncio.get_running_loop())
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._serve, args=(started,), name="loopwarden-hooks", daemon=True)
        self._thread.start()
        await asyncio.wrap_future(started)

    def _serve(self, started: concurrent.futures.Future[None]) -> None:
        """The hook thread: its loop runs the listener until `close` stops it."""
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._start_site())
        except BaseException as exc:  # noqa: BLE001 - handed to start(), which raises it on the daemon's loop
            started.set_exception(exc)
            loop.close()
            return
        self._loop = loop
        started.set_result(None)
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _start_site(self) -> None:
        assert self._socket is not None
        front = _HttpFront(self.endpoint)
        server = web.Server(front, access_log=None, keepalive_timeout=HEADER_TIMEOUT_SECONDS,
                            handler_cancellation=False)
        front.server = server
        # shutdown_timeout: at stop, requests still being answered get this long (they are
        # answered "shutting down" at once: the daemon is draining by then).
        self._runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=ANSWER_TIMEOUT_SECONDS)
        await self._runner.setup()
        ssl_context = self._tls.listener_context() if self._tls is not None else None
        # TLS handshakes run on the hook loop (asyncio's SSL protocol, 60 s handshake timeout),
        # never blocking the accept of other connections.
        site = web.SockSite(self._runner, self._socket, ssl_context=ssl_context, backlog=BACKLOG)
        await site.start()

    async def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            if self._socket is not None:
                self._socket.close()
            return
        if self._runner is not None:
            # Answers in flight may wait for evaluations on this, the daemon's, loop: awaited here.
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop))
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join)
        self._loop = self._thread = None


def hooks_listener(listen: str, evaluator: HookEvaluator, lifecycle: Lifecycle, metrics: Metrics, *,
                   security: Security, tokens: Callable[[], TokenTable | None] | None, default_agent: str,
                   fail_closed: bool, max_body_bytes: int, max_params_bytes: int = MAX_PARAMS_BYTES.default,
                   max_result_bytes: int = MAX_RESULT_BYTES.default,
                   max_output_bytes: int = MAX_OUTPUT_TEXT_BYTES.default,
                   port_hint: str | None = None) -> HooksListener:
    endpoint = HooksEndpoint(evaluator, lifecycle, metrics, tokens=tokens, default_agent=default_agent,
                             fail_closed=fail_closed, max_body_bytes=max_body_bytes,
                             max_params_bytes=max_params_bytes, max_result_bytes=max_result_bytes,
                             max_output_bytes=max_output_bytes)
    return HooksListener(listen, endpoint, security, port_hint)
