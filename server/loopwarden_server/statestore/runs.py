"""The runs a state keeper keeps: the compiled core's memory, seen as stored values.

Design. The keeper (keeper.py) moves runs between memory and a store as bytes and never looks
inside one, so all it needs of the memory side is this: which runs changed (and the marks put
back when a flush fails), whether a run is held, a held run as a stored value, and a stored value
taken in. The core writes and reads the run record's JSON itself (core/src/state.rs); only the
framing (magic + zlib) is encoding.py's.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .encoding import EncodingError, frame, unframe

if TYPE_CHECKING:
    from ..core import CoreService

RESTORED, EXPIRED, MISMATCH = "restored", "expired", "mismatch"

RunKey = tuple[str, str]  # (tenant, run_id)
# A changed run: (key, still held, its tree's root: the run itself unless it is a child run).
Dirty = tuple[RunKey, bool, str]


class CoreRuns:
    """The compiled core's runs (core.CoreService)."""

    def __init__(self, core: CoreService) -> None:
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

    def take_dirty(self) -> list[Dirty]:
        return self.core.native.take_dirty()

    def redirty(self, items: list[Dirty]) -> None:
        self.core.native.redirty(items)

    def held(self, tenant: str, run_id: str) -> bool:
        return self.core.native.held(tenant, run_id)

    def encode(self, tenant: str, run_id: str, wall_now: float) -> bytes | None:
        record = self.core.native.encode_run(tenant, run_id, wall_now, self.core.clock())
        return None if record is None else frame(record)

    def take_in(self, value: bytes, wall_now: float, expect: RunKey | None = None) -> str:
        return self.take_in_record(unframe(value), wall_now, expect)

    def take_in_record(self, record: bytes, wall_now: float, expect: RunKey | None = None) -> str:
        """A run record's JSON (unframed): restored, expired or mismatch; EncodingError naming
        the field when it is malformed."""
        try:
            outcome, evictions = self.core.native.load_run(record, wall_now, self.core.clock(), expect)
        except ValueError as exc:
            raise EncodingError(f"malformed run: {exc}") from None
        self.core.count_evictions(evictions)
        return outcome

    def clear(self) -> None:
        self.core.native.clear()
