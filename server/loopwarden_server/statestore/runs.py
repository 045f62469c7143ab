"""The runs a state keeper keeps, behind one face: the Python engine's RunStore or the compiled core.

Design. The keeper (keeper.py) moves runs between memory and a store as bytes and never looks
inside one, so all it needs of the memory side is this: which runs changed (and the marks put
back when a flush fails), whether a run is held, a held run as a stored value, and a stored value
taken in. `PythonRuns` does that with statestore.encoding over RunEntry objects; `CoreRuns` asks
the core, which writes and reads the same JSON record itself (core/src/state.rs) and leaves only
the framing (magic + zlib) to encoding.py. So a file or Redis store written by one engine is read
by the other.
"""
from __future__ import annotations

from typing import Protocol

from ..store import RunKey, RunStore
from .encoding import EncodingError, decode_run, encode_run, frame, unframe

RESTORED, EXPIRED, MISMATCH = "restored", "expired", "mismatch"


class KeptRuns(Protocol):
    idle_ttl_seconds: float

    def __len__(self) -> int: ...
    def track_changes(self, evictions_delete: bool) -> None: ...
    def dirty_count(self) -> int: ...
    def take_dirty(self) -> list[tuple[RunKey, bool]]: ...
    def redirty(self, items: list[tuple[RunKey, bool]]) -> None: ...
    def held(self, tenant: str, run_id: str) -> bool: ...
    def encode(self, tenant: str, run_id: str, wall_now: float) -> bytes | None: ...
    def take_in(self, value: bytes, wall_now: float, expect: RunKey | None = None) -> str: ...
    def clear(self) -> None: ...


class PythonRuns:
    """The Python engine's RunStore."""

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

    def take_dirty(self) -> list[tuple[RunKey, bool]]:
        return list(self.store.take_dirty().items())

    def redirty(self, items: list[tuple[RunKey, bool]]) -> None:
        self.store.redirty(items)

    def held(self, tenant: str, run_id: str) -> bool:
        return self.store.get(tenant, run_id) is not None

    def encode(self, tenant: str, run_id: str, wall_now: float) -> bytes | None:
        entry = self.store.get(tenant, run_id)
        return None if entry is None else encode_run(entry, wall_now, self.store.clock())

    def take_in(self, value: bytes, wall_now: float, expect: RunKey | None = None) -> str:
        entry, idle = decode_run(value, wall_now)
        if idle > self.store.idle_ttl_seconds:
            return EXPIRED
        if expect is not None and (entry.tenant, entry.run_id) != expect:
            return MISMATCH
        self.store.restore(entry, idle)
        return RESTORED

    def clear(self) -> None:
        self.store.clear()


class CoreRuns:
    """The compiled core's runs (core_engine.CoreService)."""

    def __init__(self, core) -> None:  # a CoreService; not imported: the core is optional
        self.core = core

    @property
    def idle_ttl_seconds(self) -> float:
        return self.core.idle_ttl_seconds

    def __len__(self) -> int:
        return len(self.core)

    def track_changes(self, evictions_delete: bool) -> None:
        self.core.native.track_changes(evictions_delete)

    def dirty_count(self) -> int:
        return self.core.native.dirty_count()

    def take_dirty(self) -> list[tuple[RunKey, bool]]:
        return self.core.native.take_dirty()

    def redirty(self, items: list[tuple[RunKey, bool]]) -> None:
        self.core.native.redirty(items)

    def held(self, tenant: str, run_id: str) -> bool:
        return self.core.native.held(tenant, run_id)

    def encode(self, tenant: str, run_id: str, wall_now: float) -> bytes | None:
        record = self.core.native.encode_run(tenant, run_id, wall_now, self.core.clock())
        return None if record is None else frame(record)

    def take_in(self, value: bytes, wall_now: float, expect: RunKey | None = None) -> str:
        record = unframe(value)
        try:
            outcome, evictions = self.core.native.load_run(record, wall_now, self.core.clock(), expect)
        except ValueError as exc:
            raise EncodingError(f"malformed run: {exc}") from None
        self.core.count_evictions(evictions)
        return outcome

    def clear(self) -> None:
        self.core.native.clear()
