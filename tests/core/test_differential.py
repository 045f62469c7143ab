"""The differential suite: the compiled core and the Python engine (the reference) give identical
verdict streams and InspectRun views for any sequence of events, config and extensions.

CI runs the `ci` Hypothesis profile (derandomized: a fixed seed, 100 examples, ~10 s). For a long
local run: `LOOPWARDEN_HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest tests/core`.
"""
from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwarden_server.settings import Limits
from tests.core.harness import CoreEngine, ReferenceEngine, pb_event
from tests.core.strategies import event_sequences, scenario_configs

# Small limits, so the envelope refusals are part of the alphabet too.
LIMITS = Limits(max_params_bytes=200, max_result_bytes=400, max_run_id_chars=6, max_tool_name_chars=12,
                max_tool_call_id_chars=4, max_json_depth=8)

# The long profile (see the module docstring) runs twenty times as many examples.
SCALE = 20 if os.environ.get("LOOPWARDEN_HYPOTHESIS_PROFILE") == "long" else 1


@st.composite
def requests(draw):
    """An event sequence cut into requests of 1-4 events, each from a tenant, some after a pause."""
    sequence = draw(event_sequences())
    script = []
    while sequence:
        size = draw(st.integers(min_value=1, max_value=4))
        script.append((sequence[:size], draw(st.sampled_from(["", "", "", "t1"])),
                       draw(st.sampled_from([0.0] * 8 + [5.0, 120.0]))))
        sequence = sequence[size:]
    return script


def _runs(engine, tenant: str):
    return [engine.inspect(run_id, tenant) for run_id in ("r1", "r2")]


def run_both(config_text: str, script) -> None:
    python = ReferenceEngine(config_text, LIMITS, max_runs=2, idle_ttl=100.0)
    core = CoreEngine(config_text, LIMITS, max_runs=2, idle_ttl=100.0)
    for step, (batch, tenant, advance) in enumerate(script):
        python.clock.now += advance
        core.clock.now += advance
        messages = [pb_event(event) for event in batch]
        expected, got = python.evaluate(messages, tenant), core.evaluate(messages, tenant)
        assert expected == got, f"step {step}: {batch}"
        for name in ("", "t1"):
            assert _runs(python, name) == _runs(core, name), f"step {step}: InspectRun differs ({name!r})"


class TestDifferential:
    @given(scenario_configs(), requests())
    @settings(max_examples=150 * SCALE)
    def test_identical_verdicts_and_views(self, config_text, script):
        """Every verdict (decision ids included) and every InspectRun view is the same in both engines."""
        run_both(config_text, script)

    @given(scenario_configs(), event_sequences(min_size=20, max_size=60))
    @settings(max_examples=40 * SCALE)
    def test_long_single_run_loops(self, config_text, sequence):
        """Long runs of one stream, where thresholds are reached and loops are blocked."""
        for event in sequence:
            event["run_id"] = "r1"
        run_both(config_text, [([event], "", 0.0) for event in sequence])
