"""Hostile input against the real daemon at its default limits: every crafted request gets its
documented answer, a valid event right after gets its normal verdict, and the daemon's peak
resident memory (VmHWM from /proc) stays bounded."""
from __future__ import annotations

import grpc
import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.support.grpc_helpers import SAME, Stream, call, channel, health_status, outcome
from tests.support.metrics import delta

pytestmark = pytest.mark.daemon

EVALUATE = "/loopwarden.v1.LoopDetectionService/Evaluate"
HUGE_INTEGER = "9" * 4301
MIB = 1024 * 1024


def raw_evaluate(ch: grpc.Channel, *requests: bytes) -> list[pb.EvaluateResponse]:
    """Send request bytes exactly as given (no client-side serialization) on one stream."""
    stub = ch.stream_stream(EVALUATE, request_serializer=None, response_deserializer=pb.EvaluateResponse.FromString)
    return list(stub(iter(requests), timeout=60))


def evaluate_request_bytes(*events: bytes) -> bytes:
    return b"".join(b"\x0a" + _varint(len(event)) + event for event in events)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def expect_status(code: grpc.StatusCode, function) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as failure:
        function()
    assert code == failure.value.code(), failure.value.details()
    return failure.value


def normal_verdict_after(daemon, run_id: str) -> pb.Verdict:
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        return stream.one(call(run_id, "read", '{"path": "/ok"}'))


class TestHostileRequests:
    def test_every_crafted_request_is_answered_and_memory_stays_bounded(self, daemon):
        """A million-event request (over and under the message limit), a 4,301-digit integer,
        invalid UTF-8, 1 MiB ids and 10 MB params each get their documented answer; a valid event
        after each gets ALLOW; the peak RSS grows by less than 100 MiB over all of them."""
        before_kib = daemon.memory_kib()
        before = daemon.scrape()
        with channel(daemon.grpc_target) as ch:
            # 1,000,000 events of 7 bytes (6.7 MiB): over the 4 MiB message limit.
            small_event = b"\x0a\x01r\x52\x00"  # run_id "r", an empty tool_call
            expect_status(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          lambda: raw_evaluate(ch, evaluate_request_bytes(*[small_event] * 1_000_000)))
            assert pb.ACTION_ALLOW == normal_verdict_after(daemon, "hostile-1").action

            # 1,000,000 empty events (2 MB): under the message limit, refused by counting raw bytes.
            refused = expect_status(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                    lambda: raw_evaluate(ch, evaluate_request_bytes(*[b""] * 1_000_000)))
            assert "too_many_events" in refused.details()
            assert pb.ACTION_ALLOW == normal_verdict_after(daemon, "hostile-2").action

            # Invalid UTF-8 in a string field: INVALID_ARGUMENT saying so, never UNKNOWN.
            bad_utf8 = evaluate_request_bytes(b"\x0a\x02\xff\xfe\x52\x00")
            undecodable = expect_status(grpc.StatusCode.INVALID_ARGUMENT, lambda: raw_evaluate(ch, bad_utf8))
            assert "could not be decoded" in undecodable.details()
            assert pb.ACTION_ALLOW == normal_verdict_after(daemon, "hostile-3").action

            # 10 MB of params: over the message limit, that stream only.
            expect_status(grpc.StatusCode.RESOURCE_EXHAUSTED, lambda: Stream(ch).one(
                call("hostile-4", "read", '"' + "x" * (10 * MIB) + '"')))
            assert pb.ACTION_ALLOW == normal_verdict_after(daemon, "hostile-4").action

            with Stream(ch) as stream:
                # A 4,301-digit integer: REJECT invalid_params_json naming the field; the stream lives.
                big = stream.one(call("hostile-5", "read", f'{{"n": {HUGE_INTEGER}}}'))
                assert (pb.ACTION_REJECT, "invalid_params_json") == (big.action, big.error_code)
                assert "params_json" in big.message and "4300 digits" in big.message
                assert pb.ACTION_ALLOW == stream.one(call("hostile-5", "read", '{"n": 1}')).action

                # 1 MiB ids, each REJECTed with its own code (50 Check calls: no memory kept).
                stub = pb_grpc.LoopDetectionServiceStub(ch)
                huge_id = "i" * MIB
                codes = set()
                for index in range(50):
                    event = [call("hostile-6", "read", agent_id=huge_id),
                             call("hostile-6", "read", session_id=huge_id),
                             call("hostile-6", "read", tool_call_id=huge_id)][index % 3]
                    verdict = stub.Check(pb.CheckRequest(event=event), timeout=10).verdict
                    codes.add((pb.Action.Name(verdict.action), verdict.error_code))
                assert {("ACTION_REJECT", "agent_id_too_long"), ("ACTION_REJECT", "session_id_too_long"),
                        ("ACTION_REJECT", "tool_call_id_too_long")} == codes
                assert pb.ACTION_ALLOW == stream.one(call("hostile-6", "read")).action
        after = daemon.scrape()
        grown_mib = (daemon.memory_kib() - before_kib) / 1024
        print(f"VmHWM before {before_kib / 1024:.1f} MiB, grown by {grown_mib:.1f} MiB")
        assert grown_mib < 100, f"peak RSS grew by {grown_mib:.0f} MiB"
        assert 1 == delta(before, after, "loopwarden_rejected_requests_total", reason="too_many_events")
        assert 1 == delta(before, after, "loopwarden_rejected_requests_total", reason="undecodable")
        assert "SERVING" == health_status(daemon.grpc_target)

    def test_a_failing_event_in_a_batch_is_rejected_alone_and_leaves_no_record(self, daemon, run_id):
        """In a batch of 3 whose middle event carries the huge integer, the first and third get
        their normal verdicts, the middle one REJECT, and InspectRun shows no record of it."""
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            first, middle, third = stream.send(call(run_id, "read", '{"a": 1}', seq=1),
                                               call(run_id, "read", f'{{"a": {HUGE_INTEGER}}}', seq=2),
                                               call(run_id, "read", '{"a": 3}', seq=3))
            inspected = pb_grpc.LoopDetectionServiceStub(ch).InspectRun(pb.InspectRunRequest(run_id=run_id))

        assert [pb.ACTION_ALLOW, pb.ACTION_REJECT, pb.ACTION_ALLOW] == [first.action, middle.action, third.action]
        assert [1, 3] == [record.seq for record in inspected.records]


class TestRetries:
    def test_a_retried_event_gets_the_same_verdict_and_changes_nothing(self, daemon, run_id):
        """The same (run, seq, content) resent after a reconnect gets the identical verdict
        (decision id included) and InspectRun's records are unchanged."""
        with channel(daemon.grpc_target) as ch:
            with Stream(ch) as stream:
                for index in range(10):
                    stream.send(call(run_id, "read", '{"p": 1}', seq=2 * index + 1),
                                outcome(run_id, "read", '{"p": 1}', SAME, seq=2 * index + 2))
                warned = stream.one(call(run_id, "read", '{"p": 1}', seq=21))
            stub = pb_grpc.LoopDetectionServiceStub(ch)
            records_before = stub.InspectRun(pb.InspectRunRequest(run_id=run_id)).records
            with Stream(ch) as reconnected:  # a new stream, as after a reconnect
                resent = reconnected.one(call(run_id, "read", '{"p": 1}', seq=21))
            records_after = stub.InspectRun(pb.InspectRunRequest(run_id=run_id)).records

        assert pb.ACTION_WARN == warned.action
        assert warned == resent
        assert list(records_before) == list(records_after)

    def test_twenty_one_retries_never_block(self, daemon, run_id):
        """One call and its outcome resent 21 times are one call and one outcome: no warning, no block."""
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            verdicts = [v for _ in range(22) for v in stream.send(
                call(run_id, "read", '{"p": 1}', seq=1), outcome(run_id, "read", '{"p": 1}', SAME, seq=2))]
            inspected = pb_grpc.LoopDetectionServiceStub(ch).InspectRun(pb.InspectRunRequest(run_id=run_id))

        assert {pb.ACTION_ALLOW} == {v.action for v in verdicts}
        assert 1 == len(inspected.records)

    def test_a_reused_seq_with_other_content_is_a_new_event(self, daemon, run_id):
        """A client that restarts its numbering (seq 1 again, other params) is evaluated as new."""
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            stream.one(call(run_id, "read", '{"p": 1}', seq=1))
            stream.one(call(run_id, "read", '{"p": 2}', seq=1))
            inspected = pb_grpc.LoopDetectionServiceStub(ch).InspectRun(pb.InspectRunRequest(run_id=run_id))

        assert [1, 1] == [r.seq for r in inspected.records]
        assert 2 == len({r.args_hash for r in inspected.records})

    def test_every_call_numbered_seq_1_with_fresh_call_ids_is_blocked_at_call_21(self, daemon, run_id):
        """The call id is part of a retry's content: a client that numbers every event `seq 1`
        but names each call afresh sends 21 calls, not one call and 20 retries, so the 21st is
        blocked; resending that 21st call (same id) is a retry and gets the same decision."""
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            for index in range(20):
                call_id = f"call-{index}"
                stream.send(call(run_id, "read", '{"p": 1}', tool_call_id=call_id, seq=1),
                            outcome(run_id, "read", '{"p": 1}', SAME, tool_call_id=call_id, seq=1))
            blocked = stream.one(call(run_id, "read", '{"p": 1}', tool_call_id="call-20", seq=1))
            resent = stream.one(call(run_id, "read", '{"p": 1}', tool_call_id="call-20", seq=1))

        assert (pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT, 20) == (blocked.action, blocked.detector, blocked.count)
        assert blocked == resent

    def test_seq_zero_is_never_deduplicated(self, daemon, run_id):
        """seq 0 ("no dedup"): 21 identical pairs with seq 0 block as usual."""
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            for _ in range(20):
                stream.send(call(run_id, "read", '{"p": 1}'), outcome(run_id, "read", '{"p": 1}', SAME))
            blocked = stream.one(call(run_id, "read", '{"p": 1}'))

        assert (pb.ACTION_BLOCK, 20) == (blocked.action, blocked.count)

