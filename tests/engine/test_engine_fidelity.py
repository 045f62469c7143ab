"""Fidelity beyond the first spec: tool-name spellings, result shapes that are not OpenClaw's, and
external-content wrapper ids (spec sections 3 and 4, steps 9 and 10), through the entry point."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.reference.engine import Action, Detector, LoopDetectionSettings, ToolCatalog, normalize_tool_name
from tests.reference.engine.external_content import blank_wrapper_ids
from tests.reference.engine.fingerprints import outcome_fingerprint
from tests.reference.engine.jsonvalues import canonical_json, decode_json
from tests.engine.driver import Run
from tests.strategies import json_values

DEFAULTS = LoopDetectionSettings(enabled=True)


def result_hash(tool, params, result, catalog=ToolCatalog()):
    return outcome_fingerprint(tool, params, result, None, catalog, has_result=True).result_hash


def wrapped(body: str, wrapper_id: str, closing_id: str | None = None) -> str:
    closing_id = wrapper_id if closing_id is None else closing_id
    return (f'<<<EXTERNAL_UNTRUSTED_CONTENT id="{wrapper_id}">>>\nSource: Web Fetch\n---\n{body}\n'
            f'<<<END_EXTERNAL_UNTRUSTED_CONTENT id="{closing_id}">>>')


def text_result(text: str) -> dict:
    return {"content": [{"type": "text", "text": text}], "details": {}}


class TestToolNameSpellings:
    @pytest.mark.parametrize("spelling", ["re\u200bad", "\ufeffread", "r\u200dea\u2060d", "ｒｅａｄ", "ＲＥＡＤ", "\u3000read"])
    def test_zero_width_and_compatibility_forms_are_the_same_tool(self, spelling):
        """Zero-width / format characters are removed and NFKC folds fullwidth letters before lower-casing."""
        assert "read" == normalize_tool_name(spelling)

    def test_fullwidth_alias_still_folds(self):
        """An alias spelled in fullwidth letters is the aliased tool."""
        assert "exec" == normalize_tool_name("Ｂａｓｈ")

    def test_rotating_spellings_count_as_one_tool(self):
        """Ten calls spelled four ways are ten calls of one tool: the eleventh is warned with count 10,
        naming the tool as that call spelled it while the key folds it."""
        run = Run(DEFAULTS)
        spellings = ["read", "re\u200bad", "ｒｅａｄ", " READ\u200c"]
        for index in range(10):
            assert Action.ALLOW == run.call(spellings[index % 4], {"path": "/x"}).action
        verdict = run.call("ｒｅ\u200bａｄ", {"path": "/x"})
        assert (Action.WARN, Detector.GENERIC_REPEAT, 10, "ｒｅ\u200bａｄ") == (
            verdict.action, verdict.detector, verdict.count, verdict.tool_name)
        assert verdict.message.startswith("WARNING: ｒｅ\u200bａｄ has been called 10 times")
        assert verdict.warning_key.startswith("generic:read:")

    def test_other_letters_are_kept(self):
        """Normalisation folds spellings, not letters: é stays é."""
        assert "réad" == normalize_tool_name("RÉAD")


class TestResultsThatAreNotOpenClawShaped:
    def test_changing_plain_values_are_never_blocked(self):
        """`{"value": i}` for i = 1..25 are 25 different outcomes: only the generic warning, never a block."""
        run = Run(DEFAULTS)
        actions = []
        for index in range(1, 26):
            actions.append(run.call("counter", {}).action)
            run.outcome("counter", {}, {"value": index})
        assert [Action.ALLOW] * 10 + [Action.WARN] * 15 == actions

    def test_identical_plain_values_are_blocked_at_the_twenty_first_call(self):
        """25 identical `{"value": 1}` results: the 21st call is blocked with count 20."""
        run = Run(DEFAULTS)
        verdicts = []
        for _ in range(25):
            verdict = run.call("counter", {})
            verdicts.append(verdict)
            if verdict.action is not Action.BLOCK:
                run.outcome("counter", {}, {"value": 1})
        first_block = next(i for i, v in enumerate(verdicts) if v.action is Action.BLOCK)
        assert (20, Detector.GENERIC_REPEAT, 20) == (first_block, verdicts[first_block].detector, verdicts[first_block].count)

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
        first, second = (decode_json(json.dumps(value)) for value in (first, second))  # as the engine decodes
        same = canonical_json(first) == canonical_json(second)
        assert same == (result_hash("t", {}, first) == result_hash("t", {}, second))


class TestMcpResults:
    def mcp(self, text="ok", structured=None, is_error=None):
        result = {"content": [{"type": "text", "text": text}]}
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

    def test_changing_structured_content_is_never_blocked_through_the_entry_point(self):
        """25 MCP results with the same text but a changing structuredContent: never blocked."""
        run = Run(DEFAULTS)
        actions = []
        for index in range(25):
            actions.append(run.call("mcp_tool", {"q": 1}).action)
            run.outcome("mcp_tool", {"q": 1}, self.mcp("done", {"count": index}))
        assert Action.BLOCK not in actions


class TestExternalContentWrappers:
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
        assert blank_wrapper_ids('<<<EXTERNAL_UNTRUSTED_CONTENT id="abc">>> x') == \
            '<<<EXTERNAL_UNTRUSTED_CONTENT id="abc">>> x'

    def test_pairs_are_blanked_and_the_rest_kept(self):
        """Each matching pair loses its id; a closer before its opener does not pair."""
        text = ('<<<END_EXTERNAL_UNTRUSTED_CONTENT id="z">>>' + wrapped("a", "x") + " and " + wrapped("b", "y"))
        assert blank_wrapper_ids(text) == ('<<<END_EXTERNAL_UNTRUSTED_CONTENT id="z">>>' + wrapped("a", "")
                                           + " and " + wrapped("b", ""))

    def test_repeated_wrapped_fetches_are_blocked_through_the_entry_point(self):
        """21 fetches of one unchanged page, each with a fresh wrapper id: the 21st is blocked (count 20)."""
        run = Run(DEFAULTS)
        for index in range(20):
            run.call("web_fetch", {"url": "https://example.test"})
            run.outcome("web_fetch", {"url": "https://example.test"}, text_result(wrapped("unchanged", f"{index:016x}")))
        verdict = run.call("web_fetch", {"url": "https://example.test"})
        assert (Action.BLOCK, Detector.GENERIC_REPEAT, 20) == (verdict.action, verdict.detector, verdict.count)

    def test_wrapped_errors_hash_alike(self):
        """An error text carrying a wrapper pair: fresh ids make no new error."""
        run = Run(DEFAULTS)
        for wrapper_id in ("1111", "2222"):
            run.call("t", {})
            run.outcome("t", {}, error="failed: " + wrapped("body", wrapper_id))
        assert 1 == len({record.result_hash for record in run.state.records})

    def test_many_unpaired_openers_stay_linear(self):
        """A hostile result of 20,000 unpaired opening markers is hashed (and quickly)."""
        text = '<<<EXTERNAL_UNTRUSTED_CONTENT id="x">>>' * 20000 + '<<<END_EXTERNAL_UNTRUSTED_CONTENT id="y">>>'
        assert text == blank_wrapper_ids(text)

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
        assert blank_wrapper_ids('<<<EXTERNAL_UNTRUSTED_CONTENT id=\\"a\\">>> x <<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\"a\\">>>') == \
            '<<<EXTERNAL_UNTRUSTED_CONTENT id=\\"\\">>> x <<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\"\\">>>'

    def test_escaped_wrapped_fetches_are_blocked_through_the_entry_point(self):
        """21 fetches whose JSON text holds an escaped wrapper with a fresh id: the 21st is blocked (count 20)."""
        run = Run(DEFAULTS)
        for index in range(20):
            run.call("web_fetch", {"url": "https://example.test"})
            page = json.dumps({"title": wrapped("unchanged", f"{index:016x}")})
            run.outcome("web_fetch", {"url": "https://example.test"}, text_result(page))
        verdict = run.call("web_fetch", {"url": "https://example.test"})
        assert (Action.BLOCK, Detector.GENERIC_REPEAT, 20) == (verdict.action, verdict.detector, verdict.count)
