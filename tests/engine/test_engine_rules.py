"""Record keeping, announcements, the guard and refusals, through the entry point. The hashing
rules themselves are stated once for both engines in tests/differential/test_fingerprints.py."""
from __future__ import annotations

import json

import loopwarden_core

from loopwarden_server.config.detection import LoopDetectionSettings
from loopwarden_server.settings import Limits
from tests.engine.driver import A, D, L, R, Run

DEFAULTS = LoopDetectionSettings(enabled=True)


class TestToolNames:
    def test_bash_and_exec_are_one_tool(self):
        """Calls spelled bash and exec count together."""
        run = Run(DEFAULTS)
        for index in range(10):
            run.call("bash" if index % 2 else "Exec", {"command": "ls"})
        verdict = run.call("exec", {"command": "ls"})
        assert (A.warn, 10, "exec") == (verdict.action, verdict.count, verdict.tool_name)


class TestArgsHash:
    def test_empty_params_mean_empty_object(self):
        """An empty params_json is {}."""
        run = Run(DEFAULTS)
        run.call("status", None)
        run.call("status", {})
        assert 1 == len({r.args_hash for r in run.state.records})



class TestOutcomeHash:
    def test_no_result_records_nothing(self):
        """An outcome with neither result nor error leaves history as it was."""
        run = Run(DEFAULTS)
        run.call("read", {"path": "/x"})
        assert A.allow == run.outcome("read", {"path": "/x"}).action
        assert [None] == [r.result_hash for r in run.state.records]

    def test_other_blocked_results_hash_normally(self):
        """A policy denial is a result (so identical denials escalate); only our veto is not."""
        run = Run(DEFAULTS)
        run.call("exec", {"command": "rm"})
        run.outcome("exec", {"command": "rm"}, {"details": {"status": "blocked", "deniedReason": "policy"}})
        assert run.state.records[-1].result_hash is not None


class TestRecords:
    def test_outcome_fills_the_pending_call_with_its_tool_call_id(self):
        """With ids, the outcome goes to its own call, not the newest identical one (whose id is kept while pending)."""
        run = Run(DEFAULTS)
        run.call("read", {"path": "/x"}, tool_call_id="c1")
        run.call("read", {"path": "/x"}, tool_call_id="c2")
        run.outcome("read", {"path": "/x"}, R("r"), tool_call_id="c1")
        assert [("", True), ("c2", False)] == [(r.tool_call_id, r.result_hash is not None) for r in run.state.records]

    def test_unmatched_outcome_appends_a_completed_record(self):
        """An outcome with no pending call becomes a record of its own."""
        run = Run(DEFAULTS)
        run.outcome("read", {"path": "/x"}, R("r"))
        assert 1 == len(run.state.records) and run.state.records[0].result_hash is not None

    def test_history_keeps_the_newest_h(self):
        """40 different calls leave the newest 30, oldest dropped first."""
        run = Run(DEFAULTS)
        for index in range(40):
            run.call("read", {"path": f"/{index}"})
        assert 30 == len(run.state.records)
        assert 11 == run.state.records[0].seq

    def test_a_smaller_history_size_applies_from_the_next_event(self):
        """Reloaded settings trim a live run's history."""
        run = Run(DEFAULTS)
        for index in range(30):
            run.call("read", {"path": f"/{index}"})
        run.settings = LoopDetectionSettings(enabled=True, history_size=5)
        run.call("read", {"path": "/new"})
        assert 5 == len(run.state.records)

    def test_unset_enabled_still_records(self):
        """Switching detection on mid-run uses history already recorded."""
        run = Run(LoopDetectionSettings(enabled=None))
        for _ in range(10):
            assert A.allow == run.call("read", {"path": "/x"}).action
        run.settings = DEFAULTS
        assert A.warn == run.call("read", {"path": "/x"}).action

    def test_disabled_records_nothing(self):
        """enabled: false keeps no history at all."""
        run = Run(LoopDetectionSettings(enabled=False))
        run.done("read", {"path": "/x"}, R("r"))
        assert 0 == len(run.state.records)

    def test_blocked_calls_count_blocks(self):
        """Every BLOCK verdict is counted on the run."""
        run = Run(DEFAULTS)
        for _ in range(20):
            run.done("read", {"path": "/x"}, R("same"))
        run.call("read", {"path": "/x"})
        run.call("read", {"path": "/x"})
        assert 2 == run.state.blocks


class TestAnnouncements:
    def test_once_per_key_then_once_per_decade(self):
        """Counts 10 and 20 and 30 are announced, 11-19 and 21-29 are not, and all are WARN."""
        run = Run(DEFAULTS)
        announced = []
        for index in range(31):
            verdict = run.call("exec", {"command": "date"})
            run.outcome("exec", {"command": "date"}, {"details": {"status": "completed", "exitCode": 0, "aggregated": f"t{index}"}})
            if verdict.action == A.warn:
                announced.append((verdict.count, verdict.announce))
        assert [(10, True)] + [(n, False) for n in range(11, 20)] + [(20, True)] + [(n, False) for n in range(21, 30)] + [(30, True)] == announced

    def test_announcements_are_per_run(self):
        """Another run's first warning is announced too."""
        first, second = Run(DEFAULTS), Run(DEFAULTS)
        for run in (first, second):
            for _ in range(10):
                run.call("read", {"path": "/x"})
        assert first.call("read", {"path": "/x"}).announce and second.call("read", {"path": "/x"}).announce


class TestGuard:
    def test_rearming_restarts_the_window(self):
        """A second compaction retry gives a fresh window of N."""
        run = Run(LoopDetectionSettings())
        run.compaction_retry()
        run.done("gateway", {"a": 1}, R("r"))
        run.done("gateway", {"a": 1}, R("r"))
        run.compaction_retry()
        run.done("gateway", {"a": 1}, R("r"))
        run.done("gateway", {"a": 1}, R("r"))
        assert run.state.abort is None
        assert A.abort == run.done("gateway", {"a": 1}, R("r"))[1].action

    def test_window_used_up_disarms(self):
        """After N observations without an abort, identical outcomes no longer abort."""
        run = Run(LoopDetectionSettings())
        run.compaction_retry()
        for result in ("a", "b", "c"):
            run.done("gateway", {"a": 1}, R(result))
        assert run.state.guard is None
        for _ in range(5):
            assert A.allow == run.done("gateway", {"a": 1}, R("same"))[1].action

    def test_outcomes_without_hash_use_no_slot(self):
        """Veto outcomes and empty outcomes are not observed."""
        run = Run(LoopDetectionSettings())
        run.compaction_retry()
        run.outcome("gateway", {"a": 1}, {"details": {"status": "blocked", "deniedReason": "tool-loop"}})
        run.outcome("gateway", {"a": 1})
        assert 0 == run.state.guard.observed

    def test_aborted_run_stays_aborted_for_every_event(self):
        """Calls, outcomes and compaction retries of an aborted run all get the abort."""
        run = Run(LoopDetectionSettings())
        run.compaction_retry()
        for _ in range(3):
            run.done("gateway", {"a": 1}, R("r"))
        verdicts = [run.call("other", {}), run.outcome("other", {}, R("x")), run.compaction_retry()]
        assert [A.abort] * 3 == [v.action for v in verdicts]
        assert {"compaction_loop_persisted"} == {v.error_code for v in verdicts}
        assert (D.post_compaction_guard, L.critical) == (verdicts[0].detector, verdicts[0].level)


class TestRejects:
    def test_invalid_json_is_rejected_and_changes_nothing(self):
        """Bad params or result JSON get REJECT with a code naming the field; state is untouched."""
        run = Run(DEFAULTS)
        run.call("read", {"path": "/x"})
        bad_params = run.outcome("read", None, None, result_json="1")
        before = run.state.records
        verdicts = [
            run.call("read", params_json="{oops"),
            run.outcome("read", {"path": "/x"}, result_json="[1,"),
            run.call("read", params_json='{"n": NaN}'),
            run.call("read", params_json='{"n": 1e999}'),
            run.call("read", params_json="[" * 100000 + "]" * 100000),
        ]
        assert ["invalid_params_json", "invalid_result_json", "invalid_params_json", "invalid_params_json",
                "json_too_deep"] == [v.error_code for v in verdicts]
        assert all(v.action == A.reject for v in verdicts)
        assert "params_json" in verdicts[0].message and "result_json" in verdicts[1].message
        # An unmatched outcome whose params_json is "" is a completed record of its own.
        assert A.allow == bad_params.action
        assert 2 == len(before) and before[1].result_hash is not None
        assert "read:" + loopwarden_core.args_digest("read", "{}").hex() == before[1].args_hash
        assert before == run.state.records

    def test_nesting_depth_limit(self):
        """Depth 64 is accepted, 65 is json_too_deep, for params and results alike; a custom limit applies."""
        run = Run(DEFAULTS)
        at_limit, over = "[" * 64 + "]" * 64, "[" * 65 + "]" * 65
        nested_objects = '{"a":' * 65 + "1" + "}" * 65
        assert A.allow == run.call("t", params_json=at_limit).action
        assert ["json_too_deep"] * 3 == [
            run.call("t", params_json=over).error_code,
            run.call("t", params_json=nested_objects).error_code,
            run.outcome("t", {}, result_json=over).error_code,
        ]
        assert "json_too_deep" == Run(DEFAULTS, limits=Limits(max_json_depth=2)).call("t", params_json="[[[]]]").error_code
        wide = "[" + ",".join(["[1]"] * 500) + "]"
        assert A.allow == run.call("t", params_json=wide).action
    def test_any_json_value_is_valid_params(self):
        """Arrays, strings, numbers and null are accepted as params."""
        run = Run(DEFAULTS)
        assert all(A.allow == run.call("t", value).action for value in ([1, 2], "s", 3.5, None))
        assert A.allow == run.call("t", json.loads("null")).action
