"""LoopwardenGuardrails: the tool guardrails, the approval gate and the agent hooks, on one daemon
connection. What each verdict does to a run is described in the package's docstring."""
from __future__ import annotations

import inspect
import json
import logging
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from agents import (
    Agent, AgentHooks, FunctionTool, ToolGuardrailFunctionOutput, ToolInputGuardrail, ToolInputGuardrailData,
    ToolOutputGuardrail, ToolOutputGuardrailData,
)
from agents.items import ModelResponse, ToolApprovalItem
from agents.run_context import RunContextWrapper
from agents.tool_context import ToolContext
from agents.tracing import get_current_trace
from agents.tracing.traces import NoOpTrace

from ...client import DEFAULT_TARGET
from ...guard_policy import abort_text, decide, decide_output
from ...runner import blocked_tool_result
from ...types import Action, LoopwardenUnavailable, RunAborted, Verdict
from .._gate import Before, Call, Gate, Settings, _decide, _unavailable, result_value
from ._runs import CURRENT_CALL, MAX_REMEMBERED, Frame, Place, Scope, Scopes, generated_run_id

log = logging.getLogger("loopwarden.integrations")

Protected = TypeVar("Protected")

# Every live guard: a tool or an agent protected by several (a guard made per request around
# shared agents, say) carries one set of loopwarden's guardrails and hooks, and each run is
# handled by the guard that saw its first event (_owner_of); question() looks in all of them.
_GUARDS: weakref.WeakSet[LoopwardenGuardrails] = weakref.WeakSet()
# Where a tool keeps its one _ToolGuard (FunctionTool is an unhashable dataclass: no weak map).
_TOOL_GUARD = "_loopwarden_tool_guard"


def _owner_of(context: RunContextWrapper[Any]) -> LoopwardenGuardrails | None:
    """The guard already handling the run of `context` (its scope is keyed by the run's Usage)."""
    usage = getattr(context, "usage", None)
    if usage is None:
        return None
    for guard in list(_GUARDS):
        if guard._scopes.owns(usage):
            return guard
    return None


@dataclass(frozen=True, slots=True)
class _Asked:
    """A call the daemon ASKed and the SDK interrupted the run for, until the person's answer is seen."""

    place: Place
    call: Call
    verdict: Verdict


@dataclass(frozen=True, slots=True)
class _Decided:
    """The daemon's answer to a call, got by the approval gate, for the input guardrail to act on."""

    place: Place
    call: Call
    before: Before


class LoopwardenGuardrails:
    """Tool guardrails (and, through `protect`, agent hooks and an approval gate) that let the
    loopwarden daemon veto repeated calls, place sub-agents in run trees, feed budgets with the
    model's token usage and hand critical loops to a person."""

    def __init__(self, target: str = DEFAULT_TARGET, *, agent_id: str = "", token: str | None = None,
                 fail_open: bool = True, ask: bool = False, root_certificates: bytes | None = None,
                 private_key: bytes | None = None, certificate_chain: bytes | None = None) -> None:
        self._gate = Gate(Settings(target, agent_id=agent_id, token=token, fail_open=fail_open,
                                   root_certificates=root_certificates, private_key=private_key,
                                   certificate_chain=certificate_chain, integration="openai_agents"))
        self._ask = ask
        self._scopes = Scopes()
        # Handoff placements per root run, shared by every Runner.run of that root (a resumed or a
        # later run keeps the sub-agents' runs); bounded like the scopes' root memory.
        self._trees: dict[str, dict[str, dict[str, str]]] = {}
        # Calls allowed by the input guardrail, until the output guardrail reports them (keyed by
        # the tool context, which the SDK hands to both guardrails of a call).
        self._pending: weakref.WeakKeyDictionary[Any, tuple[Place, Call, Before]] = weakref.WeakKeyDictionary()
        # Keyed by (root, call id); bounded: a run the host never resumes leaves its ask behind.
        self._decided: dict[tuple[str, str], _Decided] = {}
        self._asked: dict[tuple[str, str], _Asked] = {}
        self.tool_input_guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(self._check_call, name="loopwarden")
        self.tool_output_guardrail: ToolOutputGuardrail[Any] = ToolOutputGuardrail(self._check_outcome,
                                                                                   name="loopwarden")
        _GUARDS.add(self)

    # -- protect ------------------------------------------------------------------------------

    def protect(self, target: Protected) -> Protected:
        """Guard `target` (an Agent, a FunctionTool, or an iterable of either) and return it.
        Idempotent, also across guards: a tool carries one pair of loopwarden guardrails and an
        agent one set of hooks however many guards protect it; the last guard to protect it takes
        the runs that start afterwards, and a run stays with the guard that saw its first event.
        An agent gets loopwarden's agent hooks (its own hooks still run, after them),
        and so do the agents it hands off to and the agents its tools run (`Agent.as_tool`); every
        function tool gets the guardrails and, with `ask=True`, the approval gate. Tools the SDK
        runs elsewhere (hosted tools, MCP servers) take no tool guardrails and are left as they are;
        `Handoff` objects are followed only when they are plain Agents."""
        seen: set[int] = set()

        def visit(item: Any, owner: str = "") -> None:
            if isinstance(item, FunctionTool):
                if owner and isinstance(item.needs_approval, _ApprovalGate):
                    item.needs_approval.owners.add(owner)
                if id(item) in seen:
                    return
                seen.add(id(item))
                self._attach(item)
                if owner and isinstance(item.needs_approval, _ApprovalGate):
                    item.needs_approval.owners.add(owner)
                # NOTE: the SDK keeps the agent of an Agent.as_tool tool only in a private field.
                inner = getattr(item, "_agent_instance", None)
                if getattr(item, "_is_agent_tool", False) and isinstance(inner, Agent):
                    visit(inner)
                return
            if id(item) in seen:
                return
            seen.add(id(item))
            if isinstance(item, Agent):
                if isinstance(item.hooks, _Hooks):
                    item.hooks.guard = self  # taken over, not wrapped: one set of hooks per agent
                else:
                    item.hooks = _Hooks(self, item.hooks)
                for tool in item.tools:
                    visit(tool, item.name)
                for handoff in item.handoffs:
                    if isinstance(handoff, Agent):
                        visit(handoff)
            elif isinstance(item, Iterable) and not isinstance(item, (str, bytes)):
                for each in item:
                    visit(each, owner)

        visit(target)
        return target

    def _attach(self, tool: FunctionTool) -> None:
        shared = getattr(tool, _TOOL_GUARD, None)
        if not isinstance(shared, _ToolGuard):
            shared = _ToolGuard(self)
            setattr(tool, _TOOL_GUARD, shared)
        shared.guard = self
        # Any loopwarden guardrail already there (this pair, or a guard's own given to
        # function_tool) goes: a second one would send every call to the daemon twice.
        inputs = [g for g in tool.tool_input_guardrails or () if not _is_loopwardens(g)]
        outputs = [g for g in tool.tool_output_guardrails or () if not _is_loopwardens(g)]
        # Last among the input guardrails: the daemon hears only of calls the others let through.
        tool.tool_input_guardrails = [*inputs, shared.input]
        # First among the output guardrails: the first rejection ends the list, and the daemon
        # must see every real result.
        tool.tool_output_guardrails = [shared.output, *outputs]
        if self._ask and not isinstance(tool.needs_approval, _ApprovalGate):
            tool.needs_approval = _ApprovalGate(shared, tool, tool.needs_approval)

    async def aclose(self) -> None:
        """Close the connection to the daemon (it reopens on the next call)."""
        await self._gate.aclose()

    def question(self, item: ToolApprovalItem) -> str | None:
        """The daemon's message for an interruption loopwarden asked for (what to show the person),
        or None when the item is not loopwarden's (the tool's own needs_approval, say)."""
        call_id = getattr(item.raw_item, "call_id", None) or getattr(item.raw_item, "id", None) or ""
        # The run may be another guard's (the one that saw its first event): theirs are ours too.
        for guard in (self, *(other for other in list(_GUARDS) if other is not self)):
            for (_root, asked_id), asked in guard._asked.items():
                if asked_id == call_id and asked.call.tool_name == item.tool_name:
                    return asked.verdict.message
        return None

    # -- where an event belongs ---------------------------------------------------------------

    def _resolve(self, scope: Scope, context: RunContextWrapper[Any]) -> Place | None:
        """The scope's root run; None while it cannot be told yet (see _runs)."""
        run_config = context.run_config if isinstance(context, ToolContext) else None
        group_id = (run_config.group_id if run_config is not None else None) or ""
        if group_id and not scope.session_id:
            scope.session_id = group_id
        if scope.root is None:
            trace = get_current_trace()
            if trace is not None and not isinstance(trace, NoOpTrace):
                scope.root = Place(trace.trace_id)
            elif group_id:
                scope.root = Place(group_id)
            elif isinstance(context, ToolContext):  # a tool context would show a group id: there is none
                scope.root = Place(generated_run_id())
        return scope.root

    def _base(self, context: RunContextWrapper[Any]) -> tuple[Scope, str, Place | None]:
        """The scope of a context, the key of its base run among the scope's handoff tables ("" for
        the root), and that base run (None: the root is not known yet)."""
        scope = self._scopes.of(context.usage)
        frame = CURRENT_CALL.get()
        if frame is not None and frame.context is not context:  # inside a guarded call: a sub-agent
            child = frame.place.child(frame.call_id)
            return scope, child.run_id, child
        return scope, "", self._resolve(scope, context)

    async def _place(self, context: RunContextWrapper[Any], agent_name: str) -> tuple[Scope, Place | None]:
        scope, base_key, base = self._base(context)
        if base is None:
            return scope, None
        if not base_key:
            await self._open(scope, context)
        return scope, scope.place_in(base_key, base, agent_name)

    async def _open(self, scope: Scope, context: RunContextWrapper[Any]) -> None:
        """The first time a scope's root is known: share the root's handoff placements, send the
        user turn when an earlier Runner.run had this root, settle answered asks, send the usage
        that waited for the root."""
        if scope.opened or scope.root is None:
            return
        async with scope.opening:  # parallel calls of one turn: none goes ahead of the user turn
            if not scope.opened:
                await self._first_events(scope, scope.root, context)
                scope.opened = True

    async def _first_events(self, scope: Scope, root: Place, context: RunContextWrapper[Any]) -> None:
        tree = self._trees.setdefault(root.run_id, {})
        _bound(self._trees)
        for base_key, agents in scope.handoffs.items():
            merged = tree.setdefault(base_key, {})
            for agent, source in agents.items():
                merged.setdefault(agent, source)
        scope.handoffs = tree
        # NOTE: a resumed run (Runner.run on a RunState) is a new scope on the same root, and no new
        # instruction: it carries the person's decisions, or answers an ask of ours.
        resumed = bool(getattr(context, "_approvals", None)) or any(key[0] == root.run_id for key in self._asked)
        if self._scopes.seen_before(root.run_id) and not resumed:
            await self._event("user_turn", root, session_id=scope.session_id)
        await self._settle(root.run_id, context)
        pending, scope.pending_usage = scope.pending_usage, []
        for base_key, agent, fields in pending:
            # A response's text waited with its usage; its ABORT meets the run's next call anyway.
            verb = "model_output" if fields.get("text") else "usage"
            _shown(await self._event(verb, scope.place_in(base_key, root, agent), session_id=scope.session_id,
                                     **fields))

    # -- the approval gate (ask=True) ---------------------------------------------------------

    async def _needs_approval(self, gate: _ApprovalGate, tool: FunctionTool, context: RunContextWrapper[Any],
                              params: dict[str, Any], call_id: str) -> bool:
        """Ask the daemon, with accepts_ask, before the SDK plans the call: an ASK holds the call
        for the person (the run is interrupted); any other answer waits for the input guardrail."""
        frame = CURRENT_CALL.get()
        if not call_id or (frame is not None and frame.context is not context):
            # NOTE: a sub-agent run as a tool is not asked: when its run is resumed the SDK skips
            # the calling tool's guardrails, so its calls could not be told apart from the caller's.
            return False
        scope, base_key, base = self._base(context)
        if base is None:
            return False  # the root is not known before the run's first tool call: not asked
        await self._open(scope, context)
        key = (base.root, call_id)
        if key in self._asked:
            return True
        if key in self._decided:
            return False
        # The gate is not told which agent plans the call: the agent running in this base (its
        # start hook said), else the one protected agent that has the tool.
        agent = scope.current.get(base_key, "") or (next(iter(gate.owners)) if len(gate.owners) == 1 else "")
        place = scope.place_in(base_key, base, agent)
        # NOTE: the SDK hands the gate the arguments parsed; the daemon hashes JSON by value, so
        # they are sent re-encoded (the guardrail then reports the outcome under the same text).
        call = Call(place.run_id, tool.name, json.dumps(params, separators=(",", ":")), tool_call_id=call_id,
                    session_id=scope.session_id)
        try:
            before = await self._before(place, call, accepts_ask=True)
        except LoopwardenUnavailable:
            # fail_open=False: the input guardrail asks again and trips. (Raised from here, the
            # SDK would take the error for "needs approval" and interrupt the run instead.)
            return False
        if before.verdict is not None and before.verdict.action is Action.ASK:
            self._asked[key] = _Asked(place, call, before.verdict)
            _bound(self._asked)
            return True
        self._decided[key] = _Decided(place, call, before)
        _bound(self._decided)
        return False

    async def _settle(self, root: str, context: RunContextWrapper[Any]) -> None:
        """Send the denials the person gave in the SDK (RunState.reject) for calls the daemon asked:
        a rejected call never reaches a guardrail, so its answer is read from the run's approvals."""
        for key, asked in list(self._asked.items()):
            if key[0] != root or _decision(context, asked.call) is not False:
                continue
            del self._asked[key]
            await self._event("approval", asked.place, session_id=asked.call.session_id, approved=False,
                              tool_call_id=asked.call.tool_call_id)

    # -- the guardrails -----------------------------------------------------------------------

    async def _check_call(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        agent = data.agent or context.agent
        scope, place = await self._place(context, getattr(agent, "name", ""))
        assert place is not None  # a tool context always tells its root
        try:
            place, call, before = await self._decide_call(scope, place, context)
        except LoopwardenUnavailable as exc:  # only with fail_open=False
            return ToolGuardrailFunctionOutput.raise_exception(
                output_info={"action": "unavailable", "guarded": False, "message": str(exc)})
        if before.action == "abort":
            return ToolGuardrailFunctionOutput.raise_exception(output_info=before.details())
        if before.action == "block":
            return ToolGuardrailFunctionOutput.reject_content(before.message, output_info=before.details())
        if before.report or before.warning:
            self._pending[context] = (place, call, before)
        # Mark the call's task: a Runner.run inside this call is a child run of this one. The SDK
        # runs the tool in a task copied from this one, and this one ends with the call.
        CURRENT_CALL.set(Frame(place, context.tool_call_id, context))
        return ToolGuardrailFunctionOutput.allow(output_info=before.details())

    async def _decide_call(self, scope: Scope, place: Place,
                           context: ToolContext[Any]) -> tuple[Place, Call, Before]:
        key = (place.root, context.tool_call_id)
        asked = self._asked.pop(key, None)
        if asked is not None:
            # The call the daemon asked about runs: the person approved it (RunState.approve).
            always = _decision(context, asked.call, scope_of=True) == "always"
            answer = await self._event("approval", asked.place, session_id=asked.call.session_id, approved=True,
                                       tool_call_id=asked.call.tool_call_id, scope="always" if always else "once")
            if answer is not None and answer.action is Action.ABORT:  # the run ended meanwhile
                return asked.place, asked.call, Before("abort", message=abort_text(answer), verdict=answer)
            return asked.place, asked.call, Before("run", verdict=asked.verdict, report=True)
        decided = self._decided.pop(key, None)
        if decided is not None:
            return decided.place, decided.call, decided.before
        call = Call(place.run_id, context.tool_name, context.tool_arguments or "", tool_call_id=context.tool_call_id,
                    session_id=scope.session_id)
        return place, call, await self._before(place, call, accepts_ask=False)

    async def _check_outcome(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        pending = self._pending.pop(data.context, None)
        if pending is None:  # unguarded: the daemon was unreachable when it was asked
            return ToolGuardrailFunctionOutput.allow()
        place, call, before = pending
        if not before.report:
            aborted = None
        else:
            # NOTE: the SDK turns a tool's exception into a text result (its failure_error_function)
            # before output guardrails run, so failures are reported as that text, which is what the
            # model reads; identical failures still hash alike.
            verdict = await self._report(place, call, result=result_value(data.output))
            aborted = verdict if verdict is not None and verdict.action is Action.ABORT else None
        if aborted is not None:
            return ToolGuardrailFunctionOutput.raise_exception(output_info=Before("abort", verdict=aborted).details())
        if before.warning:
            if isinstance(data.output, str):
                text = f"{data.output}\n\n{before.warning}" if data.output else before.warning
                return ToolGuardrailFunctionOutput.reject_content(text, output_info=before.details())
            log.warning("loopwarden: %s result is not text; warning not shown to the model", call.tool_name)
        return ToolGuardrailFunctionOutput.allow(output_info=before.details())

    # -- the agent hooks ----------------------------------------------------------------------

    def _agent_started(self, context: RunContextWrapper[Any], agent: Any) -> None:
        scope, base_key, _base = self._base(context)
        scope.started(base_key, agent.name)
        scope.current[base_key] = agent.name

    def _handed_off(self, context: RunContextWrapper[Any], target: Any, source: Any) -> None:
        scope, base_key, _base = self._base(context)
        scope.handed_off(base_key, source.name, target.name)
        scope.current[base_key] = target.name

    async def _model_called(self, context: RunContextWrapper[Any]) -> None:
        scope, base_key, base = self._base(context)
        if base is not None:
            await self._open(scope, context)
            await self._settle(base.root, context)

    async def _model_answered(self, context: RunContextWrapper[Any], agent: Any, response: ModelResponse) -> None:
        """A model response: its text as a `model_output` with its usage (or its usage alone as a
        `usage` event). An ABORT raises RunAborted out of the run; an announced WARN is logged."""
        usage = response.usage
        fields = {"input_tokens": int(usage.input_tokens or 0), "output_tokens": int(usage.output_tokens or 0),
                  "model": agent.model if isinstance(agent.model, str) else ""}
        text, kind = _output_of(response)
        if not (text or fields["input_tokens"] or fields["output_tokens"]):
            return
        if text:
            fields = {**fields, "text": text, "output_kind": kind}
        scope, base_key, base = self._base(context)
        if base is None:
            scope.pending_usage.append((base_key, agent.name, fields))
            return
        if not base_key:
            await self._open(scope, context)
        verdict = await self._event("model_output" if text else "usage", scope.place_in(base_key, base, agent.name),
                                    session_id=scope.session_id, **fields)
        if verdict is not None and _shown(verdict):
            raise RunAborted(verdict)

    # -- the daemon ---------------------------------------------------------------------------

    async def _before(self, place: Place, call: Call, *, accepts_ask: bool) -> Before:
        """May the call run? An ASK (only with accepts_ask) comes back as a block holding the ASK
        verdict. Raises LoopwardenUnavailable only when fail_open is off."""
        client = self._gate._asyncio()
        try:
            verdict = await client.tool_call(place.run_id, call.tool_name, params_json=call.params_json,
                                             tool_call_id=call.tool_call_id, session_id=call.session_id,
                                             accepts_ask=accepts_ask, **place.fields())
        except LoopwardenUnavailable as exc:
            return _unavailable(exc, call, self._gate.settings.fail_open)
        if decide(verdict, can_ask=accepts_ask).effect == "ask":
            return Before("block", message=verdict.message, verdict=verdict)
        before = _decide(verdict, call)
        if before.action == "block":
            await self._report(place, call, result=blocked_tool_result(verdict))
        return before

    async def _report(self, place: Place, call: Call, **outcome: Any) -> Verdict | None:
        try:
            return await self._gate._asyncio().tool_outcome(
                place.run_id, call.tool_name, params_json=call.params_json, tool_call_id=call.tool_call_id,
                session_id=call.session_id, **place.fields(), **outcome)
        except LoopwardenUnavailable as exc:
            # The tool has run (or been refused) already; nothing is left to guard.
            log.warning("loopwarden unavailable, outcome of %s not reported: %s", call.tool_name, exc)
            return None

    async def _event(self, verb: str, place: Place, **fields: Any) -> Verdict | None:
        """A user_turn, usage or approval event of `place`'s run; failures are logged, not raised
        (none of them decides whether a call runs)."""
        try:
            verdict = await getattr(self._gate._asyncio(), verb)(place.run_id, **place.fields(), **fields)
        except LoopwardenUnavailable as exc:
            log.warning("loopwarden unavailable, %s of %s not sent: %s", verb, place.run_id, exc)
            return None
        if verdict.action is Action.REJECT:
            log.warning("loopwarden rejected the %s event of %s (%s): %s", verb, place.run_id, verdict.error_code,
                        verdict.message)
        return verdict


class _ToolGuard:
    """A tool's one pair of loopwarden guardrails, whichever guards protect it: each call goes to
    the guard of its run (_owner_of), else to the guard that protected the tool last."""

    def __init__(self, guard: LoopwardenGuardrails) -> None:
        self.guard = guard
        self.input: ToolInputGuardrail[Any] = ToolInputGuardrail(self._check_call, name="loopwarden")
        self.output: ToolOutputGuardrail[Any] = ToolOutputGuardrail(self._check_outcome, name="loopwarden")

    def of(self, context: RunContextWrapper[Any]) -> LoopwardenGuardrails:
        return _owner_of(context) or self.guard

    async def _check_call(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        return await self.of(data.context)._check_call(data)

    async def _check_outcome(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        return await self.of(data.context)._check_outcome(data)


def _is_loopwardens(guardrail: Any) -> bool:
    owner = getattr(getattr(guardrail, "guardrail_function", None), "__self__", None)
    return isinstance(owner, (LoopwardenGuardrails, _ToolGuard))


class _ApprovalGate:
    """A function tool's `needs_approval` with loopwarden's ASK in front: the tool's own setting
    still asks the person first (loopwarden then decides at the input guardrail, as without ask).
    One per tool; the run's guard asks only when it was made with ask=True."""

    def __init__(self, shared: _ToolGuard, tool: FunctionTool, own: Any) -> None:
        self.shared, self.own = shared, own
        self.owners: set[str] = set()  # the names of the protected agents that have the tool
        self._tool = weakref.ref(tool)

    async def __call__(self, context: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        if self.own is not False:
            # The SDK's own reading of a needs_approval setting: a bool, or a function (maybe async).
            own = self.own if isinstance(self.own, bool) else self.own(context, params, call_id)
            if inspect.isawaitable(own):
                own = await own
            if own:
                return True
        tool = self._tool()
        guard = self.shared.of(context)
        return tool is not None and guard._ask and await guard._needs_approval(self, tool, context, params, call_id)


class _Hooks(AgentHooks[Any]):
    """loopwarden's agent hooks in front of the agent's own (which still run, after them)."""

    def __init__(self, guard: LoopwardenGuardrails, own: Any) -> None:
        self.guard, self.own = guard, own  # guard: the last to protect the agent (see _owner_of)

    def _of(self, context: Any) -> LoopwardenGuardrails:
        return _owner_of(context) or self.guard

    async def on_start(self, context, agent) -> None:
        self._of(context)._agent_started(context, agent)
        if self.own is not None:
            await self.own.on_start(context, agent)

    async def on_end(self, context, agent, output) -> None:
        if self.own is not None:
            await self.own.on_end(context, agent, output)

    async def on_handoff(self, context, agent, source) -> None:
        self._of(context)._handed_off(context, agent, source)
        if self.own is not None:
            await self.own.on_handoff(context, agent, source)

    async def on_tool_start(self, context, agent, tool) -> None:
        if self.own is not None:
            await self.own.on_tool_start(context, agent, tool)

    async def on_tool_end(self, context, agent, tool, result) -> None:
        if self.own is not None:
            await self.own.on_tool_end(context, agent, tool, result)

    async def on_llm_start(self, context, agent, system_prompt, input_items) -> None:
        await self._of(context)._model_called(context)
        if self.own is not None:
            await self.own.on_llm_start(context, agent, system_prompt, input_items)

    async def on_llm_end(self, context, agent, response) -> None:
        await self._of(context)._model_answered(context, agent, response)
        if self.own is not None:
            await self.own.on_llm_end(context, agent, response)


def _shown(verdict: Verdict | None) -> bool:
    """Log the announced warning of a verdict on a model output; True when it ends the run."""
    if verdict is None:
        return False
    decision = decide_output(verdict)
    if decision.effect == "run_with_warning":
        log.warning("loopwarden: %s", decision.text)
    return decision.effect == "end_run"


def _output_of(response: ModelResponse) -> tuple[str, str]:
    """What the model wrote in a response, and its kind: the text of its output messages, a
    `final_answer` when it calls no tool, else a `message` (reasoning items left out)."""
    texts: list[str] = []
    calls = False
    for item in response.output:
        kind = getattr(item, "type", "")
        if kind == "message":
            texts += [getattr(part, "text", "") for part in getattr(item, "content", ())
                      if getattr(part, "type", "") == "output_text"]
        elif kind != "reasoning":
            calls = True  # a function call, a hosted tool's call, a handoff
    return "\n".join(part for part in texts if part).strip(), "message" if calls else "final_answer"


def _bound(table: dict) -> None:
    """Drop the oldest entries past MAX_REMEMBERED (dicts keep insertion order)."""
    while len(table) > MAX_REMEMBERED:
        del table[next(iter(table))]


def _decision(context: RunContextWrapper[Any], call: Call, *, scope_of: bool = False) -> Any:
    """The person's decision on a call as the SDK holds it: True, False or None (undecided); with
    `scope_of`, "always" when it was given for every call of the tool, else "once"."""
    try:
        decision = context.is_tool_approved(call.tool_name, call.tool_call_id)
        if not scope_of:
            return decision
        # NOTE: the SDK says whether a decision is sticky (always_approve) only in its records.
        records = context._approval_records_for_key(call.tool_name, call_id=call.tool_call_id)
        return "always" if any(record.approved is True for record in records) else "once"
    except Exception:  # noqa: BLE001 - an SDK that keeps approvals differently: the cautious answer
        return "once" if scope_of else None
