"""Health, reflection and the graceful drain on SIGTERM/SIGINT."""
from __future__ import annotations

import signal
import time

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from loopwarden.v1 import loopwarden_pb2 as pb

from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import SERVICE, Stream, call, channel, health_status

pytestmark = pytest.mark.daemon


def _listed_services(target: str) -> set[str]:
    with channel(target) as ch:
        stub = reflection_pb2_grpc.ServerReflectionStub(ch)
        responses = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
        response = next(iter(responses))
    return {service.name for service in response.list_services_response.service}


class TestHealthAndReflection:
    def test_serving_for_the_server_and_the_service(self):
        """Both "" and the service name are SERVING once the daemon listens."""
        with running_daemon() as daemon:
            assert ["SERVING", "SERVING"] == [health_status(daemon.grpc_target, name) for name in ("", SERVICE)]

    def test_reflection_lists_the_service_and_can_be_switched_off(self):
        """Reflection is on by default and lists the service; --no-reflection turns it off."""
        with running_daemon() as daemon:
            assert {SERVICE, "grpc.health.v1.Health"} <= _listed_services(daemon.grpc_target)
        with running_daemon(extra_args=["--no-reflection"]) as daemon:
            with pytest.raises(grpc.RpcError) as failure:
                _listed_services(daemon.grpc_target)
            assert grpc.StatusCode.UNIMPLEMENTED == failure.value.code()


class TestDrain:
    @pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
    def test_drain_answers_open_streams_refuses_new_ones_and_exits(self, signum):
        """NOT_SERVING at once; an open stream keeps getting answers; a new stream gets UNAVAILABLE; exit 0 after."""
        with running_daemon(extra_args=["--drain-grace", "8"]) as daemon:
            with channel(daemon.grpc_target) as ch:
                stream = Stream(ch)
                assert pb.ACTION_ALLOW == stream.one(call("drain-1", "read")).action
                daemon.signal(signum)
                daemon.wait_for_log(lambda line: line.get("msg") == "draining")
                assert "NOT_SERVING" == health_status(daemon.grpc_target)
                assert "NOT_SERVING" == health_status(daemon.grpc_target, SERVICE)
                sent = answered = 0
                for index in range(50):
                    sent += 1
                    answered += len(stream.send(call("drain-1", "read", f'{{"i":{index}}}')))
                assert sent == answered
                with pytest.raises(grpc.RpcError) as refused:
                    Stream(ch).one(call("drain-2", "read"))
                assert grpc.StatusCode.UNAVAILABLE == refused.value.code()
                started = time.monotonic()
                stream.close()
                assert 0 == daemon.process.wait(timeout=8)
                assert time.monotonic() - started < 5, "the daemon should stop soon after the last stream closes"

    def test_streams_left_open_are_cut_at_the_grace_period(self):
        """A stream that never closes does not hold the daemon past its drain grace."""
        with running_daemon(extra_args=["--drain-grace", "1"]) as daemon:
            with channel(daemon.grpc_target) as ch:
                stream = Stream(ch)
                stream.one(call("linger-1", "read"))
                started = time.monotonic()
                daemon.signal(signal.SIGTERM)
                assert 0 == daemon.process.wait(timeout=10)
                assert time.monotonic() - started < 6
                stream._responses.cancel()
