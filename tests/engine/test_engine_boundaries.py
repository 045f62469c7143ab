"""Each detector at its thresholds (W-1/W, C-1/C, G-1/G), at defaults and at W=3 C=5 G=7, and switched off."""
from __future__ import annotations

from dataclasses import replace

import pytest

from loopwarden_server.config.detection import LoopDetectionSettings, ToolCatalog
from tests.engine.driver import A, D, R, Run

DEFAULTS = LoopDetectionSettings(enabled=True)
CUSTOM = LoopDetectionSettings(enabled=True, warning_threshold=3, critical_threshold=5,
                               global_circuit_breaker_threshold=7, unknown_tool_threshold=4)
PROFILES = pytest.mark.parametrize("settings", [DEFAULTS, CUSTOM], ids=["defaults", "W3-C5-G7"])
POLL = {"action": "poll", "sessionId": "s1"}
STEADY = {"content": [{"type": "text", "text": "running"}], "details": {"status": "running", "aggregated": "steady"}}
PING, PONG = ("read", {"path": "/a"}), ("list", {"dir": "/w"})


def _repeat_calls(run: Run, n: int):
    for _ in range(n):
        run.call("read", {"path": "/x"})
    return run.call("read", {"path": "/x"})


def _repeat_done(run: Run, tool, params, result, n: int):
    for _ in range(n):
        run.done(tool, params, result)
    return run.call(tool, params)


def _alternate(run: Run, records: int, stable: bool):
    """`records` prior alternating done-calls starting with PING, then the call that extends the tail."""
    for index in range(records):
        tool, params = (PING, PONG)[index % 2]
        run.done(tool, params, R(f"{tool} stable" if stable else f"{tool} {index}"))
    tool, params = (PING, PONG)[records % 2]
    return run.call(tool, params)


class TestGenericRepeat:
    @PROFILES
    def test_warns_at_w_not_before(self, settings):
        """W-1 prior identical calls allow; W prior identical calls warn with count W."""
        W = settings.warning_threshold
        assert A.allow == _repeat_calls(Run(settings), W - 1).action
        verdict = _repeat_calls(Run(settings), W)
        assert (A.warn, D.generic_repeat, W) == (verdict.action, verdict.detector, verdict.count)

    @PROFILES
    def test_blocks_at_c_identical_outcomes_not_before(self, settings):
        """C-1 identical outcomes warn; C identical outcomes block with count C."""
        C = settings.critical_threshold
        below = _repeat_done(Run(settings), "read", {"path": "/x"}, R("same"), C - 1)
        assert (A.warn, C - 1) == (below.action, below.count)
        at = _repeat_done(Run(settings), "read", {"path": "/x"}, R("same"), C)
        assert (A.block, D.generic_repeat, C) == (at.action, at.detector, at.count)

    @PROFILES
    def test_switched_off_never_fires(self, settings):
        """With genericRepeat off, C identical outcomes are allowed (the breaker is still G away)."""
        off = replace(settings, generic_repeat=False)
        assert A.allow == _repeat_done(Run(off), "read", {"path": "/x"}, R("same"), settings.critical_threshold).action


class TestKnownPollNoProgress:
    @PROFILES
    def test_warns_at_w_and_blocks_at_c(self, settings):
        """Poll streak W-1 allows, W warns, C-1 warns, C blocks."""
        W, C = settings.warning_threshold, settings.critical_threshold
        verdicts = {n: _repeat_done(Run(settings), "process", POLL, STEADY, n) for n in (W - 1, W, C - 1, C)}
        assert A.allow == verdicts[W - 1].action
        assert (A.warn, D.known_poll_no_progress, W) == (verdicts[W].action, verdicts[W].detector, verdicts[W].count)
        assert (A.warn, C - 1) == (verdicts[C - 1].action, verdicts[C - 1].count)
        assert (A.block, D.known_poll_no_progress, C) == (verdicts[C].action, verdicts[C].detector, verdicts[C].count)

    @PROFILES
    def test_switched_off_falls_through_to_the_breaker(self, settings):
        """Poll tools never get generic_repeat; with the poll detector off only the breaker stops them."""
        off = replace(settings, known_poll_no_progress=False)
        G = settings.global_circuit_breaker_threshold
        assert A.allow == _repeat_done(Run(off), "process", POLL, STEADY, G - 1).action
        verdict = _repeat_done(Run(off), "process", POLL, STEADY, G)
        assert (A.block, D.global_circuit_breaker, G) == (verdict.action, verdict.detector, verdict.count)

    def test_command_status_and_extra_poll_tools_are_polls(self):
        """command_status with any params, and catalog poll tools, use the poll detector."""
        verdict = _repeat_done(Run(DEFAULTS), "command_status", {"id": 1}, R("same"), 10)
        assert (A.warn, D.known_poll_no_progress) == (verdict.action, verdict.detector)
        catalog = ToolCatalog(extra_poll_tools=frozenset({"job_status"}))
        verdict = _repeat_done(Run(DEFAULTS, catalog), "job_status", {"id": 1}, R("same"), 20)
        assert (A.block, D.known_poll_no_progress) == (verdict.action, verdict.detector)


class TestPingPong:
    @PROFILES
    def test_warns_at_w_not_before(self, settings):
        """An alternating tail of W-2 gives count W-1 (allow); W-1 gives count W (warn)."""
        W = settings.warning_threshold
        assert A.allow == _alternate(Run(settings), W - 2, stable=False).action
        verdict = _alternate(Run(settings), W - 1, stable=False)
        assert (A.warn, D.ping_pong, W) == (verdict.action, verdict.detector, verdict.count)

    @PROFILES
    def test_blocks_at_c_only_with_stable_results(self, settings):
        """Count C-1 with stable results warns; count C blocks; count C with changing results warns."""
        C = settings.critical_threshold
        below = _alternate(Run(settings), C - 2, stable=True)
        assert (A.warn, D.ping_pong, C - 1) == (below.action, below.detector, below.count)
        at = _alternate(Run(settings), C - 1, stable=True)
        assert (A.block, D.ping_pong, C) == (at.action, at.detector, at.count)
        changing = _alternate(Run(settings), C - 1, stable=False)
        assert (A.warn, C) == (changing.action, changing.count)

    @PROFILES
    def test_switched_off_never_fires(self, settings):
        """With pingPong off the same alternation is allowed."""
        off = replace(settings, ping_pong=False)
        assert A.allow == _alternate(Run(off), settings.critical_threshold - 1, stable=True).action

    def test_pending_calls_are_no_evidence(self):
        """Calls without outcomes can warn but never block."""
        run = Run(DEFAULTS)
        for index in range(19):
            run.call(*(PING, PONG)[index % 2])
        verdict = run.call(*PONG)
        assert (A.warn, 20) == (verdict.action, verdict.count)

    def test_a_and_b_share_one_warning_key(self):
        """A↔B and B↔A are the same pattern."""
        first = _alternate(Run(DEFAULTS), 9, stable=False)
        run = Run(DEFAULTS)
        for index in range(9):
            tool, params = (PONG, PING)[index % 2]
            run.done(tool, params, R(str(index)))
        second = run.call(*PING)
        assert first.warning_key == second.warning_key
        assert first.paired_tool_name == "read" and second.paired_tool_name == "list"


class TestUnknownToolRepeat:
    @PROFILES
    def test_blocks_at_u_not_before(self, settings):
        """U-1 failures naming a missing tool allow; U block with count U."""
        U = settings.unknown_tool_threshold

        def run_with(n):
            run = Run(settings)
            for index in range(n):
                run.done("exec", {"command": f"c{index}"}, error="Tool exec not found")
            return run.call("exec", {"command": "again"})

        assert A.allow == run_with(U - 1).action
        verdict = run_with(U)
        assert (A.block, D.unknown_tool_repeat, U) == (verdict.action, verdict.detector, verdict.count)

    def test_a_successful_call_breaks_the_streak(self):
        """The streak counts consecutive failures only."""
        run = Run(DEFAULTS)
        for index in range(9):
            run.done("exec", {"command": f"c{index}"}, error="unknown tool: exec")
        run.done("exec", {"command": "ok"}, {"details": {"status": "completed", "exitCode": 0, "aggregated": "ok"}})
        for index in range(9):
            run.done("exec", {"command": f"d{index}"}, error="unknown tool: exec")
        assert A.allow == run.call("exec", {"command": "next"}).action


class TestGlobalCircuitBreaker:
    @PROFILES
    def test_blocks_at_g_not_before(self, settings):
        """With the rolling detectors off, G-1 identical outcomes allow and G block."""
        off = replace(settings, generic_repeat=False, known_poll_no_progress=False, ping_pong=False)
        G = settings.global_circuit_breaker_threshold
        assert A.allow == _repeat_done(Run(off), "read", {"path": "/x"}, R("same"), G - 1).action
        verdict = _repeat_done(Run(off), "read", {"path": "/x"}, R("same"), G)
        assert (A.block, D.global_circuit_breaker, G) == (verdict.action, verdict.detector, verdict.count)

    def test_history_shorter_than_g_never_trips_it(self):
        """The breaker counts records in history, so H < G keeps it silent."""
        settings = LoopDetectionSettings(enabled=True, history_size=12, generic_repeat=False,
                                         known_poll_no_progress=False, ping_pong=False)
        assert A.allow == _repeat_done(Run(settings), "read", {"path": "/x"}, R("same"), 60).action
