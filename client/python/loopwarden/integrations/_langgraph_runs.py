"""Which run a LangChain agent or LangGraph tool call belongs to, and where that run sits in its tree.

A sub-agent learns its parent from the call that started it: while a guarded tool runs, the
middleware keeps that call (its run, its id, its tree's root) in a context variable, which
LangChain and LangGraph carry into everything the tool runs (their executors copy the context, as
they do for the RunnableConfig). So a graph invoked inside a guarded tool (an agent used as a
tool, `create_agent` inside a tool) is the child run `<calling run>/<tool call id>`.

A sub-graph that no guarded tool started (a compiled graph added as a node) is told apart by its
checkpoint namespace: a graph's tasks run at namespace `node:task_id` (top-level graph) or
`outer:task_id|node:task_id` (nested), so a graph whose own namespace is not empty is nested. Its
run is `<base run>/<namespace>`, a child of the base run (the configured `run_id`, else the
`thread_id`). The namespace holds the task id, so each invocation of the sub-graph is a run of
its own, and it is the same again when LangGraph re-runs the task (a resumed interrupt).

Top level: the configured `run_id` (a run per invocation, ended with it), else the `thread_id` (the
thread's run, kept across its invocations: each new human message is a `user_turn`), else a new
id per invocation.
"""
from __future__ import annotations

import contextvars
import hashlib
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

NAMESPACE_SEPARATOR = "|"  # LangGraph's NS_SEP: one segment per nested graph


@dataclass(frozen=True, slots=True)
class Place:
    """A run's ids and how long it lives."""

    run_id: str
    parent_run_id: str = ""
    root_run_id: str = ""  # the tree's root, when known (the client routes by it)
    session_id: str = ""  # the thread, when there is one
    per_invocation: bool = True  # ended (run_end) when the invocation that made it ends
    thread_run: bool = False  # the thread's own run: a new human message in it is a user turn

    def ids(self) -> dict[str, str]:
        """The fields every event of the run carries."""
        return {"session_id": self.session_id, "parent_run_id": self.parent_run_id,
                "root_run_id": self.root_run_id}


@dataclass(frozen=True, slots=True)
class Caller:
    """The guarded tool call running now: whatever graph it invokes is a child of its run."""

    run_id: str
    tool_call_id: str
    root_run_id: str
    namespace: str  # the calling tool's checkpoint namespace


CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("loopwarden_langgraph_caller", default=None)


def graph_namespace(checkpoint_ns: str | None) -> str:
    """The namespace of the graph a task belongs to: the task's namespace without its own segment."""
    return (checkpoint_ns or "").rpartition(NAMESPACE_SEPARATOR)[0]


def _configured(run_id: Any, thread_id: Any) -> tuple[str, str, bool] | None:
    """(run id, session id, whether it is the thread's run) from what the invocation was configured with."""
    thread = "" if thread_id is None else str(thread_id)
    if run_id is not None:
        return str(run_id), thread, False
    if thread:
        return thread, thread, True
    return None


def place_of(checkpoint_ns: str | None, run_id: Any, thread_id: Any, *, fallback: str) -> Place:
    """The run of a graph whose task runs at `checkpoint_ns`, invoked with these ids. `fallback`:
    the run id of a top-level graph invoked without either id."""
    thread = "" if thread_id is None else str(thread_id)
    namespace = graph_namespace(checkpoint_ns)
    caller = CALLER.get()
    if caller is not None and namespace.startswith(caller.namespace):
        # Invoked by a guarded tool: a child of the calling run, one per tool call. Graphs nested
        # deeper inside it (sub-graph nodes of the graph the tool ran) stay in that child's name.
        deeper = namespace[len(caller.namespace):].lstrip(NAMESPACE_SEPARATOR)
        child = f"{caller.run_id}/{caller.tool_call_id or caller.namespace}"
        return Place(f"{child}/{deeper}" if deeper else child, parent_run_id=caller.run_id,
                     root_run_id=caller.root_run_id, session_id=thread)
    configured = _configured(run_id, thread_id)
    if namespace and configured is not None:
        # A sub-graph run as a node: nested graphs inherit the thread id (never the run id, which
        # LangChain gives each invocation), so the base is the thread's run.
        base = configured[0]
        return Place(f"{base}/{namespace}", parent_run_id=base, root_run_id=base, session_id=thread)
    if configured is not None:
        run, session, thread_run = configured
        return Place(run, session_id=session, per_invocation=not thread_run, thread_run=thread_run)
    return Place(fallback, session_id=thread)


def fresh_run_id() -> str:
    return f"langchain-{uuid.uuid4().hex}"


def stable_seq(*parts: str) -> int:
    """A seq that is the same each time LangGraph runs the same task again (a resumed interrupt, a
    retried node): the daemon answers a resent event (same seq, same content) with its first
    verdict and changes nothing, so a re-run neither counts a call twice nor asks twice. In
    [2^62, 2^63): apart from the client's own counter."""
    digest = hashlib.blake2b("\x00".join(parts).encode(), digest_size=8).digest()
    return (1 << 62) | (int.from_bytes(digest, "big") >> 2)


class PromptMemory:
    """The latest human message each thread run was seen with (a bare ToolNode has no state of
    its own to keep it in): a new one is a user turn. Bounded; forgotten runs start again silently."""

    def __init__(self, capacity: int = 4096) -> None:
        self._prompts: OrderedDict[str, str] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def changed(self, run_id: str, prompt_id: str) -> bool:
        """Note the run's latest prompt; True when it replaced another (a new turn), not on first sight."""
        with self._lock:
            before = self._prompts.get(run_id)
            self._prompts[run_id] = prompt_id
            self._prompts.move_to_end(run_id)
            while len(self._prompts) > self._capacity:
                self._prompts.popitem(last=False)
        return before is not None and before != prompt_id
