"""What a verdict does to the agent: the one mapping every Python tool guard follows.

A guard (the tool guard in `loopwarden.runner`, the framework adapters' gate, the MCP proxy) turns
the daemon's verdict on a call into one of five effects on the agent:

- `run`: the call runs and the agent is told nothing (ALLOW, an unannounced WARN, a REJECT);
- `run_with_warning`: it runs, and the warning's text goes where the model (or the person) reads it
  (an announced WARN: spec section 6 announces a pattern once per decade of repeats);
- `refuse`: it does not run; the model reads the message as the call's result, and the blocked
  result is reported as the call's outcome so the run's history holds it (BLOCK, and an ASK that
  no person can answer, which is the BLOCK it stands for);
- `ask`: the call is held for a person, who reads the message (an ASK the guard can put to one);
- `end_run`: the run is over; the text is the message, or the error code when there is none (ABORT).

The same table, as language-neutral data, is `tests/conformance/guard/policy.json`: the Python,
Node, Go, hook and OpenClaw guards are all checked against it, so a guard that maps a verdict
differently fails there instead of drifting. Change the mapping here and in that table together.

A verdict on what the model wrote or on a compaction has no call to act on: `decide_output` is its
mapping (three of the five effects), and the table's `outputs` scenarios are its data.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from .types import Action

Effect = Literal["run", "run_with_warning", "refuse", "ask", "end_run"]


class VerdictView(Protocol):
    """What the mapping reads of a verdict: the client's `loopwarden.Verdict`, or any verdict
    whose `action` is an Action or its plain name ("allow" … "reject")."""

    @property
    def action(self) -> Any: ...
    @property
    def message(self) -> str: ...
    @property
    def announce(self) -> bool: ...
    @property
    def error_code(self) -> str: ...


@dataclass(frozen=True, slots=True)
class GuardDecision:
    """One verdict's effect on the agent. `text`: what the agent (or the person) reads; empty for
    `run`. `judged`: False for a REJECT, which judged nothing, so the daemon has no call to pair an
    outcome with and the guard runs the call unguarded."""

    effect: Effect
    text: str = ""
    judged: bool = True

    @property
    def reports_refusal(self) -> bool:
        """A refused call is reported with the blocked result the model got instead of running it."""
        return self.effect == "refuse"


def abort_text(verdict: VerdictView) -> str:
    """What the person is told when a run ends: the message; the code only when there is none
    (the code is for machines: logs, metrics, the decision log)."""
    return verdict.message or verdict.error_code


def decide(verdict: VerdictView, *, can_ask: bool) -> GuardDecision:
    """The effect of `verdict` on a call. `can_ask`: the guard can hold the call for a person (its
    event said accepts_ask); without one an ASK is the BLOCK it stands for. An action this client
    does not know is read as BLOCK when the verdict is decoded (`_wire`), so it never gets here."""
    action = Action(getattr(verdict.action, "value", verdict.action))
    if action is Action.ABORT:
        return GuardDecision("end_run", abort_text(verdict))
    if action is Action.ASK and can_ask:
        return GuardDecision("ask", verdict.message)
    if action in (Action.BLOCK, Action.ASK):
        return GuardDecision("refuse", verdict.message)
    if action is Action.REJECT:
        return GuardDecision("run", judged=False)
    if action is Action.WARN and verdict.announce:
        return GuardDecision("run_with_warning", verdict.message)
    return GuardDecision("run")


def decide_output(verdict: VerdictView) -> GuardDecision:
    """The effect of `verdict` on what the model wrote (a `model_output`) or on a compaction
    (`compaction_retry`): there is no call to refuse or to hold, so there are three effects. ABORT
    ends the run (`end_run`); an announced WARN is shown (`run_with_warning`: to the person, and to
    the model where the place can tell it without keeping a turn going); a BLOCK or an ASK, which
    these events' detectors do not give but a run's other rules may (a budget spent by an output's
    usage), is shown as a warning too, its critical text telling what the run's next call will
    meet; anything else says nothing. The table is `policy.json`'s `outputs`."""
    action = Action(getattr(verdict.action, "value", verdict.action))
    if action is Action.ABORT:
        return GuardDecision("end_run", abort_text(verdict))
    if action in (Action.BLOCK, Action.ASK) or (action is Action.WARN and verdict.announce):
        return GuardDecision("run_with_warning", verdict.message)
    if action is Action.REJECT:
        return GuardDecision("run", judged=False)
    return GuardDecision("run")
