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

Runs (see `_langgraph_runs`): the invocation's configured `run_id` (a run per invocation, ended
with `run_end`), else its `thread_id` (the thread's run, kept across its invocations: a new human
message is a `user_turn`, which starts the run fresh for loop detection and keeps its budgets),
else a new id per invocation (a bare `ToolNode`: the id of the first message in the state). A
graph a guarded tool runs (an agent used as a tool) is the child run `<calling run>/<tool call
id>`; a compiled graph added as a node, the child `<thread's run>/<its checkpoint namespace>`.
Under `create_agent` both end with their invocation (a bare `ToolNode` never sends `run_end`).

- ASK (`loopwarden.onCritical: "ask"`, `onBudget: "ask"`; only in a graph with a checkpointer,
  and unless `ask=False`): the call is held with `interrupt()` (its value describes the call, see
  `_langgraph_ask`); the `Command(resume=...)` answer goes to the daemon as an `approval`, and the
  call runs only if approved.
- What the model wrote: each model response under `create_agent` is a `model_output` event (its
  text; a `final_answer` when it calls no tool, else a `message`) carrying its `usage_metadata`,
  for the detectors of loops without tool calls and the tree's token budget
  (`loopwarden.budgets.tokensPerTree`); a response with no text is a `usage` event. An announced
  WARN is logged (`loopwarden.integrations`); an ABORT ends the run as a tool's would: the
  response's tool calls are refused and the agent jumps to its end with a final `AIMessage`
  saying why (a final answer is followed by that message). In a graph of your own, the model node
  reports its response with `report_usage`.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final, NotRequired, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import get_runtime
from langgraph.types import Command, interrupt

from ..client import DEFAULT_TARGET
from ..eventformat import json_text
from ..guard_policy import abort_text, decide_output
from ..types import RunAborted, Verdict
from ._gate import Before, Gate, Settings, error_text, result_value
from ._langgraph_ask import RESUME_SCHEMA, Answer, answer_of
from ._langgraph_ask import payload as ask_payload
from ._langgraph_channel import Channel, GuardedCall
from ._langgraph_runs import CALLER, Caller, Place, PromptMemory, fresh_run_id, place_of

__all__ = ["LoopwardenMiddleware"]

log = logging.getLogger("loopwarden.integrations")

# Final: the literal keys, so reads of LoopwardenState are typed as its fields.
_RUN_KEY: Final = "loopwarden_run_id"
_ABORT_KEY: Final = "loopwarden_abort"
_PLACE_KEY: Final = "loopwarden_place"
_PROMPT_KEY: Final = "loopwarden_prompt_id"
# LangGraph's CONFIG_KEY_CHECKPOINTER (langgraph.constants keeps it only for backwards compatibility).
_CHECKPOINTER_KEY = "__pregel_checkpointer"

ToolResult = ToolMessage | Command


class LoopwardenState(AgentState[Any]):
    """The agent state keys the middleware keeps for itself (neither input nor output)."""

    loopwarden_run_id: NotRequired[Annotated[str, PrivateStateAttr]]
    loopwarden_abort: NotRequired[Annotated[str | None, PrivateStateAttr]]
    loopwarden_place: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    loopwarden_prompt_id: NotRequired[Annotated[str | None, PrivateStateAttr]]


class LoopwardenMiddleware(AgentMiddleware[LoopwardenState, Any]):
    """Guards every tool call of a `create_agent` agent; its `wrap_tool_call` / `awrap_tool_call`
    also serve as a LangGraph `ToolNode`'s wrappers."""

    state_schema = LoopwardenState

    def __init__(self, target: str = DEFAULT_TARGET, *, agent_id: str = "", token: str | None = None,
                 fail_open: bool = True, ask: bool = True, root_certificates: bytes | None = None,
                 private_key: bytes | None = None, certificate_chain: bytes | None = None) -> None:
        """`ask`: hold a call the daemon ASKs about with `interrupt()` (only in a graph with a
        checkpointer, which interrupts need); False: such calls are blocked, as for any caller
        that cannot ask."""
        super().__init__()
        self._gate = Gate(Settings(target, agent_id=agent_id, token=token, fail_open=fail_open,
                                   root_certificates=root_certificates, private_key=private_key,
                                   certificate_chain=certificate_chain, integration="langchain"))
        self._channel = Channel(self._gate)
        self._ask = ask
        self._prompts = PromptMemory()

    def close(self) -> None:
        self._gate.close()

    async def aclose(self) -> None:
        await self._gate.aclose()

    # -- create_agent: the run of each invocation, user turns, usage, the jump to the end, run_end

    def before_agent(self, state: LoopwardenState, runtime: Any) -> dict[str, Any]:
        update, turn = _agent_start(state, runtime)
        if turn is not None:
            place, prompt = turn
            self._channel.event("user_turn", place, prompt, prompt_id=prompt)
        return update

    async def abefore_agent(self, state: LoopwardenState, runtime: Any) -> dict[str, Any]:
        update, turn = _agent_start(state, runtime)
        if turn is not None:
            place, prompt = turn
            await self._channel.aevent("user_turn", place, prompt, prompt_id=prompt)
        return update

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: LoopwardenState, runtime: Any) -> dict[str, Any] | None:
        message = state.get(_ABORT_KEY)
        if not message:
            return None
        return {"jump_to": "end", "messages": [AIMessage(content=message)]}

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: LoopwardenState, runtime: Any) -> dict[str, Any] | None:
        return self.before_model(state, runtime)

    def after_model(self, state: LoopwardenState, runtime: Any) -> dict[str, Any] | None:
        output = _output_of(state, runtime)
        if output is None:
            return None
        place, key, verb, fields = output
        return _after_output(self._channel.event(verb, place, key, **fields), fields)

    async def aafter_model(self, state: LoopwardenState, runtime: Any) -> dict[str, Any] | None:
        output = _output_of(state, runtime)
        if output is None:
            return None
        place, key, verb, fields = output
        return _after_output(await self._channel.aevent(verb, place, key, **fields), fields)

    def report_usage(self, message: AIMessage, state: Any = None) -> Verdict | None:
        """In a LangGraph graph of your own: send a model response (its text as a `model_output`
        with its `usage_metadata`, or its usage alone as a `usage` event) in the run its tool calls
        are in, and return the daemon's verdict (None: nothing sent, or the daemon unreachable); an
        ABORT there is yours to act on (the run's later tool calls are refused). Call it in the
        node that called the model; `state`: the node's state (needed only when the graph has no
        thread id and no run id)."""
        output = _node_output(message, state)
        if output is None:
            return None
        place, key, verb, fields = output
        return self._channel.event(verb, place, key, **fields)

    async def areport_usage(self, message: AIMessage, state: Any = None) -> Verdict | None:
        output = _node_output(message, state)
        if output is None:
            return None
        place, key, verb, fields = output
        return await self._channel.aevent(verb, place, key, **fields)

    def after_agent(self, state: LoopwardenState, runtime: Any) -> None:
        place = _stored_place(state)
        if place is not None and place.per_invocation:
            self._channel.event("run_end", place, "")

    async def aafter_agent(self, state: LoopwardenState, runtime: Any) -> None:
        place = _stored_place(state)
        if place is not None and place.per_invocation:
            await self._channel.aevent("run_end", place, "")

    # -- every tool call ----------------------------------------------------------------------

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]) -> ToolResult:
        call, turn = self._guarded(request)
        if turn is not None:
            self._channel.event("user_turn", call.place, turn, prompt_id=turn)
        before = self._channel.before(call)
        if before.action == "ask":
            before = self._channel.answer(call, before, _asked(call, before, request))
        if before.action != "run":
            return _refused(request, before)
        caller = CALLER.set(_caller(call))
        started = time.monotonic()
        try:
            result = handler(request)
        except GraphBubbleUp:  # an interrupt, not a failure: the call runs again on resume
            raise
        except Exception as exc:
            self._channel.after(call, before, error=error_text(exc), duration_ms=_elapsed_ms(started))
            raise
        finally:
            CALLER.reset(caller)
        aborted = self._channel.after(call, before, **_outcome_of(result), duration_ms=_elapsed_ms(started))
        return _delivered(request, result, before.warning, aborted)

    async def awrap_tool_call(self, request: ToolCallRequest,
                              handler: Callable[[ToolCallRequest], Awaitable[ToolResult]]) -> ToolResult:
        call, turn = self._guarded(request)
        if turn is not None:
            await self._channel.aevent("user_turn", call.place, turn, prompt_id=turn)
        before = await self._channel.abefore(call)
        if before.action == "ask":
            before = await self._channel.aanswer(call, before, _asked(call, before, request))
        if before.action != "run":
            return _refused(request, before)
        caller = CALLER.set(_caller(call))
        started = time.monotonic()
        try:
            result = await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            await self._channel.aafter(call, before, error=error_text(exc), duration_ms=_elapsed_ms(started))
            raise
        finally:
            CALLER.reset(caller)
        aborted = await self._channel.aafter(call, before, **_outcome_of(result), duration_ms=_elapsed_ms(started))
        return _delivered(request, result, before.warning, aborted)

    def _guarded(self, request: ToolCallRequest) -> tuple[GuardedCall, str | None]:
        """The call as the daemon sees it, and the prompt id of a user turn to report first (a bare
        ToolNode in a thread whose latest human message changed)."""
        tool_call = request.tool_call
        info = getattr(request.runtime, "execution_info", None)
        # In an agent, before_agent has stored the run's place in the state before any tool runs.
        place = cast(Place, _stored_place(request.state)) if _in_agent(request) else _tool_node_place(request)
        turn = None
        if place.thread_run and not _in_agent(request):
            prompt = _last_human_id(request.state)
            if prompt and self._prompts.changed(place.run_id, prompt):
                turn = prompt
        accepts_ask = self._ask and _can_interrupt(getattr(request.runtime, "config", None))
        return GuardedCall(place, tool_call["name"], json_text(tool_call.get("args") or {}),
                           tool_call_id=tool_call.get("id") or "", task=info.checkpoint_ns if info else "",
                           accepts_ask=accepts_ask), turn


# -- runs ----------------------------------------------------------------------------------------

def _agent_start(state: LoopwardenState, runtime: Any) -> tuple[dict[str, Any], tuple[Place, str] | None]:
    """create_agent's run for this invocation (kept in its private state), and the user turn to
    report when the invocation continues the thread's run with a new human message."""
    info = runtime.execution_info
    place = place_of(info.checkpoint_ns if info else None, info.run_id if info else None,
                     info.thread_id if info else None, fallback=fresh_run_id())
    prompt = _last_human_id(state)
    continued = place.thread_run and state.get(_RUN_KEY) == place.run_id
    turn = (place, prompt) if continued and prompt and prompt != state.get(_PROMPT_KEY) else None
    return {_RUN_KEY: place.run_id, _PLACE_KEY: _stored(place), _PROMPT_KEY: prompt, _ABORT_KEY: None}, turn


def _stored(place: Place) -> dict[str, Any]:
    return {"parent_run_id": place.parent_run_id, "root_run_id": place.root_run_id, "session_id": place.session_id,
            "per_invocation": place.per_invocation, "thread_run": place.thread_run}


def _stored_place(state: Any) -> Place | None:
    if not isinstance(state, dict) or not state.get(_RUN_KEY):
        return None
    return Place(state[_RUN_KEY], **(state.get(_PLACE_KEY) or {}))


def _tool_node_place(request: ToolCallRequest) -> Place:
    """The run of a call in a LangGraph graph of your own (a bare ToolNode)."""
    runtime = request.runtime
    return _graph_place(getattr(runtime, "execution_info", None), getattr(runtime, "config", None), request.state)


def _graph_place(info: Any, config: Any, state: Any) -> Place:
    """The run of a task of a LangGraph graph of your own, from its execution info and config."""
    config = config or {}
    run_id = info.run_id if info is not None and info.run_id is not None else config.get("run_id")
    thread_id = (info.thread_id if info is not None and info.thread_id is not None
                 else (config.get("configurable") or {}).get("thread_id"))
    place = place_of(info.checkpoint_ns if info else None, run_id, thread_id, fallback=_first_message_run(state))
    if not place.run_id:
        raise ValueError("loopwarden: no run id for this graph; invoke the graph with a thread_id or a run_id "
                         "in its config")
    return place


def _messages(state: Any) -> list:
    return (state if isinstance(state, list) else state.get("messages") if isinstance(state, dict)
            else getattr(state, "messages", None)) or []


def _first_message_run(state: Any) -> str:
    messages = _messages(state)
    first_id = getattr(messages[0], "id", None) if messages else None
    # NOTE: add_messages gives every message an id, so without a checkpointer (which is when
    # there is no thread id) the first message's id is fresh for each invocation.
    return f"langgraph-{first_id}" if first_id else ""


def _last_human_id(state: Any) -> str | None:
    """The id of the latest human message: the prompt a user turn names."""
    for message in reversed(_messages(state)):
        if isinstance(message, HumanMessage):
            return message.id
    return None


def _can_interrupt(config: Any) -> bool:
    """interrupt() needs a checkpointer; LangGraph puts the graph's own (or its parent's) in the
    config of every task it runs."""
    configurable = (config or {}).get("configurable") or {}
    return configurable.get(_CHECKPOINTER_KEY) is not None


def _caller(call: GuardedCall) -> Caller:
    place = call.place
    return Caller(place.run_id, call.tool_call_id, place.root_run_id or place.run_id, call.task)


def _asked(call: GuardedCall, before: Before, request: ToolCallRequest) -> Answer:
    """Hold the call for a person: the first time, interrupt() ends the invocation here; when the
    graph is resumed, it returns their answer (checked against RESUME_SCHEMA by LangGraph)."""
    # An "ask" Before always holds its ASK verdict. RESUME_SCHEMA is a Union, which interrupt()
    # validates with at run time but its overloads (a class or a JSON schema dict) do not name.
    value = interrupt(ask_payload(cast(Verdict, before.verdict), run_id=call.place.run_id, tool=call.tool_name,
                                  args=request.tool_call.get("args") or {}, tool_call_id=call.tool_call_id),
                      response_schema=RESUME_SCHEMA)  # type: ignore[call-overload]
    return answer_of(value)


Output = tuple[Place, str, str, dict[str, Any]]  # the run, the event's key, its verb, its fields


def _output_of(state: LoopwardenState, runtime: Any) -> Output | None:
    """create_agent: the event of the model response that just came in (`_response_event`)."""
    place = _stored_place(state)
    messages = state.get("messages") or []
    event = _response_event(messages[-1] if messages else None)
    if place is None or event is None:
        return None
    info = runtime.execution_info
    return place, messages[-1].id or (info.checkpoint_ns if info else ""), *event


def _node_output(message: Any, state: Any) -> Output | None:
    """A node of your own graph: the event of the response it got, in the run its tool calls are in."""
    event = _response_event(message)
    if event is None:
        return None
    runtime = get_runtime()
    info = runtime.execution_info
    return (_graph_place(info, get_config(), state), message.id or (info.checkpoint_ns if info else ""), *event)


def _response_event(message: Any) -> tuple[str, dict[str, Any]] | None:
    """A model response as an event: its text as a `model_output` (a `final_answer` when it calls
    no tool, else a `message`) with its usage, or its usage alone as a `usage` event; None when
    it has neither."""
    if not isinstance(message, AIMessage):
        return None
    tokens = _tokens_of(message) or {}
    text = _text_of(message)
    if text:
        kind = "message" if message.tool_calls else "final_answer"
        return "model_output", {"text": text, "output_kind": kind, **tokens}
    return ("usage", tokens) if tokens else None


def _text_of(message: AIMessage) -> str:
    """What the model wrote in a response: its text, its text blocks joined (reasoning and tool
    blocks left out)."""
    content = message.content
    if isinstance(content, str):
        return content.strip()
    parts = [block if isinstance(block, str) else block.get("text", "") for block in content
             if isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")]
    return "\n".join(part for part in parts if isinstance(part, str)).strip()


def _after_output(verdict: Verdict | None, fields: dict[str, Any]) -> dict[str, Any] | None:
    """The state update after the verdict on a response: an ABORT marks the run aborted (its tool
    calls are then refused by the daemon, and the agent jumps to its end with the message before
    its next model call); a final answer is followed by the message at once. An announced WARN is
    logged: the response is the model's already."""
    if verdict is None:
        return None
    decision = decide_output(verdict)
    if decision.effect == "run_with_warning":
        log.warning("loopwarden: %s", decision.text)
    if decision.effect != "end_run":
        return None
    update: dict[str, Any] = {_ABORT_KEY: decision.text}
    if fields.get("output_kind") == "final_answer":
        update["messages"] = [AIMessage(content=decision.text)]
    return update


def _tokens_of(message: Any) -> dict[str, Any] | None:
    """The usage event's fields from a model response's usage_metadata (None: it says nothing)."""
    usage = getattr(message, "usage_metadata", None) if isinstance(message, AIMessage) else None
    if not usage:
        return None
    metadata = message.response_metadata or {}
    return {"input_tokens": int(usage.get("input_tokens") or 0), "output_tokens": int(usage.get("output_tokens") or 0),
            "model": str(metadata.get("model_name") or metadata.get("model") or "")}


def _elapsed_ms(started: float) -> int:
    return max(0, round((time.monotonic() - started) * 1000))


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
        raise RunAborted(cast(Verdict, before.verdict))  # an "abort" Before always holds its verdict
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
    message = abort_text(aborted)
    if isinstance(result, ToolMessage):
        return Command(update={"messages": [result], _ABORT_KEY: message})
    if isinstance(result.update, dict):
        return dataclasses.replace(result, update={**result.update, _ABORT_KEY: message})
    raise RunAborted(aborted)
