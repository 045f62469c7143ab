"""Server CPU per event: the daemon and the echo server on grpc_bench.py's traffic, side by side.

Throughput on a shared 2-core machine moves with whatever else runs; the CPU time the server
process itself spent (utime + stime from /proc, every thread: the event loop and gRPC's) per
event answered moves much less, and it is what the ratio to the echo server is made of. Each
round drives the echo server and the daemon(s) with the same requests, alternating which goes
first, and prints µs of server CPU per event and events/s.

`--daemon-python` adds a second daemon from another venv (a same-run A/B: the daemon before a
change against the one after). `--profile py-spy|perf` samples one server (--profile-server)
during its batch phase of the last round and writes the report beside --out. `--memory-runs N`
then fills every daemon with N runs of 30 records each (grpc_bench.py's memory phase) and
prints the RSS it grew by per live run, so the speed and memory figures come from one run.

Run: .venv/bin/python bench/server_cpu.py [--rounds 3] [--pairs 20000] [--batch 64] [--memory-runs 100000]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from bench.grpc_bench import ENABLED, Server, phase_fill_runs, phase_pipelined, start_daemon, start_echo

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (all threads)


def start_other_daemon(python: str, tmp: str) -> Server:
    """A daemon from another venv (its own loopwarden and loopwarden_core)."""
    saved = sys.executable
    sys.executable = python
    try:
        return start_daemon(ENABLED, tmp)
    finally:
        sys.executable = saved


def measure(pool: ProcessPoolExecutor, server: Server, prefix: str, pairs: int, batch: int,
            profile: str | None = None, out: pathlib.Path | None = None) -> dict:
    profiler = None
    if profile == "py-spy":
        profiler = subprocess.Popen(
            [shutil.which("py-spy") or str(pathlib.Path(sys.executable).parent / "py-spy"), "record", "--native",
             "--rate", "500", "--format", "raw", "-o", str(out), "--pid", str(server.process.pid)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
    elif profile == "perf":
        profiler = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", "2000", "-g", "-o", str(out),
                                     "-p", str(server.process.pid)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        time.sleep(1.0)
    before, started = cpu_seconds(server.process.pid), time.perf_counter()
    result = pool.submit(phase_pipelined, server.target, prefix, pairs, batch).result()
    cpu, wall = cpu_seconds(server.process.pid) - before, time.perf_counter() - started
    if profiler is not None:
        profiler.send_signal(2)
        profiler.wait(timeout=120)
    return {"events_per_s": result["events_per_s"], "server_cpu_us_per_event": cpu * 1e6 / result["events"],
            "server_cpu_share": cpu / wall, "events": result["events"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=20000, help="call + outcome pairs per batch phase")
    parser.add_argument("--single-pairs", type=int, default=3000, help="pairs per single-event phase (0: none)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--daemon-python", default="", help="a second daemon's python (another venv), for an A/B")
    parser.add_argument("--profile", choices=("py-spy", "perf"), default=None)
    parser.add_argument("--profile-server", default="daemon", help="which server --profile samples (echo, daemon)")
    parser.add_argument("--memory-runs", type=int, default=0, help="then fill each daemon with this many 30-record runs")
    parser.add_argument("--out", default="server_cpu.json")
    args = parser.parse_args()
    pool = ProcessPoolExecutor(max_workers=1)
    out = pathlib.Path(args.out)
    figures: dict[str, dict[str, list[dict]]] = {}
    memory: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        servers = {"echo": start_echo(), "daemon": start_daemon(ENABLED, tmp)}
        if args.daemon_python:
            servers["daemon_b"] = start_other_daemon(args.daemon_python, tmp)
        try:
            names = list(servers)
            for round_number in range(args.rounds):
                order = names if round_number % 2 == 0 else names[::-1]
                last = round_number == args.rounds - 1
                for name in order:
                    server = servers[name]
                    phases = figures.setdefault(name, {})
                    if args.single_pairs:
                        phases.setdefault("single", []).append(measure(
                            pool, server, f"{name}-s{round_number}", args.single_pairs, 1))
                    profile = args.profile if (last and name == args.profile_server) else None
                    phases.setdefault(f"batch{args.batch}", []).append(measure(
                        pool, server, f"{name}-b{round_number}", args.pairs, args.batch, profile,
                        out.with_suffix(".perf" if profile == "perf" else ".pyspy")))
                print(f"round {round_number + 1}: " + "; ".join(
                    f"{name} {phase} {rows[-1]['server_cpu_us_per_event']:.2f} µs cpu/ev {rows[-1]['events_per_s']:,.0f} ev/s"
                    for name in names for phase, rows in figures[name].items()), flush=True)
            for name in names:
                server = servers[name]
                if name == "echo" or not args.memory_runs:
                    continue
                before = server.rss_kib()
                pool.submit(phase_fill_runs, server.target, "mem", args.memory_runs, 30).result()
                memory[name] = {"runs": args.memory_runs, "records_per_run": 30,
                                "bytes_per_run": (server.rss_kib() - before) * 1024 / args.memory_runs}
                print(f"{name}: {memory[name]['bytes_per_run']:,.0f} bytes RSS per live 30-record run", flush=True)
        finally:
            for server in servers.values():
                server.stop()
            pool.shutdown()
    summary = {name: {phase: {"median_server_cpu_us_per_event": statistics.median(r["server_cpu_us_per_event"] for r in rows),
                              "median_events_per_s": statistics.median(r["events_per_s"] for r in rows), "rounds": rows}
                      for phase, rows in phases.items()} for name, phases in figures.items()}
    print()
    for name, phases in summary.items():
        for phase, s in phases.items():
            echo = summary["echo"][phase]
            print(f"{name:9s} {phase:8s} server cpu {s['median_server_cpu_us_per_event']:6.2f} µs/event "
                  f"(echo {echo['median_server_cpu_us_per_event']:.2f}); {s['median_events_per_s']:9,.0f} ev/s "
                  f"= {s['median_events_per_s'] / echo['median_events_per_s']:.2f} x echo")
    for name, m in memory.items():
        print(f"{name:9s} memory   {m['bytes_per_run']:6,.0f} bytes per live run ({m['runs']:,} runs x 30 records)")
    out.write_text(json.dumps({**summary, "memory": memory} if memory else summary, indent=1))


if __name__ == "__main__":
    main()
