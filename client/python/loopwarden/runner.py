"""Runner-side helpers: wrap a tool so it asks loopwarden first and reports its outcome after."""
from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Union

from .client import AsyncLoopwardenClient, LoopwardenClient
from .guard_policy import decide
from .types import Action, LoopwardenUnavailable, RunAborted, Verdict

if TYPE_CHECKING:
    from .hooks.protocol import VerdictLike

log = logging.getLogger("loopwarden.runner")


def blocked_tool_result(verdict: VerdictLike) -> dict:
    """What the model sees instead of running a blocked call (spec section 6)."""
    return {
        "content": [{"type": "text", "text": verdict.message}],
        "details": {"status": "blocked", "deniedReason": "tool-loop", "detector": verdict.detector,
                    "count": verdict.count},
    }


def _log_warning(verdict: Verdict) -> None:
    # The default handler says only what the guard policy shows the agent (an announced WARN).
    decision = decide(verdict, can_ask=False)
    if decision.effect == "run_with_warning":
        log.warning("loopwarden: %s", decision.text)


# What an `on_ask` handler answers for an ASK verdict (it shows the human verdict.message):
# True or "once": run this call; "always": run it, and let the daemon keep a standing exemption for
# this agent, tool and arguments; False or None: do not run it (later criticals of the pattern block).
AskAnswer = Union[bool, str, None]
_ANSWERS = {True: (True, "once"), "once": (True, "once"), "always": (True, "always"), False: (False, "once"),
            None: (False, "once")}


def _answer(answer: Any) -> tuple[bool, str]:
    if answer not in _ANSWERS or (isinstance(answer, int) and not isinstance(answer, bool)):
        raise ValueError(f"on_ask must answer True, 'once', 'always', False or None, got {answer!r}")
    return _ANSWERS[answer]


def _elapsed_ms(started: float) -> int:
    return max(0, round((time.monotonic() - started) * 1000))


class _GuardPolicy:
    def __init__(self, run_id: str, *, agent_id: str | None, on_warning: Callable[[Verdict], None] | None,
                 fail_open: bool, parent_run_id: str = "", root_run_id: str = "",
                 on_ask: Callable[[Verdict], Any] | None = None) -> None:
        self.run_id = run_id
        self.agent_id = agent_id
        self.on_warning = on_warning or _log_warning
        self.fail_open = fail_open
        self.parent_run_id = parent_run_id
        self.root_run_id = root_run_id
        self.on_ask = on_ask

    def ids(self, tool_call_id: str) -> dict:
        """The fields every event of a guarded call carries. accepts_ask only with a handler: a
        guard that cannot ask a human gets the BLOCK it would get without it."""
        return {"tool_call_id": tool_call_id, "agent_id": self.agent_id, "parent_run_id": self.parent_run_id,
                "root_run_id": self.root_run_id, "accepts_ask": self.on_ask is not None}

    def child_kwargs(self, run_id: str, agent_id: str | None) -> dict:
        """A child run's guard: same handlers, this run as its parent, this tree's root."""
        return {"run_id": run_id, "agent_id": self.agent_id if agent_id is None else agent_id,
                "on_warning": self.on_warning, "fail_open": self.fail_open, "on_ask": self.on_ask,
                "parent_run_id": self.run_id, "root_run_id": self.root_run_id or self.run_id}

    def unavailable(self, exc: LoopwardenUnavailable, tool_name: str) -> None:
        if not self.fail_open:
            raise exc
        log.warning("loopwarden unavailable, running %s unguarded: %s", tool_name, exc)

    def asks(self, verdict: Verdict) -> bool:
        """The verdict is an ASK this guard puts to its handler (the guard policy's `ask`)."""
        return decide(verdict, can_ask=self.on_ask is not None).effect == "ask"

    def before(self, verdict: Verdict) -> dict | None:
        """The blocked result to hand back instead of running, or None to run the tool (the guard
        policy, loopwarden.guard_policy). An ASK reaches here only unanswered (no handler, or the
        person said no): it is a BLOCK. `on_warning` hears every WARN; the default one says only
        the announced ones, as the policy does."""
        decision = decide(verdict, can_ask=False)
        if decision.effect == "end_run":
            raise RunAborted(verdict)
        if decision.reports_refusal:
            return blocked_tool_result(verdict)
        if verdict.action is Action.WARN:
            self.on_warning(verdict)
        return None

    def approval_kwargs(self, verdict: Verdict, tool_call_id: str, answer: Any) -> dict | None:
        """The approval event's fields for a human's answer; None when the ASK names no call to answer."""
        approved, scope = _answer(answer)
        if not tool_call_id and not verdict.decision_id:
            return None
        return {**self.ids(tool_call_id), "approved": approved, "scope": scope,
                "decision_id": "" if tool_call_id else verdict.decision_id}

    @staticmethod
    def after(verdict: Verdict) -> None:
        if verdict.action is Action.ABORT:
            raise RunAborted(verdict)


class ToolGuard:
    """Guards the tool calls of one run through a blocking client.

        guard = ToolGuard(client, run_id="run-42")
        read = guard.wrap("read", read_file)
        read(path="/etc/hosts")   # asks first; a BLOCK returns the blocked result instead

    `on_ask(verdict)`: the guard can hold a call for a human (its events say accepts_ask); on an
    ASK it calls the handler (show the human verdict.message), reports the answer as an approval
    and runs the call only if approved (see AskAnswer). `guard.child(run_id)`: a guard for a
    sub-agent's run, a child run of this one in the same tree. Each outcome carries how long the
    tool ran (duration_ms, for loopwarden.budgets.toolSecondsPerTree).
    """

    def __init__(self, client: LoopwardenClient, run_id: str, *, agent_id: str | None = None,
                 on_warning: Callable[[Verdict], None] | None = None, fail_open: bool = True,
                 parent_run_id: str = "", root_run_id: str = "",
                 on_ask: Callable[[Verdict], AskAnswer] | None = None) -> None:
        self.client = client
        self.policy = _GuardPolicy(run_id, agent_id=agent_id, on_warning=on_warning, fail_open=fail_open,
                                   parent_run_id=parent_run_id, root_run_id=root_run_id, on_ask=on_ask)

    @property
    def run_id(self) -> str:
        return self.policy.run_id

    def child(self, run_id: str, *, agent_id: str | None = None) -> ToolGuard:
        """A guard for a child run (a sub-agent) of this run: its events name this run as their
        parent and are routed by this tree's root; it keeps its own history, shares the tree's
        budgets, and its stop is told to this run's next call (WARN child_stopped)."""
        return ToolGuard(self.client, **self.policy.child_kwargs(run_id, agent_id))

    def call(self, tool_name: str, fn: Callable[..., Any], params: dict | None = None, *,
             tool_call_id: str = "") -> Any:
        """Ask, run `fn(**params)` unless stopped, report its outcome. With the GenAI tracing
        opt-in (loopwarden.tracing) inside an `execute_tool` span, parent of the guardrail spans."""
        tracing = getattr(self.client, "tracing", None)
        if tracing is None:
            return self._call(tool_name, fn, params, tool_call_id)
        with tracing.execute_tool(tool_name, tool_call_id, self.policy.run_id):
            return self._call(tool_name, fn, params, tool_call_id)

    def _call(self, tool_name: str, fn: Callable[..., Any], params: dict | None, tool_call_id: str) -> Any:
        params = params or {}
        policy, client = self.policy, self.client
        ids = policy.ids(tool_call_id)
        try:
            verdict = client.tool_call(policy.run_id, tool_name, params, **ids)
        except LoopwardenUnavailable as exc:
            policy.unavailable(exc, tool_name)
            return fn(**params)
        if policy.on_ask is not None and policy.asks(verdict):
            verdict = self._ask(verdict, tool_call_id, policy.on_ask)
        blocked = policy.before(verdict)
        if blocked is not None:
            client.tool_outcome(policy.run_id, tool_name, params, result=blocked, **ids)
            return blocked
        started = time.monotonic()
        try:
            result = fn(**params)
        except Exception as exc:
            client.tool_outcome(policy.run_id, tool_name, params, error=f"{type(exc).__name__}: {exc}",
                                duration_ms=_elapsed_ms(started), **ids)
            raise
        policy.after(client.tool_outcome(policy.run_id, tool_name, params, result=result,
                                         duration_ms=_elapsed_ms(started), **ids))
        return result

    def _ask(self, verdict: Verdict, tool_call_id: str, on_ask: Callable[[Verdict], Any]) -> Verdict:
        """Put an ASK to the human; the verdict to act on: the ASK itself (a BLOCK) when denied,
        an ALLOW when approved, the approval's own answer when the daemon refused or aborted it."""
        policy = self.policy
        approval = policy.approval_kwargs(verdict, tool_call_id, on_ask(verdict))
        if approval is None or not approval["approved"]:
            if approval is not None:
                self.client.approval(policy.run_id, **approval)
            return verdict
        answered = self.client.approval(policy.run_id, **approval)
        policy.after(answered)
        return replace(verdict, action=Action.ALLOW)

    def wrap(self, tool_name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def guarded(**params: Any) -> Any:
            return self.call(tool_name, fn, params)
        return guarded


class AsyncToolGuard:
    """The same guard for async tools and the asyncio client (`on_ask` may be a coroutine function)."""

    def __init__(self, client: AsyncLoopwardenClient, run_id: str, *, agent_id: str | None = None,
                 on_warning: Callable[[Verdict], None] | None = None, fail_open: bool = True,
                 parent_run_id: str = "", root_run_id: str = "",
                 on_ask: Callable[[Verdict], AskAnswer | Awaitable[AskAnswer]] | None = None) -> None:
        self.client = client
        self.policy = _GuardPolicy(run_id, agent_id=agent_id, on_warning=on_warning, fail_open=fail_open,
                                   parent_run_id=parent_run_id, root_run_id=root_run_id, on_ask=on_ask)

    @property
    def run_id(self) -> str:
        return self.policy.run_id

    def child(self, run_id: str, *, agent_id: str | None = None) -> AsyncToolGuard:
        """A guard for a child run (a sub-agent) of this run; see ToolGuard.child."""
        return AsyncToolGuard(self.client, **self.policy.child_kwargs(run_id, agent_id))

    async def call(self, tool_name: str, fn: Callable[..., Awaitable[Any]], params: dict | None = None, *,
                   tool_call_id: str = "") -> Any:
        """ToolGuard.call for async tools and the asyncio client."""
        tracing = getattr(self.client, "tracing", None)
        if tracing is None:
            return await self._call(tool_name, fn, params, tool_call_id)
        with tracing.execute_tool(tool_name, tool_call_id, self.policy.run_id):
            return await self._call(tool_name, fn, params, tool_call_id)

    async def _call(self, tool_name: str, fn: Callable[..., Awaitable[Any]], params: dict | None,
                    tool_call_id: str) -> Any:
        params = params or {}
        policy, client = self.policy, self.client
        ids = policy.ids(tool_call_id)
        try:
            verdict = await client.tool_call(policy.run_id, tool_name, params, **ids)
        except LoopwardenUnavailable as exc:
            policy.unavailable(exc, tool_name)
            return await fn(**params)
        if policy.on_ask is not None and policy.asks(verdict):
            verdict = await self._ask(verdict, tool_call_id, policy.on_ask)
        blocked = policy.before(verdict)
        if blocked is not None:
            await client.tool_outcome(policy.run_id, tool_name, params, result=blocked, **ids)
            return blocked
        started = time.monotonic()
        try:
            result = await fn(**params)
        except Exception as exc:
            await client.tool_outcome(policy.run_id, tool_name, params, error=f"{type(exc).__name__}: {exc}",
                                      duration_ms=_elapsed_ms(started), **ids)
            raise
        policy.after(await client.tool_outcome(policy.run_id, tool_name, params, result=result,
                                               duration_ms=_elapsed_ms(started), **ids))
        return result

    async def _ask(self, verdict: Verdict, tool_call_id: str, on_ask: Callable[[Verdict], Any]) -> Verdict:
        policy = self.policy
        answer = on_ask(verdict)
        if inspect.isawaitable(answer):
            answer = await answer
        approval = policy.approval_kwargs(verdict, tool_call_id, answer)
        if approval is None or not approval["approved"]:
            if approval is not None:
                await self.client.approval(policy.run_id, **approval)
            return verdict
        policy.after(await self.client.approval(policy.run_id, **approval))
        return replace(verdict, action=Action.ALLOW)

    def wrap(self, tool_name: str, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(fn)
        async def guarded(**params: Any) -> Any:
            return await self.call(tool_name, fn, params)
        return guarded
