"""Which of Claude Code's calls the hook endpoint answered `permissionDecision: "ask"`, so that the
call's later PostToolUse (it ran: the person approved it once) or PermissionDenied (denied) is sent
to the daemon as the `approval` of that ask, ahead of the hook's own event. A call that was never
asked sends no approval (no REJECT `no_pending_ask` for every outcome).

Claude Code reports many denials with no hook at all: a headless `claude -p` that cannot put the
question, `--permission-mode dontAsk`, a permission tool answering no, an interactive "No". So an
ask also ends, as declined, when its run shows it has moved on without running the call
(`unanswered`): the run's batch ended (PostToolBatch: every call of the turn resolved, and an
approved one would have sent its PostToolUse first), a new prompt came, a call of another batch is
about to run, or the same call (tool and input) is asked again. Another call of the asked one's own
batch proves nothing: Claude Code may check a turn's calls while the person still looks at the
prompt; so without batch ids (a host with no batch ends, a thread whose batches are off) only the
same call asked again, a batch end or a new prompt does.

Held in memory per (tenant, session), for at most MAX_SESSIONS sessions and MAX_PER_SESSION asked
calls each (the least recently used go first); SessionEnd frees a session. An ask forgotten that
way (or by a daemon restart) gets no approval: the daemon's `loopwarden.askTimeoutSeconds` then
counts it as a denial. The endpoint uses it from the daemon's event loop; every change still
holds a lock, so a caller on another thread is safe too.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from loopwarden.hooks.driver import Call

MAX_SESSIONS = 10_000
MAX_PER_SESSION = 256


class HookAsks:
    """The asked, not yet settled calls of each (tenant, session): (run id, tool_use_id) -> the
    batch id the call was sent with ("": none known) and its call (tool name, input)."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, max_per_session: int = MAX_PER_SESSION) -> None:
        if max_sessions < 1 or max_per_session < 1:
            raise ValueError("max_sessions and max_per_session must be at least 1")
        self._max_sessions = max_sessions
        self._max_per_session = max_per_session
        self._sessions: OrderedDict[tuple[str, str], OrderedDict[tuple[str, str], tuple[str, Call | None]]] = (
            OrderedDict())
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return sum(len(calls) for calls in self._sessions.values())

    def asked(self, tenant: str, session_id: str, run_id: str, tool_call_id: str, batch_id: str = "",
              call: Call | None = None) -> None:
        with self._lock:
            key = (tenant, session_id)
            calls = self._sessions.get(key)
            if calls is None:
                calls = self._sessions[key] = OrderedDict()
                while len(self._sessions) > self._max_sessions:
                    self._sessions.popitem(last=False)
            else:
                self._sessions.move_to_end(key)
            calls[(run_id, tool_call_id)] = (batch_id, call)
            calls.move_to_end((run_id, tool_call_id))
            while len(calls) > self._max_per_session:
                calls.popitem(last=False)

    def settle(self, tenant: str, session_id: str, run_id: str, tool_call_id: str) -> bool:
        """Forget the call; True when it had been asked (and not yet settled)."""
        with self._lock:
            calls = self._sessions.get((tenant, session_id))
            if calls is None or (run_id, tool_call_id) not in calls:
                return False
            del calls[(run_id, tool_call_id)]
            if not calls:
                del self._sessions[(tenant, session_id)]
            return True

    def unanswered(self, tenant: str, session_id: str, run_id: str, *, tool_call_id: str = "",
                   batch_id: str | None = None, call: Call | None = None) -> list[str]:
        """Forget and name the asks of `run_id` that a later hook of the run shows were declined:
        every one (`batch_id` None: the run's batch ended, or a new prompt came), or, before the
        call `tool_call_id` (`call`: its tool name and input) of batch `batch_id` runs, each of
        another id that is the same call or of another batch (both batches known: without them, a
        call of the same turn cannot be told from the next turn's)."""
        with self._lock:
            key = (tenant, session_id)
            calls = self._sessions.get(key)
            if calls is None:
                return []
            declined = [asked for (run, asked), (batch, pattern) in calls.items()
                        if run == run_id and asked != tool_call_id
                        and (batch_id is None or (batch and batch_id and batch != batch_id)
                             or (call is not None and pattern == call))]
            for asked in declined:
                del calls[(run_id, asked)]
            if not calls:
                del self._sessions[key]
            return declined

    def end_session(self, tenant: str, session_id: str) -> None:
        with self._lock:
            self._sessions.pop((tenant, session_id), None)

    def of(self, tenant: str) -> TenantAsks:
        """The asks of one tenant, as the hook driver reads them (loopwarden.hooks.driver.AskedCalls)."""
        return TenantAsks(self, tenant)


class TenantAsks:
    """One tenant's view of HookAsks: the hook driver's asked-call store on the HTTP endpoint."""

    def __init__(self, asks: HookAsks, tenant: str) -> None:
        self._asks = asks
        self._tenant = tenant

    def asked(self, session_id: str, run_id: str, tool_call_id: str, batch_id: str, call: Call | None) -> None:
        self._asks.asked(self._tenant, session_id, run_id, tool_call_id, batch_id, call)

    def settle(self, session_id: str, run_id: str, tool_call_id: str) -> bool:
        return self._asks.settle(self._tenant, session_id, run_id, tool_call_id)

    def unanswered(self, session_id: str, run_id: str, *, tool_call_id: str = "", batch_id: str | None = None,
                   call: Call | None = None) -> list[str]:
        return self._asks.unanswered(self._tenant, session_id, run_id, tool_call_id=tool_call_id, batch_id=batch_id,
                                     call=call)

    def end_session(self, session_id: str) -> None:
        self._asks.end_session(self._tenant, session_id)
