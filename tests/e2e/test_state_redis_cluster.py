"""The state store on a real Redis Cluster (three masters, three replicas on
loopback, redis+cluster://): replicas behind the repo's nginx config share runs, a master
killed mid-run fails over to its replica with every event answered and nothing flushed lost, and
with one master's slots down the runs of the other two still load."""
from __future__ import annotations

import contextlib
import threading

import pytest
from loopwarden import LoopwardenClient
from loopwarden.types import Action

from loopwarden_server.statestore.encoding import run_key
from tests.support.metrics import delta
from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import SAME, Stream, call, channel, outcome
from tests.support.metrics import value
from tests.support.redis_cluster import redis_cluster
from tests.support.servers import nginx_router
from tests.support.state import read_loop, wait_for, wait_until_flushed

pytestmark = [pytest.mark.system, pytest.mark.daemon]

ENABLED = "{tools: {loopDetection: {enabled: true}}}"
PARAMS = {"path": "/x"}


def _owner(daemons):
    holding = [d for d in daemons if value(d.scrape(), "loopwarden_active_runs") > 0]
    assert 1 == len(holding), f"the run must live on exactly one replica, found {len(holding)}"
    return holding[0]


class TestRedisCluster:
    def test_replicas_behind_nginx_share_runs_through_the_cluster(self):
        """15 identical outcomes through nginx, one flush interval, owner kill -9: call 21 is BLOCK on the other."""
        with contextlib.ExitStack() as stack:
            cluster = stack.enter_context(redis_cluster())
            args = ["--state-store", cluster.url, "--state-flush-interval", "0.2"]
            daemons = [stack.enter_context(running_daemon(ENABLED, args)) for _ in range(2)]
            address = stack.enter_context(nginx_router([d.grpc_target for d in daemons]))
            with LoopwardenClient(address, streams="per_run") as client:
                read_loop(client, "cluster-1", 15)
                owner = _owner(daemons)
                wait_until_flushed(owner)
                stored = cluster.keys()
                owner.process.kill()
                owner.process.wait(timeout=10)
                after = read_loop(client, "cluster-1", 5)
                verdict = client.tool_call("cluster-1", "read", PARAMS)
            survivor = next(d for d in daemons if d is not owner)
            loaded = value(survivor.scrape(), "loopwarden_state_runs_loaded_total", source="store")
            errors = value(survivor.scrape(), "loopwarden_state_store_errors_total", operation="load")
        assert [b"loopwarden:" + run_key("", "cluster-1")] == stored, "one key, on the slot of its hash tag"
        assert [Action.WARN] * 5 == [v.action for v in after[0::2]]
        assert (Action.BLOCK, 20) == (verdict.action, verdict.count)
        assert (1, 0) == (loaded, errors)

    def test_a_master_killed_mid_run_fails_over_with_no_event_unanswered(self):
        """kill -9 of the master holding a run's slot under load: every event answered, the
        replica takes over, the run's flushed state reaches another daemon (call 21 BLOCK)."""
        with contextlib.ExitStack() as stack:
            cluster = stack.enter_context(redis_cluster())
            args = ["--state-store", cluster.url, "--state-flush-interval", "0.2"]
            first = stack.enter_context(running_daemon(ENABLED, args))
            key = b"loopwarden:" + run_key("", "failover-1")
            stop = threading.Event()
            sent = answered = 0

            def load() -> None:
                nonlocal sent, answered
                with channel(first.grpc_target) as ch, Stream(ch) as stream:
                    index = 0
                    while not stop.is_set():
                        run_id = f"busy-{index % 60}"
                        sent += 2
                        answered += len(stream.send(call(run_id, "write", f'{{"i":{index}}}'),
                                                    outcome(run_id, "write", f'{{"i":{index}}}', f'"{index}"')))
                        index += 1

            worker = threading.Thread(target=load)
            worker.start()
            try:
                with channel(first.grpc_target) as ch, Stream(ch) as stream:
                    before = [stream.send(call("failover-1", "read", '{"path":"/x"}'),
                                          outcome("failover-1", "read", '{"path":"/x"}', SAME)) for _ in range(8)]
                    # Written once (a busy daemon always has dirty runs: no wait for none).
                    wait_for(lambda: key in cluster.keys())
                    master = cluster.master_of(key)
                    cluster.kill(master)
                    during = [stream.send(call("failover-1", "read", '{"path":"/x"}'),
                                          outcome("failover-1", "read", '{"path":"/x"}', SAME)) for _ in range(7)]
                    cluster.wait_ok()
                    promoted = cluster.master_of(key)
            finally:
                stop.set()
                worker.join(timeout=30)
            wait_until_flushed(first, timeout=60)
            errors = value(first.scrape(), "loopwarden_state_store_errors_total", operation="flush")
            first.process.kill()
            first.process.wait(timeout=10)
            second = stack.enter_context(running_daemon(ENABLED, args))
            with LoopwardenClient(second.grpc_target) as client:
                after = read_loop(client, "failover-1", 5)
                verdict = client.tool_call("failover-1", "read", PARAMS)
        print(f"redis cluster failover: master :{master} killed, :{promoted} took over; {sent} events under "
              f"load, {answered} answered; {errors:g} failed flushes meanwhile")
        assert promoted != master
        assert sent == answered > 0
        assert all(len(pair) == 2 for pair in before + during), "every event of the run answered"
        assert [Action.WARN] * 5 == [v.action for v in after[0::2]]
        assert (Action.BLOCK, 20) == (verdict.action, verdict.count)

    def test_with_one_masters_slots_down_only_its_runs_are_unmerged(self):
        """A master and its replica killed: a run whose key it served is evaluated from memory and
        marked unmerged (its stored copy is merged before it is written); a run of another master
        loads as ever, although a load on the dead one failed first."""
        with contextlib.ExitStack() as stack:
            cluster = stack.enter_context(redis_cluster())
            args = ["--state-store", cluster.url, "--state-flush-interval", "5"]
            daemon = stack.enter_context(running_daemon(ENABLED, args))
            with LoopwardenClient(daemon.grpc_target) as client:
                client.tool_call("warm", "read", PARAMS)  # the client's slot map
            runs = [f"slotted-{n}" for n in range(30)]
            master_of = {run: cluster.master_of(b"loopwarden:" + run_key("", run)) for run in runs}
            dead = master_of[runs[0]]
            replica = next(port for port, flags, master in cluster.nodes() if "slave" in flags
                           and master == next(line.split()[0] for line in cluster.cli(dead, "cluster", "nodes")
                                              .splitlines() if "myself" in line))
            cluster.kill(replica)
            cluster.kill(dead)
            on_dead = [run for run in runs if master_of[run] == dead]
            elsewhere = [run for run in runs if master_of[run] != dead]
            before = daemon.scrape()
            with LoopwardenClient(daemon.grpc_target) as client:
                verdicts = [client.tool_call(run, "read", PARAMS) for run in [on_dead[0], *elsewhere, *on_dead[1:]]]
            after = daemon.scrape()

        assert on_dead and elsewhere
        assert all(v.action is Action.ALLOW for v in verdicts), "every event answered, from memory where need be"
        assert len(on_dead) == delta(before, after, "loopwarden_state_runs_unmerged_total")
        assert 1 == delta(before, after, "loopwarden_state_store_errors_total", operation="load"), \
            "the dead master was tried once, then its slots' loads paused"
