"""Writing runs behind the hot path: every flush interval, the runs changed since the last flush.

The core (runs.py) marks a run dirty when an
event touches it and marks a delete when it ends or is evicted; every flush interval (counted from the
previous flush's start) the flusher takes the dirty set, encodes each run as it is when its batch
is written (statestore.encoding; the mark is cleared then, so a later change queues the run
again behind the runs still waiting) and hands batches to the StateStore, framed and written on
worker threads (`_write` says why; bench/results/2026-12-02-flush-under-load.md the figures).
To a store that keeps deltas (the file store) a run is written as a delta against its last full
record whenever the core can (only what changed since: a busy run's flush costs ~12 µs instead
of ~65 µs); a failed write clears the run's base, so its next write is a full record again. A failed
batch puts its runs back in the dirty set (a run changed again meanwhile is simply written once,
as it is at the next flush), so nothing is lost while the store is away, only delayed; the next
attempt waits interval x 2^failures (at most MAX_BACKOFF_SECONDS). Persistence fails open:
events are always answered from memory, health stays SERVING, the error counter and the flush
lag gauge (and the alerts on them) tell the operator.

Fenced writes (fencing.py) carry the owner generation each copy came from: a STALE copy is
dropped, a WAITING one kept dirty. A run whose load failed (loader.py) is not written until its
stored copy is merged; the flush retries those loads first.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import cast

from .base import STALE, WAITING, WRITTEN, StateStore, StateStoreError
from .encoding import exemptions_key, is_delta, tree_key
from .fencing import Fencing, owner_mark
from .loader import RunLoader
from .metrics import StateMetrics
from .runs import CoreRuns

log = logging.getLogger("loopwarden.daemon")


def _quiet(future: asyncio.Future) -> None:
    """A write left behind by a failed flush: its outcome no longer matters (retrieved, so
    asyncio does not log it as never retrieved)."""
    if not future.cancelled():
        future.exception()


# Writes in flight (each a store write in a worker thread): two, so one write's I/O overlaps the
# loop encoding the next; the store orders the appends themselves.
WRITERS = 2
# Runs encoded per batch on the event loop: ~3 µs each for a delta, ~15 µs for a full record
# (its stored value), so a batch holds the loop for 1-4 ms.
BATCH = 256
# Runs one write takes at most: the batches encoded while both writers were busy.
GROUP = 16 * BATCH
MAX_BACKOFF_SECONDS = 30.0
FINAL_FLUSH_SECONDS = 5.0


class Flusher:
    """The dirty runs (and exemption tables) from the core's memory to the store."""

    def __init__(self, store: StateStore, runs: CoreRuns, metrics: StateMetrics, fencing: Fencing,
                 loader: RunLoader, *, flush_interval: float, wall_clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.runs = runs
        self.metrics = metrics
        self.fencing = fencing
        self.loader = loader
        self.tables = loader.tables
        self.flush_interval = flush_interval
        self._wall = wall_clock
        self._stop = asyncio.Event()
        self._failures = 0
        self._last_ok = time.monotonic()
        self._task: asyncio.Task | None = None
        # Runs taken by a flush that has not finished: still waiting to be written, so they count
        # as dirty (a flush in flight against a dead store must not read as "all flushed").
        self._in_flight = 0

    def waiting(self) -> int:
        """Runs (and exemption tables) changed and not yet written: marked dirty, or taken by
        the flush in flight."""
        return self.runs.dirty_count() + self.tables.dirty_count() + self._in_flight

    def lag(self) -> float:
        """Seconds since the last flush that left nothing waiting (0 when nothing waits)."""
        return time.monotonic() - self._last_ok if self.waiting() else 0.0

    def start(self) -> None:
        self._task = asyncio.create_task(self._flush_loop())

    async def _flush_loop(self) -> None:
        # Flushes start on a fixed cadence (one interval after the previous one *started*), so a
        # flush that took long under load is followed at once instead of an interval later: a
        # run's stored state is then never older than about one interval plus one flush.
        next_start = time.monotonic() + self.flush_interval
        while not self._stop.is_set():
            if self._failures:
                delay = min(self.flush_interval * (2 ** min(self._failures, 16)), MAX_BACKOFF_SECONDS)
            else:
                delay = max(0.0, next_start - time.monotonic())
            try:
                await asyncio.wait_for(self._stop.wait(), delay)
            except TimeoutError:
                pass
            if self._stop.is_set():
                break
            next_start = time.monotonic() + self.flush_interval
            await self.flush_once("flush")

    async def flush_once(self, operation: str = "flush") -> bool:
        """Write every dirty run; False (runs kept dirty, error counted) when the store failed.
        Runs whose load failed are merged first when the store answers; until then they stay
        dirty and unwritten (the core leaves them out of take_dirty)."""
        await self.loader.retry_unmerged()
        if not await self._flush_exemptions(operation):
            return False
        dirty = self.runs.take_dirty()
        if not dirty:
            self._last_ok = time.monotonic()
            return True
        started = time.perf_counter()
        ttl = self.runs.idle_ttl_seconds
        self._in_flight = len(dirty)
        try:
            return await self._write(dirty, ttl, operation, started)
        finally:
            self._in_flight = 0

    async def _flush_exemptions(self, operation: str) -> bool:
        """Write the changed exemption tables (an emptied one is deleted); kept dirty on failure."""
        tenants = self.tables.take_dirty()
        if self.loader.tables_unmerged:
            # A table whose stored copy was not read yet would replace it: held back until merged.
            held_back = [tenant for tenant in tenants if tenant in self.loader.tables_unmerged]
            if held_back:
                self.tables.redirty(held_back)
                tenants = [tenant for tenant in tenants if tenant not in self.loader.tables_unmerged]
        if not tenants:
            return True
        wall = self._wall()
        items = []
        for tenant in tenants:
            value, ttl = self.tables.encode(tenant, wall)
            items.append((exemptions_key(tenant), value, max(ttl, 1.0)))
        try:
            await self.store.flush(items)
        except StateStoreError as exc:
            self.tables.redirty(tenants)
            self.metrics.store_errors.labels(operation).inc()
            self.metrics.store_up.set(0)
            if self._failures == 0:
                log.error("state store flush of exemptions failed; they stay in memory and are retried",
                          extra={"state_store": self.store.describe(), "error": str(exc)})
            self._failures += 1
            return False
        return True

    async def _write(self, keys: list, ttl: float, operation: str, started: float) -> bool:
        """Write the taken runs, oldest change first (take_dirty's order), so no run waits behind
        runs that changed after it. The loop only encodes (the core's runs are read there), BATCH
        runs at a time and let go between batches; the store's writes run in worker threads, WRITERS
        writes in flight. Batches encoded
        while both writers are busy wait in a group that the next free writer takes whole (at most
        GROUP runs; past that the loop waits for a writer): one write and one fsync for many
        batches, so a flush of 100,000 small deltas is not 400 round trips through worker threads
        and the GIL (bench/flush_under_load.py has the figures). A failed write puts back every
        run not known to be stored (a run written by a later write in flight is simply written
        again)."""
        writes: deque[tuple[asyncio.Future, int]] = deque()  # in flight: (write, keys[:end] handed)
        written = 0  # keys[:written] stored
        group: list[tuple[list, list, list | None]] = []  # encoded, waiting for a writer
        grouped = 0  # runs in the group
        try:
            for start in range(0, len(keys), BATCH):
                while writes and writes[0][0].done():
                    written = await self._settle(writes.popleft(), written)
                end = min(len(keys), start + BATCH)
                chunk = keys[start:end]
                group.append((chunk, *self._encode(chunk, ttl)))
                grouped += len(chunk)
                if len(writes) >= WRITERS and grouped >= GROUP:
                    written = await self._settle(writes.popleft(), written)
                if len(writes) < WRITERS:
                    writes.append((asyncio.ensure_future(self._store_group(group)), end))
                    group, grouped = [], 0
                await asyncio.sleep(0)  # let events through between batches
            if group:
                writes.append((asyncio.ensure_future(self._store_group(group)), len(keys)))
            while writes:
                written = await self._settle(writes.popleft(), written)
        except StateStoreError as exc:
            for write, _end in writes:  # finishing or not, their runs are put back: a rewrite is harmless
                write.add_done_callback(_quiet)
            self.runs.redirty(keys[written:])
            self.metrics.store_errors.labels(operation).inc()
            self.metrics.store_up.set(0)
            if self._failures == 0:
                log.error("state store flush failed; runs stay in memory and are retried",
                          extra={"state_store": self.store.describe(), "error": str(exc),
                                 "dirty_runs": self.runs.dirty_count()})
            self._failures += 1
            return False
        if self._failures:
            log.info("state store back; dirty runs flushed", extra={"state_store": self.store.describe(),
                                                                  "failed_attempts": self._failures})
        self._failures = 0
        self.loader.store_answered()
        self.metrics.store_up.set(1)
        self._last_ok = time.monotonic()
        self.metrics.flush_seconds.observe(time.perf_counter() - started)
        return True

    def _fenced_outcomes(self, chunk: list, outcomes: list, sent: float) -> None:
        """Each fenced write's outcome: a new generation noted with the lease the write took
        (from `sent`, the core's clock when it was sent), a run held back while another
        replica's lease is live, or a stale copy dropped (the owner wrote since)."""
        waiting = []
        lease_until = sent + self.fencing.lease_seconds
        for item, (outcome, detail) in zip(chunk, outcomes):
            tenant, run_id = item.tenant, item.run_id
            if outcome == WRITTEN:
                if item.held:
                    self.runs.set_owner_gen(tenant, run_id, int(detail), lease_until)
            elif outcome == WAITING:
                waiting.append(item)
                self.metrics.fenced_writes.labels("waiting").inc()
            elif outcome == STALE:
                self.metrics.fenced_writes.labels("dropped").inc()
                if item.held:
                    self.runs.forget(tenant, run_id)
                self.fencing.log_once(item.key, "write refused: another replica wrote this run since its copy here "
                               "was loaded; the copy is dropped and its next event loads the owner's",
                               owner=owner_mark(detail)[0])
        if waiting:
            self.runs.redirty(waiting)

    def _encode(self, chunk: list, ttl: float) -> tuple[list, list | None]:
        """(key, value, ttl) of each taken run: value None deletes (the run ended or was evicted).
        The value is the run's stored value, or, to a store that keeps deltas, perhaps a delta
        (only what changed since the run's last full record: a few hundred bytes where a full
        record is a few kilobytes). With a fenced store, also the owner generation each copy came
        from (read with its state, on the loop)."""
        wall = self._wall()
        encode = functools.partial(self.runs.record, deltas=self.store.deltas)
        # Each item is a DirtyRun; its root names a child run's key.
        items = [(tree_key(item.tenant, item.root, item.run_id),
                  encode(item.tenant, item.run_id, wall) if item.held else None, ttl)
                 for item in chunk]
        generations = ([self.runs.owner_gen(item.tenant, item.run_id) if value is not None else -1
                        for (_key, value, _ttl), item in zip(items, chunk)] if self.fencing.fenced else None)
        return items, generations

    async def _store_group(self, group: list[tuple[list, list, list | None]]) -> None:
        """Encoded batches as one write."""
        if len(group) == 1:
            return await self._store_items(*group[0])
        chunk = [item for batch in group for item in batch[0]]
        items = [item for batch in group for item in batch[1]]
        # A store is fenced or not: every batch of a group has generations, or none has.
        generations = None if group[0][2] is None else [g for batch in group for g in cast(list, batch[2])]
        return await self._store_items(chunk, items, generations)

    async def _store_items(self, chunk: list, items: list, generations: list | None) -> None:
        # (A store that keeps deltas is not fenced: the fenced path below writes full records.)
        deltas = sum(value is not None and is_delta(value) for _key, value, _ttl in items) if self.store.deltas else 0
        if generations is None:
            await self.store.flush(items)
            self.metrics.deltas_written.inc(deltas)
            return
        sent = self.runs.clock()
        outcomes = await self.store.flush_fenced(
            [(key, value, ttl, generation) for (key, value, ttl), generation in zip(items, generations)],
            self.fencing.owner_id, self.fencing.lease_seconds)
        self._fenced_outcomes(chunk, outcomes, sent)  # back on the loop: it touches the core's runs

    async def _settle(self, write: tuple[asyncio.Future, int], written: int) -> int:
        """Wait for the oldest write in flight; the keys up to its end are stored."""
        future, end = write
        await future
        self._written(end - written)
        return end

    def _written(self, count: int) -> None:
        self.metrics.runs_flushed.inc(count)
        self._in_flight -= count

    async def final_flush(self) -> bool:
        """After the drain: stop the flush loop, then flush every dirty run, retried for at most
        FINAL_FLUSH_SECONDS; False when that failed."""
        self._stop.set()
        if self._task is not None:
            await self._task
        deadline = time.monotonic() + FINAL_FLUSH_SECONDS
        while True:
            ok = await self.flush_once("final_flush")
            if ok or time.monotonic() >= deadline:
                return ok
            await asyncio.sleep(0.2)
