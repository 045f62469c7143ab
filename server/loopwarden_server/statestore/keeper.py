"""Runs kept beside the hot path: restored at start, loaded on first event, written behind.

Design. A run lives in its owner's memory and every event is evaluated there, with no await on the
per-event path; that memory is the compiled core's (runs.py). The keeper is the state store's
one face to the daemon (app.py) and composes its jobs, each a module:

- loading (loader.py): every stored run at start (an embedded store), and from a shared store
  the runs a request names that memory lacks, before the request is evaluated; failed loads
  remembered and merged when the store answers;
- flushing (flusher.py): the changed runs written behind, every flush interval, in batches framed
  and written on worker threads; a failed write keeps its runs dirty and backs off;
- fencing (fencing.py): with a shared store that fences (Redis), the owner generation and lease
  that keep a replica from overwriting another's copy of a run.

Persistence fails open: events are always answered from memory, health stays SERVING, the error
counter and the flush lag gauge (and the alerts on them) tell the operator. Imports flow one way:
keeper -> flusher -> loader -> runs -> the core's face (loopwarden_core); nothing here imports the
servicer or core.py.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from ..metrics import from_scrape_thread
from .base import StateStore, StateStoreError
from .fencing import Fencing
from .flusher import Flusher
from .loader import RunLoader
from .metrics import StateMetrics
from .runs import CoreRuns, MissingRun

log = logging.getLogger("loopwarden.daemon")


class StateKeeper:
    def __init__(self, store: StateStore, runs: CoreRuns, metrics: StateMetrics, *, flush_interval: float,
                 wall_clock: Callable[[], float] = time.time, owner_id: str = "") -> None:
        self.store = store
        self.runs = runs
        self.metrics = metrics
        self.flush_interval = flush_interval
        self.final_flush_ok = True
        # Writes fenced by owner: a fencing store, a runs side that can drop a run, a name here.
        self.fencing = Fencing(owner_id, store.lazy and store.fenced and hasattr(runs, "forget") and bool(owner_id),
                               flush_interval)
        self.loader = RunLoader(store, runs, metrics, self.fencing, flush_interval=flush_interval,
                                wall_clock=wall_clock)
        self.flusher = Flusher(store, runs, metrics, self.fencing, self.loader, flush_interval=flush_interval,
                               wall_clock=wall_clock)
        self.runs.track_changes(not store.lazy)
        self.loader.tables.track_changes()
        metrics.flush_interval.set(flush_interval)
        metrics.store_up.set(1)
        metrics.dirty_runs.set_function(from_scrape_thread(self.waiting))
        metrics.flush_lag.set_function(from_scrape_thread(self.flusher.lag))
        metrics.unmerged_runs.set_function(from_scrape_thread(self.unmerged))

    def unmerged(self) -> int:
        """Runs (and exemption tables) whose load failed, waiting to be merged before a write."""
        return self.loader.unmerged()

    def waiting(self) -> int:
        """Runs (and exemption tables) changed and not yet written."""
        return self.flusher.waiting()

    @property
    def lazy(self) -> bool:
        return self.store.lazy

    @property
    def owner_id(self) -> str:
        return self.fencing.owner_id

    @property
    def lease_seconds(self) -> float:
        return self.fencing.lease_seconds

    # ------------------------------------------------------------------ start
    def check(self) -> None:
        try:
            self.store.check()
            self.store.claim()
        except StateStoreError:
            self.metrics.store_errors.labels("check").inc()
            raise
        if getattr(self.store, "degraded", ""):  # e.g. a full disk: started, serving from memory
            self.metrics.store_errors.labels("check").inc()
            self.metrics.store_up.set(0)

    def restore(self) -> None:
        """Take in every stored run (embedded store); called once every listener is bound."""
        self.loader.restore()

    def start(self) -> None:
        self.flusher.start()

    async def ensure_loaded(self, tenant: str, runs: Sequence[str | MissingRun]) -> None:
        """The runs (and the tenant's exemption table) from a shared store into memory."""
        await self.loader.ensure_loaded(tenant, runs)

    async def load_exemptions(self, tenant: str) -> None:
        await self.loader.load_exemptions(tenant)

    async def retry_unmerged(self) -> None:
        await self.loader.retry_unmerged()

    async def flush_once(self, operation: str = "flush") -> bool:
        """Write every dirty run; False (runs kept dirty, error counted) when the store failed."""
        return await self.flusher.flush_once(operation)

    async def stop(self) -> bool:
        """After the drain: stop the flusher, flush every dirty run; False when that failed."""
        started = time.monotonic()
        ok = await self.flusher.final_flush()
        self.final_flush_ok = ok
        if self.unmerged():
            log.error("runs whose stored copy could not be read are not written; their changes since "
                      "the failed load are lost rather than overwrite the store",
                      extra={"state_store": self.store.describe(), "unmerged": self.unmerged()})
        if ok:
            log.info("state flushed", extra={"state_store": self.store.describe(), "runs_held": len(self.runs),
                                             "seconds": round(time.monotonic() - started, 3)})
        else:
            # Counted after the last attempt put its runs back: each one is a run whose latest
            # state is in no store (the exit is non-zero).
            log.error("final state flush failed; runs changed since the last flush are lost",
                      extra={"state_store": self.store.describe(), "dirty_runs": self.runs.dirty_count(),
                             "runs_not_saved": self.waiting()})
        await self.store.close()
        return ok
