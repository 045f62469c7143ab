"""A metrics scrape that lands while the event loop thread is inside a core call.

The call holds the core mutably; a garbage collection it starts (by allocating its answer) can
hand the GIL to the metrics server's thread right there. That scrape must wait for the call and
answer, not fail with a 500 ("Already mutably borrowed" from a gauge reading the core). The
core's roles (`Core.evaluator`, `.persistence`, ...) borrow the one core as its own methods did,
so a role's call is such a call too."""
from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from loopwarden.eventformat import EventKind, EventRecord
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden_server.config import load_config_text
from loopwarden_server.core import CoreService
from loopwarden_server.metrics import Metrics
from loopwarden_server.settings import Limits


def _core(registry: CollectorRegistry) -> CoreService:
    return CoreService(load_config_text("{tools: {loopDetection: {enabled: true}}}"), Metrics(registry), Limits(),
                       max_runs=10_000, idle_ttl_seconds=3600, clock=time.monotonic)


@pytest.fixture
def inside_core_call() -> Iterator[Callable[[Callable[[], object], Callable[[], object]], object]]:
    """Runs `read` on another thread from within the first garbage collection that starts while
    `call` holds the core (collections made frequent); gives what the read returned or raised."""
    seen: list = []
    threads: list[threading.Thread] = []
    reader: Callable[[], object] | None = None

    def on_collection(phase: str, _info: dict) -> None:
        if phase != "start" or reader is None or threads:
            return
        def read() -> None:
            try:
                seen.append(reader())
            except Exception as exc:  # noqa: BLE001 - the outcome under test: kept, not raised on a stray thread
                seen.append(exc)
        threads.append(threading.Thread(target=read))
        threads[0].start()
        # Long enough for the reader to try while the call still holds the core; the call then
        # goes on, and a reader that waits for it finishes after.
        threads[0].join(0.05)

    def run(read: Callable[[], object], call: Callable[[], object]) -> object:
        nonlocal reader
        reader = read
        try:
            call()
        finally:
            reader = None
        assert threads, f"no garbage collection started inside the call {gc.get_count()} {gc.isenabled()} {gc.get_threshold()} {gc.callbacks}"
        threads[0].join(10)
        assert len(seen) == 1
        return seen[0]

    thresholds = gc.get_threshold()
    gc.callbacks.append(on_collection)
    gc.set_threshold(1)
    try:
        yield run
    finally:
        gc.set_threshold(*thresholds)
        gc.callbacks.remove(on_collection)


DIRTY_RUNS = 3_000


def _with_dirty_runs(core: CoreService, runs: int = DIRTY_RUNS) -> CoreService:
    core.native.persistence.track_changes(True)
    for n in range(runs):
        core.decide(EventRecord(EventKind.TOOL_CALL, run_id=f"r{n}", tool_name="read", params_json="{}"))
    return core


def _evaluating(core: CoreService) -> Callable[[], object]:
    """An Evaluate call whose answer holds many objects allocated while the call holds the core:
    one run repeating a call, warned, blocked, then aborted, with debug logs on: a log line per
    event and its dict of fields (more dicts than CPython keeps in its free list, so they count
    towards a collection)."""
    core.native.debug_logs = True
    events = [pb.Event(run_id="loop", seq=n + 1, tool_call=pb.ToolCall(tool_name="read", params_json="{}"))
              for n in range(500)]
    data = pb.EvaluateRequest(events=events).SerializeToString()
    return lambda: core.native.evaluator.evaluate(data, "", time.monotonic(), "", False, True)


def test_a_bare_read_of_the_core_is_refused_inside_a_call(inside_core_call):
    """The window is real: without waiting, a read from another thread fails."""
    core = _with_dirty_runs(_core(CollectorRegistry()))
    read = inside_core_call(lambda: len(core.native), _evaluating(core))
    assert isinstance(read, RuntimeError) and "Already mutably borrowed" in str(read), read


def test_a_scrape_inside_a_call_waits_for_it_and_answers(inside_core_call):
    registry = CollectorRegistry()
    core = _with_dirty_runs(_core(registry))
    scraped = inside_core_call(lambda: generate_latest(registry).decode(), _evaluating(core))
    assert isinstance(scraped, str), scraped
    assert f"loopwarden_active_runs {DIRTY_RUNS + 1:.1f}" in scraped, "read after the call: its looping run too"
