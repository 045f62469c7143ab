"""Loads the language-neutral conformance scenarios and expands them into concrete events.

The Python engine tests and the daemon integration tests both run these; Node and Go runners
implement the same few rules (see README.md).
"""
from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

SCENARIO_DIR = pathlib.Path(__file__).parent / "scenarios"


@dataclass(frozen=True)
class Variant:
    scenario: str
    name: str
    config: dict
    steps: list[dict]
    # Set for scenarios of an opt-in extension (its name): they need it on, so they are left out
    # of the checks that every spec example is unchanged with the extensions off.
    extension: str = ""
    # Daemon features beyond the spec the scenario needs (runTrees, budgets, ask, sameOutcome): the reference
    # oracle has none of them, so it leaves such scenarios out.
    requires: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.scenario}/{self.name}"


@dataclass(frozen=True)
class ConcreteEvent:
    """One event with templating applied, run ids prefixed and seq assigned."""

    seq: int
    run_id: str
    agent_id: str
    kind: str | None  # tool_call | tool_outcome | compaction_retry | user_turn | run_end | usage | approval | None
    tool_name: str
    tool_call_id: str
    params_json: str
    result_json: str | None
    error: str | None
    expect: dict | None
    prompt_id: str = ""  # user_turn
    parent_run_id: str = ""  # prefixed like run_id; "" for a root run
    accepts_ask: bool = False
    duration_ms: int = 0  # tool_outcome
    usage: dict | None = None  # usage: input_tokens, output_tokens, cost_usd, model
    approval: dict | None = None  # approval: tool_call_id, decision_id, approved, scope ("once"/"always"), ttl_seconds


def load_variants() -> list[Variant]:
    variants = []
    for path in sorted(SCENARIO_DIR.glob("*.json")):
        scenario = json.loads(path.read_text())
        for variant in scenario["variants"]:
            variants.append(Variant(scenario["name"], variant["name"], scenario["config"], variant["steps"],
                                    scenario.get("extension", ""), tuple(scenario.get("requires", ()))))
    return variants


# The features beyond the spec a scenario may require: the oracle (the reference engine) has none.
FEATURES = ("runTrees", "budgets", "ask", "sameOutcome")


def _fill(value: Any, i: int) -> Any:
    if isinstance(value, str):
        return value.replace("{i}", str(i))
    if isinstance(value, list):
        return [_fill(item, i) for item in value]
    if isinstance(value, dict):
        return {key: _fill(item, i) for key, item in value.items()}
    return value


_KINDS = ("tool_call", "tool_outcome", "compaction_retry", "user_turn", "run_end", "usage", "approval")


def prefixed(variant: Variant, run_id: str) -> str:
    """A run id of the data as sent: under the variant's id, so variants can share a daemon."""
    return f"{variant.id}/{run_id}" if run_id.strip() else run_id


def expand(variant: Variant) -> Iterator[ConcreteEvent]:
    seq = 0
    for step in variant.steps:
        for i in range(1, step.get("repeat", 1) + 1):
            for raw_event, expect in zip(step["events"], step["expect"], strict=True):
                event = _fill(raw_event, i)
                seq += 1
                kind = next((k for k in _KINDS if k in event), None)
                body = event.get(kind) or {}
                params_json = body.get("params_json")
                if params_json is None:
                    params_json = json.dumps(body["params"]) if "params" in body else ""
                result_json = body.get("result_json")
                if result_json is None and "result" in body:
                    result_json = json.dumps(body["result"])
                yield ConcreteEvent(
                    seq=seq,
                    run_id=prefixed(variant, event["run_id"]),
                    agent_id=event.get("agent_id", ""),
                    kind=kind,
                    tool_name=body.get("tool_name", ""),
                    tool_call_id=body.get("tool_call_id", ""),
                    params_json=params_json,
                    result_json=result_json,
                    error=body.get("error"),
                    expect=expect,
                    prompt_id=body.get("prompt_id", ""),
                    parent_run_id=prefixed(variant, event.get("parent_run_id", "")),
                    accepts_ask=event.get("accepts_ask", False),
                    duration_ms=body.get("duration_ms", 0) if kind == "tool_outcome" else 0,
                    usage=body if kind == "usage" else None,
                    approval=body if kind == "approval" else None,
                )


# Every WARN message starts with the reference's level word, and every BLOCK/ABORT message with its
# critical one, whatever the expectation says (spec section 6, message vocabulary).
LEVEL_WORDS = {"ACTION_WARN": "WARNING:", "ACTION_BLOCK": "CRITICAL:", "ACTION_ABORT": "CRITICAL:"}


def check(expect: dict | None, verdict: dict, where: str) -> None:
    """Assert a verdict (proto-style names: ACTION_*, DETECTOR_*, LEVEL_*) meets an expectation."""
    level_word = LEVEL_WORDS.get(verdict["action"])
    if level_word is not None:
        assert verdict["message"].startswith(level_word), \
            f"{where}: a {verdict['action']} message must start with {level_word!r}: {verdict['message']!r}"
    if expect is None:
        return
    for key, wanted in expect.items():
        if key == "action_in":
            assert verdict["action"] in wanted, f"{where}: action {verdict['action']} not in {wanted}"
        elif key == "message_contains":
            for phrase in [wanted] if isinstance(wanted, str) else wanted:
                assert phrase in verdict["message"], f"{where}: {phrase!r} not in message {verdict['message']!r}"
        else:
            assert wanted == verdict[key], f"{where}: {key} expected {wanted!r}, got {verdict[key]!r} ({verdict})"
    if expect.get("action") == "ACTION_ALLOW" and "detector" not in expect:
        assert verdict["detector"] == "DETECTOR_UNSPECIFIED", f"{where}: plain allow with a detector: {verdict}"
