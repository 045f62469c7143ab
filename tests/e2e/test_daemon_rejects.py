"""Malformed events: REJECT with an error code for that event alone; the stream and daemon carry on."""
from __future__ import annotations

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb

from tests.support.grpc_helpers import Stream, call, channel, health_status, outcome

pytestmark = pytest.mark.daemon

LIMITS = ["--max-params-bytes", "2048", "--max-result-bytes", "4096"]


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return "{tools: {loopDetection: {enabled: true}}}"


@pytest.fixture(scope="module")
def daemon_args() -> tuple[str, ...]:
    return tuple(LIMITS)


BAD_EVENTS = {
    "missing_run_id": (pb.Event(tool_call=pb.ToolCall(tool_name="read")), "run_id"),
    "blank_run_id": (pb.Event(run_id=" \t ", tool_call=pb.ToolCall(tool_name="read")), "run_id"),
    "no_kind": (pb.Event(run_id="bad-1"), "kind"),
    "params_not_json": (call("bad-1", "read", "{'path': '/x'}"), "params_json"),
    "params_truncated": (call("bad-1", "read", '{"path": "/x"'), "params_json"),
    "params_nan": (call("bad-1", "read", '{"n": NaN}'), "params_json"),
    "result_not_json": (outcome("bad-1", "read", "{}", "not json"), "result_json"),
    "params_too_large": (call("bad-1", "read", '{"blob": "' + "x" * 3000 + '"}'), "params_json"),
    "result_too_large": (outcome("bad-1", "read", "{}", '"' + "y" * 5000 + '"'), "result_json"),
    "error_too_large": (outcome("bad-1", "read", "{}", error="e" * 5000), "error"),
    "run_id_too_long": (call("r" * 300, "read"), "run_id"),
    "tool_name_too_long": (call("bad-1", "t" * 300), "tool_name"),
}
CODES = {
    "missing_run_id": "missing_run_id", "blank_run_id": "missing_run_id", "no_kind": "missing_event_kind",
    "params_not_json": "invalid_params_json", "params_truncated": "invalid_params_json",
    "params_nan": "invalid_params_json", "result_not_json": "invalid_result_json",
    "params_too_large": "params_too_large", "result_too_large": "result_too_large",
    "error_too_large": "result_too_large", "run_id_too_long": "run_id_too_long",
    "tool_name_too_long": "tool_name_too_long",
}


@pytest.mark.parametrize("case", sorted(BAD_EVENTS))
def test_bad_event_is_rejected_alone(daemon, case):
    """The bad event gets REJECT + its code + a message naming the field; the next event is answered."""
    event, field = BAD_EVENTS[case]
    event.seq = 7
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        rejected = stream.one(event)
        following = stream.one(call("after-" + case, "read", '{"path":"/x"}', seq=8))
    assert (pb.ACTION_REJECT, CODES[case], 7) == (rejected.action, rejected.error_code, rejected.seq)
    assert field in rejected.message
    assert (pb.ACTION_ALLOW, 8) == (following.action, following.seq)
    assert "SERVING" == health_status(daemon.grpc_target)


def test_rejects_record_nothing_and_other_runs_carry_on(daemon):
    """Rejected events never count towards a loop, and a neighbour run on the stream is unaffected."""
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        for _ in range(9):
            stream.send(call("rej-a", "read", '{"path":"/x"}'), call("rej-b", "read", "{broken"))
        verdicts = stream.send(call("rej-a", "read", '{"path":"/x"}'), call("rej-b", "read", '{"path":"/x"}'))
    assert [pb.ACTION_ALLOW, pb.ACTION_ALLOW] == [v.action for v in verdicts]


def test_any_json_value_is_valid(daemon):
    """Arrays, strings, numbers and null are valid params and results; an unknown agent is no error."""
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        verdicts = stream.send(
            call("json-1", "t", "[1, 2]"), call("json-1", "t", '"text"'), call("json-1", "t", "3.5"),
            call("json-1", "t", "null"), call("json-1", "t", ""),
            outcome("json-1", "t", "[1, 2]", "null"), outcome("json-1", "t", "{}", "[]"),
            call("json-1", "t", "{}", agent_id="nobody-configured"),
        )
    assert [pb.ACTION_ALLOW] * 8 == [v.action for v in verdicts]


def test_garbage_bytes_in_a_string_field_are_a_stream_error_not_a_crash(daemon):
    """A request whose string field is not UTF-8 fails that stream only; the daemon keeps serving."""
    import grpc
    from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

    # Field 1 (events) holding an Event whose run_id (field 1) is the invalid UTF-8 byte 0xff.
    raw = bytes([0x0A, 0x03, 0x0A, 0x01, 0xFF])
    with channel(daemon.grpc_target) as ch:
        evaluate = ch.stream_stream("/loopwarden.v1.LoopDetectionService/Evaluate",
                                    request_serializer=lambda b: b,
                                    response_deserializer=pb.EvaluateResponse.FromString)
        with pytest.raises(grpc.RpcError) as failure:
            list(evaluate(iter([raw]), timeout=5))
        assert failure.value.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT,
                                        grpc.StatusCode.UNKNOWN)
        stub = pb_grpc.LoopDetectionServiceStub(ch)
        verdict = stub.Check(pb.CheckRequest(event=call("after-garbage", "read")), timeout=5).verdict
    assert pb.ACTION_ALLOW == verdict.action
    assert "SERVING" == health_status(daemon.grpc_target)
