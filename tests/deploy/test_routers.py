"""Real routers (nginx, HAProxy) hashing x-loopwarden-run-id in front of daemons sharing a real
Redis: a run survives its replica's kill -9 and its planned drain, through the same router."""
from __future__ import annotations

import signal

import pytest
from loopwarden import LoopwardenClient
from loopwarden.types import Action

from tests.support.daemon import running_daemon
from tests.support.metrics import value
from tests.support.servers import haproxy_router, nginx_router, redis_server
from tests.support.state import read_loop, wait_until_flushed

ENABLED = "{tools: {loopDetection: {enabled: true}}}"
ROUTERS = {"nginx": nginx_router, "haproxy": haproxy_router}
PARAMS = {"path": "/x"}


def _owner(daemons, run_id: str):
    """The daemon holding the run (the router sent it there)."""
    holding = [d for d in daemons if value(d.scrape(), "loopwarden_active_runs") > 0]
    assert 1 == len(holding), f"the run must live on exactly one replica, found {len(holding)}"
    return holding[0]


@pytest.fixture(params=sorted(ROUTERS))
def router(request):
    return ROUTERS[request.param]


def _daemons(stack, redis, count: int, interval: str):
    args = ["--state-store", redis.url, "--state-flush-interval", interval, "--drain-grace", "1"]
    return [stack.enter_context(running_daemon(ENABLED, args)) for _ in range(count)]


class TestFailover:
    def test_kill_9_of_the_owner_loses_nothing_flushed(self, router):
        """15 identical outcomes through the router, flushed, owner kill -9: call 21 is BLOCK count 20 on the survivor."""
        import contextlib

        with contextlib.ExitStack() as stack:
            redis = stack.enter_context(redis_server())
            daemons = _daemons(stack, redis, 2, "0.2")
            address = stack.enter_context(router([d.grpc_target for d in daemons]))
            with LoopwardenClient(address, streams="per_run") as client:
                read_loop(client, "failover-1", 15)
                owner = _owner(daemons, "failover-1")
                wait_until_flushed(owner)
                owner.process.kill()
                owner.process.wait(timeout=10)
                after = read_loop(client, "failover-1", 5)
                verdict = client.tool_call("failover-1", "read", PARAMS)
            survivor = next(d for d in daemons if d is not owner)
            loaded = value(survivor.scrape(), "loopwarden_state_runs_loaded_total", source="store")
        assert [Action.WARN] * 5 == [v.action for v in after[0::2]]
        assert (Action.BLOCK, 20) == (verdict.action, verdict.count)
        assert 1 == loaded

    def test_a_planned_drain_of_the_owner_loses_nothing(self, router):
        """SIGTERM flushes every run at exit, even with a flush interval far away."""
        import contextlib

        with contextlib.ExitStack() as stack:
            redis = stack.enter_context(redis_server())
            daemons = _daemons(stack, redis, 2, "120")
            address = stack.enter_context(router([d.grpc_target for d in daemons]))
            with LoopwardenClient(address, streams="per_run") as client:
                read_loop(client, "drain-1", 15)
                owner = _owner(daemons, "drain-1")
                assert 0 == value(owner.scrape(), "loopwarden_state_runs_flushed_total")
                owner.signal(signal.SIGTERM)
                assert 0 == owner.process.wait(timeout=15)
                after = read_loop(client, "drain-1", 5)
                verdict = client.tool_call("drain-1", "read", PARAMS)
        assert [Action.WARN] * 5 == [v.action for v in after[0::2]]
        assert (Action.BLOCK, 20) == (verdict.action, verdict.count)


class TestRoutingHeader:
    def test_a_run_stays_on_one_replica_of_three(self, router):
        """Check, InspectRun and per-run streams of many runs: each run is held by exactly one replica."""
        import contextlib

        with contextlib.ExitStack() as stack:
            redis = stack.enter_context(redis_server())
            daemons = _daemons(stack, redis, 3, "0.2")
            address = stack.enter_context(router([d.grpc_target for d in daemons]))
            runs = [f"spread-{index}" for index in range(30)]
            with LoopwardenClient(address, streams="per_run") as client:
                for run_id in runs:
                    read_loop(client, run_id, 2)
                    client.check(_check_event(run_id))
                    assert 5 == client.inspect(run_id).events_evaluated
            held = [value(d.scrape(), "loopwarden_active_runs") for d in daemons]
        assert 30 == sum(held)
        assert all(count > 0 for count in held), f"30 runs over 3 replicas should reach each: {held}"


def _check_event(run_id: str):
    from loopwarden.v1 import loopwarden_pb2 as pb

    return pb.Event(run_id=run_id, tool_call=pb.ToolCall(tool_name="read", params_json='{"path":"/x"}'))
