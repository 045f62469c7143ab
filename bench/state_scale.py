"""The file state store at scale: N runs x R records, flushed, killed, restored.

    .venv/bin/python -m bench.state_scale --runs 100000 --records 30 [--json out.json]

Starts a real daemon (`--state-store file:...`), fills it through gRPC with N runs of R tool
calls each (batches of 1,000 events), and reports:
- steady RSS before the first flush, the flush time (the daemon's own flush histogram) and
  VmHWM (peak RSS) over steady state while it flushes every run at once;
- the state file's size;
- after `kill -9` and a restart: restore time, RSS after restore, and that every run is back;
- a graceful stop's final-flush time (nothing dirty: the cost is the drain, not the data).
The test suite runs the same code smaller (tests/e2e/test_state_scale.py).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from loopwarden.v1 import loopwarden_pb2 as pb  # noqa: E402

from tests.support.daemon import running_daemon  # noqa: E402
from tests.support.grpc_helpers import Stream, channel  # noqa: E402
from tests.support.metrics import value  # noqa: E402

CONFIG = "{tools: {loopDetection: {enabled: true}}}"
BATCH = 1000


def _fill(target: str, runs: int, records: int) -> float:
    """Every run gets `records` distinct tool calls (no loop: history fills to capacity)."""
    started = time.monotonic()
    with channel(target) as ch, Stream(ch) as stream:
        batch: list[pb.Event] = []
        for record in range(records):
            for run in range(runs):
                batch.append(pb.Event(run_id=f"scale-{run}", seq=record + 1, tool_call=pb.ToolCall(
                    tool_name="read", tool_call_id=f"c{record}", params_json=f'{{"path":"/f/{record}","n":{run}}}')))
                if len(batch) == BATCH:
                    stream.send(*batch)
                    batch = []
        if batch:
            stream.send(*batch)
    return time.monotonic() - started


def _wait_flushed(daemon, runs: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        text = daemon.scrape()
        if value(text, "loopwarden_state_dirty_runs") == 0 and value(text, "loopwarden_state_runs_flushed_total") >= runs:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"not flushed within {timeout}s")
        time.sleep(0.1)


def run(runs: int, records: int, directory: str, flush_interval: float = 1.0) -> dict:
    path = pathlib.Path(directory) / "runs.state"
    args = ["--state-store", f"file:{path}", "--state-flush-interval", str(flush_interval),
            "--max-runs", str(max(runs, 100_000))]
    figures: dict = {"runs": runs, "records": records}
    # The fill runs with flushing far away, so "steady" is measured before the one big flush.
    with running_daemon(CONFIG, [*args[:2], "--state-flush-interval", "3600", *args[4:]]) as daemon:
        figures["fill_seconds"] = round(_fill(daemon.grpc_target, runs, records), 1)
        figures["steady_rss_mib"] = round(daemon.memory_kib("VmRSS") / 1024, 1)
        figures["steady_hwm_mib"] = round(daemon.memory_kib("VmHWM") / 1024, 1)
        started = time.monotonic()
        daemon.signal(signal.SIGTERM)  # the final flush writes every run at once: the worst flush
        assert 0 == daemon.process.wait(timeout=600)
        figures["stop_with_full_flush_seconds"] = round(time.monotonic() - started, 2)
        flushed = daemon.wait_for_log(lambda l: l.get("msg") == "state flushed", timeout=5)
        figures["full_flush_seconds"] = flushed["seconds"]
    figures["state_file_mib"] = round(path.stat().st_size / 2**20, 1)
    with running_daemon(CONFIG, args) as daemon:
        restored = daemon.wait_for_log(lambda l: l.get("msg") == "state restored", timeout=600)
        figures["restore_seconds"] = restored["seconds"]
        figures["runs_restored"] = restored["runs"]
        figures["rss_after_restore_mib"] = round(daemon.memory_kib("VmRSS") / 1024, 1)
        figures["hwm_after_restore_mib"] = round(daemon.memory_kib("VmHWM") / 1024, 1)
        # Touch every run again: one flush interval later all of them are written, on a live daemon.
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            started = time.monotonic()
            batch = []
            for run in range(runs):
                batch.append(pb.Event(run_id=f"scale-{run}", tool_call=pb.ToolCall(tool_name="read", params_json="{}")))
                if len(batch) == BATCH:
                    stream.send(*batch)
                    batch = []
            if batch:
                stream.send(*batch)
        _wait_flushed(daemon, runs, timeout=600)
        figures["live_flush_of_every_run_seconds"] = round(time.monotonic() - started, 2)
        text = daemon.scrape()
        figures["live_flush_histogram_sum_seconds"] = round(value(text, "loopwarden_state_flush_seconds_sum"), 2)
        figures["hwm_after_live_flush_mib"] = round(daemon.memory_kib("VmHWM") / 1024, 1)
        daemon.process.kill()
        daemon.process.wait(timeout=10)
    with running_daemon(CONFIG, args) as daemon:
        restored = daemon.wait_for_log(lambda l: l.get("msg") == "state restored", timeout=600)
        figures["runs_back_after_kill_9"] = restored["runs"]
    figures["state_file_after_compactions_mib"] = round(path.stat().st_size / 2**20, 1)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--records", type=int, default=30)
    parser.add_argument("--json")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="loopwarden-scale-") as tmp:
        figures = run(options.runs, options.records, tmp)
    figures["cpus"] = os.cpu_count()
    print(json.dumps(figures, indent=2))
    if options.json:
        pathlib.Path(options.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
