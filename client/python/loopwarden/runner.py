"""Runner-side helpers: wrap a tool so it asks loopwarden first and reports its outcome after."""
from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .client import AsyncLoopwardenClient, LoopwardenClient
from .types import Action, LoopwardenUnavailable, RunAborted, Verdict

log = logging.getLogger("loopwarden.runner")


def blocked_tool_result(verdict: Verdict) -> dict:
    """What the model sees instead of running a blocked call (spec section 6)."""
    return {
        "content": [{"type": "text", "text": verdict.message}],
        "details": {"status": "blocked", "deniedReason": "tool-loop", "detector": verdict.detector,
                    "count": verdict.count},
    }


def _log_warning(verdict: Verdict) -> None:
    if verdict.announce:
        log.warning("loopwarden: %s", verdict.message)


class _GuardPolicy:
    def __init__(self, run_id: str, *, agent_id: str | None, on_warning: Callable[[Verdict], None] | None,
                 fail_open: bool) -> None:
        self.run_id = run_id
        self.agent_id = agent_id
        self.on_warning = on_warning or _log_warning
        self.fail_open = fail_open

    def unavailable(self, exc: LoopwardenUnavailable, tool_name: str) -> None:
        if not self.fail_open:
            raise exc
        log.warning("loopwarden unavailable, running %s unguarded: %s", tool_name, exc)

    def before(self, verdict: Verdict) -> dict | None:
        """The blocked result to hand back instead of running, or None to run the tool."""
        if verdict.action is Action.ABORT:
            raise RunAborted(verdict)
        if verdict.action is Action.BLOCK:
            return blocked_tool_result(verdict)
        if verdict.action is Action.WARN:
            self.on_warning(verdict)
        return None

    @staticmethod
    def after(verdict: Verdict) -> None:
        if verdict.action is Action.ABORT:
            raise RunAborted(verdict)


class ToolGuard:
    """Guards the tool calls of one run through a blocking client.

        guard = ToolGuard(client, run_id="run-42")
        read = guard.wrap("read", read_file)
        read(path="/etc/hosts")   # asks first; a BLOCK returns the blocked result instead
    """

    def __init__(self, client: LoopwardenClient, run_id: str, *, agent_id: str | None = None,
                 on_warning: Callable[[Verdict], None] | None = None, fail_open: bool = True) -> None:
        self.client = client
        self.policy = _GuardPolicy(run_id, agent_id=agent_id, on_warning=on_warning, fail_open=fail_open)

    def call(self, tool_name: str, fn: Callable[..., Any], params: dict | None = None, *,
             tool_call_id: str = "") -> Any:
        params = params or {}
        policy, client = self.policy, self.client
        ids = {"tool_call_id": tool_call_id, "agent_id": policy.agent_id}
        try:
            verdict = client.tool_call(policy.run_id, tool_name, params, **ids)
        except LoopwardenUnavailable as exc:
            policy.unavailable(exc, tool_name)
            return fn(**params)
        blocked = policy.before(verdict)
        if blocked is not None:
            client.tool_outcome(policy.run_id, tool_name, params, result=blocked, **ids)
            return blocked
        try:
            result = fn(**params)
        except Exception as exc:
            client.tool_outcome(policy.run_id, tool_name, params, error=f"{type(exc).__name__}: {exc}", **ids)
            raise
        policy.after(client.tool_outcome(policy.run_id, tool_name, params, result=result, **ids))
        return result

    def wrap(self, tool_name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def guarded(**params: Any) -> Any:
            return self.call(tool_name, fn, params)
        return guarded


class AsyncToolGuard:
    """The same guard for async tools and the asyncio client."""

    def __init__(self, client: AsyncLoopwardenClient, run_id: str, *, agent_id: str | None = None,
                 on_warning: Callable[[Verdict], None] | None = None, fail_open: bool = True) -> None:
        self.client = client
        self.policy = _GuardPolicy(run_id, agent_id=agent_id, on_warning=on_warning, fail_open=fail_open)

    async def call(self, tool_name: str, fn: Callable[..., Awaitable[Any]], params: dict | None = None, *,
                   tool_call_id: str = "") -> Any:
        params = params or {}
        policy, client = self.policy, self.client
        ids = {"tool_call_id": tool_call_id, "agent_id": policy.agent_id}
        try:
            verdict = await client.tool_call(policy.run_id, tool_name, params, **ids)
        except LoopwardenUnavailable as exc:
            policy.unavailable(exc, tool_name)
            return await fn(**params)
        blocked = policy.before(verdict)
        if blocked is not None:
            await client.tool_outcome(policy.run_id, tool_name, params, result=blocked, **ids)
            return blocked
        try:
            result = await fn(**params)
        except Exception as exc:
            await client.tool_outcome(policy.run_id, tool_name, params, error=f"{type(exc).__name__}: {exc}", **ids)
            raise
        policy.after(await client.tool_outcome(policy.run_id, tool_name, params, result=result, **ids))
        return result

    def wrap(self, tool_name: str, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(fn)
        async def guarded(**params: Any) -> Any:
            return await self.call(tool_name, fn, params)
        return guarded
