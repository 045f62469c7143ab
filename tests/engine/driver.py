"""Drives one run through the compiled core, with the examples' call/done vocabulary.

The engine tests run on the core (what the daemon runs) and assert in its own vocabulary: the
strings of `loopwarden_core.ACTIONS`, `DETECTORS` and `LEVELS`, named through `A`, `D` and `L`
so that a misspelt name fails at once instead of comparing unequal forever. A verdict is the
core's own `loopwarden_core.Verdict`; a run's state is what InspectRun shows of it.

The reference engine (tests/reference) is not used here: tests/differential pairs it with these
runs through `pairing` below and holds the two engines to each other event by event.
"""
from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import loopwarden_core
from loopwarden.eventformat import EventKind, EventRecord
from prometheus_client import CollectorRegistry

from loopwarden_server.config import load_config_text
from loopwarden_server.config.detection import DEFAULT_TOOL_CATALOG, LoopDetectionSettings, ToolCatalog
from loopwarden_server.config.model import Config, LoopDetectionBlock
from loopwarden_server.core import CoreService
from loopwarden_server.metrics import Metrics
from loopwarden_server.settings import Limits


class Vocabulary:
    """One of the core's exported tuples, read by attribute: `A.warn == "warn"`. A name the core
    does not export raises, so a typo (or a name the core dropped) fails the test that uses it."""

    def __init__(self, what: str, names: tuple[str, ...]) -> None:
        self._what = what
        self._names = frozenset(names)

    def __getattr__(self, name: str) -> str:
        if name.startswith("_") or name not in self._names:
            raise AttributeError(f"loopwarden_core exports no {self._what} {name!r} (it has {sorted(self._names)})")
        return name


A = Vocabulary("action", loopwarden_core.ACTIONS)
D = Vocabulary("detector", loopwarden_core.DETECTORS)
L = Vocabulary("level", loopwarden_core.LEVELS)
# A verdict that names no detector (an ALLOW, a REJECT) carries "" and level "": the core's tuples
# hold only real names.
NO_DETECTOR = ""
NO_LEVEL = ""


def settings_from(config: dict | str) -> LoopDetectionSettings:
    text = config if isinstance(config, str) else json.dumps(config)
    return load_config_text(text).settings_for("")


def R(text: str) -> dict:
    """The examples' R(x): a text result with stable details."""
    return {"content": [{"type": "text", "text": text}], "details": {"ok": True}}


def fields_of(verdict: loopwarden_core.Verdict, *, evidence_seqs: bool = True) -> tuple:
    """A verdict's fields as one comparable value (the core's Verdict compares by identity). Its
    seq, run id and decision id differ between two runs of one script, so they are left out, and
    so are the evidence seqs when one run has events the other has not."""
    return (verdict.action, verdict.detector, verdict.level, verdict.count, verdict.message, verdict.warning_key,
            verdict.announce, verdict.paired_tool_name, verdict.error_code, verdict.tool_name,
            tuple(verdict.evidence_seqs) if evidence_seqs else None, tuple(verdict.evidence_call_ids),
            verdict.shadow_action)


@dataclass(frozen=True)
class RecordSeen:
    seq: int
    tool_name: str
    args_hash: str
    tool_call_id: str
    result_hash: str | None  # None while the call is pending


@dataclass(frozen=True)
class GuardSeen:
    window_size: int
    observed: int


@dataclass(frozen=True)
class StateSeen:
    """A run's state as InspectRun shows it."""

    records: list[RecordSeen]
    blocks: int
    abort: str | None  # the abort's error code, None while the run is not aborted
    guard: GuardSeen | None


class Pairing(Protocol):
    """Something fed every event of a run after the core has answered it."""

    def __call__(self, run: Run, kind: EventKind, fields: dict[str, Any],
                 verdict: loopwarden_core.Verdict) -> None: ...


# Set by tests/differential (its conftest) to pair each new Run with the reference engine; the
# engine tests leave it None, so they run on the core alone.
pairing: Callable[[Run], Pairing] | None = None


def _config(settings: LoopDetectionSettings, catalog: ToolCatalog) -> Config:
    return Config(global_block=LoopDetectionBlock(), agent_blocks={}, tool_catalog=catalog,
                  global_settings=settings, agent_settings={})


class Run:
    """One run fed event by event to the compiled core."""

    _ids = itertools.count()

    def __init__(self, settings: LoopDetectionSettings | None = None,
                 catalog: ToolCatalog = DEFAULT_TOOL_CATALOG, limits: Limits | None = None) -> None:
        self._settings = settings or LoopDetectionSettings(enabled=True)
        self.catalog = catalog
        self.limits = limits or Limits()
        self.seq = 0
        self.run_id = f"run-{next(self._ids)}"
        self._core = CoreService(_config(self._settings, catalog), Metrics(CollectorRegistry()), self.limits,
                                 max_runs=1000, idle_ttl_seconds=3600.0, clock=lambda: 0.0)
        self._paired = None if pairing is None else pairing(self)

    @property
    def settings(self) -> LoopDetectionSettings:
        return self._settings

    @settings.setter
    def settings(self, settings: LoopDetectionSettings) -> None:
        """A config reload: the run's next event is evaluated with these settings."""
        self._settings = settings
        self._core.swap_config(_config(settings, self.catalog))

    @property
    def state(self) -> StateSeen:
        view = self._core.inspect(self.run_id)
        if view is None:
            return StateSeen([], 0, None, None)
        records = [RecordSeen(r.seq, r.tool_name, r.args_hash, r.tool_call_id, r.result_hash or None)
                   for r in view.records]
        guard = GuardSeen(view.guard_window_size, view.guard_observed) if view.guard_armed else None
        return StateSeen(records, view.blocks, view.abort_error_code if view.aborted else None, guard)

    def _evaluate(self, kind: EventKind, **fields: Any) -> loopwarden_core.Verdict:
        answer = self._core.decide(EventRecord(kind, run_id=self.run_id, seq=self.seq, **fields))
        assert answer.verdict is not None, answer.refusal
        if self._paired is not None:
            self._paired(self, kind, fields, answer.verdict)
        return answer.verdict

    def call(self, tool: str, params: Any = None, tool_call_id: str = "", *,
             params_json: str | None = None) -> loopwarden_core.Verdict:
        """A tool call; `params_json` sends text as it is (JSON no encoder writes: a bad document)."""
        self.seq += 1
        if params_json is None:
            params_json = "" if params is None else json.dumps(params)
        return self._evaluate(EventKind.TOOL_CALL, tool_name=tool, params_json=params_json, tool_call_id=tool_call_id)

    def outcome(self, tool: str, params: Any = None, result: Any = None, *, error: str | None = None,
                tool_call_id: str = "", result_json: str | None = None) -> loopwarden_core.Verdict:
        self.seq += 1
        params_json = "" if params is None else json.dumps(params)
        if result_json is None and error is None and result is not None:
            result_json = json.dumps(result)
        return self._evaluate(EventKind.TOOL_OUTCOME, tool_name=tool, params_json=params_json,
                              tool_call_id=tool_call_id, result_json=result_json, error=error)

    def done(self, tool: str, params: Any, result: Any = None, *,
             error: str | None = None) -> tuple[loopwarden_core.Verdict, loopwarden_core.Verdict]:
        """A call that was allowed to run, followed by its outcome."""
        return self.call(tool, params), self.outcome(tool, params, result, error=error)

    def compaction_retry(self) -> loopwarden_core.Verdict:
        self.seq += 1
        return self._evaluate(EventKind.COMPACTION_RETRY)

    def run_end(self) -> loopwarden_core.Verdict:
        self.seq += 1
        return self._evaluate(EventKind.RUN_END)
