"""loopwarden for LangChain v1 agents (`create_agent` middleware) and LangGraph `ToolNode`s.

    agent = create_agent(model, tools, middleware=[LoopwardenMiddleware("127.0.0.1:50051", agent_id="coder")])

    guard = LoopwardenMiddleware(agent_id="coder")
    tool_node = ToolNode(tools, wrap_tool_call=guard.wrap_tool_call, awrap_tool_call=guard.awrap_tool_call)

Every tool call asks the daemon first and reports the tool's result after (`ainvoke`/`astream` go
through the asyncio client, `invoke`/`stream` through the blocking one).

- WARN (announced): the tool runs and the warning is appended to the `ToolMessage` the model gets.
- BLOCK: the tool does not run; the model gets a `ToolMessage` (status "error") holding the block
  message, with the decision's details as its `artifact`.
- ABORT: under `create_agent` the agent jumps to its end with a final `AIMessage` saying why, the
  way `ToolCallLimitMiddleware(exit_behavior="end")` ends a run, so the thread stays valid. A bare
  `ToolNode` cannot end its graph, so there `loopwarden.RunAborted` is raised out of `invoke`.
- Daemon unreachable: the tool runs unguarded; with `fail_open=False`, `LoopwardenUnavailable` is
  raised instead.

The run id is the invocation's `run_id` (from its RunnableConfig) when it has one, else its
`thread_id`; under `create_agent` without either, one is made per invocation. A bare `ToolNode`
without either uses the id of the first message in the state. The thread id goes along as the
session id, and `create_agent` sends `run_end` when the invocation ends.
"""
from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ..client import DEFAULT_TARGET
from ..eventformat import json_text
from ..types import RunAborted, Verdict
from ._gate import Before, Call, Gate, Settings, error_text, result_value

__all__ = ["LoopwardenMiddleware"]

_RUN_KEY = "loopwarden_run_id"
_ABORT_KEY = "loopwarden_abort"

ToolResult = ToolMessage | Command


class LoopwardenState(AgentState[Any]):
    """The agent state keys the middleware keeps for itself (neither input nor output)."""

    loopwarden_run_id: NotRequired[Annotated[str, PrivateStateAttr]]
    loopwarden_abort: NotRequired[Annotated[str | None, PrivateStateAttr]]


class LoopwardenMiddleware(AgentMiddleware[LoopwardenState, Any]):
    """Guards every tool call of a `create_agent` agent; its `wrap_tool_call` / `awrap_tool_call`
    also serve as a LangGraph `ToolNode`'s wrappers."""

    state_schema = LoopwardenState

    def __init__(self, target: str = DEFAULT_TARGET, *, agent_id: str = "", token: str | None = None,
                 fail_open: bool = True, root_certificates: bytes | None = None, private_key: bytes | None = None,
                 certificate_chain: bytes | None = None) -> None:
        super().__init__()
        self._gate = Gate(Settings(target, agent_id=agent_id, token=token, fail_open=fail_open,
                                   root_certificates=root_certificates, private_key=private_key,
                                   certificate_chain=certificate_chain))

    def close(self) -> None:
        self._gate.close()

    async def aclose(self) -> None:
        await self._gate.aclose()

    # -- create_agent: a run id per invocation, the jump to the end, run_end -------------------

    def before_agent(self, state: LoopwardenState, runtime: Any) -> dict[str, Any]:
        info = runtime.execution_info
        configured = _configured_ids(info.run_id if info else None, info.thread_id if info else None)
        return {_RUN_KEY: configured[0] if configured else f"langchain-{uuid.uuid4().hex}", _ABORT_KEY: None}

    async def abefore_agent(self, state: LoopwardenState, runtime: Any) -> dict[str, Any]:
        return self.before_agent(state, runtime)

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: LoopwardenState, runtime: Any) -> dict[str, Any] | None:
        message = state.get(_ABORT_KEY)
        if not message:
            return None
        return {"jump_to": "end", "messages": [AIMessage(content=message)]}

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: LoopwardenState, runtime: Any) -> dict[str, Any] | None:
        return self.before_model(state, runtime)

    def after_agent(self, state: LoopwardenState, runtime: Any) -> None:
        if state.get(_RUN_KEY):
            self._gate.end(state[_RUN_KEY], session_id=_thread_of(runtime))

    async def aafter_agent(self, state: LoopwardenState, runtime: Any) -> None:
        if state.get(_RUN_KEY):
            await self._gate.aend(state[_RUN_KEY], session_id=_thread_of(runtime))

    # -- every tool call ----------------------------------------------------------------------

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]) -> ToolResult:
        call = _call_of(request)
        before = self._gate.before(call)
        if before.action != "run":
            return _refused(request, before)
        try:
            result = handler(request)
        except GraphBubbleUp:  # an interrupt, not a failure: the call runs again on resume
            raise
        except Exception as exc:
            self._gate.after(call, before, error=error_text(exc))
            raise
        aborted = self._gate.after(call, before, **_outcome_of(result))
        return _delivered(request, result, before.warning, aborted)

    async def awrap_tool_call(self, request: ToolCallRequest,
                              handler: Callable[[ToolCallRequest], Awaitable[ToolResult]]) -> ToolResult:
        call = _call_of(request)
        before = await self._gate.abefore(call)
        if before.action != "run":
            return _refused(request, before)
        try:
            result = await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            await self._gate.aafter(call, before, error=error_text(exc))
            raise
        aborted = await self._gate.aafter(call, before, **_outcome_of(result))
        return _delivered(request, result, before.warning, aborted)


# -- run ids -------------------------------------------------------------------------------------

def _configured_ids(run_id: Any, thread_id: Any) -> tuple[str, str] | None:
    """(run id, session id) from what the invocation was configured with, if anything."""
    thread = "" if thread_id is None else str(thread_id)
    if run_id is not None:
        return str(run_id), thread
    if thread:
        return thread, thread
    return None


def _thread_of(runtime: Any) -> str:
    info = getattr(runtime, "execution_info", None)
    return "" if info is None or info.thread_id is None else str(info.thread_id)


def _call_of(request: ToolCallRequest) -> Call:
    tool_call = request.tool_call
    run_id, session_id = _run_of(request)
    return Call(run_id, tool_call["name"], json_text(tool_call.get("args") or {}),
                tool_call_id=tool_call.get("id") or "", session_id=session_id)


def _run_of(request: ToolCallRequest) -> tuple[str, str]:
    runtime = request.runtime
    info = getattr(runtime, "execution_info", None)
    config = getattr(runtime, "config", None) or {}
    run_id = info.run_id if info is not None and info.run_id is not None else config.get("run_id")
    thread_id = (info.thread_id if info is not None and info.thread_id is not None
                 else (config.get("configurable") or {}).get("thread_id"))
    state = request.state
    if isinstance(state, dict) and state.get(_RUN_KEY):  # create_agent: chosen by before_agent
        return state[_RUN_KEY], "" if thread_id is None else str(thread_id)
    configured = _configured_ids(run_id, thread_id)
    if configured is not None:
        return configured
    messages = (state if isinstance(state, list) else state.get("messages") if isinstance(state, dict)
                else getattr(state, "messages", None))
    first_id = getattr(messages[0], "id", None) if messages else None
    if first_id:
        # NOTE: add_messages gives every message an id, so without a checkpointer (which is when
        # there is no thread id) the first message's id is fresh for each invocation.
        return f"langgraph-{first_id}", ""
    raise ValueError("loopwarden: no run id for this tool call; invoke the graph with a thread_id or a run_id "
                     "in its config")


def _in_agent(request: ToolCallRequest) -> bool:
    """Whether the call runs under create_agent with this middleware, which can end the run."""
    return isinstance(request.state, dict) and bool(request.state.get(_RUN_KEY))


# -- what the model gets -------------------------------------------------------------------------

def _tool_message(request: ToolCallRequest, content: str, **fields: Any) -> ToolMessage:
    tool_call = request.tool_call
    return ToolMessage(content=content, tool_call_id=tool_call.get("id") or "", name=tool_call["name"], **fields)


def _refused(request: ToolCallRequest, before: Before) -> ToolResult:
    if before.action == "block":
        return _tool_message(request, before.message, status="error", artifact=before.details())
    if not _in_agent(request):
        raise RunAborted(before.verdict)
    return Command(update={"messages": [_tool_message(request, before.message, status="error",
                                                      artifact=before.details())],
                           _ABORT_KEY: before.message})


def _outcome_of(result: ToolResult) -> dict[str, Any]:
    """The result as the daemon hashes it: what the model will read, never message ids."""
    if isinstance(result, ToolMessage):
        if result.status == "error":  # a ToolNode that handles tool errors made this message
            return {"error": result.content if isinstance(result.content, str) else json_text(result.content)}
        return {"result": result_value(result.content)}
    if isinstance(result, Command):
        update = result.update if isinstance(result.update, dict) else {}
        messages = [result_value(m.content) for m in update.get("messages", ()) if isinstance(m, ToolMessage)]
        return {"result": {"messages": messages, "update": {k: v for k, v in update.items() if k != "messages"},
                           "goto": str(result.goto)}}
    return {"result": result}


def _with_warning(message: ToolMessage, warning: str) -> ToolMessage:
    content = message.content
    if isinstance(content, str):
        content = f"{content}\n\n{warning}" if content else warning
    else:
        content = [*content, {"type": "text", "text": warning}]
    return message.model_copy(update={"content": content})


def _delivered(request: ToolCallRequest, result: ToolResult, warning: str, aborted: Verdict | None) -> ToolResult:
    call_id = request.tool_call.get("id")
    if warning:
        if isinstance(result, ToolMessage):
            result = _with_warning(result, warning)
        elif isinstance(result, Command) and isinstance(result.update, dict):
            messages = [_with_warning(m, warning) if isinstance(m, ToolMessage) and m.tool_call_id == call_id else m
                        for m in result.update.get("messages", ())]
            result = dataclasses.replace(result, update={**result.update, "messages": messages})
    if aborted is None:
        return result
    if not _in_agent(request):
        raise RunAborted(aborted)
    message = aborted.message or aborted.error_code
    if isinstance(result, ToolMessage):
        return Command(update={"messages": [result], _ABORT_KEY: message})
    if isinstance(result.update, dict):
        return dataclasses.replace(result, update={**result.update, _ABORT_KEY: message})
    raise RunAborted(aborted)
