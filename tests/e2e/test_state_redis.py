"""The Redis state store against a real redis-server: outages fail open, credentials and prefix,
and routed streams refuse events of another run."""
from __future__ import annotations

import threading
import time

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import SAME, Stream, call, channel, health_status, outcome
from tests.support.metrics import value
from tests.support.servers import redis_server
from tests.support.state import wait_for, wait_until_flushed

# A real redis-server from Debian's packages: make test, not make test-fast.
pytestmark = [pytest.mark.system, pytest.mark.daemon]

ENABLED = "{tools: {loopDetection: {enabled: true}}}"


class TestOutage:
    def test_redis_stopped_mid_load_answers_every_event_and_flushes_when_back(self):
        """Zero events unanswered while Redis is down, errors counted, every dirty run written once it is back."""
        with redis_server() as redis:
            args = ["--state-store", redis.url, "--state-flush-interval", "0.1"]
            with running_daemon(ENABLED, args) as daemon:
                sent = answered = 0
                stop = threading.Event()
                runs = set()

                def load() -> None:
                    nonlocal sent, answered
                    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                        index = 0
                        while not stop.is_set():
                            run_id = f"outage-{index % 200}"
                            runs.add(run_id)
                            sent += 2
                            answered += len(stream.send(call(run_id, "read", f'{{"i":{index}}}'),
                                                        outcome(run_id, "read", f'{{"i":{index}}}', SAME)))
                            index += 1

                worker = threading.Thread(target=load)
                worker.start()
                try:
                    wait_for(lambda: value(daemon.scrape(), "loopwarden_state_runs_flushed_total") > 0)
                    redis.stop()
                    wait_for(lambda: value(daemon.scrape(), "loopwarden_state_store_errors_total", operation="flush") > 0)
                    assert "SERVING" == health_status(daemon.grpc_target)
                    assert 0 == value(daemon.scrape(), "loopwarden_state_store_up")
                    time.sleep(0.5)  # keep loading while Redis is away (a span of load, not a wait for a state)
                    redis.start()
                    errors = value(daemon.scrape(), "loopwarden_state_store_errors_total", operation="flush")
                finally:
                    stop.set()
                    worker.join(timeout=30)
                wait_until_flushed(daemon, timeout=40)
                assert 1 == value(daemon.scrape(), "loopwarden_state_store_up")
                stored = redis.keys("loopwarden:*")
            print(f"redis outage: {sent} events sent, {answered} answered, {errors:g} flush errors, "
                  f"{len(stored)} of {len(runs)} runs stored once Redis was back")
            assert sent == answered and sent > 0
            assert errors >= 1
            assert len(runs) == len(stored)

    def test_an_unreachable_redis_at_start_does_not_stop_the_daemon(self):
        """Persistence fails open: the daemon starts, serves, and counts the failed load; the run
        it could not read is held back from flushes (it is merged once the store answers)."""
        from tests.support.servers import free_port

        url = f"redis://127.0.0.1:{free_port()}/0"
        with running_daemon(ENABLED, ["--state-store", url, "--state-flush-interval", "0.1"]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                assert pb.ACTION_ALLOW == stream.one(call("nowhere-1", "read")).action
            wait_for(lambda: value(daemon.scrape(), "loopwarden_state_store_errors_total", operation="load") > 0)
            assert 1 <= value(daemon.scrape(), "loopwarden_state_runs_unmerged_total")
            assert 0 == value(daemon.scrape(), "loopwarden_state_runs_flushed_total")
            assert "SERVING" == health_status(daemon.grpc_target)


class TestRedisSettings:
    def test_a_password_and_a_key_prefix(self):
        """Credentials from the URL; every key under the prefix, one hash tag per (tenant, run)."""
        with redis_server(password="s3cret-pw") as redis:
            args = ["--state-store", redis.url, "--state-key-prefix", "team-a:lw:", "--state-flush-interval", "0.1"]
            with running_daemon(ENABLED, args) as daemon:
                with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                    stream.one(call("pw-1", "read"))
                wait_until_flushed(daemon)
                listening = daemon.wait_for_log(lambda l: l.get("msg") == "listening")
            keys = redis.keys()
            with_owner = redis.keys(owner_marks=True)
        assert ["team-a:lw:{.cHctMQ}"] == keys
        assert ["team-a:lw:{.cHctMQ}", "team-a:lw:{.cHctMQ}#owner"] == with_owner, "its owner mark: same prefix, same slot"
        assert "s3cret-pw" not in str(listening)

    def test_a_run_not_in_memory_is_loaded_on_its_first_event(self):
        """Another replica's run: one GET on its first event, then it is evaluated with its history."""
        with redis_server() as redis:
            args = ["--state-store", redis.url, "--state-flush-interval", "0.1"]
            with running_daemon(ENABLED, args) as first:
                with channel(first.grpc_target) as ch, Stream(ch) as stream:
                    for _ in range(15):
                        stream.send(call("moved-1", "read", '{"p":1}'), outcome("moved-1", "read", '{"p":1}', SAME))
                wait_until_flushed(first)
            with running_daemon(ENABLED, args) as second:
                with channel(second.grpc_target) as ch, Stream(ch) as stream:
                    for _ in range(5):
                        stream.send(call("moved-1", "read", '{"p":1}'), outcome("moved-1", "read", '{"p":1}', SAME))
                    verdict = stream.one(call("moved-1", "read", '{"p":1}'))
                    fresh = stream.one(call("fresh-1", "read"))
                loaded = {source: value(second.scrape(), "loopwarden_state_runs_loaded_total", source=source)
                          for source in ("store", "new")}
                memory = value(second.scrape(), "loopwarden_state_runs_loaded_total", source="memory")
        assert (pb.ACTION_BLOCK, 20) == (verdict.action, verdict.count)
        assert pb.ACTION_ALLOW == fresh.action
        assert {"store": 1, "new": 1} == loaded
        assert 9 == memory  # events after the first request (call + outcome: the load) found it in memory


class TestRoutedStreams:
    """The module's `daemon` fixture: memory only."""

    def test_an_event_for_another_run_is_rejected_run_id_mismatch(self, daemon):
        """A stream opened for run A refuses run B's event, and keeps serving A."""
        with channel(daemon.grpc_target) as ch, Stream(ch, metadata=(("x-loopwarden-run-id", "route-a"),)) as stream:
            other, own = stream.send(call("route-b", "read"), call("route-a", "read"))
        assert (pb.ACTION_REJECT, "run_id_mismatch") == (other.action, other.error_code)
        assert pb.ACTION_ALLOW == own.action

    def test_check_with_another_runs_header_is_rejected(self, daemon):
        """Check carries the header too: a mismatch is REJECT, never evaluated."""
        with channel(daemon.grpc_target) as ch:
            stub = pb_grpc.LoopDetectionServiceStub(ch)
            response = stub.Check(pb.CheckRequest(event=call("route-c", "read")), timeout=5,
                                  metadata=(("x-loopwarden-run-id", "route-d"),))
            matching = stub.Check(pb.CheckRequest(event=call("route-c", "read")), timeout=5,
                                  metadata=(("x-loopwarden-run-id", "route-c"),))
        assert "run_id_mismatch" == response.verdict.error_code
        assert pb.ACTION_ALLOW == matching.verdict.action

    def test_a_stream_without_the_header_still_carries_many_runs(self, daemon):
        """One replica: multiplexed streams keep working."""
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            verdicts = stream.send(call("multi-1", "read"), call("multi-2", "read"))
        assert [pb.ACTION_ALLOW] * 2 == [v.action for v in verdicts]
