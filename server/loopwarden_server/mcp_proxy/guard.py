"""The proxy's verdicts: every `tools/call` asked first, every result reported after.

Each client session is one run (`SessionRun`: over stdio the proxy's one session, named by
--run-id; over Streamable HTTP one per MCP session). The judge is the daemon over gRPC
(integration `mcp_proxy`) or, with --offline, the daemon's compiled core in-process. A BLOCK
is answered with a CallToolResult of `isError: true` carrying the block message, and reported as
the call's outcome (the blocked result the model got, spec section 6). An ASK (only for a session
whose client declared elicitation) is held for the relay to ask the person, and their answer is
the call's `approval`. Once a run is aborted, every later call of its session fails the same way
without asking. A daemon that cannot be asked, or that gives no verdict within the check timeout
(--check-timeout), lets calls run (fail open, said once per outage on stderr with the reason)
unless --fail-closed. A call the daemon refuses to judge (a REJECT: arguments nested too deep, a
NaN, an over-long name) is no verdict either: it runs, said on stderr with the reason, unless
--fail-closed, where it is answered with a JSON-RPC error (Invalid params) naming the reason and
never reaches the server.

An `isError` result whose text names a missing tool the way the engine recognises an error
(`Unknown tool: deploy_app`, `Tool deploy_app not found`; the core's own pattern, asked through
`loopwarden_core.outcome_fingerprint`) is reported as that error, not as a result: it is one, and
only an error outcome counts toward unknown_tool_repeat. Every other result is reported as it
came, so its outcome hash stays the one spec section 4.9 defines.
"""
from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol, TextIO

import loopwarden_core
from loopwarden import Action, AsyncLoopwardenClient, LoopwardenUnavailable, Verdict, blocked_tool_result
from loopwarden.eventformat import EventKind, EventRecord, json_text
from loopwarden.guard_policy import abort_text, decide
from loopwarden.hooks import INTEGRATION_HEADER
from loopwarden.daemon_limits import MAX_PARAMS_BYTES, MAX_RESULT_BYTES
from loopwarden.hooks.reduction import bounded_json, bounded_text

from ..integration import MCP_PROXY, current_integration

# The default longest wait for one verdict (--check-timeout); past it the call goes on unguarded.
JUDGE_TIMEOUT_SECONDS = 5.0
# MCP Tasks polling, reported as a call of this tool (a built-in host poll preset of the core).
TASKS_GET = "tasks/get"


def annotated_class(tool: Any) -> str:
    """A `tools/list` entry's class from its MCP ToolAnnotations: `readOnlyHint: true` is readOnly,
    `destructiveHint: true` (and not read-only) is mutating, anything else unknown (""). Only an
    explicit hint counts: the spec's default (destructive unless it says otherwise) would make every
    unannotated tool mutating. `idempotentHint` is not used (an idempotent mutation repeated is
    still a repeated action the model did not need)."""
    hints = tool.get("annotations") if isinstance(tool, dict) else None
    if not isinstance(hints, dict):
        return ""
    if hints.get("readOnlyHint") is True:
        return "readOnly"
    if hints.get("destructiveHint") is True:
        return "mutating"
    return ""


def tool_classes(result: Any) -> dict[str, str]:
    """Tool name -> class of a `tools/list` result, for the tools whose annotations say one."""
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        return {}
    return {tool["name"]: cls for tool in tools
            if isinstance(tool, dict) and isinstance(tool.get("name"), str) and (cls := annotated_class(tool))}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One `tools/call` request as the daemon sees it. `tool_class`: what the MCP server's
    ToolAnnotations said of the tool in its `tools/list` answer ("" when nothing)."""

    name: str
    params_json: str
    call_id: str
    tool_class: str = ""

    @classmethod
    def of(cls, request_id: Any, params: dict[str, Any] | None, classes: dict[str, str] | None = None) -> ToolCall:
        params = params or {}
        name = params.get("name")
        name = name if isinstance(name, str) else ""
        return cls(name, json_text(params.get("arguments") or {}), str(request_id), (classes or {}).get(name, ""))

    @classmethod
    def task_poll(cls, request_id: Any, params: dict[str, Any] | None) -> ToolCall:
        """A `tasks/get` request: the tool `tasks/get`, its params (without `_meta`) the arguments."""
        arguments = {key: value for key, value in (params or {}).items() if key != "_meta"}
        return cls(TASKS_GET, json_text(arguments), str(request_id))


@dataclass(slots=True)
class SessionRun:
    """The run of one client session: its id, the parent the client named (`_meta`
    io.loopwarden/parentRunId; fixed once given), whether the client declared elicitation (its
    calls are sent with accepts_ask, so a critical may be ASKed), and the ABORT that ended it."""

    run_id: str
    parent_run_id: str = ""
    accepts_ask: bool = False
    aborted: Verdict | None = None


class Judge(Protocol):
    async def tool_call(self, run: SessionRun, call: ToolCall, *, accepts_ask: bool) -> Verdict: ...
    async def tool_outcome(self, run: SessionRun, call: ToolCall, *, result_json: str | None = None,
                           error: str | None = None) -> Verdict: ...
    async def user_turn(self, run: SessionRun) -> Verdict: ...
    async def approval(self, run: SessionRun, call: ToolCall, *, approved: bool, scope: str) -> Verdict: ...
    async def run_end(self, run: SessionRun) -> None: ...
    async def close(self) -> None: ...


class DaemonJudge:
    """The daemon over gRPC; the proxy names itself with x-loopwarden-integration: mcp_proxy."""

    def __init__(self, address: str, *, agent_id: str = "", timeout: float = JUDGE_TIMEOUT_SECONDS,
                 **client_options: Any) -> None:
        self.address = address
        # The gRPC deadline is a backstop a little past the guard's own wait, which says why it gave up.
        self._client = AsyncLoopwardenClient(address, agent_id=agent_id, timeout=timeout + 1.0,
                                             metadata=((INTEGRATION_HEADER, MCP_PROXY),), **client_options)

    @staticmethod
    def _tree(run: SessionRun) -> dict[str, Any]:
        return {"parent_run_id": run.parent_run_id, "accepts_ask": run.accepts_ask}

    async def tool_call(self, run: SessionRun, call: ToolCall, *, accepts_ask: bool) -> Verdict:
        return await self._client.tool_call(run.run_id, call.name, params_json=call.params_json,
                                            tool_call_id=call.call_id, tool_class=call.tool_class,
                                            **{**self._tree(run), "accepts_ask": accepts_ask})

    async def tool_outcome(self, run: SessionRun, call: ToolCall, *, result_json: str | None = None,
                           error: str | None = None) -> Verdict:
        return await self._client.tool_outcome(run.run_id, call.name, params_json=call.params_json,
                                               tool_call_id=call.call_id, result_json=result_json, error=error,
                                               **self._tree(run))

    async def user_turn(self, run: SessionRun) -> Verdict:
        return await self._client.user_turn(run.run_id, **self._tree(run))

    async def approval(self, run: SessionRun, call: ToolCall, *, approved: bool, scope: str) -> Verdict:
        return await self._client.approval(run.run_id, approved=approved, tool_call_id=call.call_id, scope=scope,
                                           **self._tree(run))

    async def run_end(self, run: SessionRun) -> None:
        await self._client.run_end(run.run_id, **self._tree(run))

    async def close(self) -> None:
        await self._client.close()


class OfflineJudge:
    """--offline: the daemon's own compiled core in-process (its config, no daemon)."""

    def __init__(self, config, *, agent_id: str = "") -> None:
        from ..replay.offline import OfflineEngine

        self._engine = OfflineEngine(config)
        self._agent_id = agent_id

    def _evaluate(self, run: SessionRun, kind: EventKind, call: ToolCall | None = None, **fields: Any) -> Verdict:
        if call is not None:
            fields = {"tool_name": call.name, "tool_call_id": call.call_id, "params_json": call.params_json, **fields}
        fields.setdefault("accepts_ask", run.accepts_ask)
        record = EventRecord(kind, run_id=run.run_id, agent_id=self._agent_id, parent_run_id=run.parent_run_id,
                             **fields)
        token = current_integration.set(MCP_PROXY)
        try:
            verdict = self._engine.decide(record)
        finally:
            current_integration.reset(token)
        return Verdict(seq=verdict.seq, run_id=verdict.run_id, action=Action(verdict.action),
                       detector=verdict.detector, level=verdict.level, count=verdict.count, message=verdict.message,
                       announce=verdict.announce, error_code=verdict.error_code, tool_name=verdict.tool_name,
                       decision_id=verdict.decision_id)

    async def tool_call(self, run: SessionRun, call: ToolCall, *, accepts_ask: bool) -> Verdict:
        return self._evaluate(run, EventKind.TOOL_CALL, call, tool_class=call.tool_class, accepts_ask=accepts_ask)

    async def tool_outcome(self, run: SessionRun, call: ToolCall, *, result_json: str | None = None,
                           error: str | None = None) -> Verdict:
        return self._evaluate(run, EventKind.TOOL_OUTCOME, call, result_json=result_json, error=error)

    async def user_turn(self, run: SessionRun) -> Verdict:
        return self._evaluate(run, EventKind.USER_TURN)

    async def approval(self, run: SessionRun, call: ToolCall, *, approved: bool, scope: str) -> Verdict:
        return self._evaluate(run, EventKind.APPROVAL, tool_call_id=call.call_id, approved=approved, scope=scope)

    async def run_end(self, run: SessionRun) -> None:
        self._evaluate(run, EventKind.RUN_END)

    async def close(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Before:
    refusal: dict[str, Any] | None = None  # the CallToolResult to answer with; None: run the call
    error: str = ""  # the JSON-RPC error (Invalid params) to answer with instead: the call was refused
    warning: str = ""  # an announced warning to add to the call's result for the model
    ask: Verdict | None = None  # an ASK: hold the call until a person answers (`ProxyGuard.answered`)


def unknown_tool_error(tool_name: str, result: Any) -> str | None:
    """The text of an `isError` result when it names a missing tool in a form the engine
    recognises in an error; None for anything else."""
    if not isinstance(result, dict) or result.get("isError") is not True:
        return None
    content = result.get("content")
    if not isinstance(content, list):
        return None
    text = "\n".join(block["text"] for block in content
                     if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str))
    if not text:
        return None
    _status, _digest, missing = loopwarden_core.outcome_fingerprint(tool_name, "{}", None, text)
    return text if missing else None


def error_result(message: str) -> dict[str, Any]:
    """A CallToolResult the client's model reads as a failed call. `resultType` is required from
    2026-07-28 on (a client of that revision rejects the result without it); the SDK's own servers
    send it at every revision, as this does."""
    return {"content": [{"type": "text", "text": message}], "isError": True, "resultType": "complete"}


class ProxyGuard:
    def __init__(self, judge: Judge, *, fail_closed: bool = False, timeout: float = JUDGE_TIMEOUT_SECONDS,
                 stderr: TextIO = sys.stderr, clock: Callable[[], float] = time.monotonic,
                 max_params_bytes: int = MAX_PARAMS_BYTES.default,
                 max_result_bytes: int = MAX_RESULT_BYTES.default) -> None:
        self._judge = judge
        # The daemon's event limits: larger arguments or results are judged by their sha256, length
        # and prefix (the hooks' reduction), so a loop of huge identical results is still one.
        self._max_params_bytes = max_params_bytes
        self._max_result_bytes = max_result_bytes
        self._fail_closed = fail_closed
        self._timeout = timeout
        self._stderr = stderr
        self._clock = clock
        self._outage = False

    def _say(self, text: str) -> None:
        print(f"loopwarden mcp-proxy: {text}", file=self._stderr, flush=True)

    async def _ask(self, ask) -> Verdict | None:
        """The verdict, or None when the daemon could not be asked (said once per outage)."""
        try:
            verdict = await asyncio.wait_for(ask, self._timeout)
        except (LoopwardenUnavailable, TimeoutError) as exc:
            if not self._outage:
                self._outage = True
                mode = ("tool calls are refused (fail closed)" if self._fail_closed
                        else "tool calls run unguarded (fail open)")
                reason = (f"no answer within {self._timeout:g} s (--check-timeout)" if isinstance(exc, TimeoutError)
                          else str(exc) or type(exc).__name__)
                self._say(f"loopwarden is unavailable ({reason}); {mode} until it answers again")
            return None
        if self._outage:
            self._outage = False
            self._say("loopwarden answers again; tool calls are guarded")
        return verdict

    async def before(self, run: SessionRun, call: ToolCall, *, can_hold: bool = True) -> Before:
        """What to do with one call: answer it with `refusal` instead of running it, run it and
        hand the model `warning` along with its result (an announced WARN), or hold it for a
        person (`ask`; only a call that `can_hold` in a run that accepts asks is ever ASKed: a
        tasks/get poll is not held, it gets the BLOCK)."""
        accepts_ask = run.accepts_ask and can_hold
        if run.aborted is not None:
            return Before(refusal=error_result(abort_text(run.aborted)))
        call = self._bounded(call)
        verdict = await self._ask(self._judge.tool_call(run, call, accepts_ask=accepts_ask))
        if verdict is None:
            if self._fail_closed:
                return Before(refusal=error_result(
                    "loopwarden is unavailable and set to fail closed: this call was not run."))
            return Before()
        # The guard policy (loopwarden.guard_policy); only a REJECT is the proxy's own, since its
        # --fail-closed answers one with a JSON-RPC error instead of running the call.
        if verdict.action is Action.REJECT:
            return self._refused(call, verdict)
        decision = decide(verdict, can_ask=accepts_ask)
        if decision.effect == "end_run":
            self._abort(run, verdict)
            return Before(refusal=error_result(decision.text))
        if decision.effect == "ask":
            return Before(ask=verdict)
        if decision.reports_refusal:  # a BLOCK, or an ASK nobody can answer
            await self._ask(self._judge.tool_outcome(run, call, result_json=json.dumps(blocked_tool_result(verdict))))
            return Before(refusal=error_result(decision.text))
        if decision.effect == "run_with_warning":
            self._say(decision.text)
            return Before(warning=decision.text)
        return Before()

    async def answered(self, run: SessionRun, call: ToolCall, asked: Verdict, *, approved: bool,
                       always: bool = False) -> Before:
        """A person's answer to an ASK, reported as the call's `approval`: approved, the call runs
        (its outcome is reported as any call's); denied, it is answered with a refusal (the ASK's
        message, said to be a person's denial) and not run."""
        verdict = await self._ask(self._judge.approval(run, self._bounded(call), approved=approved,
                                                       scope="always" if always else "once"))
        if verdict is not None and verdict.action is Action.ABORT:
            self._abort(run, verdict)
            return Before(refusal=error_result(abort_text(verdict)))
        if approved:
            return Before()
        return Before(refusal=error_result(f"A person declined this call: {asked.message}"))

    async def user_turn(self, run: SessionRun) -> None:
        """The client says a person gave the run a new instruction (`_meta` io.loopwarden/userTurn)."""
        verdict = await self._ask(self._judge.user_turn(run))
        if verdict is not None and verdict.action is Action.ABORT:
            self._abort(run, verdict)

    async def after(self, run: SessionRun, call: ToolCall, *, result: Any = None, error: str | None = None) -> None:
        """Report what the server returned for a call that ran."""
        if error is None:
            error = unknown_tool_error(call.name, result)
        call = self._bounded(call)
        ask = (self._judge.tool_outcome(run, call, error=bounded_text("error", error, self._max_result_bytes)[0])
               if error is not None else
               self._judge.tool_outcome(run, call, result_json=bounded_json(
                   "result_json", json_text(result), self._max_result_bytes)[0]))
        verdict = await self._ask(ask)
        if verdict is not None and verdict.action is Action.ABORT:
            self._abort(run, verdict)

    def _refused(self, call: ToolCall, verdict: Verdict) -> Before:
        """The daemon refused the call's event, so nothing was judged: fail closed, the request gets
        a JSON-RPC error naming the reason (its params are what the daemon could not take); fail
        open, it runs and stderr says why."""
        reason = verdict.message or "no reason given"
        if verdict.error_code and verdict.error_code not in reason:
            reason = f"{reason} ({verdict.error_code})"
        if self._fail_closed:
            self._say(f"refused tools/call {call.name!r} ({call.call_id}): the daemon refused it: {reason}; "
                      "not run (fail closed)")
            return Before(error=f"loopwarden could not check this call (the daemon refused it: {reason}) and is "
                                "set to fail closed, so it was not run.")
        self._say(f"tools/call {call.name!r} ({call.call_id}) runs unchecked: the daemon refused it: {reason}")
        return Before()

    def _bounded(self, call: ToolCall) -> ToolCall:
        params_json, reduced = bounded_json("params_json", call.params_json, self._max_params_bytes)
        return replace(call, params_json=params_json) if reduced is not None else call

    def _abort(self, run: SessionRun, verdict: Verdict) -> None:
        if run.aborted is None:
            run.aborted = verdict
            self._say(f"run {run.run_id} is over, every further tools/call of its session fails: "
                      f"{abort_text(verdict)}")

    async def end(self, run: SessionRun) -> None:
        """The session is over: so is its run."""
        await self._ask(self._judge.run_end(run))

    async def close(self) -> None:
        await self._judge.close()
