"""In-memory per-run state, keyed by (tenant, run_id), sharded by run id.

Design. A run is keyed by the pair (tenant, run_id), never a concatenated string: a run id is
scoped to its tenant, so two tenants using one id hold two runs. Every run id maps to exactly
one shard, chosen by zlib.crc32 of the id (never `hash()`,
which is salted per process and would move runs between shards across restarts and processes).
A shard is an OrderedDict kept in least-recently-used order, so its first entry is its LRU run
and idle-TTL expiry pops from the front without scanning live runs. The daemon runs one asyncio
event loop and the store is touched only from it, so no lock is needed; sharding keeps every
per-event operation O(1) in the number of runs and lets expiry sweep a shard at a time.

The max-runs bound is global and exact: when a new run would exceed it, the least recently
used run across all shards is evicted (the minimum of the shard heads: O(shards), not O(runs)).
An evicted or ended run is gone entirely, so a later event with its id starts from zero and can
never inherit stale counts.

Change tracking (on when a state store is configured): every run an event touches is marked
dirty, and every run that ends or is evicted is marked deleted, in one dict (key -> still held?)
that the state keeper takes whole each flush interval. Insertion order is kept, so a flush
writes runs in the order they first changed. An eviction (idle TTL, max runs) is a delete for the
embedded file store, which must not grow with runs the daemon forgot; a shared store forgets idle
runs by its own expiry, and another replica may by now own an evicted run, so there an eviction
deletes nothing (only run_end does).
"""
from __future__ import annotations

import zlib
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .engine import RunState
from .retries import RetryWindow


@dataclass(slots=True)
class RunEntry:
    tenant: str
    run_id: str
    state: RunState
    agent_id: str = ""
    session_id: str = ""
    last_seen: float = 0.0  # clock value of the latest event
    touch: int = 0  # global access counter: total LRU order across shards
    events_evaluated: int = 0
    recent: deque | None = None  # the run's latest WARN/BLOCK/ABORT decisions (InspectRun)
    retries: RetryWindow | None = None  # its latest events with a seq, to answer resends alike


EvictionListener = Callable[[str, RunEntry], None]  # (reason, entry)
RunKey = tuple[str, str]  # (tenant, run_id)


@dataclass
class RunStore:
    max_runs: int
    idle_ttl_seconds: float
    clock: Callable[[], float]
    shard_count: int = 16
    on_evict: EvictionListener | None = None
    _shards: list[OrderedDict[RunKey, RunEntry]] = field(init=False)
    _size: int = field(init=False, default=0)
    _touches: int = field(init=False, default=0)
    _dirty: dict[RunKey, bool] | None = field(init=False, default=None)
    _evictions_delete: bool = field(init=False, default=True)

    def __post_init__(self) -> None:
        self._shards = [OrderedDict() for _ in range(self.shard_count)]

    def __len__(self) -> int:
        return self._size

    def shard_index(self, run_id: str) -> int:
        return zlib.crc32(run_id.encode("utf-8", "surrogatepass")) % self.shard_count

    def _shard(self, run_id: str) -> OrderedDict[RunKey, RunEntry]:
        return self._shards[self.shard_index(run_id)]

    def get(self, tenant: str, run_id: str) -> RunEntry | None:
        """Read without touching recency (inspection must not keep a run alive)."""
        return self._shard(run_id).get((tenant, run_id))

    def touch(self, tenant: str, run_id: str) -> RunEntry | None:
        """The run's entry marked most recently used, or None when none is held (a run idle past
        its TTL but not yet swept is dropped here: it must not hand its counts to new activity)."""
        shard = self._shard(run_id)
        key = (tenant, run_id)
        entry = shard.get(key)
        if entry is None:
            return None
        now = self.clock()
        if now - entry.last_seen > self.idle_ttl_seconds:
            self._drop(shard, key, "idle_ttl")
            return None
        shard.move_to_end(key)
        self._touches += 1
        entry.last_seen = now
        entry.touch = self._touches
        if self._dirty is not None:
            self._dirty[key] = True
        return entry

    def create(self, tenant: str, run_id: str, state: RunState) -> RunEntry:
        """Hold a new run (after `touch` found none), most recently used; evicts the LRU run if full."""
        if self._size >= self.max_runs:
            self._evict_least_recently_used()
        self._touches += 1
        entry = RunEntry(tenant, run_id, state, last_seen=self.clock(), touch=self._touches)
        self._shard(run_id)[(tenant, run_id)] = entry
        self._size += 1
        if self._dirty is not None:
            self._dirty[(tenant, run_id)] = True
        return entry

    def restore(self, entry: RunEntry, idle_seconds: float) -> None:
        """Insert a run read from a snapshot as most recently used, idle for `idle_seconds`."""
        shard = self._shard(entry.run_id)
        key = (entry.tenant, entry.run_id)
        if shard.pop(key, None) is not None:
            self._size -= 1
        if self._size >= self.max_runs:
            self._evict_least_recently_used()
        self._touches += 1
        entry.touch = self._touches
        entry.last_seen = self.clock() - idle_seconds
        shard[key] = entry
        self._size += 1

    def remove(self, tenant: str, run_id: str) -> bool:
        """run_end: free the run at once (not an eviction)."""
        shard = self._shard(run_id)
        if self._dirty is not None:
            self._dirty[(tenant, run_id)] = False  # also for a run held only by the shared store
        if shard.pop((tenant, run_id), None) is None:
            return False
        self._size -= 1
        return True

    def expire_idle(self, budget: int = 10_000) -> int:
        """Drop runs idle longer than the TTL, oldest first; at most `budget` per call."""
        cutoff = self.clock() - self.idle_ttl_seconds
        dropped = 0
        for shard in self._shards:
            while shard and dropped < budget:
                key, entry = next(iter(shard.items()))
                if entry.last_seen >= cutoff:
                    break
                self._drop(shard, key, "idle_ttl")
                dropped += 1
        return dropped

    def track_changes(self, evictions_delete: bool = True) -> None:
        if self._dirty is None:
            self._dirty = {}
        self._evictions_delete = evictions_delete

    def dirty_count(self) -> int:
        return len(self._dirty) if self._dirty is not None else 0

    def take_dirty(self) -> dict[RunKey, bool]:
        """The runs changed since the last call (key -> still held), and a fresh empty set."""
        taken, self._dirty = self._dirty or {}, ({} if self._dirty is not None else None)
        return taken

    def redirty(self, items: list[tuple[RunKey, bool]]) -> None:
        """Put back runs a failed flush did not write; a run marked again since keeps its mark."""
        if self._dirty is None:
            return
        for key, live in items:
            self._dirty.setdefault(key, live)

    def clear(self) -> None:
        for shard in self._shards:
            shard.clear()
        self._size = 0

    def entries(self) -> Iterator[RunEntry]:
        for shard in self._shards:
            yield from shard.values()

    def _evict_least_recently_used(self) -> None:
        heads = [(next(iter(shard.values())).touch, index) for index, shard in enumerate(self._shards) if shard]
        if not heads:
            return
        _, index = min(heads)
        shard = self._shards[index]
        self._drop(shard, next(iter(shard)), "max_runs")

    def _drop(self, shard: OrderedDict[RunKey, RunEntry], key: RunKey, reason: str) -> None:
        entry = shard.pop(key)
        self._size -= 1
        if self._dirty is not None:
            if self._evictions_delete:
                self._dirty[key] = False
            else:
                self._dirty.pop(key, None)
        if self.on_evict is not None:
            self.on_evict(reason, entry)
