"""The agent-hook endpoints on an optional HTTP listener (`--hooks-listen`): Claude Code's
`type: "http"` hooks POST to `/v1/hooks/claude-code`, Codex's hook commands to `/v1/hooks/codex`.

The mapping between hook JSON and events is `loopwarden.hooks.protocol`, shared with the command
form (`loopwarden hook`). This module is the HTTP edge: TLS, bearer tokens, body limits, plus what
needs memory across hooks: Claude Code's batches (hook_batches) and its asked calls (hook_asks),
whose later PostToolUse or PermissionDenied is sent as the ask's `approval` ahead of the hook's own
event, in the same request. Every event of a session goes on a request routed by the session's run
(the root of its run tree, sub-agents being child runs), as a routed gRPC stream would be.

HTTP is served by aiohttp on a thread of its own with its own asyncio loop: reading connections,
parsing requests and hook JSON, and writing answers never queue ahead of the gRPC loop's work, so
one tenant's flood of hooks does not stall another tenant's gRPC calls or the health checks (it
competes for the interpreter, not for the loop; bench/hook_flood.py). Each request's events are
evaluated on the daemon's loop (`DaemonLoopEvaluator`), where the core and its run store live
(they are not thread-safe). The hook state (batches, asks) is the endpoint's alone, under locks
anyway. The listening socket has a backlog of
BACKLOG (the kernel caps it at net.core.somaxconn), so a burst of connections waits to be accepted
instead of being reset; for Claude Code a reset lets the call run unchecked. Past MAX_CONNECTIONS
open connections, answers close their connection instead of keeping it alive. A connection that
has not sent a whole request head within HEADER_TIMEOUT_SECONDS is closed (a slow-header client
holds nothing for long), and so is a kept-alive one idle that long; a body not sent within
BODY_TIMEOUT_SECONDS gets the "unavailable" answer. A request's evaluation is waited for at most
ANSWER_TIMEOUT_SECONDS; a slow evaluation, a tenant over its share of concurrent requests, or a
draining daemon get the hook's "unavailable" answer: the agent's call runs (the user is told it was
not checked) unless the operator chose `--hooks-fail-closed`. A guard outage never blocks the agent
by accident, and no hook request is answered with a 5xx. Each such answer is counted by reason
(`loopwarden_hook_requests_unchecked_total`).

Fairness: MAX_IN_FLIGHT requests are evaluated at once, shared equally by the tenants that have
requests open (a tenant is the bearer token's, or the mTLS name): alone, a tenant has all of them;
with another tenant active, half each. A tenant flooding the endpoint gets "busy" answers for its
excess at once, while another tenant's session is still judged (it never queues behind the flood).

A body nested deeper than the JSON parser goes (Python's recursion limit) is answered like one over
the size limit: a 200 in the host's format, never a dropped connection.

Sizes: a hook input up to `--hooks-max-body-bytes` is read whole; a tool input or output in it over
the daemon's event limits is reduced to its stand-in (loopwarden.hooks.reduction) and judged like a
small one (the reduction is logged). A larger input is not read: it gets a 200 in the host's format
saying the call was not checked (a deny under `--hooks-fail-closed`). Inputs over
PARSE_IN_THREAD_BYTES are decoded and reduced on a worker thread, so a 16 MiB body does not stall
the loop's other work (gRPC streams included) while it is parsed.
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
from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, Protocol, cast
from urllib.parse import parse_qs, urlsplit

from aiohttp import web

from loopwarden.eventformat import EventKind, EventRecord
from loopwarden.hooks import (
    Dialect, HookPayloadError, HookRequest, VerdictLike, answer, event_name_in, parse, refused_answer,
    unavailable_answer, unchecked_answer,
)
from loopwarden.hooks.protocol import is_before_tool
from loopwarden.hooks.reduction import DEFAULT_LIMIT_BYTES

from .core import CoreService
from .filewatch import FileWatch
from .hook_asks import HookAsks
from .hook_batches import HookBatches
from .integration import current_integration
from .lifecycle import Lifecycle, StartupError, address_in_use, split_address
from .metrics import Metrics
from .settings import Security
from .transport.auth import Caller
from .transport.hook_requests import evaluate_request, verdicts

if TYPE_CHECKING:
    from .transport.auth import TokenTable

log = logging.getLogger("loopwarden.hooks")

PATHS = {f"/v1/hooks/{dialect.value}": dialect for dialect in Dialect}
ANSWER_TIMEOUT_SECONDS = 5.0
MAX_IN_FLIGHT = 64  # requests being evaluated at once, shared by the active tenants; more get "busy"
BACKLOG = 1024  # connections the kernel queues before they are accepted
MAX_CONNECTIONS = 1024  # open connections past which answers close theirs instead of keeping it alive
# aiohttp's keep-alive timer runs from a connection's start until a request head is complete, and
# between requests: one figure is both the header timeout and the idle timeout.
HEADER_TIMEOUT_SECONDS = 10.0
BODY_TIMEOUT_SECONDS = 10.0
PARSE_IN_THREAD_BYTES = 256 * 1024
READ_CHUNK_BYTES = 256 * 1024
# Where the event's name is looked for in an input too large to read: hosts send it near the top.
EVENT_NAME_PREFIX_BYTES = 64 * 1024
# `?fail_closed=1` on a hook URL: this host's calls fail closed although the daemon's default is
# open (a command hook's own --fail-closed, passed on). It can only make an answer stricter.
_FAIL_CLOSED_VALUES = frozenset({"1", "true", "yes"})


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


def _event_name(prefix: bytes) -> str:
    """The hook's event name as read from the start of an input too large to parse ("" if absent)."""
    return event_name_in(prefix)


class HookEvaluator(Protocol):
    """The daemon's engine as the hook endpoints use it: event records in (one request, routed by
    `routed`: the run tree's root), their verdicts out, in order."""

    async def evaluate(self, records: Sequence[EventRecord], integration: str, tenant: str,
                       routed: str, *, agent_only: bool = False) -> Sequence[VerdictLike]: ...


class CoreHookEvaluator:
    """The compiled core as the hook endpoints use it: the hook's event records go to the core as
    one routed Evaluate request (transport.hook_requests), their verdicts come back typed."""

    def __init__(self, core: CoreService, loader=None) -> None:
        self._core = core
        self._loader = loader  # a shared state store's keeper: runs not in memory are loaded first

    async def evaluate(self, records: Sequence[EventRecord], integration: str, tenant: str,
                       routed: str, *, agent_only: bool = False) -> Sequence[VerdictLike]:
        token = current_integration.set(integration)  # the verdict counter's integration label
        try:
            lazy = self._loader is not None
            answer = self._core.evaluate(evaluate_request(records), tenant, routed, lazy=lazy, agent_only=agent_only)
            if lazy:
                answer = await self._core.loaded(answer, self._loader, tenant, routed)
        finally:
            current_integration.reset(token)
        if answer.refusal:
            raise RuntimeError(f"the core refused a hook request: {answer.refusal}")
        return verdicts(cast(bytes, answer.response))  # a request not refused is answered


class DaemonLoopEvaluator:
    """`evaluator` as the hook thread uses it: each evaluation runs on the daemon's loop (`loop`),
    where the core lives, and is awaited from the hook loop. A timeout on the hook side cancels it
    there too."""

    def __init__(self, evaluator: HookEvaluator, loop: asyncio.AbstractEventLoop) -> None:
        self._evaluator = evaluator
        self._loop = loop

    async def evaluate(self, records: Sequence[EventRecord], integration: str, tenant: str,
                       routed: str, *, agent_only: bool = False) -> Sequence[VerdictLike]:
        evaluation = self._evaluator.evaluate(records, integration, tenant, routed, agent_only=agent_only)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(evaluation, self._loop))


class HooksEndpoint:
    """Answers one hook request (on the hook loop): (status, JSON body)."""

    def __init__(self, evaluator: HookEvaluator, lifecycle: Lifecycle, metrics: Metrics | None, *,
                 tokens: Callable[[], TokenTable | None] | None, default_agent: str, fail_closed: bool,
                 max_body_bytes: int, max_params_bytes: int = DEFAULT_LIMIT_BYTES,
                 max_result_bytes: int = DEFAULT_LIMIT_BYTES, answer_timeout: float = ANSWER_TIMEOUT_SECONDS) -> None:
        self._evaluator = evaluator
        self._answer_timeout = answer_timeout
        self._lifecycle = lifecycle
        self._metrics = metrics
        self._tokens = tokens
        self._default_agent = default_agent
        self._fail_closed = fail_closed
        self.max_body_bytes = max_body_bytes
        self._max_params_bytes = max_params_bytes
        self._max_result_bytes = max_result_bytes
        self._in_flight: dict[str, int] = {}  # tenant -> requests being evaluated
        self.batches = HookBatches()
        self.asks = HookAsks()

    def evaluate_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Evaluations go to `loop` (the daemon's) from now on: the endpoint is served elsewhere."""
        self._evaluator = DaemonLoopEvaluator(self._evaluator, loop)

    def route(self, target: str, authorization: str,
              common_name: str) -> tuple[Dialect, Caller, str] | tuple[int, dict]:
        """Who may send what where, before the body is judged: (dialect, caller, agent), or the
        error answer (404 unknown path, 401 missing or wrong token)."""
        url = urlsplit(target)
        dialect = PATHS.get(url.path)
        if dialect is None:
            return HTTPStatus.NOT_FOUND, {"error": f"no hook endpoint at {url.path}; use one of {sorted(PATHS)}"}
        caller = self._caller(authorization, common_name)
        if caller is None:
            return HTTPStatus.UNAUTHORIZED, {"error": "missing or invalid bearer token (Authorization: Bearer …)"}
        return dialect, caller, parse_qs(url.query).get("agent", [self._default_agent])[-1]

    def fail_closed(self, target: str) -> bool:
        """Whether this request's calls fail closed: the daemon's --hooks-fail-closed, or the
        hook URL's `?fail_closed=1` (a stricter choice of one host's hooks, never a looser one)."""
        if self._fail_closed:
            return True
        values = parse_qs(urlsplit(target).query).get("fail_closed", [])
        return bool(values) and values[-1].lower() in _FAIL_CLOSED_VALUES

    async def respond(self, target: str, body: bytes, authorization: str = "",
                      common_name: str = "") -> tuple[int, dict]:
        """The answer to one hook request whose whole body was read."""
        routed = self.route(target, authorization, common_name)
        if not isinstance(routed[0], Dialect):
            return routed
        dialect, caller, agent_id = routed
        tenant = caller.tenant
        fail_closed = self.fail_closed(target)
        if len(body) > PARSE_IN_THREAD_BYTES:
            hook = await asyncio.to_thread(self._parse, dialect, body, agent_id, fail_closed)
        else:
            hook = self._parse(dialect, body, agent_id, fail_closed)
        if isinstance(hook, tuple):
            return hook
        for reduced in hook.reduced:
            log.info("hook input reduced: judged by its sha256, length and prefix", extra={
                "hook_event": hook.hook_event_name, "field": reduced.field, "bytes": reduced.size_bytes,
                "sha256": reduced.sha256, "run_id": hook.run.run_id if hook.run else ""})
        hook = self._batched(hook, tenant)
        approvals = self._approvals(hook, tenant)
        if hook.event is None and not approvals:
            return HTTPStatus.OK, {}
        return HTTPStatus.OK, await self.decide(hook, tenant, approvals, fail_closed=fail_closed,
                                                agent_only=caller.agent_only)

    def _parse(self, dialect: Dialect, body: bytes, agent_id: str,
               fail_closed: bool = False) -> HookRequest | tuple[int, dict]:
        """The body decoded and mapped (any thread: pure), or the 400 that says what is wrong (a
        deny in the host's format instead, for a before-tool event when fail-closed)."""
        try:
            payload = json.loads(body)
        except ValueError as exc:  # UnicodeDecodeError included
            return self._unreadable(dialect, body, "not_json", f"the request body is not JSON: {exc}", fail_closed)
        except RecursionError:  # nested deeper than the parser goes: answered, never a dropped connection
            return HTTPStatus.OK, self.too_deep(dialect, body[:EVENT_NAME_PREFIX_BYTES], fail_closed=fail_closed)
        try:
            return parse(dialect, payload, agent_id=agent_id, max_params_bytes=self._max_params_bytes,
                         max_result_bytes=self._max_result_bytes)
        except HookPayloadError as exc:
            return self._unreadable(dialect, body, "not_hook_input", f"not a {dialect.value} hook input: {exc}",
                                    fail_closed)
        except RecursionError:  # a tool input the parser read but that is too deep to canonicalize
            return HTTPStatus.OK, self.too_deep(dialect, body[:EVENT_NAME_PREFIX_BYTES], fail_closed=fail_closed)

    def _unreadable(self, dialect: Dialect, body: bytes, reason: str, error: str,
                    fail_closed: bool) -> tuple[int, dict]:
        """A body that is not the host's hook JSON: a 400 saying what is wrong (the host reports it
        and goes on: the call runs). Fail closed, a before-tool event whose name can still be read is
        denied instead, in the host's format: a 400 would let the call run."""
        self.count_refused(reason, dialect)
        name = event_name_in(body[:EVENT_NAME_PREFIX_BYTES])
        if fail_closed and is_before_tool(dialect, name):
            log.warning("hook input unreadable: call denied (fail closed)", extra={"hook_event": name, "error": error})
            return HTTPStatus.OK, refused_answer(dialect, name, f"the hook input could not be read: {error}",
                                                 fail_closed=True)
        return HTTPStatus.BAD_REQUEST, {"error": error}

    def too_large(self, dialect: Dialect, prefix: bytes, size: int | None, *, fail_closed: bool | None = None) -> dict:
        """The answer to an input over --hooks-max-body-bytes (unread past its prefix): a 200 in the
        host's format saying the call was not checked, a deny for a PreToolUse when fail-closed."""
        name = _event_name(prefix)
        self.count_unchecked("too_large")
        log.warning("hook input over --hooks-max-body-bytes: not checked",
                    extra={"hook_event": name, "bytes": size, "limit": self.max_body_bytes})
        stated = f" ({size} bytes)" if size is not None else ""  # a chunked body states no size
        reason = f"the hook input{stated} is over the limit of {self.max_body_bytes} bytes (--hooks-max-body-bytes)"
        return unchecked_answer(dialect, name, reason, fail_closed=self._closed(fail_closed))

    def too_deep(self, dialect: Dialect, prefix: bytes, *, fail_closed: bool | None = None) -> dict:
        """The answer to an input nested deeper than the JSON parser goes: like one too large."""
        name = _event_name(prefix)
        self.count_unchecked("too_deep")
        log.warning("hook input nested too deep to parse: not checked", extra={"hook_event": name})
        return unchecked_answer(dialect, name, "the hook input is nested too deep to be read",
                                fail_closed=self._closed(fail_closed))

    def slow_body(self, dialect: Dialect, *, fail_closed: bool | None = None) -> dict:
        """The answer to a body not sent within BODY_TIMEOUT_SECONDS."""
        self.count_unchecked("slow_body")
        log.warning("hook input not sent in time: not checked", extra={"seconds": BODY_TIMEOUT_SECONDS})
        return unchecked_answer(dialect, "", f"the hook input was not sent within {BODY_TIMEOUT_SECONDS:g} s",
                                fail_closed=self._closed(fail_closed))

    def _closed(self, fail_closed: bool | None) -> bool:
        return self._fail_closed if fail_closed is None else fail_closed or self._fail_closed

    def _approvals(self, hook: HookRequest, tenant: str) -> tuple[EventRecord, ...]:
        """The person's answers to asks this endpoint made, to send ahead of the hook's event: the
        asks of the run the hook shows were declined without a hook of their own (hook_asks), then
        this hook's call's, when it was asked: its PostToolUse approves it once, PermissionDenied
        denies it. SessionEnd forgets the session's asks."""
        if hook.ends_session:
            self.asks.end_session(tenant, hook.session_id)
        if not hook.dialect.can_ask or hook.run is None:
            return ()
        approvals = hook.declined(self._unanswered(hook, tenant, hook.run.run_id))
        settled = hook.settles_ask
        if settled is not None and self.asks.settle(tenant, hook.session_id, hook.run.run_id, hook.tool_call_id):
            approvals += (hook.approval(settled),)
        return approvals

    def _unanswered(self, hook: HookRequest, tenant: str, run_id: str) -> list[str]:
        """The asks of the hook's run (`run_id`) that it shows were declined: all of them at the end
        of the run's batch or a new prompt; before a call runs, those of other batches and the
        same call's."""
        if hook.declines_every_ask:
            return self.asks.unanswered(tenant, hook.session_id, run_id)
        if hook.call is not None and hook.event is not None:
            return self.asks.unanswered(tenant, hook.session_id, run_id, tool_call_id=hook.tool_call_id,
                                        batch_id=hook.event.batch_id, call=hook.call)
        return []

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

    def _caller(self, authorization: str, common_name: str) -> Caller | None:
        """The caller: its token's tenant and side (the tenant "" without authentication: the mTLS
        CN if any), None when the token is missing or wrong."""
        if self._tokens is None:
            return Caller(common_name)
        table = self._tokens()
        supplied = authorization[len("Bearer "):].strip() if authorization.startswith("Bearer ") else ""
        if table is None:
            reason = "token_file_unusable"
        elif not supplied:
            reason = "missing_token"
        else:
            caller = table.caller_for(supplied.encode("utf-8", "surrogateescape"))
            if caller is not None:
                return caller
            reason = "invalid_token"
        if self._metrics is not None:
            self._metrics.auth_failures.labels(reason).inc()
        return None

    async def decide(self, hook: HookRequest, tenant: str, approvals: tuple[EventRecord, ...] = (), *,
                     fail_closed: bool | None = None, agent_only: bool = False) -> dict:
        """The answer to one parsed hook request (and the approvals to send ahead of its event), or,
        when it cannot be given in time (or the daemon drains, or is busy), the unavailable answer."""
        fail_closed = self._closed(fail_closed)
        if self._lifecycle.draining:
            return self._unavailable(hook, "draining", "loopwarden is shutting down", fail_closed)
        if self._lifecycle.restoring:
            return self._unavailable(hook, "restoring", "loopwarden is starting (restoring its stored runs)",
                                     fail_closed)
        in_flight = self._in_flight
        held = in_flight.get(tenant, 0)
        if held >= self.share(tenant):
            return self._unavailable(hook, "busy", "loopwarden is busy (this tenant's share of concurrent "
                                                   "hook requests is taken)", fail_closed)
        in_flight[tenant] = held + 1
        try:
            return await asyncio.wait_for(self._evaluate(hook, tenant, approvals, fail_closed, agent_only),
                                          self._answer_timeout)
        except TimeoutError:
            return self._unavailable(hook, "timeout", f"loopwarden did not answer within {self._answer_timeout:g} s",
                                     fail_closed)
        except Exception:  # the agent gets an answer; the log gets the details
            log.exception("hook request failed", extra={"hook_event": hook.hook_event_name})
            return self._unavailable(hook, "failed", "loopwarden failed on this request", fail_closed)
        finally:
            left = in_flight[tenant] - 1
            if left:
                in_flight[tenant] = left
            else:
                del in_flight[tenant]

    def share(self, tenant: str) -> int:
        """How many requests `tenant` may have evaluated at once: an equal share of MAX_IN_FLIGHT
        among the tenants with requests open (itself included), at least one."""
        active = len(self._in_flight) + (tenant not in self._in_flight)
        return max(1, MAX_IN_FLIGHT // active)

    def _unavailable(self, hook: HookRequest, reason: str, text: str, fail_closed: bool) -> dict:
        self.count_unchecked(reason)
        return unavailable_answer(hook, text, fail_closed=fail_closed)

    def count_unchecked(self, reason: str) -> None:
        if self._metrics is not None:
            self._metrics.hooks_unchecked.labels(reason).inc()

    def count_refused(self, reason: str, dialect: Dialect) -> None:
        if self._metrics is not None:
            self._metrics.hooks_refused.labels(reason, dialect.value).inc()

    async def _evaluate(self, hook: HookRequest, tenant: str, approvals: tuple[EventRecord, ...],
                        fail_closed: bool = False, agent_only: bool = False) -> dict:
        """On the loop: the approvals (if any) and the hook's event in one request, and after a
        BLOCK the blocked call's outcome. An ASK is remembered for the call's later hooks."""
        integration, routed = hook.dialect.integration, hook.root_run_id
        decided = await self._evaluator.evaluate(hook.events(*approvals), integration, tenant, routed,
                                                 agent_only=agent_only)
        for approval, taken in zip(approvals, decided):
            if _action(taken) == "reject":
                # The daemon held no such ask (restarted without a state store, the ask timed out):
                # nothing to settle, and the hook's own event was decided all the same.
                log.info("hook approval not taken", extra={"tool_call_id": approval.tool_call_id,
                                                           "error_code": taken.error_code})
        verdict = decided[-1] if hook.event is not None else None
        if verdict is None:
            return answer(hook, None)
        if _action(verdict) == "reject":
            # The event was refused, so nothing was judged: said to the user (denied when fail
            # closed, protocol.answer) and counted, by the refusal's code and the host.
            self.count_refused(verdict.error_code or "unknown", hook.dialect)
            log.warning("hook event refused by the engine: not checked", extra={
                "hook_event": hook.hook_event_name, "error_code": verdict.error_code, "fail_closed": fail_closed})
        if hook.asked(verdict) and hook.run is not None and hook.event is not None:
            self.asks.asked(tenant, hook.session_id, hook.run.run_id, hook.tool_call_id, hook.event.batch_id,
                            hook.call)
        blocked = hook.blocked_outcome(verdict)
        if blocked is not None:
            await self._evaluator.evaluate((blocked,), integration, tenant, routed, agent_only=agent_only)
        return answer(hook, verdict, fail_closed=fail_closed)


def _action(verdict: VerdictLike) -> str:
    return str(getattr(verdict.action, "value", verdict.action))


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
        if not isinstance(routed[0], Dialect):
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
                   fail_closed: bool, max_body_bytes: int, max_params_bytes: int = DEFAULT_LIMIT_BYTES,
                   max_result_bytes: int = DEFAULT_LIMIT_BYTES, port_hint: str | None = None) -> HooksListener:
    endpoint = HooksEndpoint(evaluator, lifecycle, metrics, tokens=tokens, default_agent=default_agent,
                             fail_closed=fail_closed, max_body_bytes=max_body_bytes,
                             max_params_bytes=max_params_bytes, max_result_bytes=max_result_bytes)
    return HooksListener(listen, endpoint, security, port_hint)
