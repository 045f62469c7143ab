"""Drives one run through an engine, with the examples' call/done vocabulary.

The engine tests run twice (tests/engine/conftest.py): on the compiled core, which the daemon
runs, and on the reference engine (tests/reference), the readable oracle the core is held to.
Either way a test reads the reference's verdict type (enums) and the run's records, blocks,
abort and guard, so one assertion checks both.
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

from loopwarden.eventformat import EventKind, EventRecord
from prometheus_client import CollectorRegistry

from loopwarden_server.config import load_config_text
from loopwarden_server.config.detection import DEFAULT_TOOL_CATALOG, LoopDetectionSettings, ToolCatalog
from loopwarden_server.config.model import Config, LoopDetectionBlock
from loopwarden_server.core import CoreService
from loopwarden_server.metrics import Metrics
from loopwarden_server.settings import Limits
from tests.reference.engine import (
    Action, CompactionRetry, Detector, Level, RunEnd, RunState, ToolCall, ToolOutcome, Verdict, evaluate,
    new_run_state,
)

ENGINES = ("core", "reference")
engine = "core"  # set per test by tests/engine/conftest.py

PROTO_ACTION = {"allow": "ACTION_ALLOW", "warn": "ACTION_WARN", "block": "ACTION_BLOCK",
                "abort": "ACTION_ABORT", "reject": "ACTION_REJECT"}


def verdict_as_proto_dict(verdict: Verdict, seq: int, run_id: str) -> dict:
    """The verdict spelled like the proto (so conformance data can be shared with the daemon)."""
    detector = "DETECTOR_UNSPECIFIED" if verdict.detector.value == "none" else "DETECTOR_" + verdict.detector.value.upper()
    level = "LEVEL_UNSPECIFIED" if verdict.level.value == "none" else "LEVEL_" + verdict.level.value.upper()
    return {
        "seq": seq, "run_id": run_id, "action": PROTO_ACTION[verdict.action.value],
        "detector": detector, "level": level, "count": verdict.count, "message": verdict.message,
        "warning_key": verdict.warning_key, "announce": verdict.announce,
        "paired_tool_name": verdict.paired_tool_name, "error_code": verdict.error_code,
        "tool_name": verdict.tool_name,
    }


def settings_from(config: dict | str) -> LoopDetectionSettings:
    text = config if isinstance(config, str) else json.dumps(config)
    return load_config_text(text).settings_for("")


def R(text: str) -> dict:
    """The examples' R(x): a text result with stable details."""
    return {"content": [{"type": "text", "text": text}], "details": {"ok": True}}


def reference_verdict(core_verdict) -> Verdict:
    """A loopwarden_core.Verdict as the reference spells it (enums), to compare field by field."""
    return Verdict(
        action=Action(core_verdict.action), detector=Detector(core_verdict.detector or "none"),
        level=Level(core_verdict.level or "none"), count=core_verdict.count, message=core_verdict.message,
        warning_key=core_verdict.warning_key, announce=core_verdict.announce,
        paired_tool_name=core_verdict.paired_tool_name, error_code=core_verdict.error_code,
        tool_name=core_verdict.tool_name, evidence_seqs=tuple(core_verdict.evidence_seqs),
        evidence_call_ids=tuple(core_verdict.evidence_call_ids),
        shadow_action=None if core_verdict.shadow_action is None else Action(core_verdict.shadow_action),
    )


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
    """A run's state as both engines can show it (the core through InspectRun's view)."""

    records: list[RecordSeen]
    blocks: int
    abort: str | None  # the abort's error code, None while the run is not aborted
    guard: GuardSeen | None


def _config(settings: LoopDetectionSettings, catalog: ToolCatalog) -> Config:
    return Config(global_block=LoopDetectionBlock(), agent_blocks={}, tool_catalog=catalog,
                  global_settings=settings, agent_settings={})


class Run:
    """One run fed event by event to the engine this test runs on."""

    _ids = itertools.count()

    def __init__(self, settings: LoopDetectionSettings | None = None,
                 catalog: ToolCatalog = DEFAULT_TOOL_CATALOG, state: RunState | None = None) -> None:
        self._settings = settings or LoopDetectionSettings(enabled=True)
        self.catalog = catalog
        self.seq = 0
        self.engine = engine
        self.run_id = f"run-{next(self._ids)}"
        if self.engine == "core":
            self._core = CoreService(_config(self._settings, catalog), Metrics(CollectorRegistry()), Limits(),
                                     max_runs=1000, idle_ttl_seconds=3600.0, clock=lambda: 0.0)
        else:
            self._state = state or new_run_state(self._settings)

    @property
    def settings(self) -> LoopDetectionSettings:
        return self._settings

    @settings.setter
    def settings(self, settings: LoopDetectionSettings) -> None:
        """A config reload: the run's next event is evaluated with these settings."""
        self._settings = settings
        if self.engine == "core":
            self._core.swap_config(_config(settings, self.catalog))

    @property
    def state(self) -> StateSeen:
        if self.engine == "core":
            view = self._core.inspect(self.run_id)
            if view is None:
                return StateSeen([], 0, None, None)
            records = [RecordSeen(r.seq, r.tool_name, r.args_hash, r.tool_call_id, r.result_hash or None)
                       for r in view.records]
            guard = GuardSeen(view.guard_window_size, view.guard_observed) if view.guard_armed else None
            return StateSeen(records, view.blocks, view.abort_error_code if view.aborted else None, guard)
        s = self._state
        guard = None if s.guard is None else GuardSeen(s.guard.window_size, s.guard.observed)
        return StateSeen([RecordSeen(r.seq, r.tool_name, r.args_hash, r.tool_call_id, r.result_hash)
                          for r in s.records], s.blocks, None if s.abort is None else s.abort.error_code, guard)

    def _evaluate(self, kind: EventKind, payload, **fields) -> Verdict:
        if self.engine == "core":
            record = EventRecord(kind, run_id=self.run_id, seq=self.seq, **fields)
            return reference_verdict(self._core.decide(record).verdict)
        return evaluate(self._state, payload, self.settings, self.catalog)

    def call(self, tool: str, params: Any = None, tool_call_id: str = "") -> Verdict:
        self.seq += 1
        params_json = "" if params is None else json.dumps(params)
        return self._evaluate(EventKind.TOOL_CALL, ToolCall(tool, params_json, tool_call_id, self.seq),
                              tool_name=tool, params_json=params_json, tool_call_id=tool_call_id)

    def outcome(self, tool: str, params: Any = None, result: Any = None, *, error: str | None = None,
                tool_call_id: str = "", result_json: str | None = None) -> Verdict:
        self.seq += 1
        params_json = "" if params is None else json.dumps(params)
        if result_json is None and error is None and result is not None:
            result_json = json.dumps(result)
        return self._evaluate(EventKind.TOOL_OUTCOME,
                              ToolOutcome(tool, params_json, tool_call_id, result_json, error, self.seq),
                              tool_name=tool, params_json=params_json, tool_call_id=tool_call_id,
                              result_json=result_json, error=error)

    def done(self, tool: str, params: Any, result: Any = None, *, error: str | None = None) -> tuple[Verdict, Verdict]:
        """A call that was allowed to run, followed by its outcome."""
        return self.call(tool, params), self.outcome(tool, params, result, error=error)

    def compaction_retry(self) -> Verdict:
        self.seq += 1
        return self._evaluate(EventKind.COMPACTION_RETRY, CompactionRetry(self.seq))

    def run_end(self) -> Verdict:
        self.seq += 1
        return self._evaluate(EventKind.RUN_END, RunEnd(self.seq))
