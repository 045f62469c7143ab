"""Fencing against a real redis-server: an event sent to a replica that
does not own its run is counted and logged as a misroute, and that replica's writes are fenced by
the owner's generation, so its stale copy never overwrites the owner's state; after the owner
dies, the survivor writes once the owner's lease has run out."""
from __future__ import annotations

import time

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb

from loopwarden_server.statestore.encoding import run_key
from tests.support.stored import run_message
from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import SAME, Stream, call, channel, outcome
from tests.support.metrics import value
from tests.support.servers import redis_server
from tests.support.state import wait_for, wait_until_flushed

pytestmark = [pytest.mark.system, pytest.mark.daemon]

ENABLED = "{tools: {loopDetection: {enabled: true}}}"
ARGS = '{"path":"/a"}'


def rounds(target: str, run_id: str, count: int) -> list[pb.Verdict]:
    with channel(target) as ch, Stream(ch) as stream:
        return [stream.send(call(run_id, "read", ARGS), outcome(run_id, "read", ARGS, SAME))[0] for _ in range(count)]


def one_call(target: str, run_id: str) -> pb.Verdict:
    with channel(target) as ch, Stream(ch) as stream:
        return stream.one(call(run_id, "read", ARGS))


def stored_events(redis, run_id: str) -> int:
    import redis as redis_py

    client = redis_py.Redis(host="127.0.0.1", port=redis.port)
    try:
        return run_message(client.get(b"loopwarden:" + run_key("", run_id))).events_evaluated
    finally:
        client.close()


class TestFencedWrites:
    def test_a_misrouted_event_is_counted_and_never_overwrites_the_owner(self):
        with redis_server() as redis:
            args = ["--state-store", redis.url, "--state-flush-interval", "0.1"]
            with running_daemon(ENABLED, args) as owner, running_daemon(ENABLED, args) as stray:
                rounds(owner.grpc_target, "fenced-1", 15)
                wait_until_flushed(owner)
                misrouted = rounds(stray.grpc_target, "fenced-1", 1)  # no router: the wrong replica
                more = rounds(owner.grpc_target, "fenced-1", 5)
                verdict = one_call(owner.grpc_target, "fenced-1")
                wait_for(lambda: value(stray.scrape(), "loopwarden_state_fenced_writes_total", outcome="dropped") >= 1)
                wait_until_flushed(owner)
                stored = stored_events(redis, "fenced-1")
                counted = value(stray.scrape(), "loopwarden_state_misrouted_runs_total")
                logged = [line for line in stray.logs() if "misrouted" in line.get("msg", "")]
                held_by_stray = value(stray.scrape(), "loopwarden_active_runs")
        assert pb.ACTION_WARN == misrouted[0].action, "evaluated from the stored copy: 15 repeats"
        assert all(v.action == pb.ACTION_WARN for v in more)
        assert (pb.ACTION_BLOCK, 20) == (verdict.action, verdict.count), "call 21 through the owner"
        assert 15 * 2 + 5 * 2 + 1 == stored, "the owner's state, not the stray copy's (32 events)"
        assert (1, 1, 0) == (counted, len(logged), held_by_stray)
        assert "fenced-1" == logged[0]["run_id"]

    def test_after_the_owner_dies_the_survivor_writes_once_its_lease_runs_out(self):
        with redis_server() as redis:
            args = ["--state-store", redis.url, "--state-flush-interval", "0.1"]
            with running_daemon(ENABLED, args) as owner, running_daemon(ENABLED, args) as survivor:
                rounds(owner.grpc_target, "lease-1", 15)
                wait_until_flushed(owner)
                owner.process.kill()
                owner.process.wait(timeout=10)
                after = rounds(survivor.grpc_target, "lease-1", 5)
                verdict = one_call(survivor.grpc_target, "lease-1")
                started = time.monotonic()
                wait_until_flushed(survivor, timeout=30)
                waited = time.monotonic() - started
                stored = stored_events(redis, "lease-1")
                waiting = value(survivor.scrape(), "loopwarden_state_fenced_writes_total", outcome="waiting")
        print(f"survivor's first write after the owner's kill -9: {waited:.2f} s ({waiting:g} writes held back)")
        assert [pb.ACTION_WARN] * 5 == [v.action for v in after]
        assert (pb.ACTION_BLOCK, 20) == (verdict.action, verdict.count)
        assert 15 * 2 + 5 * 2 + 1 == stored
