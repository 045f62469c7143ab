"""Which of Claude Code's calls were held for the person (answered `permissionDecision: "ask"`), for
the command form (`loopwarden hook`), which runs once per hook and so keeps them on disk.

The person's answer comes back only as a later hook of the same `tool_use_id` (PostToolUse: it ran,
approved; PermissionDenied: denied), and the approval must go to the daemon then: so the process
that answered ASK leaves a marker file, and the process of the later hook removes it. Removing is
the test: `os.unlink` succeeds for exactly one process, so an approval is sent once, and a call that
was never asked sends nothing (no REJECT `no_pending_ask`, no extra request per outcome).

Claude Code reports many denials with no hook at all (a headless `claude -p`, dontAsk, an interactive
"No"), so an ask also ends, declined, when the run's same call (tool and input) is asked again
under another id or a new prompt comes (`unanswered`); this form sees no batch ends, so another
call proves nothing (it may be of the asked call's own turn).

One file per asked call, named by digests of (daemon address, run id) and of the tool_use_id and
holding the tool_use_id and a digest of the call, in
`$LOOPWARDEN_HOOK_STATE_DIR`, else `$XDG_STATE_HOME/loopwarden/hook-asks`, else
`~/.local/state/loopwarden/hook-asks`. Bounded: markers older than MAX_AGE_SECONDS (long past
any ask timeout) and the oldest beyond MAX_MARKERS go when a new one is written. Asks are rare, so
that scan is too.
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import time

MAX_MARKERS = 1_000
MAX_AGE_SECONDS = 24 * 3600.0
STATE_DIR_ENV = "LOOPWARDEN_HOOK_STATE_DIR"


def default_state_dir() -> pathlib.Path:
    explicit = os.environ.get(STATE_DIR_ENV)
    if explicit:
        return pathlib.Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return pathlib.Path(base) / "loopwarden" / "hook-asks"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


class AskedCallFiles:
    """Asked calls as marker files in `directory` (created on first use, private to the user)."""

    def __init__(self, directory: pathlib.Path, *, max_markers: int = MAX_MARKERS,
                 max_age_seconds: float = MAX_AGE_SECONDS, clock=time.time) -> None:
        self._directory = directory
        self._max_markers = max_markers
        self._max_age = max_age_seconds
        self._clock = clock

    def _run_prefix(self, scope: str, run_id: str) -> str:
        return _digest(scope, run_id)[:32]

    def _marker(self, scope: str, run_id: str, tool_call_id: str) -> pathlib.Path:
        return self._directory / f"{self._run_prefix(scope, run_id)}-{_digest(tool_call_id)[:32]}.ask"

    def asked(self, scope: str, run_id: str, tool_call_id: str, call: tuple[str, str] = ("", "")) -> None:
        """Remember an asked call (`call`: its tool name and input). OSError when it cannot be
        remembered (the caller must then not ask: the person's approval would be lost)."""
        self._directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        marker = self._marker(scope, run_id, tool_call_id)
        marker.write_text(f"{tool_call_id}\n{_digest(*call)}\n", encoding="utf-8", errors="surrogatepass")
        now = self._clock()
        os.utime(marker, (now, now))  # its age, by the clock the pruning reads
        self._prune()

    def settle(self, scope: str, run_id: str, tool_call_id: str) -> bool:
        """Forget the call; True when it had been asked (and not yet settled)."""
        try:
            self._marker(scope, run_id, tool_call_id).unlink()
        except FileNotFoundError:
            return False
        except OSError:
            return False  # an unreadable state dir: this process cannot have recorded an ask either
        return True

    def unanswered(self, scope: str, run_id: str, tool_call_id: str = "",
                   call: tuple[str, str] | None = None) -> list[str]:
        """Forget and name the run's asks a later hook shows were declined: every one (`call`
        None: a new prompt), or those of the same call as `call` under another id than
        `tool_call_id`. Each is named once, by the process whose unlink succeeded."""
        wanted = None if call is None else _digest(*call)
        declined = []
        for marker in sorted(self._directory.glob(f"{self._run_prefix(scope, run_id)}-*.ask")):
            try:
                asked, pattern = marker.read_text(encoding="utf-8", errors="surrogatepass").split("\n")[:2]
            except (OSError, ValueError):
                continue  # settled meanwhile, or not one of these markers
            if asked == tool_call_id or (wanted is not None and pattern != wanted):
                continue
            try:
                marker.unlink()
            except OSError:
                continue  # another process took it
            declined.append(asked)
        return declined

    def of(self, scope: str) -> DaemonAsks:
        """The asks made for one daemon (`scope`: its address), as the hook driver reads them."""
        return DaemonAsks(self, scope)

    def _prune(self) -> None:
        markers = []
        for path in self._directory.glob("*.ask"):
            try:
                markers.append((path.stat().st_mtime, path))
            except OSError:
                continue  # settled meanwhile
        markers.sort()
        cutoff = self._clock() - self._max_age
        excess = len(markers) - self._max_markers
        for index, (mtime, path) in enumerate(markers):
            if mtime >= cutoff and index >= excess:
                break
            path.unlink(missing_ok=True)


class DaemonAsks:
    """The asks of one daemon address in AskedCallFiles: the hook driver's asked-call store in the
    command form (loopwarden.hooks.driver.AskedCalls). The command form sees no batch ends, so
    another call proves nothing (it may be of the asked call's own turn): only the same call asked
    again, or a new prompt, declines an ask; and a session end leaves the markers to the pruning."""

    def __init__(self, files: AskedCallFiles, scope: str) -> None:
        self._files = files
        self._scope = scope

    def asked(self, session_id: str, run_id: str, tool_call_id: str, batch_id: str,
              call: tuple[str, str] | None) -> None:
        self._files.asked(self._scope, run_id, tool_call_id, call or ("", ""))

    def settle(self, session_id: str, run_id: str, tool_call_id: str) -> bool:
        return self._files.settle(self._scope, run_id, tool_call_id)

    def unanswered(self, session_id: str, run_id: str, *, tool_call_id: str = "", batch_id: str | None = None,
                   call: tuple[str, str] | None = None) -> list[str]:
        return self._files.unanswered(self._scope, run_id, tool_call_id, call)

    def end_session(self, session_id: str) -> None:
        pass  # markers are per run and pruned by age; a session end names no marker to find cheaply
