"""Which loopwarden run an OpenAI Agents SDK event belongs to: bookkeeping only, no I/O.

A `Runner.run` is one **scope**. Its root run id is the run's trace id; with tracing off, the
`RunConfig.group_id`; without either, one made per scope. Inside a scope:

- an agent reached by a **handoff** is a child run of the agent that handed off to it
  (`<source's run>/<target agent's name>`), fixed the first time it is reached: handing back and
  forth moves between the same runs;
- a `Runner.run` started **inside a guarded tool call** (`Agent.as_tool`, or a function tool of
  your own that runs an agent) is a child run of the calling agent's run
  (`<caller's run>/<tool call id>`): the input guardrail that lets the call run marks the call's
  asyncio task, and the SDK runs the tool in a task copied from it.

NOTE: the SDK names no run. Two things of it are used as identities: the `Usage` object, which the
SDK makes per `Runner.run` and hands to every context of that run (and to the agents it runs as
tools, which is why those are told apart by the call's task mark, not by their Usage); and the
running task's context variables, which the SDK's own tracing also relies on.
"""
from __future__ import annotations

import asyncio
import contextvars
import uuid
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

# A scope's usage, buffered until its root run is known (a model response can come before the
# first tool call, which is the first event that can see the RunConfig's group id).
PendingUsage = tuple[str, str, dict[str, Any]]  # (base key, agent name, usage fields and the response's text)

# How many root runs, handoff tables and unanswered asks a guard remembers (the oldest go first).
MAX_REMEMBERED = 4096


@dataclass(frozen=True, slots=True)
class Place:
    """A run in a tree: its id, its parent's ("" for a root) and its root's."""

    run_id: str
    parent_run_id: str = ""
    root_run_id: str = ""

    @property
    def root(self) -> str:
        return self.root_run_id or self.run_id

    def child(self, name: str) -> Place:
        return Place(f"{self.run_id}/{name}", self.run_id, self.root)

    def fields(self) -> dict[str, Any]:
        """The client verbs' keyword arguments that place an event in its tree."""
        return {"parent_run_id": self.parent_run_id, "root_run_id": self.root}


@dataclass(frozen=True, slots=True)
class Frame:
    """A guarded tool call that is running: the run of the agent that made it, and its tool context
    (the call's own output guardrail sees the same context, and belongs to the caller)."""

    place: Place
    call_id: str
    context: Any


CURRENT_CALL: contextvars.ContextVar[Frame | None] = contextvars.ContextVar("loopwarden_agents_call", default=None)


@dataclass(eq=False)
class Scope:
    """One Runner.run, with the agents it runs as tools."""

    root: Place | None = None
    session_id: str = ""
    opened: bool = False  # the root's opening events (user turn, settled asks, buffered usage) are sent
    opening: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Per base run (key "" for the scope's own root, a child's run id for an agent run as a tool):
    # each agent's name -> the name of the agent that handed off to it ("": it runs in the base run).
    handoffs: dict[str, dict[str, str]] = field(default_factory=dict)
    current: dict[str, str] = field(default_factory=dict)  # base key -> the agent running there now
    pending_usage: list[PendingUsage] = field(default_factory=list)

    def handed_off(self, base_key: str, source: str, target: str) -> None:
        """`source` handed off to `target`: target's run is a child of source's, unless it already
        has a run in this base (a run's parent is fixed by its first event)."""
        agents = self.handoffs.setdefault(base_key, {})
        agents.setdefault(source, "")
        if target not in agents:
            agents[target] = source

    def started(self, base_key: str, agent: str) -> None:
        """`agent` runs in this base: when no handoff placed it, it is the base run's own agent."""
        self.handoffs.setdefault(base_key, {}).setdefault(agent, "")

    def place_in(self, base_key: str, base: Place, agent: str) -> Place:
        agents = self.handoffs.get(base_key, {})
        chain: list[str] = []
        while agents.get(agent):  # sources are always entered before their targets: no cycles
            chain.append(agent)
            agent = agents[agent]
        place = base
        for name in reversed(chain):
            place = place.child(name)
        return place


class Scopes:
    """A Scope per live `Usage` object, and the root run ids earlier scopes had (a later scope on one
    of them is a new user turn of that run)."""

    def __init__(self) -> None:
        self._scopes: dict[int, tuple[weakref.ref, Scope]] = {}
        self._roots: OrderedDict[str, None] = OrderedDict()

    def of(self, usage: object) -> Scope:
        # NOTE: looked up by id(); the entry is dropped by the weakref callback before the address
        # can be reused.
        key = id(usage)
        held = self._scopes.get(key)
        if held is not None and held[0]() is usage:
            return held[1]
        scope = Scope()
        def forget(_ref: weakref.ref) -> None:
            self._scopes.pop(key, None)

        self._scopes[key] = (weakref.ref(usage, forget), scope)
        return scope

    def owns(self, usage: object) -> bool:
        """Whether a scope of this `Usage` (a Runner.run this guard has seen) is live here."""
        held = self._scopes.get(id(usage))
        return held is not None and held[0]() is usage

    def seen_before(self, root_run_id: str) -> bool:
        """Whether an earlier scope had this root; remembers it either way (bounded)."""
        seen = root_run_id in self._roots
        self._roots[root_run_id] = None
        self._roots.move_to_end(root_run_id)
        while len(self._roots) > MAX_REMEMBERED:
            self._roots.popitem(last=False)
        return seen


def generated_run_id() -> str:
    return f"agents-run-{uuid.uuid4().hex}"
