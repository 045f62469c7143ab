"""Health latency on the daemon's health port while one client sends max-size requests in a loop
and the config file (1.2 MB) is rewritten, against the same probe with no load, in one run.

The daemon runs everything on one event loop, so this is the check that no single request or
reload holds it: requests are bounded by the message and count limits and yield to the loop
between large events; config files are parsed in a thread. Bounded in time; loopback only.

Run: .venv/bin/python bench/health_under_load.py [--seconds 20] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loopwarden.v1 import loopwarden_pb2 as pb  # noqa: E402
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc  # noqa: E402

from bench.load_faults import free_port, rss_kib  # noqa: E402

MIB = 1024 * 1024
BIG_CONFIG = ("{tools: {loopDetection: {enabled: true}}, loopwarden: {extraPollTools: ["
              + ",".join(f'"tool_{i}"' for i in range(100_000)) + "]}}\n")


def max_size_request(n: int) -> pb.EvaluateRequest:
    """~3.9 MiB: three events with 1 MiB flat-array params and a 0.9 MiB bracket-heavy one."""
    flat = "[" + ",".join(str(i % 1000) for i in range(n, n + 260_000)) + "]"
    flat = flat[: MIB - 64].rsplit(",", 1)[0] + "]"
    brackets = "[" * (450 * 1024) + "]" * (450 * 1024)
    events = [pb.Event(run_id=f"heavy-{n % 50}", seq=0, tool_call=pb.ToolCall(tool_name="read", params_json=flat))
              for _ in range(3)]
    events.append(pb.Event(run_id="heavy-brackets", tool_call=pb.ToolCall(tool_name="read", params_json=brackets)))
    return pb.EvaluateRequest(events=events)


def heavy_client(target: str, seconds: float, queue) -> None:
    sent = answered = 0
    deadline = time.monotonic() + seconds
    with grpc.insecure_channel(target, options=[("grpc.max_send_message_length", 8 * MIB)]) as ch:
        stub = pb_grpc.LoopDetectionServiceStub(ch)
        # Built once: the client's own CPU must not compete with the daemon on a 2-core machine.
        requests = [max_size_request(n) for n in range(4)]
        n = 0
        while time.monotonic() < deadline:
            request = requests[n % len(requests)]
            n += 1
            for response in stub.Evaluate(iter([request]), timeout=60):
                answered += len(response.verdicts)
            sent += len(request.events)
    queue.put({"requests": n, "events_sent": sent, "events_answered": answered})


def probe(target: str, seconds: float, interval: float = 0.02) -> list[float]:
    """Health Check round trips (ms), one every `interval`."""
    latencies = []
    with grpc.insecure_channel(target) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
            latencies.append((time.perf_counter() - started) * 1000)
            time.sleep(interval)
    return latencies


def summary(latencies: list[float]) -> dict:
    ordered = sorted(latencies)
    return {"samples": len(ordered), "p50_ms": round(statistics.median(ordered), 2),
            "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1], 2), "max_ms": round(ordered[-1], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--without", choices=("requests", "reloads"), help="leave one load out (to see which one costs)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = pathlib.Path(tmp) / "loopwarden.json5"
        config.write_text("{tools: {loopDetection: {enabled: true}}}")
        grpc_port, health_port, metrics_port = free_port(), free_port(), free_port()
        daemon = subprocess.Popen(
            [sys.executable, "-m", "loopwarden", "serve", "--listen", f"127.0.0.1:{grpc_port}",
             "--health-listen", f"127.0.0.1:{health_port}", "--metrics-listen", f"127.0.0.1:{metrics_port}",
             "--config", str(config), "--log-level", "ERROR"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        target, health = f"127.0.0.1:{grpc_port}", f"127.0.0.1:{health_port}"
        try:
            grpc.channel_ready_future(grpc.insecure_channel(health)).result(timeout=30)
            idle = summary(probe(health, min(5.0, args.seconds / 4)))
            queue: multiprocessing.Queue = multiprocessing.Queue()
            client = multiprocessing.Process(target=heavy_client, args=(
                target, 0 if args.without == "requests" else args.seconds, queue))
            client.start()
            rewrites = 0

            def rewrite(_signum=None, _frame=None) -> None:
                nonlocal rewrites
                tmp_path = config.with_suffix(".tmp")
                tmp_path.write_text(BIG_CONFIG if rewrites % 2 == 0 else BIG_CONFIG.replace("tool_1,", "tool_x,"))
                os.replace(tmp_path, config)
                rewrites += 1

            signal.signal(signal.SIGALRM, rewrite)
            if args.without != "reloads":
                signal.setitimer(signal.ITIMER_REAL, 3.0, 3.0)
            loaded = summary(probe(health, args.seconds - 1))
            signal.setitimer(signal.ITIMER_REAL, 0)
            counts = queue.get(timeout=120)
            client.join(timeout=30)
            figures = {"idle": idle, "under_load": loaded, "config_rewrites_1_2_mb": rewrites, **counts,
                       "lost": counts["events_sent"] - counts["events_answered"],
                       "daemon_peak_rss_mib": round(rss_kib(daemon.pid, "VmHWM") / 1024, 1),
                       "p99_ratio_loaded_vs_idle": round(loaded["p99_ms"] / max(idle["p99_ms"], 0.01), 1)}
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                daemon.kill()
    print("health round trip on the health port (ms)")
    for key, value in figures.items():
        print(f"  {key:26s} {value}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
