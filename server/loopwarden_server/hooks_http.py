"""The agent-hook endpoints on an optional HTTP listener (`--hooks-listen`): Claude Code's
`type: "http"` hooks POST to `/v1/hooks/claude-code`, Codex's hook commands to `/v1/hooks/codex`.

The mapping between hook JSON and events is `loopwarden.hooks.protocol`, shared with the command
form (`loopwarden hook`). This module is the HTTP edge: TLS, bearer tokens, body limits, and the
hand-over to the event loop, plus what needs memory across hooks: Claude Code's batches
(hook_batches) and its asked calls (hook_asks), whose later PostToolUse or PermissionDenied is sent
as the ask's `approval` ahead of the hook's own event, in the same request. Every event of a
session goes on a request routed by the session's run (the root of its run tree, sub-agents being
child runs), as a routed gRPC stream would be.

NOTE: the core and its run store live on the daemon's asyncio loop and are not thread-safe.
HTTP is served by the standard library's threaded server (one thread per connection, TLS
handshakes on that thread, not in the accept loop); a request is read, authenticated and parsed
on its thread, and only its evaluation is handed to the loop (`run_coroutine_threadsafe`), waited
for at most ANSWER_TIMEOUT_SECONDS. A loop that does not answer in time, too many requests at
once, or a draining daemon get the hook's "unavailable" answer: the agent's call runs (the user is
told it was not checked) unless the operator chose `--hooks-fail-closed`. A guard outage never
blocks the agent by accident.
"""
from __future__ import annotations

import asyncio
import json
import logging
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from loopwarden.eventformat import EventKind, EventRecord
from loopwarden.hooks import Dialect, HookPayloadError, HookRequest, VerdictLike, answer, parse, unavailable_answer

from .core import CoreService
from .filewatch import FileWatch
from .hook_asks import HookAsks
from .hook_batches import HookBatches
from .integration import current_integration
from .lifecycle import Lifecycle, StartupError, split_address
from .metrics import Metrics
from .settings import Security
from .transport.hook_requests import evaluate_request, verdicts

if TYPE_CHECKING:
    from .transport.auth import TokenTable

log = logging.getLogger("loopwarden.hooks")

PATHS = {f"/v1/hooks/{dialect.value}": dialect for dialect in Dialect}
ANSWER_TIMEOUT_SECONDS = 5.0
MAX_IN_FLIGHT = 64  # requests being evaluated at once; more get the busy answer at once
IDLE_CONNECTION_SECONDS = 30.0  # a kept-alive connection that sends nothing is closed
TLS_HANDSHAKE_SECONDS = 10.0


class _TlsContexts:
    """The server's TLS context, rebuilt when the certificate, key or client CA files change
    (checked at most once a second, on a new connection): renewals apply to new handshakes."""

    def __init__(self, security: Security) -> None:
        self._security = security
        self._context = self._load()  # raises OSError/ssl.SSLError: no start without them
        self._watch = FileWatch(tuple(p for p in (security.tls_cert, security.tls_key, security.tls_client_ca) if p),
                                clock=time.monotonic, interval=1.0)

    def _load(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self._security.tls_cert, self._security.tls_key)
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


def _common_name(sock) -> str:
    """The client certificate's subject CN (mTLS), else ""."""
    getpeercert = getattr(sock, "getpeercert", None)
    certificate = getpeercert() if getpeercert is not None else None
    for rdn in (certificate or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return ""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], endpoint: HooksEndpoint, tls: _TlsContexts | None) -> None:
        self.endpoint = endpoint
        self._tls = tls
        super().__init__(address, _Handler)

    def finish_request(self, request, client_address) -> None:
        if self._tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(TLS_HANDSHAKE_SECONDS)
        try:
            secure = self._tls.current().wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            log.debug("hooks listener: TLS handshake failed", extra={"error": str(exc)})
            return
        try:
            super().finish_request(secure, client_address)
        finally:
            secure.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "loopwarden"
    sys_version = ""
    timeout = IDLE_CONNECTION_SECONDS
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 - the http.server spelling
        status, body = self.server.endpoint.handle(self)
        self._send(status, body)

    def _not_allowed(self) -> None:
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, {"error": "hook endpoints take POST"}, allow="POST")

    do_GET = do_PUT = do_DELETE = do_PATCH = _not_allowed  # noqa: N815

    def _send(self, status: int, body: dict, **headers: str) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-").title(), value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the http.server signature
        log.debug("hooks request", extra={"request": format % args})


class HookEvaluator(Protocol):
    """The daemon's engine as the hook endpoints use it: event records in (one request, routed by
    `routed`: the run tree's root), their verdicts out, in order."""

    async def evaluate(self, records: Sequence[EventRecord], integration: str, tenant: str,
                       routed: str) -> list[VerdictLike]: ...


class CoreHookEvaluator:
    """The compiled core as the hook endpoints use it: the hook's event records go to the core as
    one routed Evaluate request (transport.hook_requests), their verdicts come back typed."""

    def __init__(self, core: CoreService, loader=None) -> None:
        self._core = core
        self._loader = loader  # a shared state store's keeper: runs not in memory are loaded first

    async def evaluate(self, records: Sequence[EventRecord], integration: str, tenant: str,
                       routed: str) -> list[VerdictLike]:
        token = current_integration.set(integration)  # the verdict counter's integration label
        try:
            lazy = self._loader is not None
            answer = self._core.evaluate(evaluate_request(records), tenant, routed, lazy=lazy)
            if lazy:
                answer = await self._core.loaded(answer, self._loader, tenant, routed)
        finally:
            current_integration.reset(token)
        if answer.refusal:
            raise RuntimeError(f"the core refused a hook request: {answer.refusal}")
        return verdicts(answer.response)


class HooksEndpoint:
    """Answers one hook request (on its HTTP thread): (status, JSON body)."""

    def __init__(self, evaluator: HookEvaluator, lifecycle: Lifecycle, metrics: Metrics, *,
                 tokens: Callable[[], TokenTable | None] | None, default_agent: str, fail_closed: bool,
                 max_body_bytes: int, answer_timeout: float = ANSWER_TIMEOUT_SECONDS) -> None:
        self._evaluator = evaluator
        self._answer_timeout = answer_timeout
        self._lifecycle = lifecycle
        self._metrics = metrics
        self._tokens = tokens
        self._default_agent = default_agent
        self._fail_closed = fail_closed
        self._max_body_bytes = max_body_bytes
        self._in_flight = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        self.batches = HookBatches()
        self.asks = HookAsks()
        self.loop: asyncio.AbstractEventLoop | None = None

    def handle(self, request: _Handler) -> tuple[int, dict]:
        # The body is read first, whatever the answer: a response sent over an unread body makes
        # the close that follows a TCP reset, which can destroy the response on its way.
        body = self._body(request)
        if isinstance(body, tuple):
            return body
        url = urlsplit(request.path)
        dialect = PATHS.get(url.path)
        if dialect is None:
            return HTTPStatus.NOT_FOUND, {"error": f"no hook endpoint at {url.path}; use one of {sorted(PATHS)}"}
        tenant = self._tenant(request)
        if tenant is None:
            return HTTPStatus.UNAUTHORIZED, {"error": "missing or invalid bearer token (Authorization: Bearer …)"}
        try:
            payload = json.loads(body)
        except ValueError as exc:  # UnicodeDecodeError included
            return HTTPStatus.BAD_REQUEST, {"error": f"the request body is not JSON: {exc}"}
        agent_id = parse_qs(url.query).get("agent", [self._default_agent])[-1]
        try:
            hook = parse(dialect, payload, agent_id=agent_id)
        except HookPayloadError as exc:
            return HTTPStatus.BAD_REQUEST, {"error": f"not a {dialect.value} hook input: {exc}"}
        hook = self._batched(hook, tenant)
        approval = self._approval(hook, tenant)
        if hook.event is None and approval is None:
            return HTTPStatus.OK, {}
        return HTTPStatus.OK, self.decide(hook, tenant, approval)

    def _approval(self, hook: HookRequest, tenant: str) -> EventRecord | None:
        """The person's answer to an ask of this hook's call, when this endpoint asked it: the
        call's PostToolUse approves it once, PermissionDenied denies it. SessionEnd forgets the
        session's asks."""
        if hook.ends_session:
            self.asks.end_session(tenant, hook.session_id)
        settled = hook.settles_ask
        if settled is None or hook.run is None:
            return None
        if not self.asks.settle(tenant, hook.session_id, hook.run.run_id, hook.tool_call_id):
            return None
        return hook.approval(settled)

    def _batched(self, hook: HookRequest, tenant: str) -> HookRequest:
        """Claude Code's batches (hook_batches): a PostToolBatch ends the session's batch, a
        PreToolUse joins the open one (or opens it), SessionEnd forgets the session. A host
        without batch ends (Codex) sends no batch ids."""
        if not hook.dialect.ends_batches:
            return hook
        if hook.ends_batch:
            self.batches.end_batch(tenant, hook.session_id, hook.subagent)
        elif hook.ends_session:
            self.batches.end_session(tenant, hook.session_id)
        elif hook.ends_subagent:
            self.batches.end_subagent(tenant, hook.session_id, hook.subagent)
        elif hook.event is not None and hook.event.kind is EventKind.USER_TURN:
            self.batches.end_batch(tenant, hook.session_id, hook.subagent)  # a new prompt: a new turn
        elif hook.before_tool and hook.event is not None:
            call = hook.event
            batch_id = self.batches.call(tenant, hook.session_id, hook.subagent, call.tool_call_id,
                                         (call.tool_name, call.params_json))
            if batch_id:
                return hook.in_batch(batch_id)
        return hook

    def _tenant(self, request: _Handler) -> str | None:
        """The caller's tenant ("" without authentication), None when the token is missing or wrong."""
        if self._tokens is None:
            return _common_name(request.connection)
        table = self._tokens()
        header = request.headers.get("Authorization", "")
        supplied = header[len("Bearer "):].strip() if header.startswith("Bearer ") else ""
        if table is None:
            reason = "token_file_unusable"
        elif not supplied:
            reason = "missing_token"
        else:
            tenant = table.tenant_for(supplied.encode("utf-8", "surrogateescape"))
            if tenant is not None:
                return tenant
            reason = "invalid_token"
        self._metrics.auth_failures.labels(reason).inc()
        return None

    def _body(self, request: _Handler) -> bytes | tuple[int, dict]:
        length = request.headers.get("Content-Length")
        if length is None or not length.strip().isdigit():
            request.close_connection = True
            return HTTPStatus.LENGTH_REQUIRED, {"error": "a hook request needs a Content-Length"}
        size = int(length)
        if size > self._max_body_bytes:
            request.close_connection = True  # the unread body must not be taken for the next request
            return HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {
                "error": f"the hook input is {size} bytes; the limit is {self._max_body_bytes}"}
        return request.rfile.read(size)

    def decide(self, hook: HookRequest, tenant: str, approval: EventRecord | None = None) -> dict:
        """The answer to one parsed hook request (and the approval to send ahead of its event),
        from the event loop or, when it cannot give one in time (or the daemon drains), the
        unavailable answer."""
        loop = self.loop
        if self._lifecycle.draining or loop is None:
            return unavailable_answer(hook, "loopwarden is shutting down", fail_closed=self._fail_closed)
        if not self._in_flight.acquire(blocking=False):
            return unavailable_answer(hook, "loopwarden is busy", fail_closed=self._fail_closed)
        try:
            future = asyncio.run_coroutine_threadsafe(self._evaluate(hook, tenant, approval), loop)
            try:
                return future.result(timeout=self._answer_timeout)
            except TimeoutError:
                future.cancel()
                return unavailable_answer(hook, f"loopwarden did not answer within {self._answer_timeout:g} s",
                                          fail_closed=self._fail_closed)
            except Exception:  # noqa: BLE001 - the agent gets an answer; the log gets the details
                log.exception("hook request failed", extra={"hook_event": hook.hook_event_name})
                return unavailable_answer(hook, "loopwarden failed on this request", fail_closed=self._fail_closed)
        finally:
            self._in_flight.release()

    async def _evaluate(self, hook: HookRequest, tenant: str, approval: EventRecord | None) -> dict:
        """On the loop: the approval (if any) and the hook's event in one request, and after a
        BLOCK the blocked call's outcome. An ASK is remembered for the call's later hooks."""
        integration, routed = hook.dialect.integration, hook.root_run_id
        decided = await self._evaluator.evaluate(hook.events(approval), integration, tenant, routed)
        if approval is not None and _action(decided[0]) == "reject":
            # The daemon held no such ask (restarted without a state store, the ask timed out):
            # nothing to settle, and the hook's own event was decided all the same.
            log.info("hook approval not taken", extra={"tool_call_id": approval.tool_call_id,
                                                       "error_code": decided[0].error_code})
        verdict = decided[-1] if hook.event is not None else None
        if verdict is None:
            return answer(hook, None)
        if hook.asked(verdict) and hook.run is not None:
            self.asks.asked(tenant, hook.session_id, hook.run.run_id, hook.tool_call_id)
        blocked = hook.blocked_outcome(verdict)
        if blocked is not None:
            await self._evaluator.evaluate((blocked,), integration, tenant, routed)
        return answer(hook, verdict)


def _action(verdict: VerdictLike) -> str:
    return str(getattr(verdict.action, "value", verdict.action))


class HooksListener:
    """The HTTP listener: bound with the daemon's other ports, served on its own threads."""

    def __init__(self, listen: str, endpoint: HooksEndpoint, security: Security) -> None:
        self._listen = listen
        self.endpoint = endpoint
        self._security = security
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def bind(self) -> str:
        """Bind the port; the bound HOST:PORT. StartupError says what failed."""
        try:
            tls = _TlsContexts(self._security) if self._security.tls else None
        except (OSError, ssl.SSLError) as exc:
            raise StartupError(f"--hooks-listen: cannot load TLS files (--tls-cert/--tls-key): {exc}") from None
        host, port = split_address(self._listen)
        try:
            self._server = _Server((host, port), self.endpoint, tls)
        except OSError as exc:
            raise StartupError(f"cannot serve hooks on {self._listen}: {exc.strerror or exc}") from None
        return f"{host}:{self._server.server_port}"

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.endpoint.loop = loop
        assert self._server is not None
        self._thread = threading.Thread(target=self._server.serve_forever, name="hooks-http", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def hooks_listener(listen: str, evaluator: HookEvaluator, lifecycle: Lifecycle, metrics: Metrics, *,
                   security: Security, tokens: Callable[[], TokenTable | None] | None, default_agent: str,
                   fail_closed: bool, max_body_bytes: int) -> HooksListener:
    endpoint = HooksEndpoint(evaluator, lifecycle, metrics, tokens=tokens, default_agent=default_agent,
                             fail_closed=fail_closed, max_body_bytes=max_body_bytes)
    return HooksListener(listen, endpoint, security)
