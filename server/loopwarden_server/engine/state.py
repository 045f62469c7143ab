"""Per-run memory (spec section 3): a bounded record list, announcements, guard, abort."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .verdicts import Verdict

# A run that warns on ever-new patterns must not grow without bound.
MAX_ANNOUNCED_KEYS = 512


class Record:
    """One tool call of a run: pending until its outcome fills result_hash."""

    __slots__ = ("seq", "tool_name", "args_hash", "tool_call_id", "result_hash", "unknown_tool_name")

    def __init__(
        self,
        seq: int,
        tool_name: str,
        args_hash: str,
        tool_call_id: str = "",
        result_hash: str | None = None,
        unknown_tool_name: str | None = None,
    ) -> None:
        self.seq = seq
        self.tool_name = tool_name
        self.args_hash = args_hash
        self.tool_call_id = tool_call_id
        self.result_hash = result_hash
        self.unknown_tool_name = unknown_tool_name

    def __repr__(self) -> str:
        return (
            f"Record(seq={self.seq}, tool={self.tool_name!r}, args={self.args_hash[-8:]}, "
            f"result={(self.result_hash or '-')[-8:]}, unknown={self.unknown_tool_name!r})"
        )


@dataclass(slots=True)
class GuardWindow:
    """An armed post-compaction guard: N slots, each filled by one observed outcome triple."""

    window_size: int
    observed: int = 0
    first_triple: tuple[str, str, str] | None = None
    all_identical: bool = True

    def observe(self, triple: tuple[str, str, str]) -> None:
        if self.first_triple is None:
            self.first_triple = triple
        elif triple != self.first_triple:
            self.all_identical = False
        self.observed += 1

    @property
    def used_up(self) -> bool:
        return self.observed >= self.window_size


@dataclass(slots=True)
class RunState:
    """Everything the engine remembers about one run. Mutated in place by `evaluate`."""

    history_size: int = 30
    records: deque[Record] = field(default_factory=lambda: deque(maxlen=30))
    # warning key -> highest decade of count already announced (count // 10)
    announced: dict[str, int] = field(default_factory=dict)
    guard: GuardWindow | None = None
    abort: Verdict | None = None
    blocks: int = 0

    def resize(self, history_size: int) -> None:
        """Apply a (re)loaded historySize: keep the newest records."""
        if history_size != self.history_size:
            self.records = deque(self.records, maxlen=history_size)
            self.history_size = history_size

    def append(self, record: Record) -> None:
        self.records.append(record)
