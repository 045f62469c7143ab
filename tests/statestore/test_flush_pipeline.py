"""The flush under load: the core frames records off the event loop in the stored format, the
keeper writes oldest-changed runs first with two writes in flight (batches grouped while both
are busy), flushes keep a cadence, and a busy run goes to the file store as deltas that a
restart applies."""
from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry

from bench.flush_under_load import CONFIG, _event
from loopwarden_server.statestore.base import StateStoreError
from loopwarden_server.statestore.encoding import MAGIC, is_delta, run_key
from loopwarden_server.statestore.file import FileStateStore
from loopwarden_server.statestore.flusher import BATCH
from loopwarden_server.statestore.keeper import StateKeeper
from loopwarden_server.statestore.metrics import StateMetrics
from loopwarden_server.statestore.runs import CoreRuns
from tests.core.harness import CoreEngine
from tests.statestore.test_keeper import MemoryStore
from tests.support.stored import delta_message, frame_delta, run_message


class TestCoreFraming:
    def test_the_core_hands_a_flush_its_values_framed(self):
        """A flush's values come from the core as stored values already (no framing is left
        to the daemon), and taking one clears the run's change mark."""
        engine = CoreEngine(CONFIG)
        engine.evaluate([_event(0, 0)])
        kept = CoreRuns(engine.service)
        kept.track_changes(evictions_delete=True)
        engine.evaluate([_event(0, 1)])
        assert kept.dirty_count() == 1
        value = kept.record("", "busy-0", time.time())
        assert value is not None and value[:4] == MAGIC
        assert kept.dirty_count() == 0


class FailingStore(MemoryStore):
    """Writes the first `good` flush calls, then fails until `good` is raised."""

    def __init__(self, good: int) -> None:
        super().__init__()
        self.good = good
        self.calls = 0
        self.started: list[float] = []
        self.delay = 0.0

    async def flush(self, items):
        self.started.append(time.monotonic())
        await asyncio.sleep(self.delay)
        self.calls += 1
        if self.calls > self.good:
            raise StateStoreError("disk gone")
        await super().flush(items)


def _core_keeper(store, runs: int, flush_interval: float = 1.0, capacity: int = 0):
    engine = CoreEngine(CONFIG, max_runs=capacity or runs + 10)
    kept = CoreRuns(engine.service)
    registry = CollectorRegistry()
    keeper = StateKeeper(store, kept, StateMetrics(registry), flush_interval=flush_interval)
    for start in range(0, runs, 500):
        engine.evaluate([_event(r, 0) for r in range(start, min(runs, start + 500))])
    return engine, kept, keeper, registry


class TestPipelinedWrites:
    def test_a_write_that_fails_mid_flush_puts_back_exactly_the_runs_not_written(self):
        """3 batches of runs: the write of the first lands, the write holding the second fails;
        every run from the failed write on (the ones encoded meanwhile too: a later write may or
        may not have landed, so they are not known to be stored) is dirty again, the first
        batch's are not, and the next flush writes them; every stored value is the core's record
        in today's format."""
        runs = 2 * BATCH + 10
        store = FailingStore(good=99)
        poison = run_key("", f"busy-{BATCH + 5}")  # in the second batch
        flush, poisoned = store.flush, [True]

        async def failing_on_poison(items):
            if poisoned[0] and any(key == poison for key, _value, _ttl in items):
                raise StateStoreError("disk gone")
            await flush(items)

        store.flush = failing_on_poison

        async def scenario():
            engine, kept, keeper, registry = _core_keeper(store, runs)
            assert not await keeper.flush_once()
            first = {run_key("", f"busy-{r}") for r in range(BATCH)}
            assert first <= set(store.data) and poison not in store.data
            assert runs - BATCH == kept.dirty_count() == keeper.waiting()
            assert BATCH == registry.get_sample_value("loopwarden_state_runs_flushed_total")
            poisoned[0] = False
            assert await keeper.flush_once()
            assert 0 == kept.dirty_count() == keeper.waiting()
            return engine, registry

        engine, registry = asyncio.run(scenario())
        assert {run_key("", f"busy-{r}") for r in range(runs)} == set(store.data)
        assert runs == registry.get_sample_value("loopwarden_state_runs_flushed_total")
        record = run_message(store.data[run_key("", "busy-7")])
        assert ("busy-7", 1) == (record.run_id, record.events_evaluated)

    def test_batches_encoded_while_both_writers_are_busy_go_in_one_write(self):
        """Slow writes (a loaded disk): the batches encoded meanwhile are grouped, so 12 batches
        take far fewer than 12 writes, and every run is stored once."""
        runs = 12 * BATCH
        store = FailingStore(good=99)
        store.delay = 0.05
        sizes: list[int] = []
        flush = store.flush

        async def counting(items):
            sizes.append(len(items))
            await flush(items)

        store.flush = counting

        async def scenario():
            _engine, kept, keeper, registry = _core_keeper(store, runs)
            assert await keeper.flush_once()
            assert 0 == kept.dirty_count()
            return registry

        registry = asyncio.run(scenario())
        assert len(sizes) <= 4 and sum(sizes) == runs == len(store.data), sizes
        assert max(sizes) > BATCH
        assert runs == registry.get_sample_value("loopwarden_state_runs_flushed_total")

    def test_the_oldest_changed_runs_are_written_first(self):
        """take_dirty's order (first changed, first written): a run changed before the others
        is in the first batch, with the runs changed right after it, even when it changed again
        since. (Batches are compared, not which write landed first: two writes are in flight,
        and either may reach the store first.)"""
        store = FailingStore(good=99)
        batches: list[set[bytes]] = []
        flush = store.flush

        async def recording(items):
            batches.append({key for key, _value, _ttl in items})
            await flush(items)

        store.flush = recording

        async def scenario():
            engine, kept, keeper, _registry = _core_keeper(store, 0, capacity=4 * BATCH)
            engine.evaluate([_event(0, 0)])
            engine.evaluate([_event(r, 0) for r in range(1, 2 * BATCH)])
            engine.evaluate([_event(0, 1)])
            assert await keeper.flush_once()

        asyncio.run(scenario())
        [first] = [batch for batch in batches if run_key("", "busy-1") in batch]
        assert run_key("", "busy-0") in first
        assert run_key("", f"busy-{2 * BATCH - 1}") not in first


class TestCadence:
    def test_a_flush_longer_than_the_interval_is_followed_at_once(self):
        """Flushes start one interval after the previous one started: a 0.6 s write with a 0.3 s
        interval is followed at once (before: 0.6 + 0.3 between starts)."""
        store = FailingStore(good=99)
        store.delay = 0.6

        async def scenario():
            engine, _kept, keeper, _registry = _core_keeper(store, 1, flush_interval=0.3)
            keeper.start()
            for n in range(1, 40):
                engine.evaluate([_event(0, n)])
                await asyncio.sleep(0.05)
            await keeper.stop()

        asyncio.run(scenario())
        gaps = [b - a for a, b in zip(store.started, store.started[1:])]
        assert len(gaps) >= 2
        assert max(gaps[:-1]) < 0.8, gaps  # the last gap is the final flush on stop


class TestDeltasThroughTheKeeper:
    """The keeper over the file store and the core: a busy run is written as its full record,
    then deltas; a restart takes it back whole; a delta that names another record is left out
    (counted and logged), and the run comes back as its record holds it."""

    def _written(self, path, calls: int):
        """A run given 30 calls, flushed, then `calls` more, each flushed: (engine, registry)."""
        store = FileStateStore(str(path))
        store.check()

        async def scenario():
            engine, kept, keeper, registry = _core_keeper(store, 0, capacity=10)
            keeper.restore()
            for n in range(30):
                engine.evaluate([_event(0, n)])
            assert await keeper.flush_once()
            for n in range(30, 30 + calls):
                engine.evaluate([_event(0, n)])
                assert await keeper.flush_once()
            await store.close()
            return engine, registry
        return asyncio.run(scenario())

    def test_the_deltas_among_the_runs_flushed_are_counted(self, tmp_path):
        _engine, registry = self._written(tmp_path / "runs.state", calls=3)
        assert 4 == registry.get_sample_value("loopwarden_state_runs_flushed_total")  # the record, 3 deltas
        assert 3 == registry.get_sample_value("loopwarden_state_deltas_written_total")

    def _restarted(self, path, caplog):
        store = FileStateStore(str(path))
        store.check()
        engine, kept, keeper, registry = _core_keeper(store, 0, capacity=10)
        with caplog.at_level("INFO", logger="loopwarden.daemon"):
            keeper.restore()
        [restored] = [r for r in caplog.records if r.getMessage() == "state restored"]
        return engine, registry, restored

    def test_a_restart_takes_the_run_back_whole_from_its_record_and_latest_delta(self, tmp_path, caplog):
        self._written(tmp_path / "runs.state", calls=3)
        [(base, delta)] = list(FileStateStore(str(tmp_path / "runs.state")).restore())
        assert delta is not None and is_delta(delta) and len(delta) < len(base) // 2
        engine, registry, restored = self._restarted(tmp_path / "runs.state", caplog)
        assert (1, 1, 0) == (restored.runs, restored.runs_with_delta, restored.deltas_left_out)
        view = engine.service.native.inspection.run("", "busy-0")
        assert 33 == view.events_evaluated
        assert 0 == registry.get_sample_value("loopwarden_state_store_errors_total", {"operation": "restore"})

    def test_a_delta_of_another_record_is_left_out_and_counted(self, tmp_path, caplog):
        path = tmp_path / "runs.state"
        self._written(path, calls=3)
        [(_base, delta)] = list(FileStateStore(str(path)).restore())
        # The same delta naming another base, appended as the run's latest frame.
        other = delta_message(delta)
        other.base = 0
        store = FileStateStore(str(path))
        store.check()
        list(store.restore())
        asyncio.run(store.flush([(run_key("", "busy-0"), frame_delta(other), 60.0)]))
        engine, registry, restored = self._restarted(path, caplog)
        assert (1, 0, 1) == (restored.runs, restored.runs_with_delta, restored.deltas_left_out)
        assert 30 == engine.service.native.inspection.run("", "busy-0").events_evaluated, "as its record holds it"
        assert 1 == registry.get_sample_value("loopwarden_state_store_errors_total", {"operation": "restore"})
