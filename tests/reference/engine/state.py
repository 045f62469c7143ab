"""Per-run memory (spec section 3): a bounded record history, announcements, guard, abort.

Design. A daemon holds up to hundreds of thousands of runs, each with up to historySize records,
so a record must not be a Python object holding two 64-character hex strings (~350 bytes). The
history is stored column by column instead: the 32-byte args and result digests of every record
live in two bytearrays, tool names are interned strings shared by every run, and sequence numbers
sit in an array of machine integers. A 30-record history is then ~2.5 KB. The columns are kept
oldest first; dropping the oldest record is a memmove of a few hundred bytes, which is cheaper
than ring-buffer index arithmetic in every scan. Scans for "this call" use bytearray.rfind,
which runs in C.

Result status per record: PENDING (the call has no outcome yet), RESULT, or ERROR (the outcome
was an error; its digest is of the error text). Two outcomes are "the same result" when both
status and digest are equal.
"""
from __future__ import annotations

import sys
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .verdicts import Verdict

if TYPE_CHECKING:
    from .compaction_guard import GuardWindow

# A run that warns on ever-new patterns must not grow without bound.
MAX_ANNOUNCED_KEYS = 512
# Past this many distinct triples a run stops remembering new ones: a repeat of a forgotten
# triple then counts as new, which can only make the run-wide breaker later, never wrongly earlier.
MAX_SEEN_TRIPLES = 4096

DIGEST = 32
PENDING, RESULT, ERROR = 0, 1, 2
_NO_DIGEST = bytes(DIGEST)

intern = sys.intern


@dataclass(frozen=True, slots=True)
class Record:
    """One record, spelled out for inspection, snapshots and tests (not how it is stored)."""

    seq: int
    tool_name: str
    args_hash: str  # "tool:" + 64 hex
    tool_call_id: str = ""
    result_hash: str | None = None  # 64 hex, "error:" + 64 hex, or None while pending
    unknown_tool_name: str | None = None


def args_hash_text(tool_name: str, args_digest: bytes) -> str:
    return f"{tool_name}:{args_digest.hex()}"


def result_hash_text(status: int, result_digest: bytes) -> str | None:
    if status == PENDING:
        return None
    return ("error:" if status == ERROR else "") + result_digest.hex()


class History:
    """The newest `capacity` records of a run, oldest first, one column per field."""

    __slots__ = ("capacity", "args", "results", "status", "tools", "call_ids", "seqs", "unknown", "spellings")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.args = bytearray()
        self.results = bytearray()
        self.status = bytearray()
        self.tools: list[str] = []
        self.call_ids: list[str] = []
        self.seqs = array("Q")
        # Allocated on the first record that names a missing tool: most runs never need it.
        self.unknown: list[str | None] | None = None
        # The tool as the host spelled it where that differs from `tools` (`Bash` of `exec`):
        # allocated on the first such record, as `unknown` is.
        self.spellings: list[str | None] | None = None

    def __len__(self) -> int:
        return len(self.tools)

    def append(self, seq: int, tool_name: str, args_digest: bytes, call_id: str = "",
               status: int = PENDING, result_digest: bytes = _NO_DIGEST, unknown: str | None = None,
               spelled: str | None = None) -> None:
        if len(self.tools) >= self.capacity:
            self._drop_oldest(len(self.tools) - self.capacity + 1)
        self.args += args_digest
        self.results += result_digest
        self.status.append(status)
        self.tools.append(intern(tool_name))
        self.call_ids.append(call_id)
        self.seqs.append(seq & 0xFFFFFFFFFFFFFFFF)
        if unknown is not None or self.unknown is not None:
            if self.unknown is None:
                self.unknown = [None] * (len(self.tools) - 1)
            self.unknown.append(unknown)
        spelled = None if spelled == tool_name else spelled
        if spelled is not None or self.spellings is not None:
            if self.spellings is None:
                self.spellings = [None] * (len(self.tools) - 1)
            self.spellings.append(spelled)

    def spelling_at(self, index: int) -> str:
        """The record's tool as the host spelled it (messages, InspectRun)."""
        spelled = None if self.spellings is None else self.spellings[index]
        return self.tools[index] if spelled is None else spelled

    def set_result(self, index: int, status: int, result_digest: bytes, unknown: str | None) -> None:
        self.results[index * DIGEST:(index + 1) * DIGEST] = result_digest
        self.status[index] = status
        # A call id only serves to match an outcome to its pending call. Unique ids are ~80 bytes
        # each, nearly half a run's memory, so a completed record lets go of its id.
        self.call_ids[index] = ""
        if unknown is not None or self.unknown is not None:
            if self.unknown is None:
                self.unknown = [None] * len(self.tools)
            self.unknown[index] = unknown

    def resize(self, capacity: int) -> None:
        if len(self.tools) > capacity:
            self._drop_oldest(len(self.tools) - capacity)
        self.capacity = capacity

    def _drop_oldest(self, count: int) -> None:
        del self.args[:count * DIGEST]
        del self.results[:count * DIGEST]
        del self.status[:count]
        del self.tools[:count]
        del self.call_ids[:count]
        del self.seqs[:count]
        if self.unknown is not None:
            del self.unknown[:count]
        if self.spellings is not None:
            del self.spellings[:count]

    def args_digest(self, index: int) -> bytes:
        return bytes(self.args[index * DIGEST:(index + 1) * DIGEST])

    def result_digest(self, index: int) -> bytes:
        return bytes(self.results[index * DIGEST:(index + 1) * DIGEST])

    def unknown_at(self, index: int) -> str | None:
        return None if self.unknown is None else self.unknown[index]

    def matches(self, tool_name: str, args_digest: bytes) -> Iterator[int]:
        """Indexes of records of this call, newest first (C-speed search of the args column)."""
        args, tools = self.args, self.tools
        end = len(args)
        while True:
            position = args.rfind(args_digest, 0, end)
            if position < 0:
                return
            end = position + DIGEST - 1
            if position % DIGEST:
                continue  # a match straddling two digests: not a record
            index = position // DIGEST
            if tools[index] == tool_name:
                yield index

    def record(self, index: int) -> Record:
        # InspectRun's tool_name is the spelling; the args hash is over the normalised name.
        return Record(self.seqs[index], self.spelling_at(index), args_hash_text(self.tools[index], self.args_digest(index)),
                      self.call_ids[index], result_hash_text(self.status[index], self.result_digest(index)),
                      self.unknown_at(index))

    def __iter__(self) -> Iterator[Record]:
        return (self.record(index) for index in range(len(self.tools)))


@dataclass(slots=True)
class RunState:
    """Everything the engine remembers about one run. Mutated in place by `evaluate`."""

    history: History = field(default_factory=lambda: History(30))
    # warning key -> highest decade of count already announced (count // 10)
    announced: dict[str, int] | None = None
    guard: GuardWindow | None = None  # an armed post-compaction guard
    abort: Verdict | None = None
    blocks: int = 0
    # Run-wide breaker (extension): 64-bit keys of every (tool, args, result) triple seen in the
    # run, and how many completed calls in a row brought none new. Only kept while it is on.
    seen_triples: set[int] | None = None
    no_new_streak: int = 0

    @property
    def records(self) -> list[Record]:
        return list(self.history)

    def resize(self, history_size: int) -> None:
        """Apply a (re)loaded historySize: keep the newest records."""
        if history_size != self.history.capacity:
            self.history.resize(history_size)
