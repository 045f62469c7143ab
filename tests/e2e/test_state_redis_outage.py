"""A Redis outage against a real redis-server: a load that fails is remembered, the run is
evaluated from memory meanwhile, and once Redis answers the stored copy is merged before anything
is written back, so an outage never replaces a stored history with a shorter one."""
from __future__ import annotations

import threading
import time

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb

from loopwarden_server.statestore.encoding import tree_key_parts
from tests.support.stored import history_seqs
from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import SAME, Stream, call, channel, outcome
from tests.support.metrics import value
from tests.support.servers import redis_server
from tests.support.state import wait_until_flushed

pytestmark = [pytest.mark.system, pytest.mark.daemon]

ENABLED = "{tools: {loopDetection: {enabled: true}}}"
ARGS = '{"path":"/a"}'
OUTAGE_SECONDS = 10.0


def _wait_for(predicate, timeout: float = 30.0, what=lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"condition not met in time {what()}"
        time.sleep(0.05)


def rounds(stream: Stream, run_id: str, count: int) -> list[pb.Verdict]:
    """`count` calls of one tool with one argument, each with the same outcome: the calls' verdicts."""
    return [stream.send(call(run_id, "read", ARGS), outcome(run_id, "read", ARGS, SAME))[0] for _ in range(count)]


def stored_records(redis) -> dict[str, int]:
    """run id -> how many history records its stored value holds."""
    import redis as redis_py

    client = redis_py.Redis(host="127.0.0.1", port=redis.port)
    try:
        found = {}
        for key in client.keys("loopwarden:*"):
            if key.endswith((b"}exemptions", b"#owner")):
                continue
            found[tree_key_parts(key[len(b"loopwarden:"):])[2]] = len(history_seqs(client.get(key)))
        return found
    finally:
        client.close()


class TestLoadsThatFailAreMerged:
    def test_an_outage_under_load_blocks_on_the_merged_streak_and_shortens_no_stored_run(self):
        with redis_server(durable=True) as redis:  # its data outlives the restart
            args = ["--state-store", redis.url, "--state-flush-interval", "0.1"]
            with running_daemon(ENABLED, args) as owner, running_daemon(ENABLED, args) as other:
                shared = [f"shared-{i}" for i in range(40)]
                with channel(owner.grpc_target) as ch, Stream(ch) as stream:
                    for run_id in ("held", "short", "long"):
                        rounds(stream, run_id, 15)
                    for run_id in shared:  # 30 records each: a full history
                        rounds(stream, run_id, 30)
                wait_until_flushed(owner)
                before = stored_records(redis)
                assert {"held": 15, "short": 15, "long": 15} == {k: before[k] for k in ("held", "short", "long")}

                # Load on both replicas for the whole outage: the owner on runs it holds, the other
                # replica on runs it does not (each load of those fails while Redis is away).
                stop = threading.Event()
                sent = answered = 0

                def load(target: str, runs: list[str]) -> None:
                    nonlocal sent, answered
                    with channel(target) as ch, Stream(ch) as stream:
                        index = 0
                        while not stop.is_set():
                            run_id = runs[index % len(runs)]
                            got = len(stream.send(call(run_id, "write", f'{{"i":{index}}}'),
                                                  outcome(run_id, "write", f'{{"i":{index}}}', f'"{index}"')))
                            sent += 2  # after the call: a += around a blocking call loses the other thread's
                            answered += got
                            index += 1

                workers = [threading.Thread(target=load, args=(owner.grpc_target, shared[:20])),
                           threading.Thread(target=load, args=(other.grpc_target, shared[20:]))]
                redis.stop()
                stopped = time.monotonic()
                for worker in workers:
                    worker.start()
                try:
                    with channel(owner.grpc_target) as ch, Stream(ch) as stream:
                        during_held = rounds(stream, "held", 3)  # calls 16-18, from the owner's memory
                    with channel(other.grpc_target) as ch, Stream(ch) as stream:
                        during_short = rounds(stream, "short", 3)  # calls 16-18: its load fails
                        during_long = rounds(stream, "long", 7)  # calls 16-22: memory's streak only
                    _wait_for(lambda: value(other.scrape(), "loopwarden_state_unmerged_runs") >= 22,
                              what=lambda: other.scrape()[-3000:])
                    unmerged_during = value(other.scrape(), "loopwarden_state_unmerged_runs")
                    time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - stopped)))  # the outage's length
                    redis.start()
                    # The store's own word that it answers the other replica again: runs it marked
                    # during the outage (its load traffic) merged.
                    _wait_for(lambda: value(other.scrape(), "loopwarden_state_runs_merged_total") >= 1)
                finally:
                    stop.set()
                    for worker in workers:
                        worker.join(timeout=30)
                with channel(owner.grpc_target) as ch, Stream(ch) as stream:
                    after_held = rounds(stream, "held", 3)  # calls 19-21
                with channel(other.grpc_target) as ch, Stream(ch) as stream:
                    after_short = rounds(stream, "short", 3)  # calls 19-21: 15 stored + 3 since
                    after_long = rounds(stream, "long", 1)  # call 23: 15 stored + 7 since
                _wait_for(lambda: value(other.scrape(), "loopwarden_state_unmerged_runs") == 0)
                wait_until_flushed(owner, timeout=60)
                wait_until_flushed(other, timeout=60)
                after = stored_records(redis)
                merged = value(other.scrape(), "loopwarden_state_runs_merged_total")
                marked = value(other.scrape(), "loopwarden_state_runs_unmerged_total")

        print(f"redis outage {OUTAGE_SECONDS:g}s under load: {sent} events sent, {answered} answered; "
              f"other replica marked {marked:g} runs ({unmerged_during:g} at once), merged {merged:g}; "
              f"held: {[v.action for v in during_held + after_held]}, short: "
              f"{[v.action for v in during_short + after_short]}, long: {[v.action for v in during_long + after_long]}")
        assert sent == answered > 0
        assert all(v.action != pb.ACTION_BLOCK for v in during_held + after_held[:2])
        assert (pb.ACTION_BLOCK, 20) == (after_held[2].action, after_held[2].count), "owner held it: call 21"
        assert all(v.action != pb.ACTION_BLOCK for v in during_short + during_long), "fail open from memory"
        assert all(v.action != pb.ACTION_BLOCK for v in after_short[:2])
        assert (pb.ACTION_BLOCK, 20) == (after_short[2].action, after_short[2].count), "merged streak 20 at call 21"
        assert (pb.ACTION_BLOCK, 22) == (after_long[0].action, after_long[0].count), \
            "the first call after the store returns: merged streak 22"
        shortened = {run: (before[run], after.get(run, 0)) for run in before if after.get(run, 0) < before[run]}
        assert not shortened, f"stored runs with fewer records than before the outage: {shortened}"
        assert merged >= 22 and marked >= 22
