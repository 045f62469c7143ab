"""Loading runs into the core's memory: every stored run at start (an embedded store), and from
a shared store (`lazy`) the runs a request names that memory lacks, before it is evaluated.

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

Fenced loads (fencing.py) note the owner generation a copy came from, and re-read a run whose
lease lapsed before its next event. This module knows nothing of the servicer: the transport
hands a `RunLoader` to core.CoreService.loaded.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Sequence

from ..snapshot import SnapshotError, read_snapshot, snapshot_records
from .base import StateStore, StateStoreError
from .encoding import EncodingError, exemptions_key, is_exemptions, run_key, tree_key
from .fencing import Fencing, owner_mark
from .file import FileStateStore, NotAStateFile
from .metrics import StateMetrics
from .runs import CoreRuns, Loaded, MissingRun, RunKey

log = logging.getLogger("loopwarden.daemon")

# Marked runs retried at once (a gather each) at a flush.
LOAD_BATCH = 256


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



class LoadPauses:
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



class RunLoader:
    """Runs (and the tenants' exemption tables) from the store into the core's memory."""

    def __init__(self, store: StateStore, runs: CoreRuns, metrics: StateMetrics, fencing: Fencing, *,
                 flush_interval: float, wall_clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.runs = runs
        self.metrics = metrics
        self.fencing = fencing
        self.flush_interval = flush_interval
        self._wall = wall_clock
        self._loading: dict[RunKey, asyncio.Future] = {}
        self._loading_exemptions: dict[str, asyncio.Future] = {}
        self.load_pauses = LoadPauses()
        # A runs side that can merge (the core's) remembers failed loads; another (a test-only
        # engine) starts such a run anew as before.
        self.merging = store.lazy and hasattr(runs, "merge_in")
        # Tenants whose exemption table could not be read: not flushed until a load succeeds.
        self.tables_unmerged: set[str] = set()
        # The tenants' standing exemptions (ASK's "always" answers) travel with the runs.
        self.tables = getattr(runs, "exemption_tables", None) or _NoExemptionTables()

    def unmerged(self) -> int:
        """Runs (and exemption tables) whose load failed, waiting to be merged before a write."""
        return (self.runs.unmerged_count() if self.merging else 0) + len(self.tables_unmerged)

    def store_answered(self) -> None:
        """A flush succeeded: every pause on loads is lifted."""
        self.load_pauses.clear()

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
                if outcome.restored:
                    restored += 1
                    with_delta += delta is not None and outcome == Loaded.RESTORED
                    delta_skipped += outcome == Loaded.RESTORED_BASE_ONLY
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

    async def ensure_loaded(self, tenant: str, runs: Sequence[str | MissingRun]) -> None:
        """Fetch these runs from the shared store into memory (at most one GET per run), and the
        tenant's exemption table with them: a replica meets a tenant through a run it does not
        hold, so another replica's "always" answers arrive with it (staleness: see docs/ask.md).
        Each run is a run id (a root run), or a lazy answer's MissingRun: a child run is stored
        under its tree's root's key."""
        await asyncio.gather(self.load_exemptions(tenant),
                             *(self._load_one(tenant, run, run) if isinstance(run, str)
                               else self._load_one(tenant, run.run_id, run.root) for run in runs))

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
        if self.load_pauses.paused(shard):
            self.tables_unmerged.add(tenant)
            return
        try:
            value = await self.store.load(key)
        except StateStoreError as exc:
            self.metrics.store_errors.labels("load").inc()
            self.metrics.store_up.set(0)
            self.load_pauses.pause(shard, self.flush_interval)
            self.tables_unmerged.add(tenant)
            log.warning("state store load of exemptions failed; memory's are used", extra={"error": str(exc)})
            return
        self.tables_unmerged.discard(tenant)
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
        if self.load_pauses.paused(shard):
            self._load_failed(tenant, run_id, root)  # that part of the store is away: fail open, from memory
            return
        mark = None
        started = self.runs.clock() if self.fencing.fenced else 0.0
        try:
            if self.fencing.fenced:
                value, mark = await self.store.load_owned(key)
            else:
                value = await self.store.load(key)
        except StateStoreError as exc:
            self.metrics.store_errors.labels("load").inc()
            self.metrics.store_up.set(0)
            self.load_pauses.pause(shard, self.flush_interval)
            log.warning("state store load failed; the run is evaluated from memory", extra={"error": str(exc)})
            self._load_failed(tenant, run_id, root)
            return
        if self.fencing.fenced and self.runs.lease_lapsed(tenant, run_id):
            self._recheck(tenant, run_id, value, mark, started)
            return
        if self.merging:
            if self._merge(tenant, run_id, value) != Loaded.HELD and self.fencing.fenced:
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
        self.metrics.runs_loaded.labels("store" if outcome == Loaded.RESTORED else "new").inc()

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
                outcome = None
                self.metrics.store_errors.labels("load").inc()
                log.error("stored run unreadable; memory's copy answers", extra={"error": str(exc)})
            if outcome is not None and outcome.restored:
                self.metrics.runs_loaded.labels("store").inc()
                self._owned(tenant, run_id, mark, started)
                return
        self.metrics.runs_loaded.labels("memory").inc()
        if self.runs.held(tenant, run_id):
            self.runs.set_owner_gen(tenant, run_id, self.runs.owner_gen(tenant, run_id),
                                    started + self.fencing.lease_seconds)

    def _owned(self, tenant: str, run_id: str, mark: bytes | None, started: float) -> None:
        """A run just loaded (or merged) by a load sent at `started` (the core's clock): note the
        generation its copy came from and its lease, and count a misroute when another
        replica's lease on it is live."""
        owner, generation, lease_end = owner_mark(mark)
        if self.runs.held(tenant, run_id):
            self.runs.set_owner_gen(tenant, run_id, max(generation, self.runs.owner_gen(tenant, run_id)),
                                    started + self.fencing.lease_seconds)
        if owner and owner != self.fencing.owner_id and lease_end > self._wall():
            self.metrics.misrouted_runs.inc()
            self.fencing.log_once((tenant, run_id), "event for a run another replica owns (misrouted: no routing "
                           "header, or a router that does not hash x-loopwarden-run-id); it is evaluated "
                           "here from the stored copy, and this replica's writes of it are fenced",
                           owner=owner)

    def _load_failed(self, tenant: str, run_id: str, root: str) -> None:
        """The run is evaluated from memory; with a merging runs side it is marked so that no
        flush writes it before its stored copy is merged in. A run memory already holds as
        loaded (never marked) needs no mark: memory's copy is the current one."""
        held = self.runs.held(tenant, run_id)
        if self.merging and not held and self.runs.mark_unmerged(tenant, run_id, root):
            self.metrics.runs_unmerged.inc()
        self.metrics.runs_loaded.labels("memory" if held else "new").inc()

    def _merge(self, tenant: str, run_id: str, value: bytes | None) -> Loaded | None:
        """A load that answered: the stored value merged into (or taken in as) the run; what
        became of it (None when nothing usable was stored)."""
        held = self.runs.held(tenant, run_id)
        if value is None:
            self.runs.clear_unmerged(tenant, run_id)  # nothing stored: memory's copy is all of it
            self.metrics.runs_loaded.labels("memory" if held else "new").inc()
            return None
        try:
            outcome = self.runs.merge_in(value, self._wall(), expect=(tenant, run_id))
        except EncodingError as exc:
            self.runs.clear_unmerged(tenant, run_id)
            self.metrics.store_errors.labels("load").inc()
            log.error("stored run unreadable; memory's copy replaces it", extra={"error": str(exc)})
            self.metrics.runs_loaded.labels("memory" if held else "new").inc()
            return None
        if outcome == Loaded.MERGED:
            self.metrics.runs_merged.inc()
        self.metrics.runs_loaded.labels("store" if outcome in (Loaded.MERGED, Loaded.RESTORED) else
                                        "memory" if outcome == Loaded.HELD else "new").inc()
        return outcome

    async def retry_unmerged(self) -> None:
        """Load every marked run and unread exemption table again (at each flush): those the
        store now answers for are merged, so their next flush can write them."""
        if not self.unmerged() or self.load_pauses.everywhere(self.store):
            return
        for tenant in list(self.tables_unmerged):
            await self.load_exemptions(tenant)
        if not self.merging:
            return
        marked = self.runs.unmerged()
        for start in range(0, len(marked), LOAD_BATCH):
            if self.load_pauses.everywhere(self.store):
                return  # the store failed again: the rest wait for the next flush
            await asyncio.gather(*(self._load_one(run.tenant, run.run_id, run.root)
                                   for run in marked[start:start + LOAD_BATCH]))
