"""The agent-hook endpoints' logic: one hook request in, its answer out, whatever carries it.

The HTTP listener (hooks_http) hands each request here with its path, body and credentials:
the path names the host (`/v1/hooks/NAME`, one per host registered in loopwarden.hooks.hosts),
the caller is its token's tenant (hook_auth), the body is read by the host's module
(loopwarden.hooks.protocol), and the flow around it — the approvals sent ahead of the hook's own
event, an ASK remembered, a BLOCK's outcome reported — is the hook driver's (loopwarden.hooks.driver),
shared with the command form, over this endpoint's memory of asked calls (hook_asks, per tenant).
What needs memory across a host's hooks besides asks is kept here too: batches (hook_batches).
Every event of a session goes on a request routed by the session's run (the root of its run
tree, sub-agents being child runs), as a routed gRPC stream would be.

Each request's events are evaluated on the daemon's loop (`DaemonLoopEvaluator`), where the core
and its run store live (they are not thread-safe). A request's evaluation is waited for at most
ANSWER_TIMEOUT_SECONDS; a slow evaluation, a tenant over its share of concurrent requests
(hook_auth.TenantShares), or a draining daemon get the hook's "unavailable" answer: the agent's
call runs (the user is told it was not checked) unless the operator chose `--hooks-fail-closed`.
A guard outage never blocks the agent by accident, and no hook request is answered with a 5xx.
Each such answer is counted by reason (`loopwarden_hook_requests_unchecked_total`).

A body nested deeper than the JSON parser goes (Python's recursion limit) is answered like one over
the size limit: a 200 in the host's format, never a dropped connection. A tool input or output over
the daemon's event limits is reduced to its stand-in (loopwarden.hooks.reduction) and judged like a
small one (the reduction is logged). Inputs over PARSE_IN_THREAD_BYTES are decoded and reduced on a
worker thread, so a 16 MiB body does not stall the loop's other work while it is parsed.
"""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, Protocol, cast
from urllib.parse import parse_qs, urlsplit

from loopwarden.eventformat import EventKind, EventRecord
from loopwarden.hooks import HOSTS, HookHost, HookPayloadError, HookRequest, VerdictLike, driver
from loopwarden.hooks.protocol import (
    action_of, event_name_in, parse, refused_answer, unavailable_answer, unchecked_answer,
)
from loopwarden.daemon_limits import MAX_OUTPUT_TEXT_BYTES, MAX_PARAMS_BYTES, MAX_RESULT_BYTES

from .core import CoreService
from .hook_asks import HookAsks
from .hook_auth import HookAuth, TenantShares
from .hook_batches import HookBatches
from .integration import current_integration
from .lifecycle import Lifecycle
from .metrics import Metrics
from .transport.auth import Caller
from .transport.hook_requests import evaluate_request, verdicts

if TYPE_CHECKING:
    from .transport.auth import TokenTable

log = logging.getLogger("loopwarden.hooks")

PATHS = {f"/v1/hooks/{host.name}": host for host in HOSTS}
ANSWER_TIMEOUT_SECONDS = 5.0
# A body not sent within this long gets the "unavailable" answer (the listener's timer).
BODY_TIMEOUT_SECONDS = 10.0
PARSE_IN_THREAD_BYTES = 256 * 1024
# Where the event's name is looked for in an input too large to read: hosts send it near the top.
EVENT_NAME_PREFIX_BYTES = 64 * 1024
# `?fail_closed=1` on a hook URL: this host's calls fail closed although the daemon's default is
# open (a command hook's own --fail-closed, passed on). It can only make an answer stricter.
_FAIL_CLOSED_VALUES = frozenset({"1", "true", "yes"})


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
        self._loader = loader  # a shared store's loader (statestore/loader.py): runs not in memory load first

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
                 max_body_bytes: int, max_params_bytes: int = MAX_PARAMS_BYTES.default,
                 max_result_bytes: int = MAX_RESULT_BYTES.default,
                 max_output_bytes: int = MAX_OUTPUT_TEXT_BYTES.default,
                 answer_timeout: float = ANSWER_TIMEOUT_SECONDS) -> None:
        self._evaluator = evaluator
        self._answer_timeout = answer_timeout
        self._lifecycle = lifecycle
        self._metrics = metrics
        self._auth = HookAuth(tokens, metrics)
        self._default_agent = default_agent
        self._fail_closed = fail_closed
        self.max_body_bytes = max_body_bytes
        self._max_params_bytes = max_params_bytes
        self._max_result_bytes = max_result_bytes
        self._max_output_bytes = max_output_bytes
        self.shares = TenantShares()
        self.batches = HookBatches()
        self.asks = HookAsks()

    def evaluate_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Evaluations go to `loop` (the daemon's) from now on: the endpoint is served elsewhere."""
        self._evaluator = DaemonLoopEvaluator(self._evaluator, loop)

    def route(self, target: str, authorization: str,
              common_name: str) -> tuple[HookHost, Caller, str] | tuple[int, dict]:
        """Who may send what where, before the body is judged: (host, caller, agent), or the
        error answer (404 unknown path, 401 missing or wrong token)."""
        url = urlsplit(target)
        host = PATHS.get(url.path)
        if host is None:
            return HTTPStatus.NOT_FOUND, {"error": f"no hook endpoint at {url.path}; use one of {sorted(PATHS)}"}
        caller = self._auth.caller(authorization, common_name)
        if caller is None:
            return HTTPStatus.UNAUTHORIZED, {"error": "missing or invalid bearer token (Authorization: Bearer …)"}
        return host, caller, parse_qs(url.query).get("agent", [self._default_agent])[-1]

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
        if not isinstance(routed[0], HookHost):
            return routed
        host, caller, agent_id = routed
        tenant = caller.tenant
        fail_closed = self.fail_closed(target)
        if len(body) > PARSE_IN_THREAD_BYTES:
            hook = await asyncio.to_thread(self._parse, host, body, agent_id, fail_closed)
        else:
            hook = self._parse(host, body, agent_id, fail_closed)
        if isinstance(hook, tuple):
            return hook
        for reduced in hook.reduced:
            log.info("hook input reduced: judged by its sha256, length and prefix", extra={
                "hook_event": hook.hook_event_name, "field": reduced.field, "bytes": reduced.size_bytes,
                "sha256": reduced.sha256, "run_id": hook.run.run_id if hook.run else ""})
        hook = self._batched(hook, tenant)
        approvals = driver.approvals(hook, self.asks.of(tenant))
        if hook.event is None and not approvals:
            return HTTPStatus.OK, {}
        return HTTPStatus.OK, await self.decide(hook, tenant, approvals, fail_closed=fail_closed,
                                                agent_only=caller.agent_only)

    def _parse(self, host: HookHost, body: bytes, agent_id: str,
               fail_closed: bool = False) -> HookRequest | tuple[int, dict]:
        """The body decoded and mapped (any thread: pure), or the 400 that says what is wrong (a
        deny in the host's format instead, for a before-tool event when fail-closed)."""
        try:
            payload = json.loads(body)
        except ValueError as exc:  # UnicodeDecodeError included
            return self._unreadable(host, body, "not_json", f"the request body is not JSON: {exc}", fail_closed)
        except RecursionError:  # nested deeper than the parser goes: answered, never a dropped connection
            return HTTPStatus.OK, self.too_deep(host, body[:EVENT_NAME_PREFIX_BYTES], fail_closed=fail_closed)
        try:
            return parse(host, payload, agent_id=agent_id, max_params_bytes=self._max_params_bytes,
                         max_result_bytes=self._max_result_bytes, max_output_bytes=self._max_output_bytes)
        except HookPayloadError as exc:
            return self._unreadable(host, body, "not_hook_input", f"not a {host.name} hook input: {exc}",
                                    fail_closed)
        except RecursionError:  # a tool input the parser read but that is too deep to canonicalize
            return HTTPStatus.OK, self.too_deep(host, body[:EVENT_NAME_PREFIX_BYTES], fail_closed=fail_closed)

    def _unreadable(self, host: HookHost, body: bytes, reason: str, error: str,
                    fail_closed: bool) -> tuple[int, dict]:
        """A body that is not the host's hook JSON: a 400 saying what is wrong (the host reports it
        and goes on: the call runs). Fail closed, a before-tool event whose name can still be read is
        denied instead, in the host's format: a 400 would let the call run."""
        self.count_refused(reason, host)
        name = event_name_in(body[:EVENT_NAME_PREFIX_BYTES])
        if fail_closed and host.is_before_tool(name):
            log.warning("hook input unreadable: call denied (fail closed)", extra={"hook_event": name, "error": error})
            return HTTPStatus.OK, refused_answer(host, name, f"the hook input could not be read: {error}",
                                                 fail_closed=True)
        return HTTPStatus.BAD_REQUEST, {"error": error}

    def too_large(self, host: HookHost, prefix: bytes, size: int | None, *, fail_closed: bool | None = None) -> dict:
        """The answer to an input over --hooks-max-body-bytes (unread past its prefix): a 200 in the
        host's format saying the call was not checked, a deny for a PreToolUse when fail-closed."""
        name = event_name_in(prefix)
        self.count_unchecked("too_large")
        log.warning("hook input over --hooks-max-body-bytes: not checked",
                    extra={"hook_event": name, "bytes": size, "limit": self.max_body_bytes})
        stated = f" ({size} bytes)" if size is not None else ""  # a chunked body states no size
        reason = f"the hook input{stated} is over the limit of {self.max_body_bytes} bytes (--hooks-max-body-bytes)"
        return unchecked_answer(host, name, reason, fail_closed=self._closed(fail_closed))

    def too_deep(self, host: HookHost, prefix: bytes, *, fail_closed: bool | None = None) -> dict:
        """The answer to an input nested deeper than the JSON parser goes: like one too large."""
        name = event_name_in(prefix)
        self.count_unchecked("too_deep")
        log.warning("hook input nested too deep to parse: not checked", extra={"hook_event": name})
        return unchecked_answer(host, name, "the hook input is nested too deep to be read",
                                fail_closed=self._closed(fail_closed))

    def slow_body(self, host: HookHost, *, fail_closed: bool | None = None) -> dict:
        """The answer to a body not sent within BODY_TIMEOUT_SECONDS."""
        self.count_unchecked("slow_body")
        log.warning("hook input not sent in time: not checked", extra={"seconds": BODY_TIMEOUT_SECONDS})
        return unchecked_answer(host, "", f"the hook input was not sent within {BODY_TIMEOUT_SECONDS:g} s",
                                fail_closed=self._closed(fail_closed))

    def _closed(self, fail_closed: bool | None) -> bool:
        return self._fail_closed if fail_closed is None else fail_closed or self._fail_closed

    def _batched(self, hook: HookRequest, tenant: str) -> HookRequest:
        """Claude Code's batches (hook_batches): a PostToolBatch ends the session's batch, a
        PreToolUse joins the open one (or opens it), SessionEnd forgets the session. A host
        without batch ends (Codex) sends no batch ids."""
        if not hook.host.ends_batches:
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
        with self.shares.hold(tenant) as held:
            if not held:
                return self._unavailable(hook, "busy", "loopwarden is busy (this tenant's share of concurrent "
                                                       "hook requests is taken)", fail_closed)
            try:
                return await asyncio.wait_for(self._evaluate(hook, tenant, approvals, fail_closed, agent_only),
                                              self._answer_timeout)
            except TimeoutError:
                return self._unavailable(hook, "timeout",
                                         f"loopwarden did not answer within {self._answer_timeout:g} s", fail_closed)
            except Exception:  # the agent gets an answer; the log gets the details
                log.exception("hook request failed", extra={"hook_event": hook.hook_event_name})
                return self._unavailable(hook, "failed", "loopwarden failed on this request", fail_closed)

    def share(self, tenant: str) -> int:
        """How many requests `tenant` may have evaluated at once (hook_auth.TenantShares)."""
        return self.shares.share(tenant)

    def _unavailable(self, hook: HookRequest, reason: str, text: str, fail_closed: bool) -> dict:
        self.count_unchecked(reason)
        return unavailable_answer(hook, text, fail_closed=fail_closed)

    def count_unchecked(self, reason: str) -> None:
        if self._metrics is not None:
            self._metrics.hooks_unchecked.labels(reason).inc()

    def count_refused(self, reason: str, host: HookHost) -> None:
        if self._metrics is not None:
            self._metrics.hooks_refused.labels(reason, host.name).inc()

    async def _evaluate(self, hook: HookRequest, tenant: str, approvals: tuple[EventRecord, ...],
                        fail_closed: bool = False, agent_only: bool = False) -> dict:
        """On the loop: the approvals (if any) and the hook's event in one request, and after a
        BLOCK the blocked call's outcome. An ASK is remembered for the call's later hooks."""
        integration, routed = hook.host.integration, hook.root_run_id
        decided = await self._evaluator.evaluate(hook.events(*approvals), integration, tenant, routed,
                                                 agent_only=agent_only)
        for approval, taken in zip(approvals, decided):
            if action_of(taken) == "reject":
                # The daemon held no such ask (restarted without a state store, the ask timed out):
                # nothing to settle, and the hook's own event was decided all the same.
                log.info("hook approval not taken", extra={"tool_call_id": approval.tool_call_id,
                                                           "error_code": taken.error_code})
        verdict = hook.verdict_in(decided, len(approvals))
        if verdict is not None and action_of(verdict) == "reject":
            # The event was refused, so nothing was judged: said to the user (denied when fail
            # closed, protocol.answer) and counted, by the refusal's code and the host.
            self.count_refused(verdict.error_code or "unknown", hook.host)
            log.warning("hook event refused by the engine: not checked", extra={
                "hook_event": hook.hook_event_name, "error_code": verdict.error_code, "fail_closed": fail_closed})
        result = driver.decided(hook, verdict, self.asks.of(tenant), fail_closed=fail_closed)
        if result.blocked is not None:
            await self._evaluator.evaluate((result.blocked,), integration, tenant, routed, agent_only=agent_only)
        return result.answer
