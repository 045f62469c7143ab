"""One tenant floods the hook endpoint; another tenant's gRPC Check and the health check are timed,
against the same probes with no flood, in one run.

Two tenants in a token file: `alpha` floods `POST /v1/hooks/claude-code` (PreToolUse inputs of
many sessions, every request answered, from `--flood-procs` processes of `--flood-threads` kept-alive
connections each, as fast as the daemon answers); `beta` sends one gRPC Check every 20 ms and the
health service is asked as often. Printed: each probe's p50 / p99 / max in ms, quiet and flooded,
the flooded p99 minus the quiet one, and the flood's answered requests per second (by answer:
judged, or "busy" for alpha's excess over its share).

Run: .venv/bin/python bench/hook_flood.py [--seconds 15] [--flood-procs 1] [--flood-threads 32] [--json out.json]
"""
from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loopwarden.v1 import loopwarden_pb2 as pb  # noqa: E402
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc  # noqa: E402

from bench.load_faults import free_port  # noqa: E402

TOKENS = "alpha alpha-flood-token\nbeta beta-probe-token\n"
CONFIG = "{tools: {loopDetection: {enabled: true}}}\n"


def start_daemon(tmp: pathlib.Path) -> tuple[subprocess.Popen, str, str]:
    (tmp / "tokens").write_text(TOKENS)
    (tmp / "config.json5").write_text(CONFIG)
    grpc_port, metrics_port, hooks_port = free_port(), free_port(), free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "loopwarden", "serve", "--listen", f"127.0.0.1:{grpc_port}",
         "--metrics-listen", f"127.0.0.1:{metrics_port}", "--hooks-listen", f"127.0.0.1:{hooks_port}",
         "--auth-token-file", str(tmp / "tokens"), "--config", str(tmp / "config.json5")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("LOOPWARDEN_")})
    for line in process.stdout:
        if '"listening"' in line:
            break
    threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()
    return process, f"127.0.0.1:{grpc_port}", f"127.0.0.1:{hooks_port}"


def _pre_tool_use(session: str, n: int) -> bytes:
    return json.dumps({"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
                       "hook_event_name": "PreToolUse", "tool_name": "Bash",
                       "tool_input": {"command": f"ls {n % 7}"}, "tool_use_id": f"toolu_{session}_{n}"}).encode()


def flood_process(address: str, seconds: float, threads: int, start_at: float, queue) -> None:
    host, port = address.rsplit(":", 1)
    counts = {"judged": 0, "busy": 0, "other": 0}
    lock = threading.Lock()

    def connection_loop(index: int) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        mine = {"judged": 0, "busy": 0, "other": 0}
        n = 0
        deadline = start_at + seconds
        while time.time() < deadline:
            body = _pre_tool_use(f"flood-{os.getpid()}-{index}-{n // 50}", n)
            n += 1
            try:
                conn.request("POST", "/v1/hooks/claude-code", body, {
                    "Content-Type": "application/json", "Authorization": "Bearer alpha-flood-token"})
                answer = conn.getresponse().read()
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection(host, int(port), timeout=30)
                mine["other"] += 1
                continue
            mine["busy" if b"busy" in answer else "judged"] += 1
        with lock:
            for key, value in mine.items():
                counts[key] += value

    while time.time() < start_at:
        time.sleep(0.01)
    workers = [threading.Thread(target=connection_loop, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    queue.put(counts)


def probe(target: str, seconds: float, interval: float = 0.02) -> tuple[list[float], list[float]]:
    """beta's Check round trips and health round trips (ms), one of each every `interval`."""
    checks, healths = [], []
    metadata = (("authorization", "Bearer beta-probe-token"),)
    with grpc.insecure_channel(target) as ch:
        stub, health = pb_grpc.LoopDetectionServiceStub(ch), health_pb2_grpc.HealthStub(ch)
        n = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            event = pb.Event(run_id=f"probe-{n % 20}", tool_call=pb.ToolCall(tool_name="read", params_json=f'{{"n":{n}}}'))
            n += 1
            started = time.perf_counter()
            stub.Check(pb.CheckRequest(event=event), metadata=metadata, timeout=30)
            checks.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            health.Check(health_pb2.HealthCheckRequest(), timeout=30)
            healths.append((time.perf_counter() - started) * 1000)
            time.sleep(interval)
    return checks, healths


def figures(latencies: list[float]) -> dict:
    ordered = sorted(latencies)
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered), 2),
            "p99_ms": round(ordered[max(0, int(len(ordered) * 0.99) - 1)], 2), "max_ms": round(ordered[-1], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--flood-procs", type=int, default=1)
    parser.add_argument("--flood-threads", type=int, default=32)
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="hook-flood-") as tmp:
        process, grpc_target, hooks_address = start_daemon(pathlib.Path(tmp))
        try:
            probe(grpc_target, 1.0)  # warm: connections, the core's first runs
            quiet_checks, quiet_health = probe(grpc_target, args.seconds)
            queue = multiprocessing.Queue()
            start_at = time.time() + 1.0
            floods = [multiprocessing.Process(target=flood_process, args=(
                hooks_address, args.seconds + 1.0, args.flood_threads, start_at, queue))
                for _ in range(args.flood_procs)]
            for flood in floods:
                flood.start()
            time.sleep(max(0.0, start_at - time.time()) + 0.5)  # the flood under way
            flooded_checks, flooded_health = probe(grpc_target, args.seconds)
            counts = [queue.get(timeout=120) for _ in floods]
            for flood in floods:
                flood.join()
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)

    answered = {key: sum(c[key] for c in counts) for key in ("judged", "busy", "other")}
    result = {
        "check": {"quiet": figures(quiet_checks), "flooded": figures(flooded_checks)},
        "health": {"quiet": figures(quiet_health), "flooded": figures(flooded_health)},
        "flood": {"seconds": args.seconds + 1.0, "procs": args.flood_procs, "threads": args.flood_threads,
                  **answered, "answered_per_second": round((answered["judged"] + answered["busy"]) / (args.seconds + 1.0))},
    }
    for name in ("check", "health"):
        quiet, flooded = result[name]["quiet"], result[name]["flooded"]
        result[name]["p99_added_ms"] = round(flooded["p99_ms"] - quiet["p99_ms"], 2)
        print(f"{name:6} quiet   p50 {quiet['p50_ms']:8.2f} ms  p99 {quiet['p99_ms']:8.2f} ms  max {quiet['max_ms']:8.2f} ms")
        print(f"{name:6} flooded p50 {flooded['p50_ms']:8.2f} ms  p99 {flooded['p99_ms']:8.2f} ms  max {flooded['max_ms']:8.2f} ms"
              f"  (p99 +{result[name]['p99_added_ms']:.2f} ms)")
    flood = result["flood"]
    print(f"flood  {flood['answered_per_second']} hook requests/s answered ({flood['judged']} judged, "
          f"{flood['busy']} busy, {flood['other']} failed) from {flood['procs']}x{flood['threads']} connections")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
