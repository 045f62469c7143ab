"""The resolved settings cross into the core as one typed object (`loopwarden_core.Settings`, built
by core.py's `core_settings`), never a mapping: every field arrives as Python resolved it, a field
left out or of the wrong type is refused naming it, and a reload with per-agent settings and a
preset changes the verdicts it should."""
from __future__ import annotations

import dataclasses
import time

import loopwarden_core
import pytest
from prometheus_client import CollectorRegistry

from loopwarden.eventformat import EventKind, EventRecord
from loopwarden_server.config import load_config_text
from loopwarden_server.config import tables as config_tables
from loopwarden_server.config.detection import LoopDetectionSettings
from loopwarden_server.core import CoreService, core_settings
from loopwarden_server.metrics import Metrics
from loopwarden_server.settings import Limits

# What Python keeps to itself (the preset's name) and what is compiled rather than read back.
NOT_READ_BACK = {"preset", "tool_rules"}


def _changed(field: dataclasses.Field, default: object) -> object:
    """A value for the field other than its default, of the same type."""
    if field.name in ("enabled",):
        return False  # the default is None: a third state
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 3
    if isinstance(default, float):
        return default + 0.125
    assert isinstance(default, str), field.name
    row = next(row for row in config_tables.SETTINGS if row.field == field.name)
    return next(choice for choice in row.choices if choice != default)


def test_every_resolved_field_crosses_as_python_resolved_it() -> None:
    fields = [f for f in dataclasses.fields(LoopDetectionSettings) if f.name not in NOT_READ_BACK]
    values = {f.name: _changed(f, f.default) for f in fields}
    crossed = core_settings(LoopDetectionSettings(**values))
    assert {name: getattr(crossed, name) for name in values} == values
    # and the core reads no field Python does not resolve
    getters = {name for name in dir(loopwarden_core.Settings) if not name.startswith("_")}
    assert getters == set(values)


def test_a_field_left_out_or_of_the_wrong_type_is_refused_naming_it() -> None:
    settings = LoopDetectionSettings()
    keywords = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings) if f.name != "preset"}
    keywords["tool_rules"] = settings.tool_rules.compiled()
    loopwarden_core.Settings(**keywords)
    with pytest.raises(TypeError, match="missing 1 required keyword argument: 'history_size'"):
        loopwarden_core.Settings(**{k: v for k, v in keywords.items() if k != "history_size"})
    with pytest.raises(TypeError, match="warning_threshold"):
        loopwarden_core.Settings(**{**keywords, "warning_threshold": "10"})
    with pytest.raises(TypeError, match="preset"):
        loopwarden_core.Settings(**keywords, preset="fast")


RELOADED = """{
  tools: {loopDetection: {enabled: true}},
  agents: {list: [{id: "strict", tools: {loopDetection: {warningThreshold: 2}}},
                  {id: "quick", loopwarden: {preset: "fast"}}]},
}"""


def _actions(core: CoreService, agent: str, calls: int) -> list[str]:
    run = f"{agent}-{time.monotonic_ns()}"
    return [core.decide(EventRecord(EventKind.TOOL_CALL, run_id=run, agent_id=agent, tool_name="read",
                                    params_json='{"path": "/x"}')).verdict.action for _ in range(calls)]


def test_a_reload_hands_over_each_agents_settings() -> None:
    """Before the reload every agent has the global settings; after it, `strict`'s own threshold
    and `quick`'s preset decide its verdicts, and the others keep the global ones."""
    core = CoreService(load_config_text("{tools: {loopDetection: {enabled: true}}}"), Metrics(CollectorRegistry()),
                       Limits(), max_runs=100, idle_ttl_seconds=3600, clock=time.monotonic)
    assert _actions(core, "strict", 4) == ["allow"] * 4

    core.swap_config(load_config_text(RELOADED))
    assert _actions(core, "strict", 3) == ["allow", "allow", "warn"]
    assert _actions(core, "quick", 5) == ["allow"] * 4 + ["warn"]  # the fast preset warns at 4 repeats
    assert _actions(core, "anyone", 5) == ["allow"] * 5
