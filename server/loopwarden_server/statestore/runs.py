"""The runs a state keeper keeps: the compiled core's memory, seen as stored values.

Design. The keeper (keeper.py) moves runs between memory and a store as bytes and never looks
inside one, so all it needs of the memory side is this: which runs changed (and the marks put
back when a flush fails), whether a run is held, a held run as a stored value, and a stored value
taken in. The core writes and reads the stored values, framing included (core/src/stored.rs):
here they are only bytes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .encoding import EncodingError

if TYPE_CHECKING:
    from ..core import CoreService

RESTORED, EXPIRED, MISMATCH = "restored", "expired", "mismatch"
# Restored from its full record alone: the delta stored after it did not apply (another base:
# the file store's damage handling can leave one behind) and was left out.
RESTORED_BASE_ONLY = "restored_base_only"
# merge_in's further outcomes: folded into memory's copy; memory's copy already current.
MERGED, HELD = "merged", "held"

RunKey = tuple[str, str]  # (tenant, run_id)
# A changed run: (key, still held, its tree's root: the run itself unless it is a child run).
Dirty = tuple[RunKey, bool, str]


class CoreRuns:
    """The compiled core's runs (core.CoreService)."""

    def __init__(self, core: CoreService) -> None:
        self.core = core
        self.exemption_tables = CoreExemptionTables(core)

    @property
    def idle_ttl_seconds(self) -> float:
        return self.core.idle_ttl_seconds

    def __len__(self) -> int:
        return len(self.core)

    def track_changes(self, evictions_delete: bool) -> None:
        self.core.native.track_changes(evictions_delete)

    def dirty_count(self) -> int:
        return self.core.native.dirty_count()

    def take_dirty(self) -> list[Dirty]:
        return self.core.native.take_dirty()

    def redirty(self, items: list[Dirty]) -> None:
        self.core.native.redirty(items)

    def held(self, tenant: str, run_id: str) -> bool:
        return self.core.native.held(tenant, run_id)

    def encode(self, tenant: str, run_id: str, wall_now: float) -> bytes | None:
        """The run's stored value (its full record), None when it is not held."""
        return self.core.native.encode_run(tenant, run_id, wall_now, self.core.clock())

    def record(self, tenant: str, run_id: str, wall_now: float, deltas: bool = False) -> bytes | None:
        """The run for a flush: its stored value, or with `deltas` (a store that keeps them)
        perhaps a delta (encoding.is_delta). Its change mark is cleared, so the run's next change
        queues it behind the runs still waiting: the longest-unwritten runs are written first."""
        return self.core.native.take_record(tenant, run_id, wall_now, self.core.clock(), deltas)

    @staticmethod
    def frame_records(values: list[bytes | None]) -> list[bytes | None]:
        """The keeper's hook for framing off the event loop: the core's values come framed and
        uncompressed now, so there is nothing left to do (the keeper still calls it)."""
        return values

    def take_in(self, value: bytes, wall_now: float, expect: RunKey | None = None, delta: bytes | None = None) -> str:
        """A stored value, and the delta stored after it (the file store's restore)."""
        return self.take_in_record(value, wall_now, expect, delta)

    def take_in_record(self, record: bytes, wall_now: float, expect: RunKey | None = None,
                       delta: bytes | None = None) -> str:
        """A stored value of any version, or a bare JSON-era record (a snapshot's run), and a
        delta stored after it: restored (with the delta applied), restored_base_only (the delta
        was not the record's), expired or mismatch; EncodingError saying what is wrong when the
        value is malformed."""
        try:
            outcome, evictions = self.core.native.load_run(record, wall_now, self.core.clock(), expect, delta)
        except ValueError as exc:
            raise EncodingError(f"malformed run: {exc}") from None
        self.core.count_evictions(evictions)
        return outcome

    def clear(self) -> None:
        self.core.native.clear()

    # A run whose load failed (keeper.py): evaluated from memory, not flushed until merged.
    def mark_unmerged(self, tenant: str, run_id: str, root: str) -> bool:
        """True when newly marked."""
        return self.core.native.mark_unmerged(tenant, run_id, root)

    def clear_unmerged(self, tenant: str, run_id: str) -> bool:
        return self.core.native.clear_unmerged(tenant, run_id)

    def unmerged(self) -> list[tuple[str, str, str]]:
        """The marked runs: (tenant, run_id, root)."""
        return self.core.native.unmerged_runs()

    # Fencing (keeper.py): the owner generation a held run's copy came from; a stale copy dropped.
    def owner_gen(self, tenant: str, run_id: str) -> int:
        return self.core.native.owner_gen(tenant, run_id)

    def set_owner_gen(self, tenant: str, run_id: str, generation: int, lease_until: float | None = None) -> None:
        """`lease_until` (the core's clock, `clock()`): until when this replica's lease on the
        run is known to be live; past it the run's next event re-reads the stored copy first."""
        self.core.native.set_owner_gen(tenant, run_id, generation, lease_until)

    def lease_lapsed(self, tenant: str, run_id: str) -> bool:
        """Held, and its lease (set_owner_gen's `lease_until`) lapsed by now."""
        return self.core.native.lease_lapsed(tenant, run_id, self.core.clock())

    def clock(self) -> float:
        """The core's clock, which lease times are kept in."""
        return self.core.clock()

    def forget(self, tenant: str, run_id: str) -> bool:
        """Drop a held run without deleting it from the store."""
        return self.core.native.forget(tenant, run_id)

    def unmerged_count(self) -> int:
        return self.core.native.unmerged_count()

    def merge_in(self, value: bytes, wall_now: float, expect: RunKey) -> str:
        """A stored value read after a failed load: merged into memory's copy of a marked run,
        restored when the run is not held, left alone (HELD) when memory's copy is current;
        EncodingError when it is malformed (the mark is lifted: nothing readable to merge)."""
        try:
            outcome, evictions = self.core.native.merge_run(value, wall_now, self.core.clock(), expect)
        except ValueError as exc:
            raise EncodingError(f"malformed run: {exc}") from None
        self.core.count_evictions(evictions)
        return outcome


class CoreExemptionTables:
    """The compiled core's standing exemptions, a table per tenant: one stored value beside the
    tenant's runs (encoding.exemptions_key), moved by the keeper as runs are."""

    def __init__(self, core: CoreService) -> None:
        self.core = core

    def track_changes(self) -> None:
        self.core.native.track_exemptions()

    def dirty_count(self) -> int:
        return self.core.native.exemptions_dirty_count()

    def take_dirty(self) -> list[str]:
        return self.core.native.take_dirty_exemptions()

    def redirty(self, tenants: list[str]) -> None:
        self.core.native.redirty_exemptions(tenants)

    def encode(self, tenant: str, wall_now: float) -> tuple[bytes | None, float]:
        """The tenant's table as a stored value and its TTL; (None, 0) when it holds none."""
        encoded = self.core.native.encode_exemptions(tenant, wall_now, self.core.clock())
        if encoded is None:
            return None, 0.0
        return encoded

    def absent(self, tenant: str) -> None:
        """The shared store holds none for the tenant (revoked or expired elsewhere)."""
        self.core.native.exemptions_absent(tenant)

    def take_in(self, value: bytes, wall_now: float) -> int:
        """A stored table taken in (how many unexpired); EncodingError when it is malformed."""
        try:
            _tenant, count = self.core.native.load_exemptions(value, wall_now, self.core.clock())
        except ValueError as exc:
            raise EncodingError(f"malformed exemption table: {exc}") from None
        return count
