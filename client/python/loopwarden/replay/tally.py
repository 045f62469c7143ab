"""Per-run tallies of a replay: counts by action, and where each run was first warned, blocked, aborted."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..eventformat import EventKind
from .observed import Observed

ACTIONS = ("allow", "warn", "block", "abort", "reject")


@dataclass(frozen=True, slots=True)
class Hit:
    """A verdict other than ALLOW, placed in its run.

    `event` is the event's 0-based position in the run; `call` counts the run's tool_call events
    up to and including this event's call (an outcome belongs to the call before it), so the
    distance between two hits in calls is what an agent would have spent.
    """

    event: int
    call: int
    seq: int
    kind: str
    action: str
    detector: str
    count: int
    tool_name: str


@dataclass
class RunTally:
    run_id: str
    events: int = 0
    calls: int = 0
    counts: Counter = field(default_factory=Counter)
    hits: list[Hit] = field(default_factory=list)
    # seq of each tool_call event -> (event position, call number): where a labelled loop starts.
    call_at_seq: dict[int, tuple[int, int]] = field(default_factory=dict)

    def first(self, action: str) -> Hit | None:
        return next((hit for hit in self.hits if hit.action == action), None)

    @property
    def first_warn(self) -> Hit | None:
        return self.first("warn")

    @property
    def first_block(self) -> Hit | None:
        return self.first("block")

    @property
    def first_abort(self) -> Hit | None:
        return self.first("abort")

    @property
    def flagged(self) -> bool:
        return any(hit.action != "reject" for hit in self.hits)


class ReplayTally:
    """Feed it every (event dict, verdict) of a replay, in order; read `runs` after."""

    def __init__(self) -> None:
        self.runs: dict[str, RunTally] = {}
        self.totals: Counter = Counter()

    def add(self, data: Mapping[str, Any], observed: Observed) -> None:
        run_id = str(data.get("run_id", "")).strip()
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = RunTally(run_id)
        kind = str(data.get("kind", ""))
        if kind == EventKind.TOOL_CALL.value:
            run.calls += 1
            run.call_at_seq.setdefault(int(data.get("seq", 0)), (run.events, run.calls))
        action = observed.enforced_action
        run.counts[action] += 1
        self.totals[action] += 1
        if action != "allow":
            run.hits.append(Hit(run.events, run.calls, observed.seq, kind, action, observed.detector,
                                observed.count, str(data.get("tool_name", ""))))
        run.events += 1


def describe_hit(hit: Hit | None) -> str:
    return "-" if hit is None else f"seq {hit.seq} {hit.detector or hit.kind}"


def run_table(runs: Iterable[RunTally]) -> list[str]:
    """The per-run table: counts by action and the first warning, block and abort (seq and detector)."""
    header = ("run", "events", "calls", *ACTIONS, "first warn", "first block", "first abort")
    rows = [header] + [
        (run.run_id, str(run.events), str(run.calls), *(str(run.counts.get(a, 0)) for a in ACTIONS),
         describe_hit(run.first_warn), describe_hit(run.first_block), describe_hit(run.first_abort))
        for run in runs
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    numeric = range(1, 3 + len(ACTIONS))
    return [
        "  ".join(cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i])
                  for i, cell in enumerate(row)).rstrip()
        for row in rows
    ]


def summary_line(totals: Mapping[str, int]) -> str:
    """`summary: allow=N, warn=M` (the last line of every replay)."""
    return "summary: " + ", ".join(f"{action}={n}" for action, n in sorted(totals.items()))
