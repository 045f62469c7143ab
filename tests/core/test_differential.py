"""The differential suite: the compiled core and the reference engine (tests/reference, the oracle)
give identical verdict streams, InspectRun views, metric deltas and decision-log lines for any
sequence of events, config and extensions.

Every run draws a new seed (printed in pytest's header and in every failure), so CI explores new
cases each time; `LOOPWARDEN_DIFFERENTIAL_SEED=N` replays one run's cases exactly. For a long
local run: `LOOPWARDEN_HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest tests/core`.
"""
from __future__ import annotations

import json
import logging
import os
import random

from hypothesis import given, seed, settings
from hypothesis import strategies as st

from loopwarden_server.settings import Limits
from tests.core.harness import CoreEngine, ReferenceEngine, pb_event
from tests.core.strategies import event_sequences, scenario_configs

# Small limits, so the envelope refusals are part of the alphabet too.
LIMITS = Limits(max_params_bytes=200, max_result_bytes=400, max_run_id_chars=6, max_tool_name_chars=12,
                max_tool_call_id_chars=4, max_json_depth=8)

# The long profile (see the module docstring) runs twenty times as many examples.
SCALE = 20 if os.environ.get("LOOPWARDEN_HYPOTHESIS_PROFILE") == "long" else 1
# A new seed every run unless one is given to replay (tests/conftest.py prints it in the header).
SEED = int(os.environ.get("LOOPWARDEN_DIFFERENTIAL_SEED") or random.SystemRandom().randrange(2**32))
# What a run's log line says, beside its message (the extra fields both engines set).
LOG_FIELDS = ("decision_id", "tenant", "run_id", "agent_id", "session_id", "seq", "tool", "action", "detector",
              "count", "warning_key", "error_code", "evidence_seqs", "loop_started_seq", "kind")


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


# InspectRun's run-tree fields are the core's alone: the reference engine has no trees.
_TREE_FIELDS = ("parent_run_id", "children", "root_run_id", "depth", "tree_totals", "run_totals")


def _runs(engine, tenant: str):
    views = [engine.inspect(run_id, tenant) for run_id in ("r1", "r2")]
    for view in views:
        for name in _TREE_FIELDS if view is not None else ():
            view.ClearField(name)
    return views


def _counters(engine) -> dict:
    """Every loopwarden counter sample, and the latency histogram's count (its timings differ)."""
    found = {}
    for metric in engine.registry.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") or sample.name == "loopwarden_evaluation_seconds_count":
                found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelno, record.getMessage(),
                           tuple((name, getattr(record, name, None)) for name in LOG_FIELDS)))


def _evaluate_logged(engine, messages, tenant: str):
    """The engine's verdicts for one request and the decision-log lines it wrote (DEBUG included)."""
    logger, handler = logging.getLogger("loopwarden.decisions"), _Lines()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        return engine.evaluate(messages, tenant), handler.lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def run_both(config_text: str, script) -> None:
    reference = ReferenceEngine(config_text, LIMITS, max_runs=2, idle_ttl=100.0)
    core = CoreEngine(config_text, LIMITS, max_runs=2, idle_ttl=100.0)
    replay = f"(replay: LOOPWARDEN_DIFFERENTIAL_SEED={SEED})"
    for step, (batch, tenant, advance) in enumerate(script):
        reference.clock.now += advance
        core.clock.now += advance
        messages = [pb_event(event) for event in batch]
        (expected, expected_lines), (got, got_lines) = (_evaluate_logged(reference, messages, tenant),
                                                        _evaluate_logged(core, messages, tenant))
        assert expected == got, f"step {step}: {batch} {replay}"
        assert expected_lines == got_lines, f"step {step}: decision log lines differ {replay}"
        assert _counters(reference) == _counters(core), f"step {step}: metrics differ {replay}"
        for name in ("", "t1"):
            assert _runs(reference, name) == _runs(core, name), f"step {step}: InspectRun differs ({name!r}) {replay}"


@st.composite
def long_history_configs(draw):
    """A scenario config whose history holds 20-40 records, so runs longer than it wrap around."""
    config = json.loads(draw(scenario_configs()))
    config["tools"]["loopDetection"]["historySize"] = draw(st.integers(min_value=20, max_value=40))
    return json.dumps(config)


class TestDifferential:
    @seed(SEED)
    @given(scenario_configs(), requests())
    @settings(max_examples=150 * SCALE, derandomize=False)
    def test_identical_verdicts_and_views(self, config_text, script):
        """Every verdict (decision ids included), InspectRun view, metric and log line is the same."""
        run_both(config_text, script)

    @seed(SEED)
    @given(scenario_configs(), event_sequences(min_size=20, max_size=60))
    @settings(max_examples=40 * SCALE, derandomize=False)
    def test_long_single_run_loops(self, config_text, sequence):
        """Long runs of one stream, where thresholds are reached and loops are blocked."""
        for event in sequence:
            event["run_id"] = "r1"
        run_both(config_text, [([event], "", 0.0) for event in sequence])

    @seed(SEED)
    @given(long_history_configs(), event_sequences(min_size=60, max_size=120))
    @settings(max_examples=15 * SCALE, derandomize=False)
    def test_histories_past_history_size(self, config_text, sequence):
        """One run of 60-120 events against a 20-40 record history: records are dropped as the
        window slides, and both engines forget the same ones."""
        for event in sequence:
            event["run_id"] = "r1"
        run_both(config_text, [([event], "", 0.0) for event in sequence])
