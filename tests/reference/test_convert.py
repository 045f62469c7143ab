"""transport.convert: protobuf events in, service inputs out; decisions and run views back to protobuf."""
from __future__ import annotations

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb

from tests.reference.engine import (
    Action, CompactionRetry, Detector, Level, LoopDetectionSettings, Record, RunEnd, ToolCall, ToolOutcome, Verdict,
)
from tests.reference.service import Decision, RunView
from tests.reference import convert


class TestEventInput:
    def test_tool_call(self):
        event = pb.Event(run_id="r", agent_id="a", session_id="s", seq=3,
                         tool_call=pb.ToolCall(tool_name="read", tool_call_id="c1", params_json='{"p": 1}'))

        converted = convert.event_input(event)

        assert ("r", "a", "s", 3) == (converted.run_id, converted.agent_id, converted.session_id, converted.seq)
        assert ToolCall("read", '{"p": 1}', "c1", 3) == converted.payload
        assert "tool_call" == converted.kind

    @pytest.mark.parametrize("outcome, result_json, error", [
        (pb.ToolOutcome(tool_name="read", result_json='{"v": 1}'), '{"v": 1}', None),
        (pb.ToolOutcome(tool_name="read", error="boom"), None, "boom"),
        (pb.ToolOutcome(tool_name="read"), None, None),
        (pb.ToolOutcome(tool_name="read", result_json=""), "", None),
    ], ids=["result", "error", "neither", "empty-result-set"])
    def test_tool_outcome_keeps_which_of_result_and_error_was_set(self, outcome, result_json, error):
        """The oneof decides: result_json set (even empty), error set, or neither (None, None)."""
        converted = convert.event_input(pb.Event(run_id="r", seq=4, tool_outcome=outcome))

        assert ToolOutcome("read", "", "", result_json, error, 4) == converted.payload

    @pytest.mark.parametrize("event, payload", [
        (pb.Event(run_id="r", seq=5, compaction_retry=pb.CompactionRetry()), CompactionRetry(5)),
        (pb.Event(run_id="r", seq=6, run_end=pb.RunEnd()), RunEnd(6)),
        (pb.Event(run_id="r", seq=7), None),
    ], ids=["compaction_retry", "run_end", "no-kind"])
    def test_other_kinds(self, event, payload):
        assert payload == convert.event_input(event).payload


class TestVerdictMessage:
    def test_plain_allow_is_minimal(self):
        """An ALLOW without message carries seq, run, action and tool, and nothing else."""
        message = convert.verdict_message(Decision(9, "r", Verdict(action=Action.ALLOW, tool_name="read")))

        assert pb.Verdict(seq=9, run_id="r", action=pb.ACTION_ALLOW, tool_name="read") == message

    def test_block_with_evidence(self):
        verdict = Verdict(action=Action.BLOCK, detector=Detector.GENERIC_REPEAT, level=Level.CRITICAL, count=20,
                          message="m", warning_key="k", announce=True, tool_name="read",
                          evidence_seqs=(3, 5, 7), evidence_call_ids=("c7",))

        message = convert.verdict_message(Decision(8, "r", verdict, "lw-1"))

        assert (pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT, pb.LEVEL_CRITICAL, 20, "lw-1") == (
            message.action, message.detector, message.level, message.count, message.decision_id)
        assert ([3, 5, 7], ["c7"], 3) == (list(message.evidence.seqs), list(message.evidence.tool_call_ids),
                                          message.evidence.loop_started_seq)
        assert not message.shadow

    def test_shadow_reports_the_withheld_action(self):
        verdict = Verdict(action=Action.ALLOW, detector=Detector.PING_PONG, level=Level.CRITICAL, message="m",
                          shadow_action=Action.BLOCK)

        message = convert.verdict_message(Decision(1, "r", verdict, "lw-2"))

        assert (pb.ACTION_ALLOW, True, pb.ACTION_BLOCK) == (message.action, message.shadow, message.shadow_action)

    @pytest.mark.parametrize("detector", list(Detector))
    def test_every_detector_has_a_wire_value(self, detector):
        """A detector added to the engine without its proto enum value fails here."""
        verdict = Verdict(action=Action.WARN, detector=detector, level=Level.WARNING, message="m")

        message = convert.verdict_message(Decision(1, "r", verdict))

        expected = "DETECTOR_UNSPECIFIED" if detector is Detector.NONE else f"DETECTOR_{detector.name}"
        assert expected == pb.Detector.Name(message.detector)


class TestInspectResponse:
    def test_view_to_message(self):
        settings = LoopDetectionSettings(enabled=True, history_size=12)
        block = Decision(5, "r", Verdict(action=Action.BLOCK, detector=Detector.GENERIC_REPEAT,
                                         level=Level.CRITICAL, message="m"), "lw-9")
        view = RunView(tenant="", run_id="r", agent_id="a", records=(Record(1, "read", "read:ab", "", "cd"),
                                                          Record(3, "read", "read:ab", "c3", None)),
                       guard_armed=True, guard_window_size=3, guard_observed=1, blocks=1, aborted=False,
                       abort_error_code="", settings=settings, events_evaluated=4, recent_decisions=(block,))

        message = convert.inspect_response(view)

        assert ("r", "a", 1, False, 4) == (message.run_id, message.agent_id, message.blocks, message.aborted,
                                           message.events_evaluated)
        assert [("read:ab", "cd", ""), ("read:ab", "", "c3")] == [
            (r.args_hash, r.result_hash, r.tool_call_id) for r in message.records]
        assert (True, 3, 1) == (message.guard.armed, message.guard.window_size, message.guard.observed)
        assert (True, 12) == (message.effective_config.enabled, message.effective_config.history_size)
        assert ["lw-9"] == [v.decision_id for v in message.recent_verdicts]

    def test_enabled_unset_stays_unset(self):
        """enabled=None (only the guard) is absent on the wire, not false."""
        message = convert.effective_config(LoopDetectionSettings(enabled=None))

        assert not message.HasField("enabled")
