"""Hard limits: each answered with REJECT + a stable code (or a status for that stream only)."""
from __future__ import annotations

import grpc
import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.support.grpc_helpers import Stream, call, channel, health_status, outcome
from tests.support.metrics import delta

pytestmark = pytest.mark.daemon

LIMITS = ["--max-json-depth", "8", "--max-events-per-request", "5", "--max-message-bytes", "65536",
          "--max-streams", "3", "--max-run-id-chars", "16", "--max-tool-name-chars", "12",
          "--max-params-bytes", "1000", "--max-result-bytes", "1000"]


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return "{tools: {loopDetection: {enabled: true}}}"


@pytest.fixture(scope="module")
def daemon_args() -> tuple[str, ...]:
    return tuple(LIMITS)


class TestEventLimits:
    @pytest.mark.parametrize("event, code", [
        (call("lim-1", "read", "[" * 9 + "]" * 9), "json_too_deep"),
        (outcome("lim-1", "read", "{}", '{"a":' * 9 + "1" + "}" * 9), "json_too_deep"),
        (call("lim-1", "read", '{"x":"' + "a" * 1000 + '"}'), "params_too_large"),
        (outcome("lim-1", "read", "{}", '"' + "b" * 1000 + '"'), "result_too_large"),
        (call("r" * 17, "read"), "run_id_too_long"),
        (call("lim-1", "t" * 13), "tool_name_too_long"),
    ], ids=["params-depth", "result-depth", "params-size", "result-size", "run-id", "tool-name"])
    def test_each_limit_rejects_with_its_code(self, daemon, event, code):
        """Just over the limit: REJECT with the limit's code; just under: answered normally."""
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            rejected = stream.one(event)
            fine = stream.one(call("r" * 16, "t" * 12, "[" * 8 + "]" * 8))
        assert (pb.ACTION_REJECT, code) == (rejected.action, rejected.error_code)
        assert pb.ACTION_ALLOW == fine.action

    def test_too_many_events_in_one_request(self, daemon):
        """A request over the per-request limit ends its stream with RESOURCE_EXHAUSTED naming the
        limit, evaluating none of its events (counted); at the limit a new stream is served."""
        before = daemon.scrape()
        with channel(daemon.grpc_target) as ch:
            refused = Stream(ch)
            with pytest.raises(grpc.RpcError) as failure:
                refused.send(*[call("lim-2", "read", f'{{"i":{i}}}', seq=i + 1) for i in range(6)])
            with Stream(ch) as stream:
                allowed = stream.send(*[call("lim-2", "read", f'{{"i":{i}}}', seq=i + 1) for i in range(5)])
                inspected = pb_grpc.LoopDetectionServiceStub(ch).InspectRun(pb.InspectRunRequest(run_id="lim-2"))
        after = daemon.scrape()
        assert grpc.StatusCode.RESOURCE_EXHAUSTED == failure.value.code()
        assert "too_many_events" in failure.value.details() and "5" in failure.value.details()
        assert [pb.ACTION_ALLOW] * 5 == [v.action for v in allowed]
        assert 5 == len(inspected.records)  # the refused request left nothing behind
        assert 1 == delta(before, after, "loopwarden_rejected_requests_total", reason="too_many_events")


class TestStreamLimits:
    def test_an_oversized_message_fails_only_its_stream(self, daemon):
        """A request over --max-message-bytes ends that stream with RESOURCE_EXHAUSTED; another stream carries on."""
        with channel(daemon.grpc_target) as ch, Stream(ch) as bystander:
            assert pb.ACTION_ALLOW == bystander.one(call("lim-3", "read")).action
            big = Stream(ch)
            with pytest.raises(grpc.RpcError) as failure:
                big.one(call("lim-4", "read", '"' + "x" * 70000 + '"'))
            assert grpc.StatusCode.RESOURCE_EXHAUSTED == failure.value.code()
            assert pb.ACTION_ALLOW == bystander.one(call("lim-3", "read")).action
        assert "SERVING" == health_status(daemon.grpc_target)

    def test_concurrent_streams_are_capped(self, daemon):
        """The stream over --max-streams gets RESOURCE_EXHAUSTED; closing one makes room again."""
        with channel(daemon.grpc_target) as ch:
            streams = [Stream(ch) for _ in range(3)]
            for index, stream in enumerate(streams):
                stream.one(call(f"lim-5-{index}", "read"))
            with pytest.raises(grpc.RpcError) as refused:
                Stream(ch).one(call("lim-5-x", "read"))
            assert grpc.StatusCode.RESOURCE_EXHAUSTED == refused.value.code()
            streams.pop().close()
            with Stream(ch) as again:
                assert pb.ACTION_ALLOW == again.one(call("lim-5-y", "read")).action
            for stream in streams:
                stream.close()
