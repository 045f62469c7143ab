"""The stand-in of a hook payload over the daemon's event limits (loopwarden.hooks.reduction)."""
from __future__ import annotations

import hashlib
import json

from loopwarden.hooks import host, parse
from loopwarden.hooks.reduction import REDUCED_KEY, bounded_json, bounded_text
from tests.client.python.hooks import payloads

LIMIT = 4096


def test_a_text_within_the_limit_is_kept_as_it_is():
    text = json.dumps({"stdout": "a" * 100})

    assert (text, None) == bounded_json("tool_response", text, LIMIT)


def test_a_text_over_the_limit_stands_in_by_its_sha256_length_and_prefix():
    text = json.dumps({"stdout": "a" * 10000})

    reduced, reduction = bounded_json("tool_response", text, LIMIT)

    stand_in = json.loads(reduced)[REDUCED_KEY]
    assert hashlib.sha256(text.encode()).hexdigest() == stand_in["sha256"] == reduction.sha256
    assert len(text) == stand_in["bytes"] == reduction.size_bytes
    assert text.startswith(stand_in["prefix"]) and stand_in["prefix"]
    assert len(reduced.encode()) <= LIMIT


def test_identical_texts_reduce_alike_and_different_ones_differently():
    same = [bounded_json("tool_response", json.dumps({"stdout": "a" * 10000}), LIMIT)[0] for _ in range(2)]
    other = bounded_json("tool_response", json.dumps({"stdout": "a" * 9999 + "b"}), LIMIT)[0]

    assert same[0] == same[1]
    assert other != same[0]


def test_a_limit_below_the_prefix_keeps_the_hash_alone():
    reduced, _ = bounded_json("tool_input", json.dumps({"command": "c" * 5000}), 200)

    assert "" == json.loads(reduced)[REDUCED_KEY]["prefix"]
    assert len(reduced.encode()) <= 200


def test_an_error_text_keeps_its_prefix_and_says_it_was_reduced():
    reduced, reduction = bounded_text("error", "E" * 5000, 2048)

    assert reduced.startswith("E" * 1024) and f"reduced from 5000 bytes, sha256 {reduction.sha256}" in reduced
    assert len(reduced.encode()) <= 2048


def test_parse_reduces_the_fields_over_their_limits_and_names_them():
    body = payloads.claude_post_tool_use("s", "t", response={"stdout": "o" * 10000})
    body["tool_input"] = {"command": "i" * 10000}

    hook = parse(host("claude-code"), body, max_params_bytes=LIMIT, max_result_bytes=LIMIT)

    assert ["tool_input", "tool_response"] == [reduced.field for reduced in hook.reduced]
    assert REDUCED_KEY in json.loads(hook.event.params_json)
    assert REDUCED_KEY in json.loads(hook.event.result_json)
    assert () == parse(host("claude-code"), payloads.claude_post_tool_use("s", "t")).reduced
