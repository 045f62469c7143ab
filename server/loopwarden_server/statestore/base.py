"""The state store interface: where runs go so that they outlive the process holding them.

Byte-oriented on purpose: a store moves keys and values (statestore.encoding) and never sees a
RunState, so a backend in another language (the Rust core) implements the same five methods.

- `check()`      at start, before any listener binds: fail fast (StateStoreError) on a store that
                 can never work here (an unwritable path, a malformed URL). A store that is merely
                 unreachable right now (Redis down) does not fail the start: persistence fails open.
- `restore()`    after every listener binds: the stored runs, streamed, for an embedded store
                 that owns every run of its replica (the file store): each run's value and the
                 delta stored after it, if any (a store that keeps deltas: `deltas = True`). A
                 shared store (`lazy = True`) returns nothing and is asked per run instead:
- `load(key)`    one run's value, or None when the store has none (a new run).
- `flush(items)` write (key, value, ttl_seconds) items; value None deletes the key. All or nothing
                 from the caller's view: on StateStoreError the caller keeps the runs dirty and
                 flushes them again later.
- `close()`      release connections and files.

A shared store may also fence writes by owner (`fenced`, `load_owned`, `flush_fenced`).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence

FlushItem = tuple[bytes, "bytes | None", float]  # (key, value or None = delete, ttl seconds)
# A restored run: its value (a full record) and the latest delta stored after it, or None.
StoredRun = tuple[bytes, "bytes | None"]
# A fenced write: a FlushItem and the owner generation the writer's copy came from (-1: a delete,
# which only a live lease of another replica holds back).
FencedItem = tuple[bytes, "bytes | None", float, int]
# What became of a fenced write: (WRITTEN, new generation), (WAITING, mark) while another
# replica's lease is live and nobody wrote since, (STALE, mark) when another replica wrote since.
STALE, WAITING, WRITTEN = 0, 1, 2


class StateStoreError(RuntimeError):
    """The store failed an operation; the message says which and why (never a password)."""


class StateStore(ABC):
    #: True: runs are loaded one by one on their first event (shared by replicas).
    lazy: bool = False
    #: What logs and metrics call this store ("file", "redis").
    kind: str = ""
    #: True: the store keeps a run's latest delta beside its full record (a flush may write a
    #: delta: only what changed since), and `restore` yields both. A store that keeps one value
    #: per key (Redis) is always written full records.
    deltas: bool = False

    def describe(self) -> str:
        """Where the store is, fit for a log line (no credentials)."""
        return self.kind

    @abstractmethod
    def check(self) -> None: ...

    def claim(self) -> None:
        """Take the store for this daemon, where a store is one daemon's alone (the file store);
        StateStoreError names who holds it. Called once, at the daemon's start, after `check`."""

    def restore(self) -> Iterator[StoredRun]:
        return iter(())

    def shard(self, key: bytes) -> str:
        """The part of the store that serves `key`, for pausing loads where a load failed: a
        store with parts (a Redis Cluster: the master serving the key's slot) names it; every
        other store is one part, ""."""
        return ""

    def shards(self) -> list[str]:
        """Every part `shard` names (as far as the store knows them now)."""
        return [""]

    async def load(self, key: bytes) -> bytes | None:
        return None

    @abstractmethod
    async def flush(self, items: Sequence[FlushItem]) -> None: ...

    #: True: the store keeps an owner mark per run and fences writes by it (load_owned,
    #: flush_fenced; fencing.py says how they are used).
    fenced: bool = False

    async def load_owned(self, key: bytes) -> tuple[bytes | None, bytes | None]:
        """One run's value and its owner mark (b"<instance> <generation> <lease end, ms>")."""
        return await self.load(key), None

    async def flush_fenced(self, items: Sequence[FencedItem], owner: str,
                           lease_seconds: float) -> list[tuple[int, int | bytes]]:
        """Write each item unless another replica owns its run; one (outcome, detail) per item."""
        raise NotImplementedError

    async def close(self) -> None:
        return None
