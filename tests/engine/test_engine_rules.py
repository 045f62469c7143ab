"""Hashing rules, record keeping, announcements and the guard, through the entry point."""
from __future__ import annotations

import json
import re

from tests.reference.engine import (
    Action, Detector, ErrorCode, Level, LoopDetectionSettings, RunState, ToolCatalog,
    normalize_tool_name,
)
from tests.reference.engine.fingerprints import args_hash, outcome_fingerprint, unknown_tool_name
from tests.reference.engine.jsonvalues import decode_json
from tests.engine.driver import R, Run

DEFAULTS = LoopDetectionSettings(enabled=True)


def result_hash(tool, params, result, catalog=ToolCatalog()):
    return outcome_fingerprint(tool, params, result, None, catalog, has_result=True).result_hash


class TestToolNames:
    def test_normalisation(self):
        """Names are trimmed, lower-cased, aliased, and never empty."""
        assert ["exec", "apply_patch", "read", "tool"] == [
            normalize_tool_name(n) for n in ("  Bash ", "apply-patch", "READ", "  ")]

    def test_bash_and_exec_are_one_tool(self):
        """Calls spelled bash and exec count together."""
        run = Run(DEFAULTS)
        for index in range(10):
            run.call("bash" if index % 2 else "Exec", {"command": "ls"})
        verdict = run.call("exec", {"command": "ls"})
        assert (Action.WARN, 10, "exec") == (verdict.action, verdict.count, verdict.tool_name)


class TestArgsHash:
    def test_shape(self):
        """An args hash is the tool name, a colon and 64 lowercase hex digits."""
        assert re.fullmatch(r"read:[0-9a-f]{64}", args_hash("read", {"path": "/a"}))

    def test_empty_params_mean_empty_object(self):
        """An empty params_json is {}."""
        run = Run(DEFAULTS)
        run.call("status", None)
        run.call("status", {})
        assert 1 == len({r.args_hash for r in run.state.records})

    def test_update_plan_rewording_is_the_same_call(self):
        """update_plan hashes its plan shape: rewording steps is no progress, a status change is."""
        one = {"plan": [{"step": "write code", "status": "in_progress"}], "explanation": "x"}
        reworded = {"plan": [{"step": "write the code", "status": "in_progress"}], "explanation": "y"}
        progressed = {"plan": [{"step": "write code", "status": "completed"}], "explanation": "x"}
        assert args_hash("update_plan", one) == args_hash("update_plan", reworded)
        assert args_hash("update_plan", one) != args_hash("update_plan", progressed)

    def test_unicode_and_lone_surrogates_hash(self):
        """Any JSON string hashes, including a lone surrogate escape."""
        value = decode_json('{"s": "\\ud800 é 🙂"}')
        assert re.fullmatch(r"t:[0-9a-f]{64}", args_hash("t", value))


class TestOutcomeHash:
    def test_error_prefix_and_unknown_tool_name(self):
        """Errors hash as error:…; missing-tool messages name the tool."""
        fingerprint = outcome_fingerprint("exec", {}, None, "Tool exec not found", ToolCatalog(), has_result=False)
        assert fingerprint.result_hash.startswith("error:")
        assert "exec" == fingerprint.unknown_tool_name
        assert "web.search" == unknown_tool_name("Unknown tool: 'Web.Search'")
        assert "foo" == unknown_tool_name('tool "foo" is not available')
        assert unknown_tool_name("permission denied") is None

    def test_no_result_records_nothing(self):
        """An outcome with neither result nor error leaves history as it was."""
        run = Run(DEFAULTS)
        run.call("read", {"path": "/x"})
        assert Action.ALLOW == run.outcome("read", {"path": "/x"}).action
        assert [None] == [r.result_hash for r in run.state.records]

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
            assert Action.ALLOW == run.call("read", {"path": "/x"}).action
        run.settings = DEFAULTS
        assert Action.WARN == run.call("read", {"path": "/x"}).action

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
            if verdict.action is Action.WARN:
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
        assert Action.ABORT == run.done("gateway", {"a": 1}, R("r"))[1].action

    def test_window_used_up_disarms(self):
        """After N observations without an abort, identical outcomes no longer abort."""
        run = Run(LoopDetectionSettings())
        run.compaction_retry()
        for result in ("a", "b", "c"):
            run.done("gateway", {"a": 1}, R(result))
        assert run.state.guard is None
        for _ in range(5):
            assert Action.ALLOW == run.done("gateway", {"a": 1}, R("same"))[1].action

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
        assert [Action.ABORT] * 3 == [v.action for v in verdicts]
        assert {ErrorCode.COMPACTION_LOOP_PERSISTED.value} == {v.error_code for v in verdicts}
        assert (Detector.POST_COMPACTION_GUARD, Level.CRITICAL) == (verdicts[0].detector, verdicts[0].level)


class TestRejects:
    def test_invalid_json_is_rejected_and_changes_nothing(self):
        """Bad params or result JSON get REJECT with a code naming the field; state is untouched."""
        run = Run(DEFAULTS)
        run.call("read", {"path": "/x"})
        before = [(r.args_hash, r.result_hash) for r in run.state.records]
        bad_params = run.outcome("read", None, None, result_json="1")
        run.seq += 1
        from tests.reference.engine import ToolCall, ToolOutcome, evaluate
        state: RunState = run.state
        verdicts = [
            evaluate(state, ToolCall("read", "{oops"), DEFAULTS),
            evaluate(state, ToolOutcome("read", '{"path": "/x"}', result_json="[1,"), DEFAULTS),
            evaluate(state, ToolCall("read", '{"n": NaN}'), DEFAULTS),
            evaluate(state, ToolCall("read", '{"n": 1e999}'), DEFAULTS),
            evaluate(state, ToolCall("read", "[" * 100000 + "]" * 100000), DEFAULTS),
        ]
        assert [ErrorCode.INVALID_PARAMS_JSON.value, ErrorCode.INVALID_RESULT_JSON.value,
                ErrorCode.INVALID_PARAMS_JSON.value, ErrorCode.INVALID_PARAMS_JSON.value,
                ErrorCode.JSON_TOO_DEEP.value] == [v.error_code for v in verdicts]
        assert all(v.action is Action.REJECT for v in verdicts)
        assert "params_json" in verdicts[0].message and "result_json" in verdicts[1].message
        assert Action.ALLOW == bad_params.action
        assert before + [(args_hash("read", {}), result_hash("read", {}, 1))] == [
            (r.args_hash, r.result_hash) for r in state.records]

    def test_nesting_depth_limit(self):
        """Depth 64 is accepted, 65 is json_too_deep, for params and results alike; a custom limit applies."""
        from tests.reference.engine import ToolCall, ToolOutcome, evaluate, new_run_state
        state = new_run_state(DEFAULTS)  # the reference's own entry point; the core's limit: tests/e2e/test_limits.py
        at_limit, over = "[" * 64 + "]" * 64, "[" * 65 + "]" * 65
        nested_objects = '{"a":' * 65 + "1" + "}" * 65
        assert Action.ALLOW == evaluate(state, ToolCall("t", at_limit), DEFAULTS).action
        assert [ErrorCode.JSON_TOO_DEEP.value] * 3 == [
            evaluate(state, ToolCall("t", over), DEFAULTS).error_code,
            evaluate(state, ToolCall("t", nested_objects), DEFAULTS).error_code,
            evaluate(state, ToolOutcome("t", "{}", result_json=over), DEFAULTS).error_code,
        ]
        assert ErrorCode.JSON_TOO_DEEP.value == evaluate(state, ToolCall("t", "[[[]]]"), DEFAULTS, max_json_depth=2).error_code
        wide = "[" + ",".join(["[1]"] * 500) + "]"
        assert Action.ALLOW == evaluate(state, ToolCall("t", wide), DEFAULTS).action

    def test_any_json_value_is_valid_params(self):
        """Arrays, strings, numbers and null are accepted as params."""
        run = Run(DEFAULTS)
        assert all(Action.ALLOW == run.call("t", value).action for value in ([1, 2], "s", 3.5, None))
        assert Action.ALLOW == run.call("t", json.loads("null")).action
