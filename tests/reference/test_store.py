"""RunStore: stable sharding, exact global LRU eviction, idle expiry, run_end removal, size accounting."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib

import pytest

from tests.reference.engine import History, RunState
from tests.reference.store import RunEntry, RunStore

HISTORY = 30
TENANT = ""
RUN_IDS = [f"run-{index}" for index in range(64)] + ["", "ünïcødé-run", "hb/2024-01-01T00:00:00Z", "x" * 256]


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Evictions:
    """Collects on_evict calls as (reason, run_id)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __call__(self, reason: str, entry: RunEntry) -> None:
        self.seen.append((reason, entry.run_id))


def acquire(store: RunStore, run_id: str) -> RunEntry:
    """What the service does for each event: the held run, touched, or a new one."""
    return store.touch(TENANT, run_id) or store.create(TENANT, run_id, RunState(History(HISTORY)))


def make_store(max_runs: int = 1000, idle_ttl: float = 3600.0, shards: int = 16):
    clock, evictions = FakeClock(), Evictions()
    store = RunStore(max_runs=max_runs, idle_ttl_seconds=idle_ttl, clock=clock, shard_count=shards, on_evict=evictions)
    return store, clock, evictions


def shard_indices_in_subprocess(hash_seed: str, shards: int) -> dict[str, list[int]]:
    """Shard indices (and, for contrast, `hash() % shards`) computed by a fresh interpreter with the given hash seed."""
    code = (
        "import json, sys\n"
        "from tests.reference.store import RunStore\n"
        "ids = json.loads(sys.stdin.read())\n"
        f"store = RunStore(max_runs=1, idle_ttl_seconds=1, clock=lambda: 0.0, shard_count={shards})\n"
        f"print(json.dumps({{'store': [store.shard_index(i) for i in ids], 'hash': [hash(i) % {shards} for i in ids]}}))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    result = subprocess.run([sys.executable, "-c", code], input=json.dumps(RUN_IDS), capture_output=True, text=True,
                            env=env, timeout=60, check=True)
    return json.loads(result.stdout)


class TestSharding:
    @pytest.mark.parametrize("shards", [1, 7, 16])
    def test_shard_is_crc32_of_the_run_id(self, shards):
        """A run's shard is zlib.crc32 of its UTF-8 id modulo the shard count."""
        store, _, _ = make_store(shards=shards)

        assert [zlib.crc32(i.encode()) % shards for i in RUN_IDS] == [store.shard_index(i) for i in RUN_IDS]

    def test_shard_is_the_same_in_every_process(self):
        """Interpreters with different hash seeds put every run in the same shard as this one."""
        store, _, _ = make_store(shards=16)
        first = shard_indices_in_subprocess("1", 16)
        second = shard_indices_in_subprocess("2", 16)

        assert [store.shard_index(i) for i in RUN_IDS] == first["store"] == second["store"]
        # The seeds really differ in effect: hash() would have moved runs between shards.
        assert first["hash"] != second["hash"]

    def test_acquired_run_lives_in_its_shard(self):
        """A run acquired (touched or created) is placed in the shard its id hashes to."""
        store, _, _ = make_store(shards=16)
        for run_id in RUN_IDS:
            acquire(store, run_id)

        assert all((TENANT, run_id) in store._shards[store.shard_index(run_id)] for run_id in RUN_IDS)
        assert len(RUN_IDS) == sum(len(shard) for shard in store._shards)


class TestMaxRunsEviction:
    def test_oldest_runs_are_evicted_across_shards(self):
        """With max_runs=100, 150 new runs evict exactly the 50 oldest, in order, each with reason max_runs."""
        store, clock, evictions = make_store(max_runs=100)
        for index in range(150):
            clock.now += 1
            acquire(store, f"run-{index}")

        assert [("max_runs", f"run-{index}") for index in range(50)] == evictions.seen
        assert 100 == len(store)
        assert [None] * 50 == [store.get(TENANT, f"run-{index}") for index in range(50)]
        assert all(store.get(TENANT, f"run-{index}") is not None for index in range(50, 150))

    def test_eviction_is_exact_even_when_clock_does_not_move(self):
        """LRU order follows access order, not clock ticks: equal timestamps still evict the oldest first."""
        store, _, evictions = make_store(max_runs=10)
        for index in range(15):
            acquire(store, f"run-{index}")

        assert [f"run-{index}" for index in range(5)] == [run_id for _, run_id in evictions.seen]

    def test_touching_an_old_run_protects_it(self):
        """An event for the oldest run makes it most recent, so the next new run evicts the second oldest instead."""
        store, clock, evictions = make_store(max_runs=100)
        for index in range(100):
            clock.now += 1
            acquire(store, f"run-{index}")
        clock.now += 1
        acquire(store, "run-0")

        acquire(store, "run-new")

        assert [("max_runs", "run-1")] == evictions.seen
        assert store.get(TENANT, "run-0") is not None

    def test_get_does_not_protect_a_run(self):
        """Reading a run (as inspection does) does not make it recent, so it is still evicted first."""
        store, _, evictions = make_store(max_runs=3)
        for index in range(3):
            acquire(store, f"run-{index}")
        store.get(TENANT, "run-0")

        acquire(store, "run-new")

        assert [("max_runs", "run-0")] == evictions.seen

    def test_evicted_run_comes_back_fresh(self):
        """An evicted run that sends another event starts from a new state, not its old one."""
        store, _, _ = make_store(max_runs=1)
        old = acquire(store, "run-a")
        old.events_evaluated = 7
        acquire(store, "run-b")

        fresh = acquire(store, "run-a")

        assert fresh is not old
        assert 0 == fresh.events_evaluated

    def test_existing_run_never_triggers_eviction(self):
        """A full store serving an event of a run it already holds evicts nothing."""
        store, _, evictions = make_store(max_runs=2)
        acquire(store, "run-a")
        acquire(store, "run-b")

        acquire(store, "run-a")

        assert ([], 2) == (evictions.seen, len(store))


class TestIdleExpiry:
    def test_expire_idle_drops_only_idle_runs(self):
        """expire_idle drops runs idle longer than the TTL, reports them with reason idle_ttl and keeps the rest."""
        store, clock, evictions = make_store(idle_ttl=60)
        acquire(store, "idle-a")
        acquire(store, "idle-b")
        clock.now += 50
        acquire(store, "busy")
        clock.now += 11  # idle-a/b: 61s idle, busy: 11s

        dropped = store.expire_idle()

        assert 2 == dropped
        assert [("idle_ttl", "idle-a"), ("idle_ttl", "idle-b")] == sorted(evictions.seen)
        assert (1, True) == (len(store), store.get(TENANT, "busy") is not None)

    def test_run_idle_exactly_the_ttl_is_kept(self):
        """A run idle for exactly the TTL is not expired, neither by the sweep nor on acquire."""
        store, clock, evictions = make_store(idle_ttl=60)
        entry = acquire(store, "run")
        clock.now += 60

        assert 0 == store.expire_idle()
        assert entry is acquire(store, "run")
        assert [] == evictions.seen

    def test_recent_event_keeps_a_run_alive(self):
        """A run with an event inside the TTL survives a sweep that would have dropped it otherwise."""
        store, clock, _ = make_store(idle_ttl=60)
        acquire(store, "run")
        clock.now += 59
        acquire(store, "run")
        clock.now += 59

        assert 0 == store.expire_idle()
        assert 1 == len(store)

    def test_budget_limits_one_sweep(self):
        """expire_idle drops at most `budget` runs per call; the next call continues."""
        store, clock, _ = make_store(idle_ttl=60)
        for index in range(20):
            acquire(store, f"run-{index}")
        clock.now += 61

        assert (5, 15) == (store.expire_idle(budget=5), len(store))
        assert (15, 0) == (store.expire_idle(), len(store))

    def test_expired_unswept_run_is_replaced_on_acquire(self):
        """An expired run not yet swept is dropped (reason idle_ttl) and replaced by a fresh entry on its next event."""
        store, clock, evictions = make_store(idle_ttl=60)
        old = acquire(store, "run")
        old.events_evaluated = 9
        clock.now += 61

        fresh = acquire(store, "run")

        assert fresh is not old
        assert 0 == fresh.events_evaluated
        assert [("idle_ttl", "run")] == evictions.seen
        assert 1 == len(store)


class TestRemove:
    def test_remove_is_not_an_eviction(self):
        """run_end's remove frees the run without calling on_evict."""
        store, _, evictions = make_store()
        acquire(store, "run")

        assert True is store.remove(TENANT, "run")
        assert ([], 0, None) == (evictions.seen, len(store), store.get(TENANT, "run"))

    def test_removing_an_unknown_run_changes_nothing(self):
        """Removing a run the store does not hold returns False and leaves the size alone."""
        store, _, _ = make_store()
        acquire(store, "run")

        assert (False, 1) == (store.remove(TENANT, "other"), len(store))

    def test_removed_run_frees_room_for_a_new_one(self):
        """After a remove a full store takes a new run without evicting anyone."""
        store, _, evictions = make_store(max_runs=2)
        acquire(store, "run-a")
        acquire(store, "run-b")
        store.remove(TENANT, "run-a")

        acquire(store, "run-c")

        assert ([], 2) == (evictions.seen, len(store))


class TestSize:
    def test_len_follows_every_operation(self):
        """len counts live runs through creation, repeats, removal, eviction and expiry."""
        store, clock, _ = make_store(max_runs=5, idle_ttl=60)
        sizes = []
        for index in range(4):
            acquire(store, f"run-{index}")
        sizes.append(len(store))
        acquire(store, "run-0")
        sizes.append(len(store))
        store.remove(TENANT, "run-1")
        sizes.append(len(store))
        for index in range(4, 9):
            acquire(store, f"run-{index}")
        sizes.append(len(store))
        clock.now += 61
        acquire(store, "late")
        store.expire_idle()
        sizes.append(len(store))

        assert [4, 4, 3, 5, 1] == sizes
        assert [len(store)] == [len(list(store.entries()))]
