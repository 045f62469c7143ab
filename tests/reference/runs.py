"""The reference engine's RunStore behind the keeper's face (statestore/runs.py's CoreRuns), so a
test can move a run between the oracle and the core through stored bytes."""
from __future__ import annotations

from loopwarden_server.statestore.encoding import EncodingError
from loopwarden_server.statestore.runs import DirtyRun, Loaded, RunKey

from .codec import decode_run, encode_run
from .store import RunStore


class ReferenceRuns:
    def __init__(self, runs: RunStore) -> None:
        self.store = runs

    @property
    def idle_ttl_seconds(self) -> float:
        return self.store.idle_ttl_seconds

    def __len__(self) -> int:
        return len(self.store)

    def track_changes(self, evictions_delete: bool) -> None:
        self.store.track_changes(evictions_delete=evictions_delete)

    def dirty_count(self) -> int:
        return self.store.dirty_count()

    def take_dirty(self) -> list[DirtyRun]:
        return [DirtyRun(tenant, run_id, held) for (tenant, run_id), held in self.store.take_dirty().items()]

    def redirty(self, items: list[DirtyRun]) -> None:
        self.store.redirty([(item.key, item.held) for item in items])

    def held(self, tenant: str, run_id: str) -> bool:
        return self.store.get(tenant, run_id) is not None

    def encode(self, tenant: str, run_id: str, wall_now: float) -> bytes | None:
        entry = self.store.get(tenant, run_id)
        return None if entry is None else encode_run(entry, wall_now, self.store.clock())

    def record(self, tenant: str, run_id: str, wall_now: float, deltas: bool = False) -> bytes | None:
        """A flush's value: always the full record (the oracle writes no deltas)."""
        return self.encode(tenant, run_id, wall_now)

    def take_in(self, value: bytes, wall_now: float, expect: RunKey | None = None, delta: bytes | None = None) -> Loaded:
        if delta is not None:  # only the core writes deltas; the oracle's runs are full records
            raise EncodingError("the reference codec reads full records, not deltas")
        entry, idle = decode_run(value, wall_now)
        if idle > self.store.idle_ttl_seconds:
            return Loaded.EXPIRED
        if expect is not None and (entry.tenant, entry.run_id) != expect:
            return Loaded.MISMATCH
        self.store.restore(entry, idle)
        return Loaded.RESTORED

    def clear(self) -> None:
        self.store.clear()
