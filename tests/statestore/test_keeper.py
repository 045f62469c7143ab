"""The keeper: dirty runs written behind, kept on failure, loaded once on first event."""
from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry

from tests.reference.engine import new_run_state
from loopwarden_server.config import load_default_config
from loopwarden_server.statestore.base import StateStore, StateStoreError
from loopwarden_server.statestore.encoding import run_key
from loopwarden_server.statestore.keeper import StateKeeper
from loopwarden_server.statestore.metrics import StateMetrics
from tests.reference.codec import encode_run
from tests.reference.runs import ReferenceRuns
from tests.reference.store import RunStore

SETTINGS = load_default_config().settings_for("")


class MemoryStore(StateStore):
    """A shared store in a dict; `down` makes every call fail."""

    lazy = True
    kind = "memory"

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.down = False
        self.gets = 0

    def check(self) -> None:
        pass

    async def load(self, key):
        self.gets += 1
        await asyncio.sleep(0.01)
        if self.down:
            raise StateStoreError("down")
        return self.data.get(key)

    async def flush(self, items):
        if self.down:
            raise StateStoreError("down")
        for key, value, _ttl in items:
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value


def _keeper(store=None):
    registry = CollectorRegistry()
    runs = RunStore(max_runs=100, idle_ttl_seconds=3600, clock=time.monotonic)
    # The keeper moves runs as stored bytes and never looks inside one: these tests hold the runs in
    # the reference store (easy to set up by hand); tests/e2e/test_state_*.py drive it over the core.
    keeper = StateKeeper(store or MemoryStore(), ReferenceRuns(runs), StateMetrics(registry), flush_interval=0.05)
    return keeper, runs, registry


class TestWriteBehind:
    def test_touched_runs_are_written_and_ended_runs_deleted(self):
        """A flush writes what changed since the last one; run_end becomes a delete."""
        async def scenario():
            keeper, runs, registry = _keeper()
            runs.create("", "a", new_run_state(SETTINGS))
            runs.create("t", "b", new_run_state(SETTINGS))
            assert await keeper.flush_once()
            assert {run_key("", "a"), run_key("t", "b")} == set(keeper.store.data)
            runs.remove("", "a")
            assert await keeper.flush_once()
            return keeper, registry
        keeper, registry = asyncio.run(scenario())
        assert {run_key("t", "b")} == set(keeper.store.data)
        assert 3 == registry.get_sample_value("loopwarden_state_runs_flushed_total")

    def test_a_failed_flush_keeps_every_run_dirty_until_the_store_is_back(self):
        """Nothing is lost while the store is away: the next good flush writes all of it."""
        async def scenario():
            keeper, runs, registry = _keeper()
            keeper.store.down = True
            for index in range(5):
                runs.create("", f"r{index}", new_run_state(SETTINGS))
            assert not await keeper.flush_once()
            assert 5 == runs.dirty_count()
            keeper.store.down = False
            assert await keeper.flush_once()
            return keeper, runs, registry
        keeper, runs, registry = asyncio.run(scenario())
        assert (5, 0) == (len(keeper.store.data), runs.dirty_count())
        assert 1 == registry.get_sample_value("loopwarden_state_store_errors_total", {"operation": "flush"})


class TestLoadOnFirstEvent:
    def test_a_stored_run_is_loaded_once_however_many_ask(self):
        """Concurrent requests for one missing run cost one GET; the run is then in memory."""
        async def scenario():
            keeper, runs, registry = _keeper()
            source = RunStore(max_runs=10, idle_ttl_seconds=3600, clock=time.monotonic)
            entry = source.create("", "r", new_run_state(SETTINGS))
            entry.events_evaluated = 9
            keeper.store.data[run_key("", "r")] = encode_run(entry, time.time(), time.monotonic())
            await asyncio.gather(*(keeper.ensure_loaded("", ["r"]) for _ in range(5)))
            return keeper, runs, registry
        keeper, runs, registry = asyncio.run(scenario())
        assert 1 == keeper.store.gets
        assert 9 == runs.get("", "r").events_evaluated
        assert 1 == registry.get_sample_value("loopwarden_state_runs_loaded_total", {"source": "store"})

    def test_an_unreachable_store_fails_open(self):
        """A failed GET is counted and the run starts from memory; nothing raises."""
        async def scenario():
            keeper, runs, registry = _keeper()
            keeper.store.down = True
            await keeper.ensure_loaded("", ["r"])
            return registry
        registry = asyncio.run(scenario())
        assert 1 == registry.get_sample_value("loopwarden_state_store_errors_total", {"operation": "load"})
        assert 1 == registry.get_sample_value("loopwarden_state_runs_loaded_total", {"source": "new"})


class TestEvictions:
    def test_an_evicted_run_is_deleted_from_the_file_store_but_not_from_a_shared_one(self):
        """Idle or max-runs evictions: a delete for the embedded store; the shared store keeps the key to its TTL."""
        async def scenario(lazy: bool):
            store = MemoryStore()
            store.lazy = lazy
            keeper, runs, _registry = _keeper(store)
            runs.max_runs = 1
            runs.create("", "old", new_run_state(SETTINGS))
            assert await keeper.flush_once()
            runs.create("", "new", new_run_state(SETTINGS))  # evicts "old"
            assert await keeper.flush_once()
            return set(store.data)
        assert {run_key("", "new")} == asyncio.run(scenario(lazy=False))
        assert {run_key("", "old"), run_key("", "new")} == asyncio.run(scenario(lazy=True))
