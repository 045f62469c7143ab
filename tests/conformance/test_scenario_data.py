"""The conformance data itself: every WARN/BLOCK/ABORT expectation asserts the reference's phrase."""
from __future__ import annotations

import json

import pytest

from tests.conformance.scenarios import LEVEL_WORDS, SCENARIO_DIR, check

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


def expectations():
    for path in sorted(SCENARIO_DIR.glob("*.json")):
        scenario = json.loads(path.read_text())
        for variant in scenario["variants"]:
            for step_index, step in enumerate(variant["steps"]):
                for expect in step["expect"]:
                    if expect and expect.get("action") in LEVEL_WORDS and expect.get("detector"):
                        yield f"{scenario['name']}/{variant['name']}/step{step_index}", expect


class TestPhrasesInTheData:
    @pytest.mark.parametrize(("where", "expect"), list(expectations()), ids=lambda value: value if isinstance(value, str) else "")
    def test_every_flagging_expectation_names_its_phrase(self, where, expect):
        """A WARN/BLOCK/ABORT expectation with a detector lists that detector's phrase in message_contains."""
        key = (expect["detector"], expect["action"])
        phrase = PHRASES.get(key) or PHRASES[(expect["detector"], None)]
        wanted = expect.get("message_contains", [])
        wanted = [wanted] if isinstance(wanted, str) else wanted
        assert any(phrase in item for item in wanted), f"{where}: {phrase!r} not asserted in {wanted}"

    def test_there_is_data_for_every_detector(self):
        """Every detector of the phrase table appears in some flagging expectation."""
        seen = {expect["detector"] for _, expect in expectations()}
        assert sorted({detector for detector, _ in PHRASES}) == sorted(seen)


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
