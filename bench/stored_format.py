"""The stored-run format's cost: bytes per stored run, encode and decode time per run, and the
flush's CPU per changed run, this daemon's format against another build's (the JSON era's).

    .venv/bin/python -m bench.stored_format [--runs 2000] [--records 30] \
        [--against /work/main/.venv/bin/python] [--json out.json]

Fills a core (in-process, no gRPC) with RUNS runs of RECORDS distinct tool calls each (a full
history at the default historySize of 30), then:
- bytes: each run's stored value as the keeper writes it to Redis (a full record), mean; also
  for runs in a loop (RECORDS identical calls, each with the same outcome: what zlib squeezed);
- encode: a held run to its stored value (for the JSON era, its JSON and then the zlib framing
  the keeper does off the loop: both are the flush's cost), per run;
- decode: a stored value taken into a fresh core (`CoreRuns.take_in`: for the JSON era, zlib
  inflate and the JSON reader), per run;
- flush CPU per changed run: every run changed by one more call, then one keeper flush (process
  CPU, worker threads included), to a memory store written like Redis (full records) and to a
  file store (which keeps deltas), per run.
With `--against PYTHON`, the same measurement runs under that interpreter (a venv holding another
build of the core and daemon, e.g. main's) and both are printed with the ratio new/old.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]

CONFIG = "{tools: {loopDetection: {enabled: true}}}"


def _core():
    from prometheus_client import CollectorRegistry

    from loopwarden_server.config import load_config_text
    from loopwarden_server.core import CoreService
    from loopwarden_server.metrics import Metrics
    from loopwarden_server.settings import Limits

    return CoreService(load_config_text(CONFIG), Metrics(CollectorRegistry()), Limits(), max_runs=10**6,
                       idle_ttl_seconds=10**9, clock=time.monotonic, instance_id="bench")


def _send(core, events) -> None:
    from loopwarden.v1 import loopwarden_pb2 as pb

    core.evaluate(pb.EvaluateRequest(events=events).SerializeToString(), "")


def _call(run: int, record: int):
    from loopwarden.v1 import loopwarden_pb2 as pb

    return pb.Event(run_id=f"run-{run}", seq=record + 1, tool_call=pb.ToolCall(
        tool_name="read", tool_call_id=f"c{record}", params_json=f'{{"path":"/f/{record}","n":{run}}}'))


def _fill(core, runs: int, records: int) -> None:
    for record in range(records):
        for start in range(0, runs, 500):
            _send(core, [_call(run, record) for run in range(start, min(runs, start + 500))])


def _looping(core, runs: int, records: int) -> None:
    from loopwarden.v1 import loopwarden_pb2 as pb

    for _ in range(records):
        for start in range(0, runs, 250):
            events = []
            for run in range(start, min(runs, start + 250)):
                params = f'{{"path":"/loop","n":{run}}}'
                events.append(pb.Event(run_id=f"loop-{run}", tool_call=pb.ToolCall(tool_name="read", params_json=params)))
                events.append(pb.Event(run_id=f"loop-{run}", tool_outcome=pb.ToolOutcome(
                    tool_name="read", params_json=params, result_json='{"status":"running"}')))
            _send(core, events)


def _best(fn, repeat: int = 7) -> float:
    """The best of `repeat` CPU timings of fn() (process CPU seconds, so other processes on a
    shared machine cost it less than they would wall time)."""
    times = []
    for _ in range(repeat):
        started = time.process_time()
        fn()
        times.append(time.process_time() - started)
    return min(times)


def measure(runs: int, records: int) -> dict:
    import loopwarden_core

    from loopwarden_server.statestore.file import FileStateStore
    from loopwarden_server.statestore.keeper import StateKeeper
    from loopwarden_server.statestore.metrics import StateMetrics
    from loopwarden_server.statestore.runs import CoreRuns
    from prometheus_client import CollectorRegistry

    json_era = hasattr(loopwarden_core, "frame_records")
    core = _core()
    _fill(core, runs, records)
    kept = CoreRuns(core)
    wall = time.time()
    keys = [("", f"run-{run}") for run in range(runs)]

    def encode_run(side, tenant: str, run_id: str) -> bytes:
        # The core's face grew role objects with the protobuf era; the JSON era's is flat.
        return getattr(side.native, "persistence", side.native).encode_run(tenant, run_id, wall, side.clock())

    def encode() -> list[bytes]:
        if json_era:  # the JSON, then the framing the keeper runs off the loop
            return loopwarden_core.frame_records([encode_run(core, t, r) for t, r in keys])
        return [encode_run(core, t, r) for t, r in keys]

    values = encode()
    encode_s = _best(encode)
    sizes = [len(v) for v in values]

    def decode() -> None:
        fresh = CoreRuns(_core())
        for value in values:
            fresh.take_in(value, wall)

    decode_s = _best(decode)

    looping = _core()
    loops = min(runs, 500)
    _looping(looping, loops, records)
    loop_values = [encode_run(looping, "", f"loop-{run}") for run in range(loops)]
    if json_era:
        loop_values = loopwarden_core.frame_records(loop_values)

    from loopwarden_server.statestore.base import StateStore

    class Memory(StateStore):
        """A store written like Redis: full records, no deltas."""
        lazy, kind, deltas = True, "memory", False

        def __init__(self) -> None:
            self.data: dict = {}

        def check(self) -> None:
            pass

        def describe(self) -> str:
            return "memory"

        async def load(self, key):
            return self.data.get(key)

        async def flush(self, items):
            for key, value, _ttl in items:
                self.data[key] = value

    def flush_cpu(store, rounds: int = 3) -> float:
        """CPU seconds of one flush of every run changed by one more call (best of `rounds`)."""
        keeper = StateKeeper(store, kept, StateMetrics(CollectorRegistry()), flush_interval=3600)
        keeper.restore()

        async def once() -> float:
            assert await keeper.flush_once()  # the first write of every run: full records (bases)
            best = float("inf")
            for step in range(rounds):
                for start in range(0, runs, 500):
                    _send(core, [_call(run, records + step) for run in range(start, min(runs, start + 500))])
                started = time.process_time()
                assert await keeper.flush_once()
                best = min(best, time.process_time() - started)
            return best

        return asyncio.run(once())

    memory_s = flush_cpu(Memory())
    with tempfile.TemporaryDirectory() as scratch:
        store = FileStateStore(os.path.join(scratch, "runs.state"))
        store.check()
        file_s = flush_cpu(store)
        asyncio.run(store.close())
    return {
        "format": "json (LWR\\x03 + zlib)" if json_era else "protobuf (LWR\\x04)",
        "runs": runs, "records": records,
        "bytes_per_run": statistics.mean(sizes),
        "bytes_per_looping_run": statistics.mean(len(v) for v in loop_values),
        "encode_us_per_run": encode_s / runs * 1e6,
        "decode_us_per_run": decode_s / runs * 1e6,
        "flush_cpu_us_per_changed_run_full_records": memory_s / runs * 1e6,
        "flush_cpu_us_per_changed_run_file_deltas": file_s / runs * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--records", type=int, default=30)
    parser.add_argument("--against", help="another venv's python (its core and daemon measured the same way)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    if args.one:
        print(json.dumps(measure(args.runs, args.records)))
        return
    mine = measure(args.runs, args.records)
    results = {"new": mine}
    if args.against:
        out = subprocess.run([args.against, "-m", "bench.stored_format", "--one", "--runs", str(args.runs),
                              "--records", str(args.records)], cwd=REPO, capture_output=True, text=True, check=True)
        results["old"] = json.loads(out.stdout.strip().splitlines()[-1])
    for name, figures in results.items():
        print(f"{name}: {figures['format']}, {figures['runs']} runs x {figures['records']} records")
        for key, number in figures.items():
            if isinstance(number, float):
                ratio = f"   new/old {mine[key] / results['old'][key]:.2f}" if "old" in results and name == "new" else ""
                print(f"  {key:48} {number:10.2f}{ratio}")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
