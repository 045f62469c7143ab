"""The conformance data itself: every WARN/BLOCK/ABORT expectation asserts the reference's phrase,
and every event is of the format README.md describes (the runners in three languages read it)."""
from __future__ import annotations

import json
import math

import pytest

from tests.conformance.scenarios import _KINDS, FEATURES, LEVEL_WORDS, SCENARIO_DIR, check

# The reference's key phrase per detector (spec section 6, message vocabulary); the level word is
# asserted for every verdict by `check` itself.
PHRASES = {
    ("DETECTOR_GENERIC_REPEAT", "ACTION_WARN"): "identical arguments",
    ("DETECTOR_GENERIC_REPEAT", "ACTION_BLOCK"): "identical outcomes",
    ("DETECTOR_KNOWN_POLL_NO_PROGRESS", None): "no progress",
    ("DETECTOR_PING_PONG", None): "ping-pong loop",
    ("DETECTOR_UNKNOWN_TOOL_REPEAT", None): "unavailable tool ",
    ("DETECTOR_GLOBAL_CIRCUIT_BREAKER", None): "global circuit breaker",
    ("DETECTOR_POST_COMPACTION_GUARD", None): "compaction",
    ("DETECTOR_RUN_WIDE_NO_PROGRESS", None): "run-wide breaker",
    ("DETECTOR_ARGUMENT_CHURN", None): "changing arguments",
    ("DETECTOR_ERROR_REPEAT", None): "identical error",
}

# Detectors beyond the spec (budgets, run trees) have no reference phrase. A budget verdict says "budget"; a child_stopped
# warning must name the child's run id (NAMES_A_CHILD), which is what the orchestrating model needs.
EXTENSION_PHRASES = {"DETECTOR_BUDGET": "budget"}
NAMES_A_CHILD = "DETECTOR_CHILD_STOPPED"


def scenarios():
    for path in sorted(SCENARIO_DIR.glob("*.json")):
        yield path.stem, json.loads(path.read_text())


def expectations():
    for _, scenario in scenarios():
        for variant in scenario["variants"]:
            child_runs = {event["run_id"] for step in variant["steps"] for event in step["events"]
                          if event.get("parent_run_id")}
            for step_index, step in enumerate(variant["steps"]):
                for expect in step["expect"]:
                    if expect and expect.get("action") in LEVEL_WORDS and expect.get("detector"):
                        yield f"{scenario['name']}/{variant['name']}/step{step_index}", expect, child_runs


def events():
    for name, scenario in scenarios():
        for variant in scenario["variants"]:
            for step_index, step in enumerate(variant["steps"]):
                for event in step["events"]:
                    yield f"{name}/{variant['name']}/step{step_index}", scenario, event


def _ids(value):
    return value if isinstance(value, str) else ""


class TestPhrasesInTheData:
    @pytest.mark.parametrize(("where", "expect", "child_runs"), list(expectations()), ids=_ids)
    def test_every_flagging_expectation_names_its_phrase(self, where, expect, child_runs):
        """A WARN/BLOCK/ABORT expectation with a detector lists that detector's phrase in
        message_contains (a child_stopped one: the run id of a child run of the variant)."""
        wanted = expect.get("message_contains", [])
        wanted = [wanted] if isinstance(wanted, str) else wanted
        if expect["detector"] == NAMES_A_CHILD:
            assert child_runs & set(wanted), f"{where}: no child run id of {sorted(child_runs)} asserted in {wanted}"
            return
        key = (expect["detector"], expect["action"])
        phrase = PHRASES.get(key) or PHRASES.get((expect["detector"], None)) or EXTENSION_PHRASES[expect["detector"]]
        assert any(phrase in item for item in wanted), f"{where}: {phrase!r} not asserted in {wanted}"

    def test_there_is_data_for_every_detector(self):
        """Every detector of the phrase tables appears in some flagging expectation."""
        seen = {expect["detector"] for _, expect, _ in expectations()}
        tables = {detector for detector, _ in PHRASES} | set(EXTENSION_PHRASES) | {NAMES_A_CHILD}
        assert sorted(tables) == sorted(seen)


# What each feature of `requires` is needed for: event fields and kinds, and config keys.
_NEEDS = {"parent_run_id": "runTrees", "accepts_ask": "ask", "approval": "ask", "usage": "budgets",
          "duration_ms": "budgets"}
_CONFIG_NEEDS = {"runTree": "runTrees", "budgets": "budgets", "onBudget": "ask", "onCritical": "ask", "sameOutcome": "sameOutcome"}
# Presets that turn a feature on.
_PRESET_NEEDS = {"fast": "sameOutcome"}
SCOPES = ("once", "always")


def _count(body: dict, key: str, where: str) -> None:
    value = body.get(key, 0)
    assert isinstance(value, int) and not isinstance(value, bool) and value >= 0, \
        f"{where}: {key} must be a non-negative integer, got {value!r}"


def event_problems(event: dict, where: str) -> None:
    """Assert one event is of the format (README.md); the message names the field."""
    kinds = [kind for kind in _KINDS if kind in event]
    assert len(kinds) <= 1, f"{where}: an event has at most one kind, got {kinds}"
    assert isinstance(event.get("run_id"), str), f"{where}: run_id must be a string"
    assert isinstance(event.get("parent_run_id", ""), str), f"{where}: parent_run_id must be a string"
    assert isinstance(event.get("accepts_ask", False), bool), f"{where}: accepts_ask must be true or false"
    body = event[kinds[0]] if kinds else {}
    if kinds == ["tool_outcome"]:
        _count(body, "duration_ms", f"{where}: tool_outcome")
    elif kinds == ["usage"]:
        for key in ("input_tokens", "output_tokens"):
            _count(body, key, f"{where}: usage")
        cost = body.get("cost_usd", 0)
        assert isinstance(cost, (int, float)) and not isinstance(cost, bool) and math.isfinite(cost) and cost >= 0, \
            f"{where}: usage.cost_usd must be a finite non-negative number, got {cost!r}"
        assert isinstance(body.get("model", ""), str), f"{where}: usage.model must be a string"
    elif kinds == ["approval"]:
        assert body.get("tool_call_id") or body.get("decision_id"), \
            f"{where}: approval names the asked call by tool_call_id or decision_id"
        assert isinstance(body.get("approved"), bool), f"{where}: approval.approved must be true or false"
        assert body.get("scope", "once") in SCOPES, f"{where}: approval.scope must be one of {SCOPES}"
        _count(body, "ttl_seconds", f"{where}: approval")


class TestTheEventFormat:
    @pytest.mark.parametrize(("where", "scenario", "event"), list(events()), ids=_ids)
    def test_every_event_is_of_the_format(self, where, scenario, event):
        """Kinds, types and ranges of every event's fields, and the features it needs are required."""
        event_problems(event, where)
        needed = {_NEEDS[key] for key in _NEEDS if key in event or any(
            isinstance(body, dict) and key in body for body in event.values())}
        assert needed <= set(scenario.get("requires", [])), f"{where}: uses {sorted(needed)}: list them in requires"

    @pytest.mark.parametrize(("name", "scenario"), list(scenarios()), ids=_ids)
    def test_requires_names_known_features_and_covers_the_config(self, name, scenario):
        """`requires` lists features the runners know, and every feature the config turns on."""
        requires = scenario.get("requires", [])
        assert set(requires) <= set(FEATURES), f"{name}: unknown features {sorted(set(requires) - set(FEATURES))}"
        block = scenario["config"].get("loopwarden", {})
        needed = {_CONFIG_NEEDS[key] for key in block if key in _CONFIG_NEEDS}
        needed |= {_PRESET_NEEDS[block["preset"]]} if block.get("preset") in _PRESET_NEEDS else set()
        assert needed <= set(requires), f"{name}: its config needs {sorted(needed)}: list them in requires"
        assert scenario["name"] == name, f"{name}.json names itself {scenario['name']!r}"

    def test_a_bad_approval_scope_is_named(self):
        """A scope other than once/always fails with the field named."""
        with pytest.raises(AssertionError, match="approval.scope"):
            event_problems({"run_id": "r", "approval": {"tool_call_id": "c", "approved": True, "scope": "forever"}}, "here")

    def test_a_negative_cost_is_named(self):
        """usage.cost_usd must be finite and not negative."""
        with pytest.raises(AssertionError, match="usage.cost_usd"):
            event_problems({"run_id": "r", "usage": {"cost_usd": -1}}, "here")

    def test_an_approval_naming_no_call_is_refused(self):
        """An approval must name the asked call."""
        with pytest.raises(AssertionError, match="tool_call_id or decision_id"):
            event_problems({"run_id": "r", "approval": {"approved": True}}, "here")

    def test_the_new_scenarios_are_there(self):
        """Trees, budgets, ASK and judging repeats by their outcomes each have data."""
        required = {feature for _, scenario in scenarios() for feature in scenario.get("requires", [])}
        assert set(FEATURES) == required


class TestTheLevelWordRule:
    def test_a_warning_without_its_level_word_fails(self):
        """`check` refuses a WARN whose message does not start with WARNING:, even with no expectation."""
        with pytest.raises(AssertionError, match="must start with 'WARNING:'"):
            check(None, {"action": "ACTION_WARN", "message": "Warning: x"}, "here")

    def test_a_block_needs_critical(self):
        """A BLOCK message must start with CRITICAL:."""
        with pytest.raises(AssertionError, match="CRITICAL:"):
            check(None, {"action": "ACTION_BLOCK", "message": "Blocked: x"}, "here")

    def test_a_list_of_phrases_must_all_occur(self):
        """message_contains as a list asserts every phrase."""
        verdict = {"action": "ACTION_ABORT", "message": "CRITICAL: compaction did not break it", "detector": "D"}
        check({"message_contains": ["compaction", "break"]}, verdict, "here")
        with pytest.raises(AssertionError, match="'gateway' not in message"):
            check({"message_contains": ["compaction", "gateway"]}, verdict, "here")
