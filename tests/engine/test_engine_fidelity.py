"""Fidelity beyond the first spec through the entry point: tool-name spellings, result shapes that
are not OpenClaw's, and external-content wrapper ids (spec sections 3 and 4, steps 9 and 10). The
hashing rules behind them are stated for both engines in tests/differential/test_fingerprints.py."""
from __future__ import annotations

import json

from loopwarden_server.config.detection import LoopDetectionSettings
from tests.engine.driver import A, D, Run
from tests.support.results import text_result, wrapped

DEFAULTS = LoopDetectionSettings(enabled=True)


class TestToolNameSpellings:
    def test_rotating_spellings_count_as_one_tool(self):
        """Ten calls spelled four ways are ten calls of one tool: the eleventh is warned with count 10,
        naming the tool as that call spelled it while the key folds it."""
        run = Run(DEFAULTS)
        spellings = ["read", "re\u200bad", "ｒｅａｄ", " READ\u200c"]
        for index in range(10):
            assert A.allow == run.call(spellings[index % 4], {"path": "/x"}).action
        verdict = run.call("ｒｅ\u200bａｄ", {"path": "/x"})
        assert (A.warn, D.generic_repeat, 10, "ｒｅ\u200bａｄ") == (
            verdict.action, verdict.detector, verdict.count, verdict.tool_name)
        assert verdict.message.startswith("WARNING: ｒｅ\u200bａｄ has been called 10 times")
        assert verdict.warning_key.startswith("generic:read:")



class TestResultsThatAreNotOpenClawShaped:
    def test_changing_plain_values_are_never_blocked(self):
        """`{"value": i}` for i = 1..25 are 25 different outcomes: only the generic warning, never a block."""
        run = Run(DEFAULTS)
        actions = []
        for index in range(1, 26):
            actions.append(run.call("counter", {}).action)
            run.outcome("counter", {}, {"value": index})
        assert [A.allow] * 10 + [A.warn] * 15 == actions

    def test_identical_plain_values_are_blocked_at_the_twenty_first_call(self):
        """25 identical `{"value": 1}` results: the 21st call is blocked with count 20."""
        run = Run(DEFAULTS)
        verdicts = []
        for _ in range(25):
            verdict = run.call("counter", {})
            verdicts.append(verdict)
            if verdict.action != A.block:
                run.outcome("counter", {}, {"value": 1})
        first_block = next(i for i, v in enumerate(verdicts) if v.action == A.block)
        assert (20, D.generic_repeat, 20) == (first_block, verdicts[first_block].detector, verdicts[first_block].count)



class TestMcpResults:
    def mcp(self, text="ok", structured=None, is_error=None):
        result = {"content": [{"type": "text", "text": text}]}
        if structured is not None:
            result["structuredContent"] = structured
        if is_error is not None:
            result["isError"] = is_error
        return result

    def test_changing_structured_content_is_never_blocked_through_the_entry_point(self):
        """25 MCP results with the same text but a changing structuredContent: never blocked."""
        run = Run(DEFAULTS)
        actions = []
        for index in range(25):
            actions.append(run.call("mcp_tool", {"q": 1}).action)
            run.outcome("mcp_tool", {"q": 1}, self.mcp("done", {"count": index}))
        assert A.block not in actions


class TestExternalContentWrappers:
    def test_repeated_wrapped_fetches_are_blocked_through_the_entry_point(self):
        """21 fetches of one unchanged page, each with a fresh wrapper id: the 21st is blocked (count 20)."""
        run = Run(DEFAULTS)
        for index in range(20):
            run.call("web_fetch", {"url": "https://example.test"})
            run.outcome("web_fetch", {"url": "https://example.test"}, text_result(wrapped("unchanged", f"{index:016x}")))
        verdict = run.call("web_fetch", {"url": "https://example.test"})
        assert (A.block, D.generic_repeat, 20) == (verdict.action, verdict.detector, verdict.count)

    def test_wrapped_errors_hash_alike(self):
        """An error text carrying a wrapper pair: fresh ids make no new error."""
        run = Run(DEFAULTS)
        for wrapper_id in ("1111", "2222"):
            run.call("t", {})
            run.outcome("t", {}, error="failed: " + wrapped("body", wrapper_id))
        assert 1 == len({record.result_hash for record in run.state.records})

    def test_escaped_wrapped_fetches_are_blocked_through_the_entry_point(self):
        """21 fetches whose JSON text holds an escaped wrapper with a fresh id: the 21st is blocked (count 20)."""
        run = Run(DEFAULTS)
        for index in range(20):
            run.call("web_fetch", {"url": "https://example.test"})
            page = json.dumps({"title": wrapped("unchanged", f"{index:016x}")})
            run.outcome("web_fetch", {"url": "https://example.test"}, text_result(page))
        verdict = run.call("web_fetch", {"url": "https://example.test"})
        assert (A.block, D.generic_repeat, 20) == (verdict.action, verdict.detector, verdict.count)
