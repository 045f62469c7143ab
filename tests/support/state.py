"""Waiting on the state store's own word (its metrics), never on a sleep."""
from __future__ import annotations

import time

from tests.support.grpc_helpers import SAME
from tests.support.metrics import value


def wait_until_flushed(daemon, at_least: float = 1.0, timeout: float = 15.0) -> float:
    """Block until no run waits to be written and `at_least` runs were flushed; the flushed count."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = daemon.scrape()
        flushed = value(text, "loopwarden_state_runs_flushed_total")
        if value(text, "loopwarden_state_dirty_runs") == 0 and flushed >= at_least:
            return flushed
        time.sleep(0.05)
    raise AssertionError(f"runs not flushed within {timeout}s: {daemon.scrape()[-2000:]}")


def stored_runs(path) -> dict[tuple[str, str], object]:
    """The runs a state file holds, (tenant, run_id) -> the run's full record (its stored message,
    tests/support/stored.py): each base with
    the delta after it applied by the core, as a restore does (a test reads what a restarted
    daemon would hold, never a base that a delta has moved past)."""
    from loopwarden_server.statestore.encoding import is_exemptions
    from loopwarden_server.statestore.file import FileStateStore
    from loopwarden_server.statestore.runs import CoreRuns, Loaded

    from tests.core.harness import CoreEngine
    from tests.support.stored import run_message

    store = FileStateStore(str(path))
    store.check()
    chains = [(stored, delta) for stored, delta in store.restore() if not is_exemptions(stored)]
    engine = CoreEngine("{}", max_runs=len(chains) + 1, idle_ttl=1e12)
    runs, wall = CoreRuns(engine.service), time.time()
    found = {}
    for stored, delta in chains:
        base = run_message(stored)
        assert runs.take_in(stored, wall, delta=delta) == Loaded.RESTORED, "a delta that does not apply to its base"
        record = engine.service.native.persistence.encode_run(base.tenant, base.run_id, wall, engine.clock())
        found[(base.tenant, base.run_id)] = run_message(record)
    return found


def flushed_count(daemon) -> float:
    return value(daemon.scrape(), "loopwarden_state_runs_flushed_total")


def wait_for(predicate, timeout: float = 15.0) -> None:
    """Block until `predicate()` holds; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def read_loop(client, run_id: str, times: int) -> list:
    """`times` identical `read` calls of a run through a client, each followed by the same
    outcome (grpc_helpers.SAME): the verdicts, call and outcome alternating."""
    params = {"path": "/x"}
    verdicts = []
    for _ in range(times):
        verdicts.append(client.tool_call(run_id, "read", params))
        verdicts.append(client.tool_outcome(run_id, "read", params, result_json=SAME))
    return verdicts

