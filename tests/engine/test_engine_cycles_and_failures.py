"""The opt-in detection of loops without one repeated call, through the daemon's service
layer on the compiled core: cycles of 3 to 6 calls (`loopwarden.cycles`), exec terminal failures
across changing commands (`loopwarden.execFailureStreak`) and failures across tools
(`loopwarden.failureCascade`), each configured as a config file writes it.
"""
from __future__ import annotations

import pytest

from tests.engine.driver import A, D, NO_DETECTOR, Run, settings_from

MEMBERS = [("list", {"dir": "src"}), ("read", {"path": "a.py"}), ("grep", {"pattern": "todo"}),
           ("read", {"path": "b.py"}), ("exec", {"command": "make"}), ("edit", {"path": "a.py"})]



def seen(verdict) -> tuple:
    return verdict.action, verdict.detector, verdict.count


def rounds(run: Run, calls: list[tuple[str, dict, dict]]) -> list:
    """Each call and, unless it was stopped, its result: the calls' verdicts."""
    verdicts = []
    for tool, params, result in calls:
        verdict = run.call(tool, params)
        if verdict.action in (A.allow, A.warn):
            run.outcome(tool, params, result)
        verdicts.append(verdict)
    return verdicts


class TestCycles:
    CONFIG = {"tools": {"loopDetection": {"enabled": True}}, "loopwarden": {"cycles": {"enabled": True}}}

    def test_enabled_alone_takes_the_documented_thresholds(self):
        settings = settings_from(self.CONFIG)
        assert (settings.cycle_warn_after, settings.cycle_block_after) == (2, 3)
        assert (settings_from({"tools": {"loopDetection": {"enabled": True}}}).cycle_warn_after) == 0

    @pytest.mark.parametrize("period", [3, 4, 5, 6])
    def test_a_stable_cycle_is_warned_and_blocked_by_its_4p_th_call(self, period):
        run = Run(settings_from(self.CONFIG))
        calls = [(*MEMBERS[i % period], {"content": [{"type": "text", "text": f"member {i % period}"}]})
                 for i in range(4 * period)]
        verdicts = rounds(run, calls)
        assert all(seen(v) == (A.allow, NO_DETECTOR, 0) for v in verdicts[:2 * period])
        assert seen(verdicts[2 * period]) == (A.warn, D.cycle, 2 * period + 1)
        assert seen(verdicts[3 * period]) == (A.block, D.cycle, 3 * period + 1)
        assert verdicts[3 * period].message.startswith("CRITICAL: ")

    def test_a_cycle_with_changing_outcomes_is_never_judged(self):
        run = Run(settings_from(self.CONFIG))
        calls = [(*MEMBERS[i % 3], {"content": [{"type": "text", "text": f"round {i // 3}"}]}) for i in range(24)]
        assert all(v.action == A.allow for v in rounds(run, calls))


class TestExecFailureStreak:
    CONFIG = {"tools": {"loopDetection": {"enabled": True}}, "loopwarden": {"execFailureStreak": {"enabled": True}}}

    @staticmethod
    def failure(output: str, exit_code: int = 1) -> dict:
        return {"content": [{"type": "text", "text": output}],
                "details": {"status": "completed", "exitCode": exit_code, "aggregated": output, "durationMs": 12}}

    def test_forty_changing_commands_failing_alike_block_at_call_21(self):
        run = Run(settings_from(self.CONFIG))
        calls = [("exec", {"command": f"python job-{i}.py"},
                  self.failure(f"Traceback at 2026-08-30T10:{i:02}:00Z (pid {900 + i}): ModuleNotFoundError: foo"))
                 for i in range(40)]
        verdicts = rounds(run, calls)
        assert all(v.action == A.allow for v in verdicts[:20])
        assert seen(verdicts[20]) == (A.block, D.generic_repeat, 20)
        assert "identical outcomes" in verdicts[20].message
        assert all(seen(v) == (A.block, D.generic_repeat, 20) for v in verdicts[20:])

    def test_off_by_default(self):
        run = Run(settings_from({"tools": {"loopDetection": {"enabled": True}}}))
        calls = [("exec", {"command": f"python job-{i}.py"}, self.failure("ModuleNotFoundError: foo")) for i in range(30)]
        assert all(v.action == A.allow for v in rounds(run, calls))

    def test_an_errno_change_resets_the_streak(self):
        run = Run(settings_from(self.CONFIG))
        calls = [("exec", {"command": f"curl h{i}"}, self.failure("connect: errno 111")) for i in range(15)]
        calls += [("exec", {"command": "curl h15"}, self.failure("connect: errno 113"))]
        calls += [("exec", {"command": f"curl g{i}"}, self.failure("connect: errno 111")) for i in range(19)]
        assert all(v.action != A.block for v in rounds(run, calls))


class TestFailureCascade:
    @pytest.mark.parametrize("threshold", [3, 8])
    def test_n_failing_calls_of_n_tools_block_call_n_plus_1(self, threshold):
        config = {"tools": {"loopDetection": {"enabled": True}},
                  "loopwarden": {"failureCascade": {"enabled": True, "threshold": threshold}}}
        run = Run(settings_from(config))
        verdicts = []
        for i in range(threshold):
            verdicts.append(run.call(f"tool_{i}", {"n": i}))
            run.outcome(f"tool_{i}", {"n": i}, error=f"tool_{i}: permission denied")
        assert all(v.action == A.allow for v in verdicts[:threshold - 1])
        assert seen(verdicts[threshold - 1]) == (A.warn, D.failure_cascade, threshold - 1)
        assert seen(run.call("another", {})) == (A.block, D.failure_cascade, threshold)

    def test_the_fast_preset_blocks_the_seventh_call_after_six_failures(self):
        run = Run(settings_from({"loopwarden": {"preset": "fast"}}))
        for i in range(6):
            run.call(f"tool_{i}", {})
            run.outcome(f"tool_{i}", {}, error="denied")
        assert seen(run.call("tool_6", {})) == (A.block, D.failure_cascade, 6)
