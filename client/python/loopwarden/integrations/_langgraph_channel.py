"""The events the LangChain/LangGraph adapter sends, with what `_gate.Gate` leaves out: the run's
place in its tree (parent, root), `accepts_ask`, and seqs that stay the same when LangGraph runs a
task again (so a resumed interrupt re-sends its call as a retry: it is neither counted nor asked
twice). The policy is the gate's (`_gate._decide`): only the ASK is this adapter's own, because
only it can hold a call for a person (an interrupt).

Every verb goes through the gate's clients (one blocking, one asyncio per loop), so one
middleware holds one connection whatever it sends.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, cast

from ..guard_policy import abort_text, decide
from ..runner import blocked_tool_result
from ..types import Action, LoopwardenUnavailable, Verdict
from ._gate import Before, Call, Gate, _abort_of, _decide, _unavailable
from ._langgraph_ask import Answer, declined_message
from ._langgraph_runs import Place, stable_seq

log = logging.getLogger("loopwarden.integrations")


@dataclass(frozen=True, slots=True)
class GuardedCall:
    """One tool call of a LangGraph task, as every event about it spells it."""

    place: Place
    tool_name: str
    params_json: str
    tool_call_id: str = ""
    task: str = ""  # the task's checkpoint namespace: with the call id, the same when the task runs again
    accepts_ask: bool = False  # the graph can interrupt (it has a checkpointer) and the middleware asks

    def gate_call(self) -> Call:
        return Call(self.place.run_id, self.tool_name, self.params_json, tool_call_id=self.tool_call_id,
                    session_id=self.place.session_id)

    def fields(self, kind: str) -> dict[str, Any]:
        # A call without an id gets the client's next seq: two such calls of one task with the same
        # arguments would otherwise be one event to the daemon (a re-run then counts again).
        seq = stable_seq(kind, self.place.run_id, self.task, self.tool_call_id) if self.tool_call_id else None
        return {"tool_call_id": self.tool_call_id, "accepts_ask": self.accepts_ask, **self.place.ids(), "seq": seq}

    def call_kwargs(self) -> dict[str, Any]:
        return {"params_json": self.params_json, **self.fields("tool_call")}

    def outcome_kwargs(self, **outcome: Any) -> dict[str, Any]:
        return {"params_json": self.params_json, **self.fields("tool_outcome"), **outcome}

    def approval_kwargs(self, verdict: Verdict, answer: Answer) -> dict[str, Any]:
        fields = self.fields("approval")
        return {**fields, "approved": answer.approved, "scope": answer.scope, "ttl_seconds": answer.ttl_seconds,
                "decision_id": "" if fields["tool_call_id"] else verdict.decision_id}


def asked(verdict: Verdict, call: GuardedCall) -> Before | None:
    """An ASK the adapter can put to a person (an interrupt); None for every other verdict."""
    decision = decide(verdict, can_ask=call.accepts_ask)
    if decision.effect == "ask":
        return Before("ask", message=decision.text, verdict=verdict)
    return None


def _answered(verdict: Verdict | None, call: GuardedCall, answer: Answer, asked_verdict: Verdict) -> Before:
    """What to do once the person answered and the daemon heard it."""
    if verdict is not None and verdict.action is Action.ABORT:
        return Before("abort", message=abort_text(verdict), verdict=verdict)
    if verdict is not None and verdict.action is Action.REJECT:
        # The ask had timed out (or was answered elsewhere): the person's word still decides.
        log.warning("loopwarden rejected the approval of %s (%s): %s", call.tool_name, verdict.error_code,
                    verdict.message)
    if not answer.approved:
        return Before("block", message=declined_message(asked_verdict), verdict=asked_verdict)
    return Before("run", verdict=asked_verdict, report=True)


class Channel:
    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    # NOTE: the gate's clients are reached through its own (private) accessors, so this adapter and
    # the gate share one connection and one tree memory (RunTrees) per middleware.

    def _client(self):
        return self.gate._blocking()

    def _aclient(self):
        return self.gate._asyncio()

    # -- blocking -----------------------------------------------------------------------------

    def before(self, call: GuardedCall) -> Before:
        client = self._client()
        try:
            verdict = client.tool_call(call.place.run_id, call.tool_name, **call.call_kwargs())
        except LoopwardenUnavailable as exc:
            return _unavailable(exc, call.gate_call(), self.gate.settings.fail_open)
        ask = asked(verdict, call)
        if ask is not None:
            return ask
        before = _decide(verdict, call.gate_call())
        if before.action == "block":
            self._send(client.tool_outcome, call, **call.outcome_kwargs(result=blocked_tool_result(verdict)))
        return before

    def answer(self, call: GuardedCall, asked_before: Before, answer: Answer) -> Before:
        asked_verdict = cast(Verdict, asked_before.verdict)  # an "ask" Before always holds its ASK
        verdict = self._send(self._client().approval, call, **call.approval_kwargs(asked_verdict, answer))
        return _answered(verdict, call, answer, asked_verdict)

    def after(self, call: GuardedCall, before: Before, **outcome: Any) -> Verdict | None:
        if not before.report:
            return None
        verdict = self._send(self._client().tool_outcome, call, **call.outcome_kwargs(**outcome))
        return None if verdict is None else _abort_of(verdict)

    def event(self, verb: str, place: Place, key: str, **fields: Any) -> Verdict | None:
        """A run-level event (`usage`, `user_turn`, `run_end`); `key` names it across re-runs."""
        try:
            return getattr(self._client(), verb)(place.run_id, **place.ids(), seq=stable_seq(verb, place.run_id, key),
                                                 **fields)
        except LoopwardenUnavailable as exc:
            log.warning("loopwarden unavailable, %s of %s not sent: %s", verb, place.run_id, exc)
            return None

    @staticmethod
    def _send(verb, call: GuardedCall, **fields: Any) -> Verdict | None:
        try:
            if "params_json" in fields:
                return verb(call.place.run_id, call.tool_name, **fields)
            return verb(call.place.run_id, **fields)
        except LoopwardenUnavailable as exc:
            # The tool has run (or been refused) already; nothing is left to guard.
            log.warning("loopwarden unavailable, %s of %s not reported: %s", verb.__name__, call.tool_name, exc)
            return None

    # -- asyncio ------------------------------------------------------------------------------

    async def abefore(self, call: GuardedCall) -> Before:
        client = self._aclient()
        try:
            verdict = await client.tool_call(call.place.run_id, call.tool_name, **call.call_kwargs())
        except LoopwardenUnavailable as exc:
            return _unavailable(exc, call.gate_call(), self.gate.settings.fail_open)
        ask = asked(verdict, call)
        if ask is not None:
            return ask
        before = _decide(verdict, call.gate_call())
        if before.action == "block":
            await self._asend(client.tool_outcome, call, **call.outcome_kwargs(result=blocked_tool_result(verdict)))
        return before

    async def aanswer(self, call: GuardedCall, asked_before: Before, answer: Answer) -> Before:
        asked_verdict = cast(Verdict, asked_before.verdict)  # an "ask" Before always holds its ASK
        verdict = await self._asend(self._aclient().approval, call, **call.approval_kwargs(asked_verdict, answer))
        return _answered(verdict, call, answer, asked_verdict)

    async def aafter(self, call: GuardedCall, before: Before, **outcome: Any) -> Verdict | None:
        if not before.report:
            return None
        verdict = await self._asend(self._aclient().tool_outcome, call, **call.outcome_kwargs(**outcome))
        return None if verdict is None else _abort_of(verdict)

    async def aevent(self, verb: str, place: Place, key: str, **fields: Any) -> Verdict | None:
        try:
            return await getattr(self._aclient(), verb)(place.run_id, **place.ids(),
                                                        seq=stable_seq(verb, place.run_id, key), **fields)
        except LoopwardenUnavailable as exc:
            log.warning("loopwarden unavailable, %s of %s not sent: %s", verb, place.run_id, exc)
            return None

    @staticmethod
    async def _asend(verb, call: GuardedCall, **fields: Any) -> Verdict | None:
        try:
            if "params_json" in fields:
                return await verb(call.place.run_id, call.tool_name, **fields)
            return await verb(call.place.run_id, **fields)
        except LoopwardenUnavailable as exc:
            log.warning("loopwarden unavailable, %s of %s not reported: %s", verb.__name__, call.tool_name, exc)
            return None

