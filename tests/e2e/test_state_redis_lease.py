"""An ex-owner whose lease on a run lapsed, against a real redis-server and two real daemons:
it reads the run again before it answers for it, so the events another replica answered
meanwhile count (the block comes where the whole history puts it) and none of them is dropped
from the stored run."""
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
from tests.support.state import wait_until_flushed

pytestmark = [pytest.mark.system, pytest.mark.daemon]

ENABLED = "{tools: {loopDetection: {enabled: true}}}"
ARGS = '{"path":"/a"}'
FLUSH_INTERVAL = 0.1
# statestore/fencing.py: a lease is 3 flush intervals, at least 1 s, counted from the write that took it.
LEASE_SECONDS = max(1.0, 3 * FLUSH_INTERVAL)


def rounds(target: str, run_id: str, count: int) -> list[pb.Verdict]:
    """`count` identical call/outcome pairs; each call's verdict."""
    with channel(target) as ch, Stream(ch) as stream:
        return [stream.send(call(run_id, "read", ARGS), outcome(run_id, "read", ARGS, SAME))[0] for _ in range(count)]


def until_blocked(target: str, run_id: str, most: int) -> tuple[int, int]:
    """Identical pairs until a call is blocked (its outcome never comes: the call was not made):
    (calls sent, events acknowledged)."""
    with channel(target) as ch, Stream(ch) as stream:
        for sent in range(1, most + 1):
            if stream.one(call(run_id, "read", ARGS)).action == pb.ACTION_BLOCK:
                return sent, 2 * sent - 1
            stream.one(outcome(run_id, "read", ARGS, SAME))
        return most, 2 * most


def stored_events(redis, run_id: str) -> int:
    import redis as redis_py

    client = redis_py.Redis(host="127.0.0.1", port=redis.port)
    try:
        return run_message(client.get(b"loopwarden:" + run_key("", run_id))).events_evaluated
    finally:
        client.close()


class TestLapsedLease:
    def test_an_ex_owner_reads_the_run_again_and_blocks_where_the_merged_history_puts_it(self):
        with redis_server() as redis:
            args = ["--state-store", redis.url, "--state-flush-interval", str(FLUSH_INTERVAL)]
            with running_daemon(ENABLED, args) as a, running_daemon(ENABLED, args) as b:
                on_a = rounds(a.grpc_target, "lapsed-1", 10)  # calls 1-10
                wait_until_flushed(a)
                time.sleep(LEASE_SECONDS + 0.3)  # A's lease lapses: B may take the run
                on_b = rounds(b.grpc_target, "lapsed-1", 8)  # calls 11-18
                wait_until_flushed(b)
                loaded_before = value(a.scrape(), "loopwarden_state_runs_loaded_total", source="store")
                calls, acknowledged_on_a = until_blocked(a.grpc_target, "lapsed-1", 15)
                loaded_after = value(a.scrape(), "loopwarden_state_runs_loaded_total", source="store")
                # A's writes wait for B's lease to lapse, then go (B's generation is A's copy's).
                wait_until_flushed(a, timeout=30)
                stored = stored_events(redis, "lapsed-1")
                dropped = value(a.scrape(), "loopwarden_state_fenced_writes_total", outcome="dropped")
        acknowledged = 10 * 2 + 8 * 2 + acknowledged_on_a
        block_call = 18 + calls
        print(f"block at call {block_call}; events acknowledged {acknowledged}, stored {stored}")
        assert [pb.ACTION_ALLOW] * 10 == [v.action for v in on_a]
        assert [pb.ACTION_WARN] * 8 == [v.action for v in on_b], "B loaded A's 10 calls"
        assert 21 == block_call, "the block where A's and B's calls together put it"
        assert acknowledged == stored, "every acknowledged event is in the stored run"
        assert (1, 0) == (loaded_after - loaded_before, dropped), "read again once; no write refused"

    def test_an_ex_owner_whose_run_nobody_took_keeps_its_copy(self):
        """A lapsed lease on a run nobody wrote since: one read, memory's copy answers on."""
        with redis_server() as redis:
            args = ["--state-store", redis.url, "--state-flush-interval", str(FLUSH_INTERVAL)]
            with running_daemon(ENABLED, args) as a:
                rounds(a.grpc_target, "kept-1", 10)
                wait_until_flushed(a)
                time.sleep(LEASE_SECONDS + 0.3)
                memory_before = value(a.scrape(), "loopwarden_state_runs_loaded_total", source="memory")
                calls, acknowledged_on_a = until_blocked(a.grpc_target, "kept-1", 15)
                wait_until_flushed(a)
                stored = stored_events(redis, "kept-1")
                store_loads = value(a.scrape(), "loopwarden_state_runs_loaded_total", source="store")
        assert 21 == 10 + calls
        assert 10 * 2 + acknowledged_on_a == stored
        assert 0 == store_loads, "memory's copy was current: nothing taken in"
        assert memory_before >= 1
