"""loopwarden for the OpenAI Agents SDK: a tool input guardrail asks before each function tool runs,
a tool output guardrail reports what it returned.

    guard = LoopwardenGuardrails("127.0.0.1:50051", agent_id="coder")
    agent = guard.protect(Agent(name="coder", tools=[read_file]))
    result = await Runner.run(agent, "fix the build", max_turns=50)

`max_turns` above the critical threshold (the SDK's default of 10 ends the run before loopwarden's
warning at the 11th identical call and its block at the 21st: docs/integrations/openai-agents.md).

`protect` adds both guardrails to every function tool of an agent (and of the agents it hands off
to), of a tool, or of a list of tools; `guard.tool_input_guardrail` and `guard.tool_output_guardrail`
can also be given to `function_tool(...)` directly. The guardrails run on the asyncio client.

- WARN (announced): the tool runs; the output guardrail appends the warning to a text result
  (`reject_content` with the result and the warning: the SDK's one way to change what the model
  reads). A non-text result is passed on as it is and the warning only logged.
- BLOCK: the input guardrail rejects the call with the block message as its result
  (`reject_content`); the tool does not run.
- ABORT: the guardrail trips (`raise_exception`), so `Runner.run` raises the SDK's
  `ToolInputGuardrailTripwireTriggered` (or `ToolOutputGuardrailTripwireTriggered` when the outcome
  ended the run); `.output.output_info` holds the decision as a dict.
- Daemon unreachable: the tool runs unguarded; with `fail_open=False` the input guardrail trips.

The run id is the run's trace id (the SDK starts a trace per `Runner.run`); with tracing off it is
the `RunConfig.group_id`, and without that one is made per run. The group id goes along as the
session id.
"""
from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Iterable
from typing import Any, TypeVar

from agents import (
    Agent, FunctionTool, ToolGuardrailFunctionOutput, ToolInputGuardrail, ToolInputGuardrailData,
    ToolOutputGuardrail, ToolOutputGuardrailData,
)
from agents.tool_context import ToolContext
from agents.tracing import get_current_trace
from agents.tracing.traces import NoOpTrace

from ..client import DEFAULT_TARGET
from ..types import LoopwardenUnavailable
from ._gate import Before, Call, Gate, Settings, result_value

__all__ = ["LoopwardenGuardrails"]

log = logging.getLogger("loopwarden.integrations")

Protected = TypeVar("Protected")


class LoopwardenGuardrails:
    """A pair of tool guardrails that let the loopwarden daemon veto repeated calls."""

    def __init__(self, target: str = DEFAULT_TARGET, *, agent_id: str = "", token: str | None = None,
                 fail_open: bool = True, root_certificates: bytes | None = None, private_key: bytes | None = None,
                 certificate_chain: bytes | None = None) -> None:
        self._gate = Gate(Settings(target, agent_id=agent_id, token=token, fail_open=fail_open,
                                   root_certificates=root_certificates, private_key=private_key,
                                   certificate_chain=certificate_chain))
        self._run_ids = _RunIds()
        # Calls allowed by the input guardrail, until the output guardrail reports them.
        self._pending: dict[tuple[str, str], tuple[Call, Before]] = {}
        self.tool_input_guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(self._check_call, name="loopwarden")
        self.tool_output_guardrail: ToolOutputGuardrail[Any] = ToolOutputGuardrail(self._check_outcome,
                                                                                   name="loopwarden")

    def protect(self, target: Protected) -> Protected:
        """Add the guardrails to every function tool of `target` (an Agent, with the agents it hands
        off to, a FunctionTool, or an iterable of either) and return `target`. Idempotent. Tools
        the SDK runs elsewhere (hosted tools, MCP servers) take no tool guardrails and are left as
        they are."""
        seen: set[int] = set()

        def visit(item: Any) -> None:
            if id(item) in seen:
                return
            seen.add(id(item))
            if isinstance(item, FunctionTool):
                self._attach(item)
            elif isinstance(item, Agent):
                for tool in item.tools:
                    visit(tool)
                for handoff in item.handoffs:
                    if isinstance(handoff, Agent):
                        visit(handoff)
            elif isinstance(item, Iterable) and not isinstance(item, (str, bytes)):
                for each in item:
                    visit(each)

        visit(target)
        return target

    def _attach(self, tool: FunctionTool) -> None:
        inputs, outputs = list(tool.tool_input_guardrails or ()), list(tool.tool_output_guardrails or ())
        if self.tool_input_guardrail not in inputs:
            # Last among the input guardrails: the daemon hears only of calls the others let through.
            tool.tool_input_guardrails = [*inputs, self.tool_input_guardrail]
        if self.tool_output_guardrail not in outputs:
            # First among the output guardrails: the first rejection ends the list, and the daemon
            # must see every real result.
            tool.tool_output_guardrails = [self.tool_output_guardrail, *outputs]

    async def aclose(self) -> None:
        """Close the connection to the daemon (it reopens on the next call)."""
        await self._gate.aclose()

    # -- the guardrails -----------------------------------------------------------------------

    async def _check_call(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        call = self._call_of(data.context)
        try:
            before = await self._gate.abefore(call)
        except LoopwardenUnavailable as exc:  # only with fail_open=False
            return ToolGuardrailFunctionOutput.raise_exception(
                output_info={"action": "unavailable", "guarded": False, "message": str(exc)})
        if before.action == "abort":
            return ToolGuardrailFunctionOutput.raise_exception(output_info=before.details())
        if before.action == "block":
            return ToolGuardrailFunctionOutput.reject_content(before.message, output_info=before.details())
        if before.report or before.warning:
            self._pending[(call.run_id, call.tool_call_id)] = (call, before)
        return ToolGuardrailFunctionOutput.allow(output_info=before.details())

    async def _check_outcome(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        pending = self._pending.pop((self._run_of(context)[0], context.tool_call_id), None)
        if pending is None:  # unguarded: the daemon was unreachable when it was asked
            return ToolGuardrailFunctionOutput.allow()
        call, before = pending
        # NOTE: the SDK turns a tool's exception into a text result (its failure_error_function)
        # before output guardrails run, so failures are reported as that text, which is what the
        # model reads; identical failures still hash alike.
        aborted = await self._gate.aafter(call, before, result=result_value(data.output))
        if aborted is not None:
            return ToolGuardrailFunctionOutput.raise_exception(output_info=Before("abort", verdict=aborted).details())
        if before.warning:
            if isinstance(data.output, str):
                text = f"{data.output}\n\n{before.warning}" if data.output else before.warning
                return ToolGuardrailFunctionOutput.reject_content(text, output_info=before.details())
            log.warning("loopwarden: %s result is not text; warning not shown to the model", call.tool_name)
        return ToolGuardrailFunctionOutput.allow(output_info=before.details())

    # -- run ids ------------------------------------------------------------------------------

    def _call_of(self, context: ToolContext[Any]) -> Call:
        run_id, session_id = self._run_of(context)
        return Call(run_id, context.tool_name, context.tool_arguments or "", tool_call_id=context.tool_call_id,
                    session_id=session_id)

    def _run_of(self, context: ToolContext[Any]) -> tuple[str, str]:
        group_id = (context.run_config.group_id if context.run_config is not None else None) or ""
        trace = get_current_trace()
        if trace is not None and not isinstance(trace, NoOpTrace):
            return trace.trace_id, group_id
        if group_id:
            return group_id, group_id
        return self._run_ids.of(context.usage), ""


class _RunIds:
    """A run id for each run that has neither a trace nor a group id.

    NOTE: the SDK exposes no run id, but it makes one `Usage` per `Runner.run` and hands that very
    object to every tool context of the run (and to agents run as tools inside it). A run id is
    therefore kept per live Usage object, and dropped when the object goes: ids are looked up by
    `id()`, and the entry is removed before the address can be reused.
    """

    def __init__(self) -> None:
        self._ids: dict[int, tuple[weakref.ref, str]] = {}

    def of(self, usage: object) -> str:
        key = id(usage)
        held = self._ids.get(key)
        if held is not None and held[0]() is usage:
            return held[1]
        run_id = f"agents-run-{uuid.uuid4().hex}"
        self._ids[key] = (weakref.ref(usage, lambda _ref, key=key: self._ids.pop(key, None)), run_id)
        return run_id

