"""Claude Code's parallel batches on the hook endpoint: every PreToolUse between two PostToolBatch
hooks of a session is sent with the same `ToolCall.batch_id` (loopwarden.parallelBatches), so a
turn's fan-out of distinct calls is one step of argumentChurn and the run-wide breaker, and
identical calls of one turn count once.

The batch id is the `tool_use_id` of the batch's first PreToolUse: unique per call, so a batch id
never collides with an earlier one of the run, not even after a daemon restart (a counter would
start again at 1 and join an old batch).

A batch has at most MAX_BATCH calls (the engine's cap). A thread of a session (the main thread, or
a subagent, whose turns are batches of their own ended by their own PostToolBatch) that has never
ended a batch may belong to a host that never sends PostToolBatch (a Claude Code too old for it, a
hook setup that does not register it): there, no batch would ever end and a loop of identical
calls would count once per batch. So such a thread's first batch is on probation: when it
outgrows MAX_BATCH calls, or repeats a call it already holds (same tool, same input: what a loop
does, and what a fan-out does not), that call and the thread's later ones are sent without a batch
id (judged as before: call by call, plus the engine's own grouping of calls issued while earlier
ones are pending) until a PostToolBatch of it arrives. A distinct fan-out in a session's first
turn is grouped at once; a loop at its start is counted from its first repeat.

Held in memory, for at most MAX_SESSIONS sessions (the least recently used go first); SessionEnd
frees a session. The endpoint uses it from the daemon's event loop; every change still holds a
lock, so a caller on another thread is safe too.
"""
from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

MAX_SESSIONS = 10_000
MAX_BATCH = 64  # the engine's cap on one batch (core/src/engine/batches.rs)


@dataclass(slots=True)
class _Thread:
    """The batches of one thread of a session (main thread or subagent)."""

    batch: str = ""  # the open batch's id ("": between batches)
    calls: int = 0  # calls in the open batch
    ended_one: bool = False  # a PostToolBatch of this thread has been seen: batch ends do come
    unbatched: bool = False  # its first batch failed probation: no batch ids until a PostToolBatch
    probation: set[int] = field(default_factory=set)  # the first batch's calls (hashes), before any batch end
    ids: set[str] = field(default_factory=set)  # the open batch's tool_use_ids


class HookBatches:
    """The open batch of each (tenant, session, subagent)."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
        self._max_sessions = max_sessions
        # (tenant, session id) -> {subagent ("" = main thread): its batches}
        self._sessions: OrderedDict[tuple[str, str], dict[str, _Thread]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def _thread(self, tenant: str, session_id: str, subagent: str) -> _Thread:
        """The thread's state, created if new; the session becomes the most recently used. Under the lock."""
        key = (tenant, session_id)
        threads = self._sessions.get(key)
        if threads is None:
            threads = self._sessions[key] = {}
            while len(self._sessions) > self._max_sessions:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(key)
        thread = threads.get(subagent)
        if thread is None:
            thread = threads[subagent] = _Thread()
        return thread

    def call(self, tenant: str, session_id: str, subagent: str, tool_use_id: str, tool_call: tuple[str, str]) -> str:
        """The batch id of a PreToolUse ("": none). `tool_call`: its (tool name, input as JSON text)."""
        with self._lock:
            thread = self._thread(tenant, session_id, subagent)
            if thread.unbatched:
                return ""
            if tool_use_id and tool_use_id in thread.ids:
                # The same call delivered again (two hook setups, a retried hook): no second call
                # of the batch, and no repeat for probation. The engine answers it as a retry.
                return thread.batch
            if not thread.batch:
                # A PreToolUse always has a tool_use_id; without one, an id no other batch has.
                thread.batch, thread.calls = tool_use_id or f"batch-{uuid.uuid4().hex}", 0
                thread.ids.clear()
            thread.calls += 1
            if tool_use_id:
                thread.ids.add(tool_use_id)
            if not thread.ended_one:
                key = hash(tool_call)
                if thread.calls > MAX_BATCH or key in thread.probation:
                    thread.batch, thread.unbatched = "", True
                    thread.probation.clear()
                    return ""
                thread.probation.add(key)
            return thread.batch

    def end_batch(self, tenant: str, session_id: str, subagent: str) -> None:
        """PostToolBatch: the thread's next PreToolUse starts a new batch."""
        with self._lock:
            thread = self._thread(tenant, session_id, subagent)
            thread.batch, thread.calls, thread.ended_one, thread.unbatched = "", 0, True, False
            thread.probation.clear()
            thread.ids.clear()

    def end_subagent(self, tenant: str, session_id: str, subagent: str) -> None:
        """SubagentStop: the subagent's batches are forgotten (its session's stay)."""
        with self._lock:
            threads = self._sessions.get((tenant, session_id))
            if threads is not None:
                threads.pop(subagent, None)
                if not threads:
                    del self._sessions[(tenant, session_id)]

    def end_session(self, tenant: str, session_id: str) -> None:
        """SessionEnd: the session and its subagents are forgotten."""
        with self._lock:
            self._sessions.pop((tenant, session_id), None)
