"""Loss at kill -9 under load: N busy runs on the file store, how stale is each run's stored state.

    .venv/bin/python -m bench.flush_under_load --runs 100000 [--rate 20000] [--seconds 12] [--json out.json]
    .venv/bin/python -m bench.flush_under_load --breakdown --runs 10000   # where a flush's time goes

Starts a real daemon (`--state-store file:...`, flush interval 1 s), gives every run `--records`
distinct tool calls (a full history: the record a flush writes is the biggest it gets), then keeps
every run busy: rounds over all runs, each run one more distinct call a round, paced to `--rate`
events/s in all (or as fast as the daemon answers). A probe stream sends one event every 10 ms
and times its answer (event latency while flushes run). After `--seconds` of that steady state
the daemon is killed with SIGKILL, and the state file is read back offline (the restore's own
reader): for each run, the events it was answered for minus the events its stored record counts
are the events kill -9 lost; the time from the first lost event's answer to the kill is the loss
in seconds of the run's events. A run loses nothing the interval before a flush took it.

`--breakdown` times the parts of a flush in process on the same records: the core's encode (the
stored value, framed), the file store's append + fsync; bench/stored_format.py sets the stored
format against the JSON era's.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import signal
import statistics
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import grpc  # noqa: E402
from loopwarden.v1 import loopwarden_pb2 as pb  # noqa: E402

from loopwarden_server.statestore.file import FileStateStore  # noqa: E402
from tests.support.daemon import running_daemon  # noqa: E402
from tests.support.grpc_helpers import Stream, channel  # noqa: E402
from tests.support.metrics import value  # noqa: E402
from tests.support.state import stored_runs  # noqa: E402

CONFIG = "{tools: {loopDetection: {enabled: true}}}"
BATCH = 200  # events a request: small, so a request stalled behind a flush shows in its latency


def _event(run: int, n: int) -> pb.Event:
    """The n-th call (from 0) of run `run`: every call distinct, so no run ever loops."""
    return pb.Event(run_id=f"busy-{run}", seq=n + 1, tool_call=pb.ToolCall(
        tool_name="read", tool_call_id=f"c{n}", params_json=f'{{"path":"/f/{n}","n":{run}}}'))


def _percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class Driver:
    """Rounds over all runs, one event per run a round, paced to `rate` events/s in all. Keeps,
    per run, the time each of its events was answered (the answer means the event was applied)."""

    def __init__(self, target: str, runs: int, records: int, rate: float) -> None:
        self.target, self.runs, self.rate = target, runs, rate
        self.sent = [records] * runs  # events answered per run (the fill's included)
        self.answered_at: list[list[float]] = [[] for _ in range(runs)]  # steady-state events only
        self.stop = threading.Event()
        self.latencies: list[float] = []  # seconds per request of BATCH events
        self.events = 0
        self.thread = threading.Thread(target=self._drive, daemon=True)

    def _drive(self) -> None:
        try:
            self._rounds()
        except grpc.RpcError:
            if not self.stop.is_set():
                raise  # the daemon failed before the kill

    def _rounds(self) -> None:
        started = time.monotonic()
        with channel(self.target) as ch, Stream(ch) as stream:
            run = 0
            while not self.stop.is_set():
                chunk = [(r % self.runs) for r in range(run, run + BATCH)]
                events = [_event(r, self.sent[r]) for r in chunk]
                if self.rate:
                    due = started + self.events / self.rate
                    pause = due - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                sent = time.monotonic()
                verdicts = stream.send(*events)
                answered = time.monotonic()
                self.latencies.append(answered - sent)
                assert len(verdicts) == len(events)
                for r in chunk:
                    self.sent[r] += 1
                    self.answered_at[r].append(answered)
                self.events += len(chunk)
                run = (run + BATCH) % self.runs


class Probe:
    """One event every 10 ms on its own stream and run: the latency of a single event."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.stop = threading.Event()
        self.latencies: list[float] = []
        self.thread = threading.Thread(target=self._probe, daemon=True)

    def _probe(self) -> None:
        try:
            self._probe_until_stopped()
        except grpc.RpcError:
            if not self.stop.is_set():
                raise

    def _probe_until_stopped(self) -> None:
        with channel(self.target) as ch, Stream(ch) as stream:
            n = 0
            while not self.stop.is_set():
                started = time.monotonic()
                stream.one(pb.Event(run_id="probe", tool_call=pb.ToolCall(tool_name="probe", params_json=f'{{"n":{n}}}')))
                self.latencies.append(time.monotonic() - started)
                n += 1
                time.sleep(0.01)


def _fill(target: str, runs: int, records: int) -> list[list[float]]:
    """Every run's first `records` calls, 1,000 a request (runs in order); returns when each
    request was answered: [record n][run // 1000]."""
    answered: list[list[float]] = []
    with channel(target) as ch, Stream(ch) as stream:
        for n in range(records):
            answered.append([])
            for start in range(0, runs, 1000):
                stream.send(*(_event(run, n) for run in range(start, min(runs, start + 1000))))
                answered[n].append(time.monotonic())
    return answered


def stored_counts(path: pathlib.Path) -> dict[str, int]:
    """run id -> events_evaluated of its stored run, read as a restore reads it (the core takes
    each run's full record in with the delta after it)."""
    return {run_id: record.events_evaluated for (_tenant, run_id), record in stored_runs(path).items()}


def runs_with_delta(path: pathlib.Path) -> int:
    """Runs whose latest write in the state file is a delta against their full record."""
    store = FileStateStore(str(path))
    return sum(delta is not None for _value, delta in store.restore())


def run(runs: int, records: int, seconds: float, rate: float, directory: str,
        flush_interval: float = 1.0) -> dict:
    path = pathlib.Path(directory) / "runs.state"
    args = ["--state-store", f"file:{path}", "--state-flush-interval", str(flush_interval),
            "--max-runs", str(max(runs + 10, 100_000))]
    figures: dict = {"runs": runs, "records": records, "flush_interval_seconds": flush_interval,
                     "target_rate_events_per_second": rate}
    with running_daemon(CONFIG, args) as daemon:
        started = time.monotonic()
        filled = _fill(daemon.grpc_target, runs, records)
        figures["fill_seconds"] = round(time.monotonic() - started, 1)
        driver, probe = Driver(daemon.grpc_target, runs, records, rate), Probe(daemon.grpc_target)
        at_steady = daemon.scrape()
        driver.thread.start()
        probe.thread.start()
        time.sleep(seconds)
        text = daemon.scrape()
        driver.stop.set()  # so the streams' errors after the kill end their threads quietly
        probe.stop.set()
        killed = time.monotonic()
        daemon.process.send_signal(signal.SIGKILL)
        daemon.process.wait(timeout=10)
        driver.thread.join(timeout=10)
        probe.thread.join(timeout=10)
        compactions = [line for line in daemon.logs() if line.get("msg") == "state file compacted"]
    steady = killed - started - figures["fill_seconds"]
    figures["steady_seconds"] = round(steady, 1)
    figures["events_per_second"] = round(driver.events / steady)
    figures["events_per_run_per_second"] = round(driver.events / steady / runs, 3)
    count = value(text, "loopwarden_state_flush_seconds_count")
    figures["flushes"] = int(count)
    figures["mean_flush_seconds"] = round(value(text, "loopwarden_state_flush_seconds_sum") / max(count, 1), 2)
    # The flushes of the steady state alone (the fill's first flushes write every run in full).
    steady_count = count - value(at_steady, "loopwarden_state_flush_seconds_count")
    figures["steady_flushes"] = int(steady_count)
    figures["steady_mean_flush_seconds"] = round(
        (value(text, "loopwarden_state_flush_seconds_sum") - value(at_steady, "loopwarden_state_flush_seconds_sum"))
        / max(steady_count, 1), 2)
    # Of the runs the steady state's flushes wrote, those written as deltas (a busy run's write
    # goes whole again once its delta would pass half its full record: every few events).
    figures["steady_runs_flushed"] = int(value(text, "loopwarden_state_runs_flushed_total")
                                         - value(at_steady, "loopwarden_state_runs_flushed_total"))
    figures["steady_deltas_written"] = int(value(text, "loopwarden_state_deltas_written_total")
                                           - value(at_steady, "loopwarden_state_deltas_written_total"))
    figures["compactions"] = len(compactions)
    figures["compaction_seconds_max"] = max((line.get("seconds", 0.0) for line in compactions), default=0.0)
    figures["compaction_flushes_waited_seconds_max"] = max(
        (line.get("flushes_waited_seconds", 0.0) for line in compactions), default=0.0)
    stored = stored_counts(path)
    # Whether a run's latest write is a delta depends on where in that cycle the kill caught it.
    figures["runs_stored_with_delta"] = runs_with_delta(path)
    lost_events: list[int] = []
    lost_seconds: list[float] = []
    missing = 0
    for r in range(runs):
        have = stored.get(f"busy-{r}")
        if have is None:
            missing += 1
            continue
        lost = max(0, driver.sent[r] - have)
        lost_events.append(lost)
        if lost:
            answered = driver.answered_at[r]
            first_lost = answered[-lost] if lost <= len(answered) else filled[have][r // 1000]
            lost_seconds.append(killed - first_lost)
        else:
            lost_seconds.append(0.0)
    figures["runs_missing_from_store"] = missing
    figures["lost_events_max"] = max(lost_events, default=0)
    figures["lost_events_mean"] = round(statistics.fmean(lost_events), 2) if lost_events else 0
    figures["lost_seconds_max"] = round(max(lost_seconds, default=0.0), 2)
    figures["lost_seconds_p99"] = round(_percentile(lost_seconds, 0.99), 2)
    figures["lost_seconds_p50"] = round(_percentile(lost_seconds, 0.50), 2)
    figures["lost_intervals_max"] = round(figures["lost_seconds_max"] / flush_interval, 2)
    figures["batch_latency_p99_ms"] = round(_percentile(driver.latencies, 0.99) * 1000, 1)
    figures["batch_latency_max_ms"] = round(max(driver.latencies, default=0) * 1000, 1)
    figures["probe_latency_p50_ms"] = round(_percentile(probe.latencies, 0.50) * 1000, 1)
    figures["probe_latency_p99_ms"] = round(_percentile(probe.latencies, 0.99) * 1000, 1)
    figures["probe_latency_max_ms"] = round(max(probe.latencies, default=0) * 1000, 1)
    return figures


def _append_seconds(store: FileStateStore, items: list) -> float:
    """Wall seconds (fsync waits for the disk) to flush these items, 256 a flush."""
    began = time.perf_counter()

    async def write() -> None:
        for start in range(0, len(items), 256):
            await store.flush(items[start:start + 256])
    asyncio.run(write())
    return time.perf_counter() - began


def breakdown(runs: int, records: int, directory: str) -> dict:
    """Per run, in process: the core's encode (its stored value, framed: protobuf, no zlib),
    append + fsync; and for a delta after one more call (what a busy run's flush writes to the
    file store): its encode, its size, its append + fsync."""
    from loopwarden_server.statestore.encoding import run_key
    from tests.core.harness import CoreEngine
    engine = CoreEngine(CONFIG, max_runs=runs + 10)
    for n in range(records):
        for start in range(0, runs, 1000):
            engine.evaluate([_event(r, n) for r in range(start, min(runs, start + 1000))])
    keys = [("", f"busy-{r}") for r in range(runs)]
    wall, now = time.time(), engine.clock()
    # CPU seconds of this thread (the machine is shared: wall time would count other processes).
    began = time.thread_time()
    values = [engine.service.native.persistence.encode_run(t, r, wall, now) for t, r in keys]
    encode = time.thread_time() - began
    store = FileStateStore(str(pathlib.Path(directory) / "breakdown.state"))
    store.check()
    list(store.restore())
    append = _append_seconds(store, [(run_key(t, r), v, 0.0) for (t, r), v in zip(keys, values)])
    # A busy run's usual write now: its base written once (a full record, as above), one more
    # call, then the delta a flush writes in its place (the core's take_record, as the keeper).
    native = engine.service.native.persistence
    for t, r in keys:
        native.take_record(t, r, wall, now, True)
    for start in range(0, runs, 1000):
        engine.evaluate([_event(r, records) for r in range(start, min(runs, start + 1000))])
    began = time.thread_time()
    deltas = [native.take_record(t, r, wall, now, True) for t, r in keys]
    delta_encode = time.thread_time() - began
    assert all(d.startswith(b"LWD") for d in deltas), "every run written as a delta"
    delta_append = _append_seconds(store, [(run_key(t, r), d, 0.0) for (t, r), d in zip(keys, deltas)])
    return {"runs": runs, "records": records,
            "stored_value_bytes": round(statistics.fmean(map(len, values))),
            "encode_us_per_run": round(encode / runs * 1e6, 1),
            "append_fsync_us_per_run": round(append / runs * 1e6, 1),
            "delta_bytes": round(statistics.fmean(map(len, deltas))),
            "delta_encode_us_per_run": round(delta_encode / runs * 1e6, 1),
            "delta_append_fsync_us_per_run": round(delta_append / runs * 1e6, 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--records", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--rate", type=float, default=0.0, help="events/s in all; 0: as fast as answered")
    parser.add_argument("--flush-interval", type=float, default=1.0)
    parser.add_argument("--breakdown", action="store_true")
    parser.add_argument("--json")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="loopwarden-flush-") as tmp:
        if options.breakdown:
            figures = breakdown(options.runs, options.records, tmp)
        else:
            figures = run(options.runs, options.records, options.seconds, options.rate, tmp, options.flush_interval)
    figures["cpus"] = os.cpu_count()
    figures["load_average_1m"] = round(os.getloadavg()[0], 1)
    print(json.dumps(figures, indent=2))
    if options.json:
        pathlib.Path(options.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
