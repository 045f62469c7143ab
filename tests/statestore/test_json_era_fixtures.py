"""Stored runs written by the JSON-era daemon (tests/statestore/fixtures, made by
generate_json_era.py with main's code before the format became protobuf) load unchanged: a state
file's full records and deltas, Redis values, a run tree, a pending ask, an exemption table and
a retry window all come back, and the runs answer the next events as main's daemon did. Nothing
written afterwards is JSON. A value damaged in place costs its own run only."""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import shutil
import time
from pathlib import Path

from loopwarden_server.statestore.encoding import EncodingError, is_delta, is_exemptions
from loopwarden_server.statestore.file import FileStateStore
from loopwarden_server.statestore.runs import CoreRuns, Loaded
from tests.statestore.fixtures.generate_json_era import RUNS, replica, restored_views
from tests.statestore.test_keeper import MemoryStore

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())
NEW_MAGICS = (b"LWR\x04", b"LWD\x02", b"LWX\x02")


def _written_at() -> float:
    """When the fixtures were written (their runs' latest event, wall clock): they are taken in as
    of then, so a pending ask has not timed out by the time the test runs."""
    import orjson

    from tests.reference.codec import unframe

    raw = json.loads((FIXTURES / "redis_values.json").read_text())
    values = [base64.b64decode(v) for v in raw.values()]
    return max(orjson.loads(unframe(v))["last_seen"] for v in values if v[:4] == b"LWR\x03") + 1.0


WALL = _written_at()


def redis_values() -> dict[bytes, bytes]:
    """The fixture's Redis values, keyed without the deployment's prefix (as the store loads them)."""
    raw = json.loads((FIXTURES / "redis_values.json").read_text())
    return {base64.b64decode(k).removeprefix(b"loopwarden:"): base64.b64decode(v) for k, v in raw.items()}


def test_the_fixtures_are_of_the_json_era():
    """What these tests lean on: the fixtures hold the old formats, deltas included."""
    values = redis_values()
    assert {v[:4] for v in values.values()} == {b"LWR\x03", b"LWX\x01"}
    chains = list(FileStateStore(str(FIXTURES / "runs.state")).restore())
    assert any(delta is not None and delta[:4] == b"LWD\x01" for _value, delta in chains)


def test_a_json_era_state_file_restores_the_runs_as_main_did(tmp_path):
    path = tmp_path / "runs.state"
    shutil.copy(FIXTURES / "runs.state", path)

    async def scenario():
        store = FileStateStore(str(path))
        store.check()
        core, keeper = replica(store, wall_clock=lambda: WALL)
        keeper.restore()
        assert restored_views(core) == EXPECTED
        # The probes changed every run: the flush writes them all, in the new format only (an
        # unchanged value, here the exemption table, stays as it is until it changes).
        written, flush = [], store.flush

        async def recording(items):
            written.extend(value for _key, value, _ttl in items)
            await flush(items)

        store.flush = recording
        assert await keeper.flush_once()
        await store.close()
        assert len(written) == len(RUNS) and {v[:4] for v in written} <= set(NEW_MAGICS), [v[:4] for v in written]
        core2, keeper2 = replica(FileStateStore(str(path)))
        keeper2.store.check()
        keeper2.restore()
        for tenant, run_id in RUNS:
            assert core2.inspect(run_id, tenant) is not None

    asyncio.run(scenario())


def test_json_era_redis_values_load_as_main_loaded_them():
    core, _keeper = replica(MemoryStore())
    runs = CoreRuns(core)
    for _key, value in redis_values().items():
        if is_exemptions(value):
            assert runs.exemption_tables.take_in(value, WALL) == 1
        else:
            assert runs.take_in(value, WALL) == Loaded.RESTORED
    assert restored_views(core) == EXPECTED
    for tenant, run_id in RUNS:
        value = runs.encode(tenant, run_id, time.time())
        assert value is not None and value[:4] == b"LWR\x04"
    assert runs.exemption_tables.encode("t", time.time())[0][:4] == b"LWX\x02"


def _damaged(value: bytes) -> bytes:
    """The value with bytes in its middle overwritten (a bad disk, a bad copy)."""
    middle = len(value) // 2
    return value[:middle] + b"\xff" * 8 + value[middle + 8:]


@pytest.mark.parametrize("era", ["json", "protobuf"])
def test_a_damaged_redis_value_costs_its_run_only(era):
    values = {k: v for k, v in redis_values().items() if not is_exemptions(v)}
    if era == "protobuf":  # the same runs as this daemon writes them
        core, _ = replica(MemoryStore())
        runs = CoreRuns(core)
        for value in values.values():
            runs.take_in(value, time.time())
        values = {key: runs.encode(*key_of(value, runs), time.time()) for key, value in values.items()}
    bad_key = sorted(values)[0]
    values[bad_key] = _damaged(values[bad_key])
    core, _keeper = replica(MemoryStore())
    runs = CoreRuns(core)
    outcomes = {}
    for key, value in values.items():
        try:
            outcomes[key] = runs.take_in(value, time.time())
        except EncodingError:
            outcomes[key] = "malformed"
    assert outcomes.pop(bad_key) == "malformed"
    assert set(outcomes.values()) == {Loaded.RESTORED} and len(outcomes) == len(values) - 1


def key_of(value: bytes, runs: CoreRuns) -> tuple[str, str]:
    """(tenant, run_id) of a stored run, read by a scratch core."""
    scratch, _ = replica(MemoryStore())
    before = set()
    CoreRuns(scratch).take_in(value, time.time())
    for tenant, run_id in RUNS:
        if scratch.inspect(run_id, tenant) is not None and (tenant, run_id) not in before:
            return tenant, run_id
    raise AssertionError("no run")


def test_a_damaged_run_in_a_state_file_costs_that_run_only(tmp_path, caplog):
    """A value that passes the file's checksums but is not a run (written so, or damaged before
    it was framed) is skipped and counted; every other run restores."""
    path = tmp_path / "runs.state"

    async def scenario():
        store = FileStateStore(str(path))
        store.check()
        core, keeper = replica(store)
        keeper.restore()
        runs = CoreRuns(core)
        for value in redis_values().values():
            if not is_exemptions(value):
                runs.take_in(value, time.time())
        items = []
        for tenant, run_id in RUNS:
            value = runs.encode(tenant, run_id, time.time())
            items.append(((tenant, run_id), _damaged(value) if run_id == "asked" else value))
        from loopwarden_server.statestore.encoding import run_key
        await store.flush([(run_key(*key), value, 3600.0) for key, value in items])
        await store.close()
        again = FileStateStore(str(path))
        again.check()
        core2, keeper2 = replica(again)
        with caplog.at_level(logging.INFO):
            keeper2.restore()
        await again.close()
        held = {(t, r) for t, r in RUNS if core2.inspect(r, t) is not None}
        assert held == set(RUNS) - {("t", "asked")}
        (restored,) = [r for r in caplog.records if r.getMessage() == "state restored"]
        assert restored.malformed_skipped == 1

    asyncio.run(scenario())


def test_is_delta_knows_both_eras():
    assert is_delta(b"LWD\x01{}") and is_delta(b"LWD\x02") and not is_delta(b"LWR\x04")
