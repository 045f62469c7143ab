"""Loads that fail are remembered, over the compiled core and a shared store in
memory that can be taken down: the run is evaluated from memory, never flushed over the stored
copy it could not read, retried, and merged; exemption tables likewise (union minus revocations)."""
from __future__ import annotations

import asyncio
import itertools
import time

from loopwarden.v1 import loopwarden_pb2 as pb
from prometheus_client import CollectorRegistry

from loopwarden_server.statestore.encoding import run_key
from tests.support.stored import history_seqs
from loopwarden_server.config import load_config_text
from loopwarden_server.core import CoreService
from loopwarden_server.metrics import Metrics
from loopwarden_server.settings import Limits
from loopwarden_server.statestore.keeper import StateKeeper
from loopwarden_server.statestore.metrics import StateMetrics
from loopwarden_server.statestore.runs import CoreRuns
from tests.statestore.test_exemption_tables import CONFIG, _call, _granted, _outcome, _send
from tests.statestore.test_keeper import MemoryStore


_replicas = itertools.count(1)


def _replica(store) -> tuple[CoreService, StateKeeper]:
    """A core and its keeper, with an instance id of its own (decision ids differ per replica)."""
    core = CoreService(load_config_text(CONFIG), Metrics(CollectorRegistry()), Limits(), max_runs=100,
                       idle_ttl_seconds=3600, clock=time.monotonic, instance_id=f"replica{next(_replicas)}")
    keeper = StateKeeper(store, CoreRuns(core), StateMetrics(CollectorRegistry()), flush_interval=0.05)
    return core, keeper


def _stored_history(store: MemoryStore, run_id: str) -> int:
    return len(history_seqs(store.data[run_key("t", run_id)]))


async def _lazily(core, keeper, *events: pb.Event) -> list[pb.Verdict]:
    """One request as the transport sends it with a shared store: its runs loaded first."""
    data = pb.EvaluateRequest(events=list(events)).SerializeToString()
    answer = await core.loaded(core.evaluate(data, "t", lazy=True), keeper, "t")
    return list(pb.EvaluateResponse.FromString(answer.response).verdicts)


def test_a_run_whose_load_failed_is_merged_before_it_is_written():
    async def scenario():
        store = MemoryStore()
        owner, owner_keeper = _replica(store)
        for i in range(15):
            _send(owner, _call("r1", f"c{i}"), _outcome("r1"))
        assert await owner_keeper.flush_once()
        assert 15 == _stored_history(store, "r1")

        other, keeper = _replica(store)
        store.down = True
        for i in range(3):  # calls 16-18 from memory: the load fails, memory's streak starts at 0
            (verdict, _) = await _lazily(other, keeper, _call("r1", f"d{i}"), _outcome("r1"))
            assert pb.ACTION_ALLOW == verdict.action
        assert 2 == keeper.unmerged(), "the run and its tenant's exemption table"
        store.down = False
        assert await keeper.flush_once()  # within the load pause: nothing merged, nothing written
        assert 15 == _stored_history(store, "r1")
        await asyncio.sleep(keeper.flush_interval)  # the load pause after a failure runs out
        unmerged_before = keeper.unmerged()
        # A flush with the store back merges first and writes the merged run: 15 + 3 records.
        assert await keeper.flush_once()
        stored_after = _stored_history(store, "r1")
        merged = keeper.metrics.runs_merged._value.get()
        verdicts = [(await _lazily(other, keeper, _call("r1", f"e{i}"), _outcome("r1")))[0] for i in range(3)]
        return unmerged_before, stored_after, merged, keeper.unmerged(), verdicts

    unmerged_before, stored_after, merged, unmerged_after, verdicts = asyncio.run(scenario())
    assert (2, 18, 1, 0) == (unmerged_before, stored_after, merged, unmerged_after)
    assert [pb.ACTION_WARN, pb.ACTION_WARN, pb.ACTION_ASK] == [v.action for v in verdicts], "call 21: the merged streak is 20"


def test_the_next_event_after_the_store_returns_merges_without_waiting_for_a_flush():
    async def scenario():
        store = MemoryStore()
        owner, owner_keeper = _replica(store)
        for i in range(19):
            _send(owner, _call("r1", f"c{i}"), _outcome("r1"))
        assert await owner_keeper.flush_once()
        other, keeper = _replica(store)
        store.down = True
        (during, _) = await _lazily(other, keeper, _call("r1", "d"), _outcome("r1"))  # call 20
        store.down = False
        await asyncio.sleep(keeper.flush_interval)
        (after,) = await _lazily(other, keeper, _call("r1", "e"))  # call 21: 19 stored + 1 since
        return during, after

    during, after = asyncio.run(scenario())
    assert pb.ACTION_ALLOW == during.action
    assert (pb.ACTION_ASK, 20) == (after.action, after.count)


def test_a_store_holding_nothing_lifts_the_mark_and_memory_is_written():
    async def scenario():
        store = MemoryStore()
        core, keeper = _replica(store)
        store.down = True
        await _lazily(core, keeper, _call("new-1", "c"), _outcome("new-1"))
        assert 2 == keeper.unmerged()
        store.down = False
        await asyncio.sleep(keeper.flush_interval)
        assert await keeper.flush_once()
        return keeper.unmerged(), run_key("t", "new-1") in store.data

    assert (0, True) == asyncio.run(scenario())


def test_an_exemption_table_whose_load_failed_is_held_back_then_merged():
    async def scenario():
        store = MemoryStore()
        owner, owner_keeper = _replica(store)
        first = _granted(owner, "r1")
        assert await owner_keeper.flush_once()

        other, keeper = _replica(store)
        store.down = True
        await keeper.load_exemptions("t")  # fails: the table is marked
        second = _granted(other, "r2")  # granted from memory meanwhile
        store.down = False
        assert await keeper.flush_once()  # within the load pause: held back, the stored one stays
        held_back = _ids(await _read(store))
        await asyncio.sleep(keeper.flush_interval)
        assert await keeper.flush_once()  # read, merged (the union), written
        merged = _ids(await _read(store))
        assert other.revoke_exemption(first, "t") is not None
        assert await keeper.flush_once()
        return held_back, merged, _ids(await _read(store)), {first}, {first, second}, {second}

    held_back, merged, revoked, *expected = asyncio.run(scenario())
    assert expected == [held_back, merged, revoked]


async def _read(store: MemoryStore):
    """The stored table as a fresh replica reads it."""
    core, keeper = _replica(store)
    await keeper.load_exemptions("t")
    return core


def _ids(core) -> set[str]:
    return {e.id for e in core.list_exemptions("t")}
