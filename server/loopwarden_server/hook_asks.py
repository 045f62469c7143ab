"""Which of Claude Code's calls the hook endpoint answered `permissionDecision: "ask"`, so that the
call's later PostToolUse (it ran: the person approved it once) or PermissionDenied (denied) is sent
to the daemon as the `approval` of that ask, ahead of the hook's own event. A call that was never
asked sends no approval (no REJECT `no_pending_ask` for every outcome).

Held in memory per (tenant, session), for at most MAX_SESSIONS sessions and MAX_PER_SESSION asked
calls each (the least recently used go first); SessionEnd frees a session. An ask forgotten that
way (or by a daemon restart) gets no approval: the daemon's `loopwarden.askTimeoutSeconds` then
counts it as a denial. The endpoint uses it from the daemon's event loop; every change still
holds a lock, so a caller on another thread is safe too.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

MAX_SESSIONS = 10_000
MAX_PER_SESSION = 256


class HookAsks:
    """The asked, not yet settled calls of each (tenant, session): (run id, tool_use_id)."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, max_per_session: int = MAX_PER_SESSION) -> None:
        if max_sessions < 1 or max_per_session < 1:
            raise ValueError("max_sessions and max_per_session must be at least 1")
        self._max_sessions = max_sessions
        self._max_per_session = max_per_session
        self._sessions: OrderedDict[tuple[str, str], OrderedDict[tuple[str, str], None]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return sum(len(calls) for calls in self._sessions.values())

    def asked(self, tenant: str, session_id: str, run_id: str, tool_call_id: str) -> None:
        with self._lock:
            key = (tenant, session_id)
            calls = self._sessions.get(key)
            if calls is None:
                calls = self._sessions[key] = OrderedDict()
                while len(self._sessions) > self._max_sessions:
                    self._sessions.popitem(last=False)
            else:
                self._sessions.move_to_end(key)
            calls[(run_id, tool_call_id)] = None
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

    def end_session(self, tenant: str, session_id: str) -> None:
        with self._lock:
            self._sessions.pop((tenant, session_id), None)
