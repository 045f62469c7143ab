"""The framework-free half of every adapter: one set of settings, one connection, one policy.

An adapter turns its framework's tool call into a `Call`, asks `Gate.before` (or `abefore`), runs
the tool only when told to, and reports what it returned with `after` (`aafter`). The policy is
the tool guard's (`loopwarden.guard_policy`, checked against tests/conformance/guard): a blocked
call is reported with the spec's blocked result, a REJECT lets the call run unguarded, and an
unreachable daemon lets it run unless `fail_open` is off. What the model is shown and how a run
ends are left to the adapter, because every framework has its own idiom for both.
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any, Literal

from .._wire import MISSING
from ..client import DEFAULT_TARGET, AsyncLoopwardenClient, LoopwardenClient
from ..guard_policy import decide
from ..hooks.protocol import INTEGRATION_HEADER
from ..runner import blocked_tool_result
from ..types import Action, LoopwardenUnavailable, Verdict

log = logging.getLogger("loopwarden.integrations")


@dataclass(frozen=True, slots=True)
class Settings:
    """What every adapter's constructor takes, under the same names."""

    target: str = DEFAULT_TARGET
    agent_id: str = ""  # picks the agent block of the daemon's config; "" is the default agent
    token: str | None = None  # bearer token; the daemon tells tenants apart by it
    fail_open: bool = True  # daemon unreachable: run the tool unguarded (False: refuse to run it)
    root_certificates: bytes | None = None  # TLS: the daemon's CA
    private_key: bytes | None = None  # mTLS: this runner's key and certificate
    certificate_chain: bytes | None = None
    # Which adapter this is, sent as the integration header: the daemon's verdict counter and
    # decision log then tell its blocks from a plain gRPC client's ("" sends none).
    integration: str = ""

    def client_options(self) -> dict[str, Any]:
        metadata = ((INTEGRATION_HEADER, self.integration),) if self.integration else ()
        return {"agent_id": self.agent_id, "token": self.token, "root_certificates": self.root_certificates,
                "private_key": self.private_key, "certificate_chain": self.certificate_chain, "metadata": metadata}


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call as the daemon sees it."""

    run_id: str
    tool_name: str
    params_json: str  # the arguments as JSON text ("" means {})
    tool_call_id: str = ""
    session_id: str = ""  # the conversation (thread, group) the run belongs to, when there is one


@dataclass(frozen=True, slots=True)
class Before:
    """What to do with one call. `report`: whether its outcome goes to the daemon afterwards
    (not when the daemon was unreachable or rejected the call: it knows nothing to pair it with)."""

    action: Literal["run", "block", "abort", "ask"]  # "ask": only adapters that can put it to a person
    message: str = ""  # block/abort: the daemon's message, for the model (block) or the user (abort)
    warning: str = ""  # run: an announced warning to show the model along with the result
    verdict: Verdict | None = None
    report: bool = False

    def details(self) -> dict[str, Any]:
        """Plain data about the decision, for frameworks that carry it beside the message."""
        verdict = self.verdict
        if verdict is None:
            return {"action": self.action, "guarded": False}
        return {"action": verdict.action.value, "detector": verdict.detector, "level": verdict.level,
                "count": verdict.count, "message": verdict.message, "error_code": verdict.error_code,
                "decision_id": verdict.decision_id}


def _decide(verdict: Verdict, call: Call) -> Before:
    """The guard policy's decision (loopwarden.guard_policy) in the gate's terms. An ASK is a BLOCK
    here: these integrations do not say accepts_ask (no human to ask), so the daemon sends none; an
    adapter that can ask (langchain's interrupt, the Agents SDK's approval) takes the ASK before
    this is called."""
    decision = decide(verdict, can_ask=False)
    if decision.effect == "end_run":
        return Before("abort", message=decision.text, verdict=verdict)
    if decision.effect == "refuse":
        return Before("block", message=decision.text, verdict=verdict)
    if not decision.judged:
        log.warning("loopwarden rejected the %s call (%s), running it unguarded: %s", call.tool_name,
                    verdict.error_code, verdict.message)
        return Before("run", verdict=verdict)
    if decision.effect == "run_with_warning":
        log.warning("loopwarden: %s", decision.text)
    return Before("run", warning=decision.text, verdict=verdict, report=True)


def _unavailable(exc: LoopwardenUnavailable, call: Call, fail_open: bool) -> Before:
    if not fail_open:
        raise exc
    log.warning("loopwarden unavailable, running %s unguarded: %s", call.tool_name, exc)
    return Before("run")


def _abort_of(verdict: Verdict) -> Verdict | None:
    return verdict if verdict.action is Action.ABORT else None


def _ids(call: Call) -> dict[str, Any]:
    return {"tool_call_id": call.tool_call_id, "session_id": call.session_id}


class Gate:
    """Asks before each call and reports after it, through a blocking client for synchronous
    frameworks and an asyncio client for async ones. Both are made on first use."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._client: LoopwardenClient | None = None
        self._async: tuple[asyncio.AbstractEventLoop, AsyncLoopwardenClient] | None = None

    # -- clients ------------------------------------------------------------------------------

    def _blocking(self) -> LoopwardenClient:
        with self._lock:  # frameworks run parallel tool calls on worker threads
            if self._client is None:
                self._client = LoopwardenClient(self.settings.target, **self.settings.client_options())
            return self._client

    def _asyncio(self) -> AsyncLoopwardenClient:
        loop = asyncio.get_running_loop()
        if self._async is None or self._async[0] is not loop:
            # NOTE: a grpc.aio channel belongs to the loop it was made on, so an application that
            # runs each invocation on a loop of its own (asyncio.run per request) gets a client per
            # loop. The previous client is let go *before* the next is made: collected while a
            # channel of the new loop is alive, it would schedule its clean-up on its closed loop.
            self._async = None
            self._async = (loop, AsyncLoopwardenClient(self.settings.target, **self.settings.client_options()))
        return self._async[1]

    def close(self) -> None:
        """Close the blocking client (an asyncio client is closed by `aclose`)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    async def aclose(self) -> None:
        """Close the asyncio client of the running loop, and the blocking client."""
        held, self._async = self._async, None
        if held is not None and held[0] is asyncio.get_running_loop():
            await held[1].close()
        self.close()

    # -- blocking -----------------------------------------------------------------------------

    def before(self, call: Call) -> Before:
        """May the call run? Raises LoopwardenUnavailable only when fail_open is off."""
        client = self._blocking()
        try:
            verdict = client.tool_call(call.run_id, call.tool_name, params_json=call.params_json, **_ids(call))
        except LoopwardenUnavailable as exc:
            return _unavailable(exc, call, self.settings.fail_open)
        before = _decide(verdict, call)
        if before.action == "block":
            self._report(client, call, result=blocked_tool_result(verdict))
        return before

    def after(self, call: Call, before: Before, *, result: Any = MISSING, error: str | None = None) -> Verdict | None:
        """Report what the call returned; the ABORT verdict when that ended the run, else None."""
        if not before.report:
            return None
        verdict = self._report(self._blocking(), call, result=result, error=error)
        return None if verdict is None else _abort_of(verdict)

    def end(self, run_id: str, *, session_id: str = "") -> None:
        """The run is over: the daemon frees its state."""
        try:
            self._blocking().run_end(run_id, session_id=session_id)
        except LoopwardenUnavailable as exc:
            log.warning("loopwarden unavailable, run_end of %s not sent: %s", run_id, exc)

    @staticmethod
    def _report(client: LoopwardenClient, call: Call, **outcome: Any) -> Verdict | None:
        try:
            return client.tool_outcome(call.run_id, call.tool_name, params_json=call.params_json, **_ids(call),
                                       **outcome)
        except LoopwardenUnavailable as exc:
            # The tool has run (or been refused) already; nothing is left to guard.
            log.warning("loopwarden unavailable, outcome of %s not reported: %s", call.tool_name, exc)
            return None

    # -- asyncio ------------------------------------------------------------------------------

    async def abefore(self, call: Call) -> Before:
        client = self._asyncio()
        try:
            verdict = await client.tool_call(call.run_id, call.tool_name, params_json=call.params_json,
                                             **_ids(call))
        except LoopwardenUnavailable as exc:
            return _unavailable(exc, call, self.settings.fail_open)
        before = _decide(verdict, call)
        if before.action == "block":
            await self._areport(client, call, result=blocked_tool_result(verdict))
        return before

    async def aafter(self, call: Call, before: Before, *, result: Any = MISSING,
                     error: str | None = None) -> Verdict | None:
        if not before.report:
            return None
        verdict = await self._areport(self._asyncio(), call, result=result, error=error)
        return None if verdict is None else _abort_of(verdict)

    async def aend(self, run_id: str, *, session_id: str = "") -> None:
        try:
            await self._asyncio().run_end(run_id, session_id=session_id)
        except LoopwardenUnavailable as exc:
            log.warning("loopwarden unavailable, run_end of %s not sent: %s", run_id, exc)

    @staticmethod
    async def _areport(client: AsyncLoopwardenClient, call: Call, **outcome: Any) -> Verdict | None:
        try:
            return await client.tool_outcome(call.run_id, call.tool_name, params_json=call.params_json,
                                             **_ids(call), **outcome)
        except LoopwardenUnavailable as exc:
            log.warning("loopwarden unavailable, outcome of %s not reported: %s", call.tool_name, exc)
            return None


def result_value(output: Any) -> Any:
    """A tool's result as the daemon should hash it: pydantic models as their JSON data, text that
    is JSON as that value (frameworks hand the model a dict as JSON text; parsed, the daemon sees
    its fields and can skip the volatile ones), anything else as it is."""
    dump = getattr(output, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(output, str):
        try:
            return json.loads(output)
        except ValueError:
            return output
    return output


def error_text(exc: BaseException) -> str:
    """A failed tool's outcome, spelled as the tool guard spells it."""
    return f"{type(exc).__name__}: {exc}"
