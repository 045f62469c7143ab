"""Runs kept beside the hot path: restored at start, loaded on first event, written behind.

Design. A run lives in its owner's memory and every event is evaluated there, with no await on the
per-event path; that memory is the compiled core's (runs.py). It marks a run dirty when an event
touches it and marks a delete when it ends or is evicted; every flush interval (counted from the
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

A shared store (`lazy`) is asked for a run the first time a request names it while it is not in
memory: the transport awaits `ensure_loaded` before the synchronous service evaluates, so the
run is evaluated with its history even when its previous owner died. Loads of one run are
coalesced; a run that appeared in memory while its load was in flight keeps the memory copy.

A load that fails (or is skipped while the store is paused after a failure) is remembered: the
core marks the run unmerged, evaluates it from memory (fail open) and keeps it out of every
flush, so a flush never replaces a stored run it could not read. The mark is retried on the
run's next event (the core names a marked run as one to load) and, for every marked run, at
each flush; when the store answers, the stored copy is merged into memory's (core
service/merge.rs: stored records then what arrived since, counters summed, sets unioned) and the
merged run is written at the next flush. A tenant's exemption table whose load failed is held
back from flushes the same way and merged as the union minus revocations. Counted
(loopwarden_state_runs_unmerged_total, _merged_total, the loopwarden_state_unmerged_runs gauge)
and alerted (LoopwardenStateRunsUnmerged).

Owners and fencing (a store that is `fenced`: Redis). Each written run has an owner mark beside
it: the writing replica, a generation counted up by every write, and a lease (3 flush intervals,
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

import asyncio
import functools
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import cast

from ..metrics import from_scrape_thread
from ..snapshot import SnapshotError, read_snapshot, snapshot_records
from .base import STALE, WAITING, WRITTEN, StateStore, StateStoreError
from .encoding import EncodingError, exemptions_key, is_delta, is_exemptions, run_key, tree_key
from .file import FileStateStore, NotAStateFile
from .metrics import StateMetrics
from .runs import HELD, MERGED, RESTORED, RESTORED_BASE_ONLY, CoreRuns, RunKey

log = logging.getLogger("loopwarden.daemon")


def _quiet(future: asyncio.Future) -> None:
    """A write left behind by a failed flush: its outcome no longer matters (retrieved, so
    asyncio does not log it as never retrieved)."""
    if not future.cancelled():
        future.exception()


class _NoExemptionTables:
    """The exemption tables of a runs side that keeps none (a test-only engine): nothing to move."""

    def track_changes(self) -> None:
        return None

    def dirty_count(self) -> int:
        return 0

    def take_dirty(self) -> list[str]:
        return []

    def redirty(self, tenants: list[str]) -> None:
        return None

    def encode(self, tenant: str, wall_now: float) -> tuple[bytes | None, float]:
        return None, 0.0

    def take_in(self, value: bytes, wall_now: float) -> int:
        return 0

    def absent(self, tenant: str) -> None:
        return None

# Writes in flight (each frames its batch in a worker thread, then appends): two, so framing
# uses a second core while the loop encodes; the store orders the appends themselves.
WRITERS = 2
# Runs encoded per batch on the event loop: ~3 µs each for a delta, ~15 µs for a full record
# (its stored value), so a batch holds the loop for 1-4 ms.
BATCH = 256
# Runs one write takes at most: the batches encoded while both writers were busy.
GROUP = 16 * BATCH
MAX_BACKOFF_SECONDS = 30.0
FINAL_FLUSH_SECONDS = 5.0
# Runs whose misroute or refused write was logged, at most (then the set starts over).
LOGGED_RUNS = 10_000


def owner_mark(mark: bytes | None) -> tuple[str, int, float]:
    """(owner, generation, lease end in wall-clock seconds) of a stored owner mark; ("", 0, 0)
    when there is none or it is not one."""
    parts = (mark or b"").split()
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return "", 0, 0.0
    return parts[0].decode(errors="replace"), int(parts[1]), int(parts[2]) / 1000.0


class _LoadPauses:
    """Where loads are paused after one failed: a load that failed pauses its shard of the store
    (a Redis Cluster master: the slots it serves; any other store is one shard) for a flush
    interval, in which that shard's runs are evaluated from memory without waiting on it again,
    and marked unmerged. A run of another shard still loads: one master down leaves the others'
    runs whole. A successful flush lifts every pause."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def paused(self, shard: str) -> bool:
        return time.monotonic() < self._until.get(shard, 0.0)

    def pause(self, shard: str, seconds: float) -> None:
        self._until[shard] = time.monotonic() + seconds

    def everywhere(self, store: StateStore) -> bool:
        """Every shard the store has is paused (one that is not a cluster: its only one)."""
        now = time.monotonic()
        paused = {shard for shard, until in self._until.items() if until > now}
        return bool(paused) and paused >= set(store.shards())

    def clear(self) -> None:
        self._until.clear()


class StateKeeper:
    def __init__(self, store: StateStore, runs: CoreRuns, metrics: StateMetrics, *, flush_interval: float,
                 wall_clock: Callable[[], float] = time.time, owner_id: str = "") -> None:
        self.store = store
        self.runs = runs
        self.metrics = metrics
        self.flush_interval = flush_interval
        self._wall = wall_clock
        self._loading: dict[RunKey, asyncio.Future] = {}
        self._loading_exemptions: dict[str, asyncio.Future] = {}
        self._stop = asyncio.Event()
        self._failures = 0
        self._last_ok = time.monotonic()
        self._load_pauses = _LoadPauses()
        self._task: asyncio.Task | None = None
        # Runs taken by a flush that has not finished: still waiting to be written, so they count
        # as dirty (a flush in flight against a dead store must not read as "all flushed").
        self._in_flight = 0
        self.final_flush_ok = True
        # A runs side that can merge (the core's) remembers failed loads; another (a test-only
        # engine) starts such a run anew as before.
        self._merging = store.lazy and hasattr(runs, "merge_in")
        # Writes fenced by owner: a fencing store, a runs side that can drop a run, a name here.
        self.owner_id = owner_id
        self._fenced = store.lazy and store.fenced and hasattr(runs, "forget") and bool(owner_id)
        self.lease_seconds = max(1.0, 3 * flush_interval)
        self._logged: set[RunKey] = set()
        # Tenants whose exemption table could not be read: not flushed until a load succeeds.
        self._tables_unmerged: set[str] = set()
        self.runs.track_changes(not store.lazy)
        # The tenants' standing exemptions (ASK's "always" answers) travel with the runs.
        self.tables = getattr(runs, "exemption_tables", None) or _NoExemptionTables()
        self.tables.track_changes()
        metrics.flush_interval.set(flush_interval)
        metrics.store_up.set(1)
        metrics.dirty_runs.set_function(from_scrape_thread(self.waiting))
        metrics.flush_lag.set_function(from_scrape_thread(
            lambda: time.monotonic() - self._last_ok if self.waiting() else 0.0))
        metrics.unmerged_runs.set_function(from_scrape_thread(self.unmerged))

    def unmerged(self) -> int:
        """Runs (and exemption tables) whose load failed, waiting to be merged before a write."""
        return (self.runs.unmerged_count() if self._merging else 0) + len(self._tables_unmerged)

    def waiting(self) -> int:
        """Runs (and exemption tables) changed and not yet written: marked dirty, or taken by
        the flush in flight."""
        return self.runs.dirty_count() + self.tables.dirty_count() + self._in_flight

    @property
    def lazy(self) -> bool:
        return self.store.lazy

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
        started = time.monotonic()
        restored = expired = malformed = with_delta = delta_skipped = 0
        try:
            for value, delta in self.store.restore():
                if is_exemptions(value):
                    self._take_in_exemptions(value)
                    continue
                try:
                    outcome = self.runs.take_in(value, self._wall(), delta=delta)
                except EncodingError:
                    malformed += 1
                    continue
                if outcome in (RESTORED, RESTORED_BASE_ONLY):
                    restored += 1
                    with_delta += delta is not None and outcome == RESTORED
                    delta_skipped += outcome == RESTORED_BASE_ONLY
                else:
                    expired += 1
        except NotAStateFile:
            restored, expired = self._convert_snapshot()
        except (OSError, StateStoreError) as exc:
            self.metrics.store_errors.labels("restore").inc()
            self._refuse(str(exc))
        damaged = getattr(self.store, "corrupt_bytes", 0)
        if damaged:  # the file store moved them aside (PATH.corrupt-*) and logged each range
            self.metrics.damaged_bytes.set(damaged)
            self.metrics.store_errors.labels("restore").inc()
        self.runs.take_dirty()  # restoring changes nothing that is not already stored
        self.tables.take_dirty()
        self.metrics.runs_loaded.labels("store").inc(restored)
        if delta_skipped:  # a delta that names another base: byte damage contained, or a bug
            self.metrics.store_errors.labels("restore").inc()
        log.info("state restored", extra={"state_store": self.store.describe(), "runs": restored,
                                          "expired_skipped": expired, "malformed_skipped": malformed,
                                          "runs_with_delta": with_delta, "deltas_left_out": delta_skipped,
                                          "seconds": round(time.monotonic() - started, 3)})

    def _take_in_exemptions(self, value: bytes) -> None:
        try:
            self.tables.take_in(value, self._wall())
        except EncodingError as exc:
            self.metrics.store_errors.labels("load").inc()
            log.error("stored exemption table unreadable; it is skipped", extra={"error": str(exc)})

    def _convert_snapshot(self) -> tuple[int, int]:
        """A snapshot written before the state store (--snapshot): read it, rewrite it as a log.
        Each of its runs is a run record (snapshot.py), taken in by the core like any stored run
        and written to the file as the one stored format."""
        store = self.store
        assert isinstance(store, FileStateStore)
        wall = self._wall()
        try:
            records, expired = snapshot_records(read_snapshot(store.path), wall, self.runs.idle_ttl_seconds)
            for _tenant, _run_id, record in records:
                self.runs.take_in_record(record, wall)
        except (OSError, SnapshotError, EncodingError) as exc:
            self._refuse(str(exc))
            return 0, 0
        values = [(run_key(tenant, run_id), self.runs.encode(tenant, run_id, wall))
                  for tenant, run_id, _record in records]
        store.rewrite(iter([(key, value) for key, value in values if value is not None]))
        log.info("snapshot converted to a state file", extra={"state_store": store.path, "runs": len(records)})
        return len(records), expired

    def _refuse(self, error: str) -> None:
        """An unreadable state file is moved aside (never deleted) and the daemon starts empty."""
        self.runs.clear()
        if isinstance(self.store, FileStateStore) and os.path.exists(self.store.path):
            refused = f"{self.store.path}.refused"
            os.replace(self.store.path, refused)
            self.store.start_empty()
            log.error("state refused; starting with no runs", extra={
                "state_store": self.store.path, "moved_to": refused, "error": error})
        else:
            log.error("state refused; starting with no runs", extra={"state_store": self.store.describe(),
                                                                      "error": error})

    def start(self) -> None:
        self._task = asyncio.create_task(self._flush_loop())

    # ------------------------------------------------------------------ first event
    async def ensure_loaded(self, tenant: str, runs: Sequence[str | tuple[str, str]]) -> None:
        """Fetch these runs from the shared store into memory (at most one GET per run), and the
        tenant's exemption table with them: a replica meets a tenant through a run it does not
        hold, so another replica's "always" answers arrive with it (staleness: see docs/ask.md).
        Each run is a run id, or (run id, its tree's root): a child run is stored under its
        root's key."""
        await asyncio.gather(self.load_exemptions(tenant),
                             *(self._load_one(tenant, *(run if isinstance(run, tuple) else (run, run)))
                               for run in runs))

    def load_exemptions(self, tenant: str) -> asyncio.Future:
        """Fetch the tenant's exemption table from a shared store (coalesced per tenant); an
        embedded store restored it at start, so nothing is fetched."""
        pending = self._loading_exemptions.get(tenant)
        if pending is None:
            pending = self._loading_exemptions[tenant] = asyncio.ensure_future(self._fetch_exemptions(tenant))
            pending.add_done_callback(lambda _f: self._loading_exemptions.pop(tenant, None))
        return pending

    async def _fetch_exemptions(self, tenant: str) -> None:
        if not self.store.lazy or isinstance(self.tables, _NoExemptionTables):
            return
        key = exemptions_key(tenant)
        shard = self.store.shard(key)
        if self._load_pauses.paused(shard):
            self._tables_unmerged.add(tenant)
            return
        try:
            value = await self.store.load(key)
        except StateStoreError as exc:
            self.metrics.store_errors.labels("load").inc()
            self.metrics.store_up.set(0)
            self._load_pauses.pause(shard, self.flush_interval)
            self._tables_unmerged.add(tenant)
            log.warning("state store load of exemptions failed; memory's are used", extra={"error": str(exc)})
            return
        self._tables_unmerged.discard(tenant)
        if value is None:
            self.tables.absent(tenant)
        else:
            self._take_in_exemptions(value)

    def _load_one(self, tenant: str, run_id: str, root: str) -> asyncio.Future:
        key = (tenant, run_id)
        pending = self._loading.get(key)
        if pending is None:
            pending = self._loading[key] = asyncio.ensure_future(self._fetch(tenant, run_id, root))
            pending.add_done_callback(lambda _f: self._loading.pop(key, None))
        return pending

    async def _fetch(self, tenant: str, run_id: str, root: str) -> None:
        key = tree_key(tenant, root, run_id)
        shard = self.store.shard(key)
        if self._load_pauses.paused(shard):
            self._load_failed(tenant, run_id, root)  # that part of the store is away: fail open, from memory
            return
        mark = None
        started = self.runs.clock() if self._fenced else 0.0
        try:
            if self._fenced:
                value, mark = await self.store.load_owned(key)
            else:
                value = await self.store.load(key)
        except StateStoreError as exc:
            self.metrics.store_errors.labels("load").inc()
            self.metrics.store_up.set(0)
            self._load_pauses.pause(shard, self.flush_interval)
            log.warning("state store load failed; the run is evaluated from memory", extra={"error": str(exc)})
            self._load_failed(tenant, run_id, root)
            return
        if self._fenced and self.runs.lease_lapsed(tenant, run_id):
            self._recheck(tenant, run_id, value, mark, started)
            return
        if self._merging:
            if self._merge(tenant, run_id, value) != HELD and self._fenced:
                self._owned(tenant, run_id, mark, started)  # memory's copy now comes from the stored one
            return
        if value is None or self.runs.held(tenant, run_id):
            self.metrics.runs_loaded.labels("new" if value is None else "memory").inc()
            return
        try:
            outcome = self.runs.take_in(value, self._wall(), expect=(tenant, run_id))
        except EncodingError as exc:
            self.metrics.store_errors.labels("load").inc()
            log.error("stored run unreadable; it starts anew", extra={"error": str(exc)})
            self.metrics.runs_loaded.labels("new").inc()
            return
        # expired, or a value under this key that names another run: the run starts anew
        self.metrics.runs_loaded.labels("store" if outcome == RESTORED else "new").inc()

    def _recheck(self, tenant: str, run_id: str, value: bytes | None, mark: bytes | None, started: float) -> None:
        """A held run whose lease lapsed, read again before its next event: another replica's
        copy (the stored generation moved past memory's) replaces memory's, which it holds all
        of but what this replica answered unwritten, and such a copy's write would be refused
        as STALE anyway; otherwise memory's copy is current and only its lease note is renewed."""
        generation = owner_mark(mark)[1]
        if value is not None and generation > self.runs.owner_gen(tenant, run_id):
            try:
                outcome = self.runs.take_in(value, self._wall(), expect=(tenant, run_id))
            except EncodingError as exc:
                outcome = ""
                self.metrics.store_errors.labels("load").inc()
                log.error("stored run unreadable; memory's copy answers", extra={"error": str(exc)})
            if outcome in (RESTORED, RESTORED_BASE_ONLY):
                self.metrics.runs_loaded.labels("store").inc()
                self._owned(tenant, run_id, mark, started)
                return
        self.metrics.runs_loaded.labels("memory").inc()
        if self.runs.held(tenant, run_id):
            self.runs.set_owner_gen(tenant, run_id, self.runs.owner_gen(tenant, run_id),
                                    started + self.lease_seconds)

    def _owned(self, tenant: str, run_id: str, mark: bytes | None, started: float) -> None:
        """A run just loaded (or merged) by a load sent at `started` (the core's clock): note the
        generation its copy came from and its lease, and count a misroute when another
        replica's lease on it is live."""
        owner, generation, lease_end = owner_mark(mark)
        if self.runs.held(tenant, run_id):
            self.runs.set_owner_gen(tenant, run_id, max(generation, self.runs.owner_gen(tenant, run_id)),
                                    started + self.lease_seconds)
        if owner and owner != self.owner_id and lease_end > self._wall():
            self.metrics.misrouted_runs.inc()
            self._log_once((tenant, run_id), "event for a run another replica owns (misrouted: no routing "
                           "header, or a router that does not hash x-loopwarden-run-id); it is evaluated "
                           "here from the stored copy, and this replica's writes of it are fenced",
                           owner=owner)

    def _log_once(self, key: RunKey, message: str, **extra) -> None:
        if key in self._logged:
            return
        if len(self._logged) >= LOGGED_RUNS:
            self._logged.clear()
        self._logged.add(key)
        log.warning(message, extra={"tenant": key[0], "run_id": key[1], **extra})

    def _load_failed(self, tenant: str, run_id: str, root: str) -> None:
        """The run is evaluated from memory; with a merging runs side it is marked so that no
        flush writes it before its stored copy is merged in. A run memory already holds as
        loaded (never marked) needs no mark: memory's copy is the current one."""
        held = self.runs.held(tenant, run_id)
        if self._merging and not held and self.runs.mark_unmerged(tenant, run_id, root):
            self.metrics.runs_unmerged.inc()
        self.metrics.runs_loaded.labels("memory" if held else "new").inc()

    def _merge(self, tenant: str, run_id: str, value: bytes | None) -> str:
        """A load that answered: the stored value merged into (or taken in as) the run; what
        became of it (runs.py's outcomes; "" when nothing usable was stored)."""
        held = self.runs.held(tenant, run_id)
        if value is None:
            self.runs.clear_unmerged(tenant, run_id)  # nothing stored: memory's copy is all of it
            self.metrics.runs_loaded.labels("memory" if held else "new").inc()
            return ""
        try:
            outcome = self.runs.merge_in(value, self._wall(), expect=(tenant, run_id))
        except EncodingError as exc:
            self.runs.clear_unmerged(tenant, run_id)
            self.metrics.store_errors.labels("load").inc()
            log.error("stored run unreadable; memory's copy replaces it", extra={"error": str(exc)})
            self.metrics.runs_loaded.labels("memory" if held else "new").inc()
            return ""
        if outcome == MERGED:
            self.metrics.runs_merged.inc()
        self.metrics.runs_loaded.labels("store" if outcome in (MERGED, RESTORED) else
                                        "memory" if outcome == HELD else "new").inc()
        return outcome

    async def retry_unmerged(self) -> None:
        """Load every marked run and unread exemption table again (at each flush): those the
        store now answers for are merged, so their next flush can write them."""
        if not self.unmerged() or self._load_pauses.everywhere(self.store):
            return
        for tenant in list(self._tables_unmerged):
            await self.load_exemptions(tenant)
        if not self._merging:
            return
        marked = self.runs.unmerged()
        for start in range(0, len(marked), BATCH):
            if self._load_pauses.everywhere(self.store):
                return  # the store failed again: the rest wait for the next flush
            await asyncio.gather(*(self._load_one(tenant, run_id, root)
                                   for tenant, run_id, root in marked[start:start + BATCH]))

    # ------------------------------------------------------------------ write behind
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
        await self.retry_unmerged()
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
        if self._tables_unmerged:
            # A table whose stored copy was not read yet would replace it: held back until merged.
            held_back = [tenant for tenant in tenants if tenant in self._tables_unmerged]
            if held_back:
                self.tables.redirty(held_back)
                tenants = [tenant for tenant in tenants if tenant not in self._tables_unmerged]
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
        runs at a time and let go between batches; framing (zlib, in the core with the GIL let go)
        and the store's write run in worker threads, WRITERS writes in flight. Batches encoded
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
        self._load_pauses.clear()
        self.metrics.store_up.set(1)
        self._last_ok = time.monotonic()
        self.metrics.flush_seconds.observe(time.perf_counter() - started)
        return True

    def _fenced_outcomes(self, chunk: list, outcomes: list, sent: float) -> None:
        """Each fenced write's outcome: a new generation noted with the lease the write took
        (from `sent`, the core's clock when it was sent), a run held back while another
        replica's lease is live, or a stale copy dropped (the owner wrote since)."""
        waiting = []
        lease_until = sent + self.lease_seconds
        for item, (outcome, detail) in zip(chunk, outcomes):
            tenant, run_id = item[0]
            if outcome == WRITTEN:
                if item[1]:
                    self.runs.set_owner_gen(tenant, run_id, int(detail), lease_until)
            elif outcome == WAITING:
                waiting.append(item)
                self.metrics.fenced_writes.labels("waiting").inc()
            elif outcome == STALE:
                self.metrics.fenced_writes.labels("dropped").inc()
                if item[1]:
                    self.runs.forget(tenant, run_id)
                self._log_once(item[0], "write refused: another replica wrote this run since its copy here "
                               "was loaded; the copy is dropped and its next event loads the owner's",
                               owner=owner_mark(detail)[0])
        if waiting:
            self.runs.redirty(waiting)

    def _encode(self, chunk: list, ttl: float) -> tuple[list, list | None]:
        """(key, value, ttl) of each taken run: value None deletes (the run ended or was evicted).
        With the core's runs the value is the record's JSON, framed later off the loop
        (`frame_records`), or, to a store that keeps deltas, perhaps a delta (only what changed
        since the run's last full record: a few hundred bytes and no compression, where a full
        record costs ~60 µs); other runs sides hand the stored value itself. With a fenced store,
        also the owner generation each copy came from (read with its state, on the loop)."""
        wall = self._wall()
        encode = (functools.partial(self.runs.record, deltas=self.store.deltas)
                  if hasattr(self.runs, "frame_records") else self.runs.encode)
        # Each item is ((tenant, run_id), held, root); the root names a child run's key.
        items = [(tree_key(tenant, item[2] if len(item) > 2 else run_id, run_id),
                  encode(tenant, run_id, wall) if item[1] else None, ttl)
                 for item in chunk for tenant, run_id in (item[0],)]
        generations = ([self.runs.owner_gen(*item[0]) if value is not None else -1
                        for (_key, value, _ttl), item in zip(items, chunk)] if self._fenced else None)
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
        # Counted before framing: a delta is already its stored value, a full record is framed.
        # (A store that keeps deltas is not fenced: the fenced path below writes full records.)
        deltas = sum(value is not None and is_delta(value) for _key, value, _ttl in items) if self.store.deltas else 0
        framer = getattr(self.runs, "frame_records", None)
        if framer is not None:
            values = await asyncio.to_thread(framer, [value for _key, value, _ttl in items])
            items = [(key, value, ttl) for (key, _record, ttl), value in zip(items, values)]
        if generations is None:
            await self.store.flush(items)
            self.metrics.deltas_written.inc(deltas)
            return
        sent = self.runs.clock()
        outcomes = await self.store.flush_fenced(
            [(key, value, ttl, generation) for (key, value, ttl), generation in zip(items, generations)],
            self.owner_id, self.lease_seconds)
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

    async def stop(self) -> bool:
        """After the drain: stop the flusher, flush every dirty run; False when that failed."""
        self._stop.set()
        if self._task is not None:
            await self._task
        deadline = time.monotonic() + FINAL_FLUSH_SECONDS
        started = time.monotonic()
        while True:
            ok = await self.flush_once("final_flush")
            if ok or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.2)
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
