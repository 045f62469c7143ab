"""Owners and fencing: who may write a run to a shared store, and the note of it kept per run.

A store that is `fenced` (Redis) keeps an owner mark beside each written
run: the writing replica, a generation counted up by every write, and a lease (3 flush intervals,
at least 1 s) that the owner's writes renew. A replica notes the generation its copy came from
(at its load, then at each of its writes) and every write is fenced by it, atomically on the
store: refused as STALE when another replica wrote since (its copy is dropped from memory, not
deleted, and its next event loads the owner's), held back as WAITING while another replica's
lease is live and nobody wrote since (kept dirty: after a failover the survivor writes once the
dead owner's lease runs out), written otherwise. So a misrouted event never overwrites the
owner's state. A load that finds another replica's live lease is a misroute (when the daemon can
know it): counted (loopwarden_state_misrouted_runs_total) and logged once per run.

A replica also notes, per held run, until when its lease is known to be live: the time its
latest write (or load) was sent plus the lease, on the core's clock; Redis starts the lease
when the write arrives, so the note never outlives the stored lease. Past it another replica
may have taken the run, so the core names the run for a load again (one float compare per
event; nothing more while the lease is live) and its next event waits for one read of the stored
copy: when the stored generation moved on, that copy (all the events the other replica
answered) replaces memory's before the event is evaluated; otherwise memory's is current and its
note is renewed. Without this an ex-owner answered from its old copy, and its next write, refused
as STALE, dropped what it had answered since.
"""
from __future__ import annotations

import logging

log = logging.getLogger("loopwarden.daemon")

# Runs whose misroute or refused write was logged, at most (then the set starts over).
LOGGED_RUNS = 10_000

RunKey = tuple[str, str]  # (tenant, run_id)


def owner_mark(mark: bytes | None) -> tuple[str, int, float]:
    """(owner, generation, lease end in wall-clock seconds) of a stored owner mark; ("", 0, 0)
    when there is none or it is not one."""
    parts = (mark or b"").split()
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return "", 0, 0.0
    return parts[0].decode(errors="replace"), int(parts[1]), int(parts[2]) / 1000.0



class Fencing:
    """A replica's side of fencing: its owner id, whether writes are fenced at all (a fencing
    store, a runs side that can drop a run, an owner id), the lease a write takes, and the runs
    already logged as misrouted or refused (a line per run, not per event)."""

    def __init__(self, owner_id: str, fenced: bool, flush_interval: float) -> None:
        self.owner_id = owner_id
        self.fenced = fenced
        self.lease_seconds = max(1.0, 3 * flush_interval)
        self._logged: set[RunKey] = set()

    def log_once(self, key: RunKey, message: str, **extra) -> None:
        if key in self._logged:
            return
        if len(self._logged) >= LOGGED_RUNS:
            self._logged.clear()
        self._logged.add(key)
        log.warning(message, extra={"tenant": key[0], "run_id": key[1], **extra})
