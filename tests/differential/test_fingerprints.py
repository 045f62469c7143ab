"""The spec's hashing rules (sections 3 and 4): tool-name normalisation, the args hash, the outcome
hash of every result shape, external-content wrapper ids. Each rule is stated on the reference
engine's functions, the readable oracle, and every hash it reads is checked against the compiled
core's for the same text (`args_hash`, `result_hash` and `tool_name` below), so a rule holds for
both engines or the test fails naming which one differs.
"""
from __future__ import annotations

import json
import re
from typing import Any

import loopwarden_core
import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwarden_server.config.detection import ToolCatalog
from tests import strategies as s
from tests.reference.engine import fingerprints, toolnames
from tests.reference.engine.external_content import blank_wrapper_ids
from tests.reference.engine.jsonvalues import canonical_json, decode_json
from tests.strategies import json_values
from tests.support.results import text_result, wrapped


def tool_name(raw: str) -> str:
    """The normalised tool name, the same in both engines."""
    expected = toolnames.normalize_tool_name(raw)
    assert expected == loopwarden_core.normalize_tool_name(raw), f"the core normalises {raw!r} differently"
    return expected


def args_hash(tool: str, params: Any = None, *, text: str | None = None) -> str:
    """The reference's args hash of `params` (or of the JSON `text`), the core's digest equal to it."""
    text = json.dumps(params) if text is None else text
    expected = fingerprints.args_hash(tool, decode_json(text))
    assert expected == f"{tool}:{loopwarden_core.args_digest(tool, text).hex()}", f"the core hashes {text!r} differently"
    return expected


def result_hash(tool: str, params: Any, result: Any, catalog: ToolCatalog = ToolCatalog(), *,
                error: str | None = None) -> str | None:
    """The reference's result hash of an outcome, the core's status and digest equal to it."""
    params_json = json.dumps(params)
    result_json = None if error is not None else json.dumps(result)
    expected = fingerprints.outcome_fingerprint(
        tool, decode_json(params_json), None if result_json is None else decode_json(result_json), error, catalog,
        has_result=result_json is not None)
    status, digest, unknown = loopwarden_core.outcome_fingerprint(
        tool, params_json, result_json, error, sorted(catalog.provider_send_tools), sorted(catalog.extra_poll_tools))
    assert (expected.status, expected.digest if expected.status else b"", expected.unknown_tool_name) == (
        status, digest if status else b"", unknown), f"the core fingerprints {tool} {result_json or error!r} differently"
    return expected.result_hash


class TestToolNames:
    def test_normalisation(self):
        """Names are trimmed, lower-cased, aliased, and never empty."""
        assert ["exec", "apply_patch", "read", "tool"] == [tool_name(n) for n in ("  Bash ", "apply-patch", "READ", "  ")]

    @pytest.mark.parametrize("spelling", ["re\u200bad", "\ufeffread", "r\u200dea\u2060d", "ｒｅａｄ", "ＲＥＡＤ", "\u3000read"])
    def test_zero_width_and_compatibility_forms_are_the_same_tool(self, spelling):
        """Zero-width / format characters are removed and NFKC folds fullwidth letters before lower-casing."""
        assert "read" == tool_name(spelling)

    def test_fullwidth_alias_still_folds(self):
        """An alias spelled in fullwidth letters is the aliased tool."""
        assert "exec" == tool_name("Ｂａｓｈ")

    def test_other_letters_are_kept(self):
        """Normalisation folds spellings, not letters: é stays é."""
        assert "réad" == tool_name("RÉAD")


class TestArgsHash:
    def test_shape(self):
        """An args hash is the tool name, a colon and 64 lowercase hex digits."""
        assert re.fullmatch(r"read:[0-9a-f]{64}", args_hash("read", {"path": "/a"}))

    def test_update_plan_rewording_is_the_same_call(self):
        """update_plan hashes its plan shape: rewording steps is no progress, a status change is."""
        one = {"plan": [{"step": "write code", "status": "in_progress"}], "explanation": "x"}
        reworded = {"plan": [{"step": "write the code", "status": "in_progress"}], "explanation": "y"}
        progressed = {"plan": [{"step": "write code", "status": "completed"}], "explanation": "x"}
        assert args_hash("update_plan", one) == args_hash("update_plan", reworded)
        assert args_hash("update_plan", one) != args_hash("update_plan", progressed)

    def test_unicode_and_lone_surrogates_hash(self):
        """Any JSON string hashes, including a lone surrogate escape."""
        assert re.fullmatch(r"t:[0-9a-f]{64}", args_hash("t", text='{"s": "\\ud800 é 🙂"}'))

    @given(s.tool_names, s.json_objects, st.integers())
    def test_key_order_never_changes_the_args_hash(self, tool, params, seed):
        """The same params with keys in any order hash alike."""
        reordered = s.reorder_keys(params, seed)
        assert args_hash(tool, params) == args_hash(tool, reordered)

    @given(st.integers(min_value=-(2**53), max_value=2**53))
    def test_integral_floats_hash_like_integers(self, number):
        """1 and 1.0 are the same argument."""
        assert args_hash("t", text=f'{{"n": {number}}}') == args_hash("t", text=f'{{"n": {number}.0}}')

    @given(s.tool_names, s.json_objects, s.json_objects)
    def test_different_params_hash_differently(self, tool, first, second):
        """Distinct canonical params never collide."""
        a, b = decode_json(json.dumps(first)), decode_json(json.dumps(second))
        if json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True):
            assert args_hash(tool, first) != args_hash(tool, second)


class TestOutcomeHash:
    def test_error_prefix_and_unknown_tool_name(self):
        """Errors hash as error:…; missing-tool messages name the tool."""
        assert result_hash("exec", {}, None, error="Tool exec not found").startswith("error:")
        fingerprint = fingerprints.outcome_fingerprint("exec", {}, None, "Tool exec not found", ToolCatalog(),
                                                       has_result=False)
        assert "exec" == fingerprint.unknown_tool_name
        assert "web.search" == fingerprints.unknown_tool_name("Unknown tool: 'Web.Search'")
        assert "foo" == fingerprints.unknown_tool_name('tool "foo" is not available')
        assert fingerprints.unknown_tool_name("permission denied") is None
        for error in ("Unknown tool: 'Web.Search'", 'tool "foo" is not available', "permission denied"):
            result_hash("t", {}, None, error=error)  # the core names the same tool, or none

    def test_non_object_results_hash_their_value(self):
        """Strings, numbers, arrays and null are results too."""
        hashes = {result_hash("t", {}, value) for value in ("ok", 1, [1], None, "other")}
        assert 5 == len(hashes)

    def test_exec_running_hashes_status_and_tail(self):
        """A running exec changes only when its tail changes."""
        a = {"details": {"status": "running", "tail": "x", "pid": 1, "durationMs": 5}}
        b = {"details": {"status": "running", "tail": "x", "pid": 2, "durationMs": 9}}
        c = {"details": {"status": "running", "tail": "y", "pid": 1}}
        assert result_hash("exec", {}, a) == result_hash("exec", {}, b) != result_hash("exec", {}, c)

    def test_exec_output_falls_back_to_text(self):
        """Without aggregated output, the text content is the output."""
        a = {"content": [{"type": "text", "text": "one"}], "details": {"status": "completed", "exitCode": 0}}
        b = {"content": [{"type": "text", "text": "two"}], "details": {"status": "completed", "exitCode": 0}}
        assert result_hash("exec", {}, a) != result_hash("exec", {}, b)

    def test_exec_approval_pending(self):
        """Approval results hash reason/host/command/warning only."""
        a = {"details": {"status": "approval-pending", "reason": "r", "host": "h", "command": "c", "requestId": "1"}}
        b = {"details": {"status": "approval-pending", "reason": "r", "host": "h", "command": "c", "requestId": "2"}}
        c = {"details": {"status": "approval-pending", "reason": "r", "host": "h", "command": "d"}}
        assert result_hash("exec", {}, a) == result_hash("exec", {}, b) != result_hash("exec", {}, c)

    def test_process_log_fields(self):
        """process log hashes line/char totals and text, not timing."""
        params = {"action": "log", "sessionId": "s"}
        a = {"details": {"status": "running", "totalLines": 3, "totalChars": 10, "elapsedMs": 1}}
        b = {"details": {"status": "running", "totalLines": 3, "totalChars": 10, "elapsedMs": 2}}
        c = {"details": {"status": "running", "totalLines": 4, "totalChars": 12}}
        assert result_hash("process", params, a) == result_hash("process", params, b) != result_hash("process", params, c)

    def test_message_id_only_dropped_on_message_objects(self):
        """A message object's id is volatile; a conversation's id is not."""
        params = {"action": "send"}
        a = {"details": {"message": {"id": "m1", "text": "hi", "direction": "out"}, "conversation": {"id": "c1"}}}
        b = {"details": {"message": {"id": "m2", "text": "hi", "direction": "out"}, "conversation": {"id": "c1"}}}
        c = {"details": {"message": {"id": "m3", "text": "hi", "direction": "out"}, "conversation": {"id": "c2"}}}
        assert result_hash("message", params, a) == result_hash("message", params, b) != result_hash("message", params, c)

    def test_non_send_message_actions_hash_in_full(self):
        """message read results with new ids are new results."""
        params = {"action": "read"}
        a = {"details": {"messageId": "1"}}
        b = {"details": {"messageId": "2"}}
        assert result_hash("message", params, a) != result_hash("message", params, b)

    def test_provider_send_tools_come_from_the_catalog(self):
        """A configured provider tool (telegram) strips delivery ids; unconfigured it does not."""
        a = {"details": {"ok": True, "messageId": 1}}
        b = {"details": {"ok": True, "messageId": 2}}
        catalog = ToolCatalog(provider_send_tools=frozenset({"telegram"}))
        assert result_hash("telegram", {"to": "x"}, a, catalog) == result_hash("telegram", {"to": "x"}, b, catalog)
        assert result_hash("telegram", {"to": "x"}, a) != result_hash("telegram", {"to": "x"}, b)


class TestExecOutcomes:
    @given(s.exec_statuses, s.exit_codes, s.exec_outputs, s.exec_volatile, s.exec_volatile)
    def test_volatile_exec_fields_never_count(self, status, exit_code, output, first, second):
        """Durations, PIDs, cwd, session ids and start times never enter the hash."""
        base = {"status": status, "exitCode": exit_code, "aggregated": output}
        one = {"content": [], "details": {**base, **first}}
        two = {"content": [], "details": {**base, **second}}
        assert result_hash("exec", {"command": "x"}, one) == result_hash("exec", {"command": "x"}, two)

    @given(s.exec_statuses, s.exit_codes, s.exec_outputs, s.exec_volatile,
           st.sampled_from(["status", "exitCode", "output", "timedOut"]))
    def test_meaningful_exec_fields_change_the_hash(self, status, exit_code, output, volatile, changed):
        """Status, exit code, timeout and output are progress."""
        base = {"status": status, "exitCode": exit_code, "aggregated": output.strip() or "x", **volatile}
        other = dict(base)
        if changed == "status":
            other["status"] = "failed" if status == "completed" else "completed"
        elif changed == "exitCode":
            other["exitCode"] = exit_code + 1
        elif changed == "timedOut":
            other["timedOut"] = True
        else:
            other["aggregated"] = base["aggregated"] + " more"
        assert result_hash("exec", {}, {"details": base}) != result_hash("exec", {}, {"details": other})


class TestSendOutcomes:
    @given(s.send_volatile, s.send_volatile, st.text(max_size=10))
    def test_volatile_delivery_ids_never_count(self, first, second, channel):
        """Two sends of the same message differ only in delivery ids: same result."""
        params = {"action": "send", "target": "chat:1", "text": "ping"}
        stable = {"ok": True, "channel": channel, "to": "chat:1"}
        one = {"content": [{"type": "text", "text": "sent 1"}], "details": {**stable, **first}}
        two = {"content": [{"type": "text", "text": "sent 2"}], "details": {**stable, **second}}
        assert result_hash("message", params, one) == result_hash("message", params, two)

    @given(s.send_volatile, st.text(min_size=1, max_size=10))
    def test_non_volatile_send_fields_change_the_hash(self, volatile, channel):
        """A different destination or status is a different result."""
        params = {"action": "send", "target": "chat:1"}
        one = {"details": {"ok": True, "channel": channel, **volatile}}
        two = {"details": {"ok": False, "channel": channel, **volatile}}
        assert result_hash("message", params, one) != result_hash("message", params, two)


class TestGenericOutcomes:
    @given(s.tool_names.filter(lambda t: t not in ("exec", "process", "message")), s.json_objects,
           st.text(max_size=20), st.text(max_size=20))
    def test_any_change_in_details_or_text_changes_the_hash(self, tool, details, text, other_text):
        """For ordinary tools every field of details and the text count."""
        one = {"content": [{"type": "text", "text": text}], "details": details}
        two = {"content": [{"type": "text", "text": other_text}], "details": details}
        if text.strip() != other_text.strip():
            assert result_hash(tool, {}, one) != result_hash(tool, {}, two)
        changed = {"content": one["content"], "details": {**details, "__changed__": 1}}
        assert result_hash(tool, {}, one) != result_hash(tool, {}, changed)


class TestResultsThatAreNotOpenClawShaped:
    def test_a_shapeless_object_is_hashed_whole_and_canonically(self):
        """Key order does not matter; any value does."""
        assert result_hash("t", {}, {"a": 1, "b": [1, 2]}) == result_hash("t", {}, {"b": [1, 2], "a": 1})
        assert result_hash("t", {}, {"a": 1}) != result_hash("t", {}, {"a": 2})

    def test_openclaw_shaped_results_keep_the_documented_hash(self):
        """With `content` or `details`, other top-level keys are ignored as before ({details, text} only)."""
        base = {"content": [{"type": "text", "text": "x"}], "details": {"ok": True}}
        assert result_hash("t", {}, base) == result_hash("t", {}, {**base, "elapsedMs": 5})
        assert result_hash("t", {}, {"details": {}}) == result_hash("t", {}, {"details": {}, "value": 1})

    def test_shapeless_send_results_still_drop_delivery_ids(self):
        """A send tool that returns a bare object: its volatile ids still do not count."""
        params = {"action": "send", "text": "hi"}
        assert result_hash("message", params, {"ok": True, "messageId": "1"}) == \
            result_hash("message", params, {"ok": True, "messageId": "2"})

    @given(first=st.dictionaries(st.sampled_from(["value", "items", "state"]), json_values, min_size=1, max_size=3),
           second=st.dictionaries(st.sampled_from(["value", "items", "state"]), json_values, min_size=1, max_size=3))
    def test_shapeless_objects_hash_alike_exactly_when_equal_as_json(self, first, second):
        """Two bare objects are the same outcome exactly when their canonical JSON is equal."""
        same = canonical_json(decode_json(json.dumps(first))) == canonical_json(decode_json(json.dumps(second)))
        assert same == (result_hash("t", {}, first) == result_hash("t", {}, second))


class TestMcpResults:
    def mcp(self, text="ok", structured=None, is_error=None):
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
        if structured is not None:
            result["structuredContent"] = structured
        if is_error is not None:
            result["isError"] = is_error
        return result

    def test_structured_content_is_part_of_the_outcome(self):
        """An MCP result that differs only in structuredContent is a different outcome."""
        assert result_hash("t", {}, self.mcp(structured={"n": 1})) != result_hash("t", {}, self.mcp(structured={"n": 2}))

    def test_is_error_is_part_of_the_outcome(self):
        """The same text with isError true and false are two outcomes."""
        assert result_hash("t", {}, self.mcp(is_error=True)) != result_hash("t", {}, self.mcp(is_error=False))

    def test_text_still_counts(self):
        """The text content hashes as for any result."""
        assert result_hash("t", {}, self.mcp("a", {"n": 1})) != result_hash("t", {}, self.mcp("b", {"n": 1}))


class TestExternalContentWrappers:
    """The wrapper rules through the outcome hash of both engines; the pairing of markers itself,
    which only the reference exposes as a function, also in tests/core/test_wrapper_pairs.py."""

    def test_fresh_ids_on_one_page_hash_alike(self):
        """Two identical fetched pages wrapped with fresh ids are the same outcome."""
        one = text_result(wrapped("the page", "9f86d081884c7d65"))
        two = text_result(wrapped("the page", "0bfe1c3a6a7d2e11"))
        assert result_hash("web_fetch", {"url": "u"}, one) == result_hash("web_fetch", {"url": "u"}, two)

    def test_wrapped_text_in_details_is_normalised_too(self):
        """web_fetch carries wrapped text in its details; those ids do not count either."""
        one = {"details": {"title": wrapped("T", "aaaa"), "status": 200}}
        two = {"details": {"title": wrapped("T", "bbbb"), "status": 200}}
        assert result_hash("web_fetch", {}, one) == result_hash("web_fetch", {}, two)

    def test_different_pages_still_differ(self):
        """Only the id is ignored: the wrapped content still counts."""
        assert result_hash("t", {}, text_result(wrapped("page A", "1"))) != result_hash("t", {}, text_result(wrapped("page B", "2")))

    def test_mismatched_markers_are_text(self):
        """An opening and closing marker with different ids is not a pair: the ids stay in the hash."""
        one = text_result(wrapped("same", "aaaa", "cccc"))
        two = text_result(wrapped("same", "bbbb", "cccc"))
        assert result_hash("t", {}, one) != result_hash("t", {}, two)

    def test_a_lone_marker_is_text(self):
        """A lone opening marker keeps its id."""
        text = '<<<EXTERNAL_UNTRUSTED_CONTENT id="abc">>> x'
        assert blank_wrapper_ids(text) == text
        assert result_hash("t", {}, text_result(text)) != result_hash("t", {}, text_result(text.replace("abc", "abd")))

    def test_pairs_are_blanked_and_the_rest_kept(self):
        """Each matching pair loses its id; a closer before its opener does not pair."""
        text = ('<<<END_EXTERNAL_UNTRUSTED_CONTENT id="z">>>' + wrapped("a", "x") + " and " + wrapped("b", "y"))
        blanked = '<<<END_EXTERNAL_UNTRUSTED_CONTENT id="z">>>' + wrapped("a", "") + " and " + wrapped("b", "")
        assert blank_wrapper_ids(text) == blanked
        assert result_hash("t", {}, text_result(text)) == result_hash("t", {}, text_result(blanked))

    def test_many_unpaired_openers_stay_linear(self):
        """A hostile result of 20,000 unpaired opening markers is hashed (and quickly)."""
        text = '<<<EXTERNAL_UNTRUSTED_CONTENT id="x">>>' * 20000 + '<<<END_EXTERNAL_UNTRUSTED_CONTENT id="y">>>'
        assert text == blank_wrapper_ids(text)
        result_hash("t", {}, text_result(text))

    @pytest.mark.parametrize("levels", [1, 2, 3])
    def test_pairs_inside_json_escaped_text_hash_alike(self, levels):
        """A result whose text is a JSON document holding the wrapped page (escaped 1, 2, 3 times over)."""
        def escaped(wrapper_id):
            text = wrapped("the page", wrapper_id)
            for _ in range(levels):
                text = json.dumps({"title": text})
            return text_result(text)
        assert result_hash("web_fetch", {}, escaped("9f86d081884c7d65")) == result_hash("web_fetch", {}, escaped("x-1 any form"))

    def test_escaped_markers_pair_only_at_one_escaping(self):
        """An opener escaped once and a closer escaped twice are no pair: their ids stay in the hash."""
        def text(wrapper_id):
            return (f'<<<EXTERNAL_UNTRUSTED_CONTENT id=\\"{wrapper_id}\\">>> page '
                    f'<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\\\\\"{wrapper_id}\\\\\\">>>')
        assert blank_wrapper_ids(text("a")) == text("a")
        assert result_hash("t", {}, text_result(text("a"))) != result_hash("t", {}, text_result(text("b")))
        assert blank_wrapper_ids('<<<EXTERNAL_UNTRUSTED_CONTENT id=\\"a\\">>> x <<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\"a\\">>>') == \
            '<<<EXTERNAL_UNTRUSTED_CONTENT id=\\"\\">>> x <<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\"\\">>>'


def _has_float(value) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_float(item) for item in value)
    return False


class TestCanonicalEncoder:
    """The reference's canonical text: orjson on its hot path must follow the stdlib's rules, and
    the core's canonical bytes (what both hash) are the reference's."""

    @given(s.json_values)
    def test_orjson_and_stdlib_agree_apart_from_float_spelling(self, value):
        """Both encoders give the same document; the text is identical unless a non-integral float is spelled differently."""
        from tests.reference.engine.jsonvalues import _stdlib_encode, canonical_bytes

        text = json.dumps(value)
        decoded = decode_json(text)
        fast = canonical_bytes(decoded).decode("utf-8", "surrogatepass")
        slow = _stdlib_encode(decoded)
        assert json.loads(slow) == json.loads(fast)
        if not _has_float(decoded):
            assert slow == fast
        assert canonical_bytes(decoded) == loopwarden_core.canonical_json(text), "the core's canonical bytes differ"

    @given(s.json_values)
    def test_canonical_text_round_trips_to_the_same_value(self, value):
        """Decoding the canonical text gives back the decoded value: nothing is lost or reordered into a new value."""
        decoded = decode_json(json.dumps(value))
        assert decoded == decode_json(canonical_json(decoded))
