"""Loads the guard-policy table (guard/policy.json): what each verdict does to the agent.

The Python runners (test_guard_policy.py) and the wrappers of the Node, Go and OpenClaw runs
(their test names carry each scenario's name) read the same file; see guard/README.md.
"""
from __future__ import annotations

import json
import pathlib
from typing import Any

TABLE = pathlib.Path(__file__).parent / "guard" / "policy.json"
EFFECTS = ("run", "run_with_warning", "refuse", "ask", "end_run")
# What a verdict on a model output or a compaction can do: there is no call to refuse or hold.
OUTPUT_EFFECTS = ("run", "run_with_warning", "end_run")


def load_scenarios() -> list[dict[str, Any]]:
    return json.loads(TABLE.read_text())["scenarios"]


def scenario_names() -> list[str]:
    return [scenario["name"] for scenario in load_scenarios()]


def load_output_scenarios() -> list[dict[str, Any]]:
    """The table's `outputs`: verdicts on what the model wrote (model_output) or on a compaction."""
    return json.loads(TABLE.read_text())["outputs"]


def output_scenario_names() -> list[str]:
    return [scenario["name"] for scenario in load_output_scenarios()]


def expected(scenario: dict[str, Any], *, can_end_run: bool = True) -> dict[str, Any]:
    """The scenario's expectation at a place; one that cannot end the run before a call (Codex's and
    Cursor's hooks: their answer to a PreToolUse has no way to) refuses the call with the same text."""
    expect = dict(scenario["expect"])
    if expect["effect"] == "end_run" and not can_end_run:
        expect["effect"] = "refuse"
    return expect
