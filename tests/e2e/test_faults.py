"""Faults with the real daemon: SIGTERM under load, a client that stops reading, reloads mid-stream."""
from __future__ import annotations

import asyncio
import signal
import threading
import time

import grpc
import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import Stream, call, channel, health_status

pytestmark = pytest.mark.daemon


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


class TestSigtermUnderLoad:
    def test_every_received_event_is_answered(self):
        """Four streams keep sending through SIGTERM; sent == answered, new streams get UNAVAILABLE, exit 0."""
        with running_daemon("{tools: {loopDetection: {enabled: true}}}", ["--drain-grace", "10"]) as daemon:
            stop_sending = threading.Event()
            totals = {"sent": 0, "answered": 0}
            lock = threading.Lock()
            errors: list[BaseException] = []

            def client(index: int) -> None:
                try:
                    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                        n = 0
                        while not stop_sending.is_set():
                            batch = [call(f"load-{index}-{n % 50}", "read", f'{{"n":{n % 7}}}', seq=n + j) for j in range(4)]
                            verdicts = stream.send(*batch)
                            with lock:
                                totals["sent"] += len(batch)
                                totals["answered"] += len(verdicts)
                            n += 1
                except BaseException as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)

            threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
            for thread in threads:
                thread.start()
            time.sleep(0.5)
            daemon.signal(signal.SIGTERM)
            daemon.wait_for_log(lambda l: l.get("msg") == "draining")
            assert "NOT_SERVING" == health_status(daemon.grpc_target)
            with channel(daemon.grpc_target) as ch, pytest.raises(grpc.RpcError) as refused:
                Stream(ch).one(call("late", "read"))
            assert grpc.StatusCode.UNAVAILABLE == refused.value.code()
            time.sleep(0.5)
            stop_sending.set()
            for thread in threads:
                thread.join(timeout=15)
            assert 0 == daemon.process.wait(timeout=15)
        assert [] == errors
        assert totals["sent"] > 100
        assert totals["sent"] == totals["answered"]


class TestSlowClient:
    def test_a_client_that_stops_reading_is_held_by_flow_control(self):
        """A flood on a stream nobody reads never piles up in the daemon: RSS stays bounded, others are served.

        The daemon answers each request as it reads it, so unread responses sit in HTTP/2 windows
        (bounded by flow control) rather than in a queue of its own that could grow without end.
        """
        with running_daemon() as daemon:
            pid = daemon.process.pid
            before = _rss_kib(pid)
            payload = '{"blob":"' + "x" * 60000 + '"}'

            async def flood() -> int:
                async with grpc.aio.insecure_channel(daemon.grpc_target) as ch:
                    stream = pb_grpc.LoopDetectionServiceStub(ch).Evaluate()
                    written = 0
                    deadline = time.monotonic() + 6
                    while time.monotonic() < deadline:
                        try:
                            await asyncio.wait_for(
                                stream.write(pb.EvaluateRequest(events=[call("slow-1", "read", payload)])), 1.0)
                        except asyncio.TimeoutError:
                            break
                        written += 1
                    with channel(daemon.grpc_target) as other, Stream(other) as fast:
                        started = time.monotonic()
                        verdict = fast.one(call("fast-1", "read"))
                        latency = time.monotonic() - started
                    assert pb.ACTION_ALLOW == verdict.action
                    assert latency < 2.0, f"another stream waited {latency:.2f}s"
                    stream.cancel()
                    return written

            written = asyncio.run(flood())
            grown_mib = (_rss_kib(pid) - before) / 1024
        assert written * 60000 > 100 * 1024 * 1024, f"only {written} writes: the flood was too small to prove anything"
        assert grown_mib < 100, f"daemon RSS grew {grown_mib:.0f} MiB after {written} unread 60 KB requests"


class TestReloadWhileStreaming:
    def test_no_verdict_sees_half_a_config(self):
        """Global and agent thresholds swap together: in each request exactly one of two twin runs warns."""
        config_a = "{tools: {loopDetection: {enabled: true, warningThreshold: 3}}, agents: {list: [{id: 'z', tools: {loopDetection: {warningThreshold: 50, criticalThreshold: 60, globalCircuitBreakerThreshold: 70}}}]}}"
        config_b = "{tools: {loopDetection: {enabled: true, warningThreshold: 50, criticalThreshold: 60, globalCircuitBreakerThreshold: 70}}, agents: {list: [{id: 'z', tools: {loopDetection: {warningThreshold: 3}}}]}}"
        with running_daemon(config_a, ["--config-poll", "0.01"]) as daemon:
            flipping = threading.Event()
            flipping.set()

            def flip() -> None:
                texts = [config_b, config_a]
                index = 0
                while flipping.is_set():
                    daemon.write_config(texts[index % 2])
                    index += 1
                    time.sleep(0.03)

            flipper = threading.Thread(target=flip)
            flipper.start()
            seen = {"global-warns": 0, "agent-warns": 0}
            try:
                with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                    for run in range(60):
                        for position in range(1, 41):
                            verdicts = stream.send(call(f"twin-{run}", "read"), call(f"twin-{run}-z", "read", agent_id="z"))
                            if position <= 3:
                                continue  # fewer than 3 prior calls: neither config warns
                            warned = [v.action == pb.ACTION_WARN for v in verdicts]
                            assert 1 == sum(warned), f"run {run} call {position}: {[pb.Action.Name(v.action) for v in verdicts]}"
                            seen["global-warns" if warned[0] else "agent-warns"] += 1
            finally:
                flipping.clear()
                flipper.join(timeout=10)
        assert seen["global-warns"] > 0 and seen["agent-warns"] > 0, f"the reloads did not interleave: {seen}"
