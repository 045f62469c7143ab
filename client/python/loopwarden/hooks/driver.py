"""The flow around one hook, written once for every caller: the daemon's HTTP endpoint
(loopwarden_server.hook_endpoint) and the command form (`loopwarden hook`, cli).

Sans I/O: the caller sends the events and gets the verdicts its own way (async on the daemon's
loop, a blocking gRPC client in the command), and the driver says what to send and what to answer:

1. `to_send(request, asks)`: the approvals to send ahead of the hook's own event — the person's
   answers to asks this caller made (the asked call ran: approved once; the host reported its
   denial: denied), and the asks the hook shows the run has moved on from (declined) — then the
   hook's event;
2. `decided(request, verdict, asks)`: the hook's answer, with an ASK remembered for the call's
   later hooks (or, when it cannot be remembered, denied instead), and after a BLOCK the blocked
   call's outcome to report, so the run's history holds the blocked call like the tool guard's.

The asked calls live in the caller's store behind `AskedCalls`: the endpoint's memory
(loopwarden_server.hook_asks, per tenant) or the command form's marker files (asked_calls, per
daemon address), each bound to its scope.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..eventformat import EventRecord
from .protocol import HookRequest, VerdictLike, answer, unremembered_ask_answer

# A call as the host named it: (tool name, input as JSON text).
Call = tuple[str, str]


class AskedCalls(Protocol):
    """The asks of one caller's scope not yet answered, by (session, run, call id)."""

    def asked(self, session_id: str, run_id: str, tool_call_id: str, batch_id: str, call: Call | None) -> None:
        """Remember an asked call. OSError when it cannot be remembered (the call must then not be
        asked: the person's approval would be lost)."""

    def settle(self, session_id: str, run_id: str, tool_call_id: str) -> bool:
        """Forget the call; True when it had been asked (and not yet settled)."""

    def unanswered(self, session_id: str, run_id: str, *, tool_call_id: str = "", batch_id: str | None = None,
                   call: Call | None = None) -> list[str]:
        """Forget and name the run's asks a later hook shows were declined: every one
        (`batch_id` None), or, before the call `tool_call_id` (`call`) of batch `batch_id` runs,
        each of another id that is the same call or (both batches known) of another batch."""

    def end_session(self, session_id: str) -> None:
        """Forget the session's asks."""


def approvals(request: HookRequest, asks: AskedCalls) -> tuple[EventRecord, ...]:
    """The approvals to send ahead of the hook's event: the asks of its run it shows were declined,
    then its call's, when that was asked. A session's end forgets the session's asks."""
    if request.ends_session:
        asks.end_session(request.session_id)
    if not request.host.can_ask or request.run is None:
        return ()
    run_id = request.run.run_id
    if request.declines_every_ask:
        declined = asks.unanswered(request.session_id, run_id)
    elif request.call is not None and request.event is not None:
        declined = asks.unanswered(request.session_id, run_id, tool_call_id=request.tool_call_id,
                                   batch_id=request.event.batch_id, call=request.call)
    else:
        declined = []
    out = request.declined(declined)
    settled = request.settles_ask
    if settled is not None and asks.settle(request.session_id, run_id, request.tool_call_id):
        out += (request.approval(settled),)
    return out


def to_send(request: HookRequest, asks: AskedCalls) -> tuple[EventRecord, ...]:
    """Everything to send for this hook, in order: `approvals`, then the hook's own event."""
    return request.events(*approvals(request, asks))


@dataclass(frozen=True, slots=True)
class Decided:
    """The hook's answer, and what else the caller has to do."""

    answer: dict[str, Any]
    blocked: EventRecord | None = None  # the blocked call's outcome, to send after answering
    unremembered: OSError | None = None  # an ASK the store could not keep: denied instead (say why)


def decided(request: HookRequest, verdict: VerdictLike | None, asks: AskedCalls, *, fail_closed: bool = False,
            store: str = "the asked-call store") -> Decided:
    """The answer to the hook given the verdict on its event (None: it had none). `store` names
    the asked-call store in the answer when it fails."""
    if verdict is None:
        return Decided(answer(request, None))
    if request.asked(verdict) and request.run is not None and request.event is not None:
        try:
            asks.asked(request.session_id, request.run.run_id, request.tool_call_id, request.event.batch_id,
                       request.call)
        except OSError as exc:
            return Decided(unremembered_ask_answer(verdict, f"{store} is not writable", request.host),
                           unremembered=exc)
    return Decided(answer(request, verdict, fail_closed=fail_closed), request.blocked_outcome(verdict))
