"""The opt-in detectors that catch what the reference misses: argument churn and identical errors,
and how they rank after the reference detectors."""
from __future__ import annotations

from dataclasses import replace

import pytest

from loopwarden_server.config.detection import LoopDetectionSettings
from tests.conformance.scenarios import load_variants
from tests.engine.driver import A, D, L, R, Run
from tests.engine.test_engine_conformance import run_variant_on_engine

BOTH = LoopDetectionSettings(enabled=True, argument_churn_warn_at=3, argument_churn_block_at=5,
                             error_repeat_threshold=5)


def nonce_loop(run: Run, calls: int, tool: str = "fetch") -> list:
    """`calls` calls of one tool with a fresh nonce each, all returning the same page (blocked calls don't run)."""
    verdicts = []
    for index in range(calls):
        params = {"url": "https://x.test", "nonce": f"n{index}"}
        verdict = run.call(tool, params)
        verdicts.append(verdict)
        if verdict.action != A.block:
            run.outcome(tool, params, R("the same page"))
    return verdicts


def failing_loop(run: Run, calls: int, error: str = "Error: payment amount does not add up") -> list:
    verdicts = []
    for _ in range(calls):
        verdict = run.call("book", {"amount": 833})
        verdicts.append(verdict)
        if verdict.action != A.block:
            run.outcome("book", {"amount": 833}, error=error)
    return verdicts


class TestArgumentChurn:
    def test_a_nonce_rotating_loop_is_warned_then_blocked(self):
        """warnAt 3, blockAt 5: the call that sees 3 prior matching outcomes is warned, the one that sees 5 blocked."""
        verdicts = nonce_loop(Run(BOTH), 7)
        assert [(A.allow, 0)] * 3 + [(A.warn, 3), (A.warn, 4), (A.block, 5), (A.block, 5)] == [
            (v.action, v.count) for v in verdicts]
        assert {D.argument_churn} == {v.detector for v in verdicts[3:]}
        assert L.critical == verdicts[5].level

    def test_without_block_at_it_only_warns(self):
        """blockAt 0 (false): warnings only, however long the churn."""
        verdicts = nonce_loop(Run(replace(BOTH, argument_churn_block_at=0)), 12)
        assert A.block not in {v.action for v in verdicts}
        assert (A.warn, 11) == (verdicts[-1].action, verdicts[-1].count)

    def test_evidence_and_key(self):
        """The evidence is the streak's records (oldest first); the key names the tool and the shared result."""
        run = Run(BOTH)
        verdict = nonce_loop(run, 6)[-1]
        assert [1, 3, 5, 7, 9] == verdict.evidence_seqs
        assert verdict.warning_key.startswith("churn:fetch:")

    def test_changing_results_never_churn(self):
        """Changing arguments with changing results is progress."""
        run = Run(BOTH)
        for index in range(10):
            assert A.allow == run.call("fetch", {"n": index}).action
            run.outcome("fetch", {"n": index}, R(f"page {index}"))

    def test_a_repeated_argument_ends_the_streak(self):
        """Repeating one call (A, A, A) is generic_repeat's, not churn: the streak stops at the repeat."""
        run = Run(BOTH)
        for _ in range(6):
            run.call("fetch", {"n": 1})
            run.outcome("fetch", {"n": 1}, R("same"))
        assert A.allow == run.call("fetch", {"n": 2}).action

    def test_other_tools_in_between_do_not_break_it(self):
        """The streak counts this tool's calls; a call of another tool in between is skipped."""
        run = Run(BOTH)
        for index in range(3):
            run.call("fetch", {"n": index})
            run.outcome("fetch", {"n": index}, R("same"))
            run.call("think", {"t": index})
            run.outcome("think", {"t": index}, R(""))
        verdict = run.call("fetch", {"n": 99})
        assert (A.warn, D.argument_churn, 3) == (verdict.action, verdict.detector, verdict.count)

    def test_identical_errors_with_changing_arguments_churn_too(self):
        """An identical error from ever-new arguments is one outcome too."""
        run = Run(BOTH)
        for index in range(3):
            run.call("lookup", {"id": index})
            run.outcome("lookup", {"id": index}, error="Error: not found")
        assert (A.warn, D.argument_churn) == (lambda v: (v.action, v.detector))(run.call("lookup", {"id": 7}))

    def test_off_by_default(self):
        """With default settings a nonce loop is never flagged (the evasion the detector exists for)."""
        assert {A.allow} == {v.action for v in nonce_loop(Run(LoopDetectionSettings(enabled=True)), 40)}


class TestErrorRepeat:
    def test_threshold_five_warns_the_fifth_and_blocks_the_sixth(self):
        """After 5 identical failing calls the 6th is blocked (count 5); the 5th is warned (count 4)."""
        verdicts = failing_loop(Run(LoopDetectionSettings(enabled=True, error_repeat_threshold=5)), 7)
        assert [(A.allow, 0)] * 4 + [(A.warn, 4), (A.block, 5), (A.block, 5)] == [
            (v.action, v.count) for v in verdicts]
        assert {D.error_repeat} == {v.detector for v in verdicts[4:]}
        assert verdicts[5].message.startswith("CRITICAL: book failed 5 times")

    def test_a_different_error_restarts_the_count(self):
        """Only the identical error counts: a new error text is a new streak."""
        run = Run(LoopDetectionSettings(enabled=True, error_repeat_threshold=4))
        failing_loop(run, 2, "Error: one")
        # The first "two" call still sees two "one"s (below 3); after it, "two" counts from 1.
        assert [A.allow] * 3 + [A.warn] == [v.action for v in failing_loop(run, 4, "Error: two")]

    def test_successes_never_count(self):
        """Identical successful results are generic_repeat's business, not error_repeat's."""
        run = Run(LoopDetectionSettings(enabled=True, error_repeat_threshold=3))
        for _ in range(9):
            assert A.allow == run.call("read", {"p": 1}).action
            run.outcome("read", {"p": 1}, R("ok"))

    def test_evidence_is_the_failing_streak(self):
        """The block's evidence lists the failing calls, oldest first."""
        verdict = failing_loop(Run(LoopDetectionSettings(enabled=True, error_repeat_threshold=3)), 4)[-1]
        assert (A.block, [1, 3, 5]) == (verdict.action, verdict.evidence_seqs)


class TestRankedAfterTheReference:
    def test_a_reference_block_is_never_replaced(self):
        """With C = 4 the reference's generic block wins over error_repeat's block at the same call."""
        settings = LoopDetectionSettings(enabled=True, warning_threshold=2, critical_threshold=4, error_repeat_threshold=4)
        verdict = failing_loop(Run(settings), 5)[-1]
        assert (A.block, D.generic_repeat, 4) == (verdict.action, verdict.detector, verdict.count)

    def test_a_reference_warning_is_kept_at_the_same_level(self):
        """A reference WARN and an opt-in WARN on one call: the reference's is returned."""
        settings = LoopDetectionSettings(enabled=True, warning_threshold=4, critical_threshold=9, error_repeat_threshold=5)
        verdict = failing_loop(Run(settings), 5)[-1]
        assert (A.warn, D.generic_repeat, 4) == (verdict.action, verdict.detector, verdict.count)

    def test_a_higher_level_from_an_opt_in_detector_wins(self):
        """A reference WARN and an opt-in BLOCK: the call is blocked by the opt-in detector."""
        settings = LoopDetectionSettings(enabled=True, warning_threshold=4, critical_threshold=9, error_repeat_threshold=5)
        verdict = failing_loop(Run(settings), 6)[-1]
        assert (A.block, D.error_repeat, 5) == (verdict.action, verdict.detector, verdict.count)


@pytest.mark.parametrize("variant", [v for v in load_variants() if not v.extension], ids=lambda v: v.id)
def test_conformance_is_unchanged_with_both_explicitly_off(variant):
    """Every spec example gives the same verdicts with argumentChurn and errorRepeat explicitly off."""
    config = {**variant.config, "loopwarden": {"argumentChurn": {"enabled": False}, "errorRepeat": {"enabled": False}}}
    run_variant_on_engine(variant, config)


class TestPingPongNeedsAnswers:
    def alternate(self, settings, calls: int) -> list:
        """A failing booking alternating with an empty `think` note (both sides stable)."""
        run = Run(settings)
        verdicts = []
        for index in range(calls):
            tool, params = (("book", {"amount": 833}), ("think", {"thought": "retry"}))[index % 2]
            verdict = run.call(tool, params)
            verdicts.append(verdict)
            if verdict.action == A.block:
                continue
            if tool == "book":
                run.outcome(tool, params, error="Error: payment does not add up")
            else:
                run.outcome(tool, params, {"content": [{"type": "text", "text": ""}], "details": {}})
        return verdicts

    def test_the_reference_blocks_a_silent_ping_pong(self):
        """Off (the reference): stable results on both sides, so the C-th alternating call is blocked."""
        verdicts = self.alternate(LoopDetectionSettings(enabled=True, warning_threshold=4, critical_threshold=5), 6)
        assert (A.block, D.ping_pong, 5) == (verdicts[4].action, verdicts[4].detector, verdicts[4].count)

    def test_a_silent_side_only_warns(self):
        """On: a side that only returned empty results proves nothing: the alternation is warned, not blocked."""
        settings = LoopDetectionSettings(enabled=True, warning_threshold=4, critical_threshold=5, ping_pong_needs_answers=True)
        verdicts = self.alternate(settings, 8)
        assert [A.allow] * 3 + [A.warn] * 5 == [v.action for v in verdicts]
        assert {D.ping_pong} == {v.detector for v in verdicts[3:]}

    def test_the_failing_side_is_still_caught_by_its_own_repeats(self):
        """On, with errorRepeat 5: the booking's 6th identical failure (the 11th call) is blocked."""
        settings = LoopDetectionSettings(enabled=True, warning_threshold=4, critical_threshold=9,
                                         ping_pong_needs_answers=True, error_repeat_threshold=5)
        verdicts = self.alternate(settings, 12)
        number = next(i for i, v in enumerate(verdicts, 1) if v.action == A.block)
        assert (11, D.error_repeat) == (number, verdicts[number - 1].detector)

    def test_answering_sides_still_block(self):
        """On: two sides that return something stable are blocked at C as in the reference."""
        settings = LoopDetectionSettings(enabled=True, warning_threshold=4, critical_threshold=5, ping_pong_needs_answers=True)
        run = Run(settings)
        verdicts = []
        for index in range(5):
            tool, params = (("read", {"p": "a"}), ("list", {"d": "w"}))[index % 2]
            verdicts.append(run.call(tool, params))
            run.outcome(tool, params, R(f"{tool} stable"))
        assert (A.block, D.ping_pong) == (verdicts[-1].action, verdicts[-1].detector)
