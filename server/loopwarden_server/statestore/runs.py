"""The runs a state keeper keeps: the compiled core's memory, seen as stored values.

Design. The keeper (loader.py, flusher.py) moves runs between memory and a store as bytes and
never looks inside one, so all it needs of the memory side is this: which runs changed (and the
marks put back when a flush fails), whether a run is held, a held run as a stored value, and a
stored value taken in. That is the core's persistence role (`Core.persistence`) and, for the
tenants' exemption tables, its exemptions role (`Core.exemptions`); what they answer with (a
`DirtyRun`, a `RunLoad` and its `Loaded` outcome, a `StoredTable`) are the core's own types. The
core writes and reads the stored values, framing included (core/src/stored.rs): here they are only
bytes.

The store knows nothing of the servicer or the daemon's per-request face (core.py): what it
reads of the daemon's core is `CoreSide`, which core.CoreService is.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import loopwarden_core
from loopwarden_core import DirtyRun, Loaded, MarkedRun, MissingRun

from .encoding import EncodingError

__all__ = ["CoreExemptionTables", "CoreRuns", "CoreSide", "DirtyRun", "Loaded", "MarkedRun", "MissingRun", "RunKey"]

RunKey = tuple[str, str]  # (tenant, run_id)


class CoreSide(Protocol):
    """What the state store reads of the daemon's core (core.CoreService is one)."""

    native: loopwarden_core.Core
    idle_ttl_seconds: float
    clock: Callable[[], float]

    def count_evictions(self, reasons: list[str], tenant: str = "") -> None: ...


class CoreRuns:
    """The compiled core's runs, through its persistence role."""

    def __init__(self, core: CoreSide) -> None:
        self.core = core
        self.persistence = core.native.persistence
        self.exemption_tables = CoreExemptionTables(core)

    @property
    def idle_ttl_seconds(self) -> float:
        return self.core.idle_ttl_seconds

    def __len__(self) -> int:
        return len(self.core.native)

    def track_changes(self, evictions_delete: bool) -> None:
        self.persistence.track_changes(evictions_delete)

    def dirty_count(self) -> int:
        return self.persistence.dirty_count()

    def take_dirty(self) -> list[DirtyRun]:
        return self.persistence.take_dirty()

    def redirty(self, items: list[DirtyRun]) -> None:
        self.persistence.redirty(items)

    def held(self, tenant: str, run_id: str) -> bool:
        return self.persistence.held(tenant, run_id)

    def encode(self, tenant: str, run_id: str, wall_now: float) -> bytes | None:
        """The run's stored value, its full record; None when it is not held."""
        return self.record(tenant, run_id, wall_now)

    def record(self, tenant: str, run_id: str, wall_now: float, deltas: bool = False) -> bytes | None:
        """The run for a flush: its stored value, or with `deltas` (a store that keeps them)
        perhaps a delta (encoding.is_delta). Its change mark is cleared, so the run's next change
        queues it behind the runs still waiting: the longest-unwritten runs are written first."""
        return self.persistence.take_record(tenant, run_id, wall_now, self.core.clock(), deltas)

    def take_in(self, value: bytes, wall_now: float, expect: RunKey | None = None,
                delta: bytes | None = None) -> Loaded:
        """A stored value, and the delta stored after it (the file store's restore)."""
        return self.take_in_record(value, wall_now, expect, delta)

    def take_in_record(self, record: bytes, wall_now: float, expect: RunKey | None = None,
                       delta: bytes | None = None) -> Loaded:
        """A stored value of any version, or a bare JSON-era record (a snapshot's run), and a
        delta stored after it: RESTORED (with the delta applied), RESTORED_BASE_ONLY (the delta
        was not the record's), EXPIRED or MISMATCH; EncodingError saying what is wrong when the
        value is malformed."""
        try:
            loaded = self.persistence.load(record, wall_now, self.core.clock(), expect, delta)
        except ValueError as exc:
            raise EncodingError(f"malformed run: {exc}") from None
        self.core.count_evictions(loaded.evictions)
        return loaded.outcome

    def clear(self) -> None:
        self.persistence.clear()

    # A run whose load failed (loader.py): evaluated from memory, not flushed until merged.
    def mark_unmerged(self, tenant: str, run_id: str, root: str) -> bool:
        """True when newly marked."""
        return self.persistence.mark_unmerged(tenant, run_id, root)

    def clear_unmerged(self, tenant: str, run_id: str) -> bool:
        return self.persistence.clear_unmerged(tenant, run_id)

    def unmerged(self) -> list[MarkedRun]:
        """The marked runs."""
        return self.persistence.unmerged()

    # Fencing (loader.py, flusher.py): the owner generation a held run's copy came from.
    def owner_gen(self, tenant: str, run_id: str) -> int:
        return self.persistence.owner_gen(tenant, run_id)

    def set_owner_gen(self, tenant: str, run_id: str, generation: int, lease_until: float | None = None) -> None:
        """`lease_until` (the core's clock, `clock()`): until when this replica's lease on the
        run is known to be live; past it the run's next event re-reads the stored copy first."""
        self.persistence.set_owner_gen(tenant, run_id, generation, lease_until)

    def lease_lapsed(self, tenant: str, run_id: str) -> bool:
        """Held, and its lease (set_owner_gen's `lease_until`) lapsed by now."""
        return self.persistence.lease_lapsed(tenant, run_id, self.core.clock())

    def clock(self) -> float:
        """The core's clock, which lease times are kept in."""
        return self.core.clock()

    def forget(self, tenant: str, run_id: str) -> bool:
        """Drop a held run without deleting it from the store."""
        return self.persistence.forget(tenant, run_id)

    def unmerged_count(self) -> int:
        return self.persistence.unmerged_count()

    def merge_in(self, value: bytes, wall_now: float, expect: RunKey) -> Loaded:
        """A stored value read after a failed load: MERGED into memory's copy of a marked run,
        RESTORED when the run is not held, left alone (HELD) when memory's copy is current;
        EncodingError when it is malformed (the mark is lifted: nothing readable to merge)."""
        try:
            loaded = self.persistence.merge(value, wall_now, self.core.clock(), expect)
        except ValueError as exc:
            raise EncodingError(f"malformed run: {exc}") from None
        self.core.count_evictions(loaded.evictions)
        return loaded.outcome


class CoreExemptionTables:
    """The compiled core's standing exemptions, a table per tenant: one stored value beside the
    tenant's runs (encoding.exemptions_key), moved by the keeper as runs are."""

    def __init__(self, core: CoreSide) -> None:
        self.core = core
        self.exemptions = core.native.exemptions

    def track_changes(self) -> None:
        self.exemptions.track_changes()

    def dirty_count(self) -> int:
        return self.exemptions.dirty_count()

    def take_dirty(self) -> list[str]:
        return self.exemptions.take_dirty()

    def redirty(self, tenants: list[str]) -> None:
        self.exemptions.redirty(tenants)

    def encode(self, tenant: str, wall_now: float) -> tuple[bytes | None, float]:
        """The tenant's table as a stored value and its TTL; (None, 0) when it holds none."""
        stored = self.exemptions.encode(tenant, wall_now, self.core.clock())
        if stored is None:
            return None, 0.0
        return stored.record, stored.ttl_seconds

    def absent(self, tenant: str) -> None:
        """The shared store holds none for the tenant (revoked or expired elsewhere)."""
        self.exemptions.absent(tenant)

    def take_in(self, value: bytes, wall_now: float) -> int:
        """A stored table taken in (how many unexpired); EncodingError when it is malformed."""
        try:
            return self.exemptions.load(value, wall_now, self.core.clock()).count
        except ValueError as exc:
            raise EncodingError(f"malformed exemption table: {exc}") from None
