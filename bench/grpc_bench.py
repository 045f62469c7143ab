"""loopwarden against the gRPC ceiling, in one run on one machine.

Starts the daemon (the compiled core) and a bare echo server of the same contract
(bench/echo_server.py), each in its own process, and drives both from a third process with the
same realistic traffic: hundreds of runs, tool_call + tool_outcome pairs with 200-2,000 byte
params and results, a share of runs that loop (so warnings, blocks and guard aborts really
happen). Prints a table with daemon/echo ratios and writes the figures as JSON. Figures, not
pass/fail: the machine is shared and noisy.

Run: .venv/bin/python bench/grpc_bench.py [--quick] [--json bench-results.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import platform
import queue
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor

import grpc

ROOT = pathlib.Path(__file__).resolve().parents[1]
from loopwarden.v1 import loopwarden_pb2 as pb  # noqa: E402

ENABLED = "{tools: {loopDetection: {enabled: true}}}"


# ----------------------------------------------------------------------------- servers
class Server:
    def __init__(self, process: subprocess.Popen, target: str, metrics_url: str | None) -> None:
        self.process, self.target, self.metrics_url = process, target, metrics_url

    def rss_kib(self) -> int:
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def scrape(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as response:
            return response.read().decode()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_daemon(config_text: str, tmp: str, extra: tuple[str, ...] = (), engine: str = "") -> Server:
    config = pathlib.Path(tmp) / f"config-{time.monotonic_ns()}.json5"
    config.write_text(config_text)
    process = subprocess.Popen(
        [sys.executable, "-m", "loopwarden", "serve", "--config", str(config), "--listen", "127.0.0.1:0",
         "--metrics-listen", "127.0.0.1:0", "--max-runs", "200000", "--max-events-per-request", "1000",
         *extra],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for raw in process.stderr:
            if '"listening"' in raw:
                lines.put(json.loads(raw))
    threading.Thread(target=pump, daemon=True).start()
    listening = lines.get(timeout=60)
    metrics_port = listening["metrics_address"].rsplit(":", 1)[1]
    return Server(process, listening["grpc_address"], f"http://127.0.0.1:{metrics_port}/metrics")


def start_echo() -> Server:
    process = subprocess.Popen([sys.executable, str(ROOT / "bench" / "echo_server.py")], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline().split()
    return Server(process, line[1], None)


# ----------------------------------------------------------------------------- traffic
def traffic(prefix: str, pairs: int, runs: int = 400, loop_share: float = 0.2, seed: int = 7) -> list[pb.Event]:
    """Call + outcome pairs over `runs` runs; looping runs repeat params and result exactly."""
    rng = random.Random(seed)
    events: list[pb.Event] = []
    loop_params = json.dumps({"path": "/var/log/app.log", "q": "x" * 600})
    loop_result = json.dumps({"content": [{"type": "text", "text": "no change " + "y" * 500}], "details": {"ok": True}})
    for index in range(pairs):
        run_number = rng.randrange(runs)
        run = f"{prefix}-{run_number}"
        if run_number < runs * loop_share:
            params, result = loop_params, loop_result
            if rng.random() < 0.01:
                events.append(pb.Event(run_id=run, seq=index, compaction_retry=pb.CompactionRetry()))
        else:
            size = rng.randint(200, 2000)
            params = json.dumps({"path": f"/src/{rng.randrange(10**6)}.py", "query": "q" * (size // 2),
                                 "options": {"limit": 50, "recursive": True}})
            result = json.dumps({"content": [{"type": "text", "text": "r" * rng.randint(200, 2000)}],
                                 "details": {"lines": rng.randrange(100)}})
        tool = "read" if index % 3 else "search"
        events.append(pb.Event(run_id=run, seq=index, tool_call=pb.ToolCall(tool_name=tool, params_json=params)))
        events.append(pb.Event(run_id=run, seq=index, tool_outcome=pb.ToolOutcome(
            tool_name=tool, params_json=params, result_json=result)))
    return events


def _requests(events: list[pb.Event], batch: int) -> list[bytes]:
    return [pb.EvaluateRequest(events=events[i:i + batch]).SerializeToString() for i in range(0, len(events), batch)]


# ----------------------------------------------------------------------------- client phases (separate process)
def _raw_evaluate(channel: grpc.aio.Channel):
    return channel.stream_stream("/loopwarden.v1.LoopDetectionService/Evaluate",
                                 request_serializer=lambda b: b, response_deserializer=pb.EvaluateResponse.FromString)


def phase_pipelined(target: str, prefix: str, pairs: int, batch: int) -> dict:
    requests = _requests(traffic(prefix, pairs), batch)
    total_events = sum(1 for _ in traffic(prefix, pairs))

    async def run() -> dict:
        async with grpc.aio.insecure_channel(target) as channel:
            call = _raw_evaluate(channel)()
            answered = 0
            actions: dict[int, int] = {}

            async def reader() -> None:
                nonlocal answered
                for _ in requests:
                    response = await call.read()
                    answered += len(response.verdicts)
                    for verdict in response.verdicts:
                        actions[verdict.action] = actions.get(verdict.action, 0) + 1

            started = time.perf_counter()
            reading = asyncio.create_task(reader())
            for request in requests:
                await call.write(request)
            await reading
            elapsed = time.perf_counter() - started
            await call.done_writing()
        assert answered == total_events
        return {"events_per_s": answered / elapsed, "events": answered,
                "actions": {pb.Action.Name(k).removeprefix("ACTION_").lower(): v for k, v in actions.items()}}
    return asyncio.run(run())


def phase_lockstep(target: str, prefix: str, pairs: int) -> dict:
    requests = _requests(traffic(prefix, pairs), 1)

    async def run() -> dict:
        async with grpc.aio.insecure_channel(target) as channel:
            call = _raw_evaluate(channel)()
            for request in requests[:200]:  # warm up
                await call.write(request)
                await call.read()
            latencies = []
            for request in requests[200:]:
                started = time.perf_counter()
                await call.write(request)
                await call.read()
                latencies.append(time.perf_counter() - started)
            await call.done_writing()
        return _latency_summary(latencies)
    return asyncio.run(run())


def phase_unary(target: str, prefix: str, concurrency: int, total: int) -> dict:
    events = traffic(prefix, total // 2 + 1)[:total]
    requests = [pb.CheckRequest(event=e).SerializeToString() for e in events]

    async def run() -> dict:
        async with grpc.aio.insecure_channel(target) as channel:
            check = channel.unary_unary("/loopwarden.v1.LoopDetectionService/Check", request_serializer=lambda b: b,
                                        response_deserializer=pb.CheckResponse.FromString)
            latencies: list[float] = []
            position = 0

            async def worker() -> None:
                nonlocal position
                while position < len(requests):
                    request = requests[position]
                    position += 1
                    started = time.perf_counter()
                    await check(request)
                    latencies.append(time.perf_counter() - started)

            started = time.perf_counter()
            await asyncio.gather(*[worker() for _ in range(concurrency)])
            elapsed = time.perf_counter() - started
        summary = _latency_summary(latencies)
        summary["requests_per_s"] = len(latencies) / elapsed
        return summary
    return asyncio.run(run())


def phase_fill_runs(target: str, prefix: str, runs: int, records: int) -> dict:
    """Give `runs` runs `records` completed records each (outcome events with distinct params)."""
    async def run() -> dict:
        async with grpc.aio.insecure_channel(target) as channel:
            call = _raw_evaluate(channel)()
            sent = 0
            started = time.perf_counter()
            batch: list[pb.Event] = []
            pending = 0

            async def flush() -> None:
                nonlocal batch, pending
                await call.write(pb.EvaluateRequest(events=batch).SerializeToString())
                pending += 1
                batch = []
                if pending >= 8:  # keep a few requests in flight
                    await call.read()
                    pending -= 1

            for record in range(records):
                for run_number in range(runs):
                    params = f'{{"path":"/f/{record}","pad":"{"p" * 150}"}}'
                    batch.append(pb.Event(run_id=f"{prefix}-{run_number}", seq=record, tool_outcome=pb.ToolOutcome(
                        tool_name="read", params_json=params, result_json=f'{{"details":{{"n":{record}}}}}')))
                    sent += 1
                    if len(batch) == 256:
                        await flush()
            if batch:
                await flush()
            for _ in range(pending):
                await call.read()
            await call.done_writing()
            return {"events": sent, "events_per_s": sent / (time.perf_counter() - started)}
    return asyncio.run(run())


def phase_spread(target: str, prefix: str, runs: int, pairs: int, batch: int) -> dict:
    """Traffic spread over `runs` already-filled runs (for the 1k vs 100k scaling comparison)."""
    rng = random.Random(3)
    events = []
    for index in range(pairs):
        run = f"{prefix}-{rng.randrange(runs)}"
        params = f'{{"path":"/spread/{rng.randrange(50)}","pad":"{"p" * 400}"}}'
        events.append(pb.Event(run_id=run, seq=index, tool_call=pb.ToolCall(tool_name="read", params_json=params)))
        events.append(pb.Event(run_id=run, seq=index, tool_outcome=pb.ToolOutcome(
            tool_name="read", params_json=params, result_json='{"details":{"ok":true}}')))
    requests = _requests(events, batch)

    async def run() -> dict:
        async with grpc.aio.insecure_channel(target) as channel:
            call = _raw_evaluate(channel)()
            started = time.perf_counter()

            async def reader() -> None:
                for _ in requests:
                    await call.read()
            reading = asyncio.create_task(reader())
            for request in requests:
                await call.write(request)
            await reading
            await call.done_writing()
            return {"events_per_s": len(events) / (time.perf_counter() - started)}
    return asyncio.run(run())


def _latency_summary(latencies: list[float]) -> dict:
    ordered = sorted(latencies)
    return {"p50_us": ordered[len(ordered) // 2] * 1e6, "p99_us": ordered[int(len(ordered) * 0.99)] * 1e6,
            "mean_us": statistics.fmean(ordered) * 1e6, "samples": len(ordered)}


# ----------------------------------------------------------------------------- server-side histogram
def histogram(text: str) -> tuple[list[tuple[float, float]], float]:
    from prometheus_client.parser import text_string_to_metric_families
    buckets, count = [], 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "loopwarden_evaluation_duration_seconds":
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    buckets.append((float(sample.labels["le"]), sample.value))
                elif sample.name.endswith("_count"):
                    count = sample.value
    return sorted(buckets), count


def quantiles_between(before: str, after: str) -> dict:
    b_buckets, b_count = histogram(before)
    a_buckets, a_count = histogram(after)
    deltas = [(le, a - b) for (le, a), (_, b) in zip(a_buckets, b_buckets)]
    total = a_count - b_count
    out = {"events": total}
    for q in (0.5, 0.99):
        rank, lower, previous = q * total, 0.0, 0.0
        for le, cumulative in deltas:
            if cumulative >= rank:
                upper = le if le != float("inf") else lower * 2
                share = (rank - previous) / max(cumulative - previous, 1e-9)
                out[f"p{int(q * 100)}_us"] = (lower + (upper - lower) * share) * 1e6
                break
            lower, previous = le, cumulative
    return out


# ----------------------------------------------------------------------------- ghz
def ghz_binary() -> str | None:
    local = ROOT / ".cache" / "tools" / "bin" / "ghz"
    if local.exists():
        return str(local)
    if shutil.which("ghz"):
        return shutil.which("ghz")
    if not shutil.which("go"):
        return None
    local.parent.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["go", "install", "github.com/bojand/ghz/cmd/ghz@v0.121.0"],
                            env={**os.environ, "GOBIN": str(local.parent)}, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        print(f"ghz install failed: {result.stderr[-400:]}", file=sys.stderr)
        return None
    return str(local)


def run_ghz(binary: str, target: str, concurrency: int, total: int) -> dict:
    data = json.dumps({"event": {"run_id": "ghz-{{.RequestNumber}}", "seq": "{{.RequestNumber}}",
                                 "tool_call": {"tool_name": "read", "params_json": json.dumps({"path": "/x", "q": "x" * 600})}}})
    result = subprocess.run(
        [binary, "--insecure", "--proto", str(ROOT / "proto" / "loopwarden" / "v1" / "loopwarden.proto"),
         "--import-paths", str(ROOT / "proto"), "--call", "loopwarden.v1.LoopDetectionService.Check",
         "-c", str(concurrency), "-n", str(total), "-d", data, "--format", "json", target],
        capture_output=True, text=True, timeout=600)
    report = json.loads(result.stdout)
    latencies = {d["percentage"]: d["latency"] / 1000 for d in report.get("latencyDistribution") or []}
    return {"requests_per_s": report["rps"], "p50_us": latencies.get(50), "p99_us": latencies.get(99),
            "errors": sum((report.get("statusCodeDistribution") or {}).get(k, 0) for k in
                          (report.get("statusCodeDistribution") or {}) if k != "OK")}


# ----------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts (a smoke run, not for figures)")
    parser.add_argument("--json", default="bench-results.json", help="where to write the figures")
    parser.add_argument("--runs", type=int, default=100_000, help="live runs for the memory and scaling phases")
    parser.add_argument("--no-ghz", action="store_true")
    parser.add_argument("--engines", default="core",
                        help="daemons to measure beside the echo server (the daemon runs the compiled core only)")
    args = parser.parse_args()
    engines = [engine.strip() for engine in args.engines.split(",") if engine.strip()]
    scale = 0.1 if args.quick else 1.0
    big_runs = max(1000, int(args.runs * (0.05 if args.quick else 1)))
    n = lambda value: max(200, int(value * scale))  # noqa: E731

    results: dict = {"machine": {"python": platform.python_version(), "grpc": grpc.__version__,
                                 "cpus": os.cpu_count(), "platform": platform.platform()},
                     "engines": engines}
    pool = ProcessPoolExecutor(max_workers=1)
    with tempfile.TemporaryDirectory() as tmp:
        echo = start_echo()
        daemons = {engine: start_daemon(ENABLED, tmp, engine=engine) for engine in engines}
        try:
            # One run: the echo server and every engine, one after the other, on the same traffic.
            for name, server in (("echo", echo), *((f"daemon_{e}", d) for e, d in daemons.items())):
                print(f"-- {name}", flush=True)
                r = results.setdefault(name, {})
                before = server.scrape() if server.metrics_url else None
                r["stream_single"] = pool.submit(phase_pipelined, server.target, f"{name}-single", n(15000), 1).result()
                if before is not None:
                    r["server_side_single"] = quantiles_between(before, server.scrape())
                before = server.scrape() if server.metrics_url else None
                r["stream_batch64"] = pool.submit(phase_pipelined, server.target, f"{name}-batch", n(60000), 64).result()
                if before is not None:
                    r["server_side_batch64"] = quantiles_between(before, server.scrape())
                r["lockstep"] = pool.submit(phase_lockstep, server.target, f"{name}-lock", n(2500)).result()
                for concurrency in (1, 8, 64):
                    r[f"unary_c{concurrency}"] = pool.submit(
                        phase_unary, server.target, f"{name}-unary{concurrency}", concurrency, n(6000)).result()
                print(json.dumps(r, indent=1), flush=True)

            ghz = None if args.no_ghz else ghz_binary()
            if ghz:
                for name, server in (("echo", echo), *((f"daemon_{e}", d) for e, d in daemons.items())):
                    for concurrency in (1, 8, 64):
                        results[name][f"ghz_unary_c{concurrency}"] = run_ghz(ghz, server.target, concurrency, n(10000))
            echo.stop()

            for engine, daemon in daemons.items():
                print(f"-- {engine}: memory and scaling: {big_runs:,} runs x 30 records", flush=True)
                rss_before = daemon.rss_kib()
                fill = pool.submit(phase_fill_runs, daemon.target, "mem", big_runs, 30).result()
                rss_after = daemon.rss_kib()
                results[f"memory_{engine}"] = {
                    "runs": big_runs, "records_per_run": 30, "fill_events_per_s": fill["events_per_s"],
                    "rss_before_mib": rss_before / 1024, "rss_after_mib": rss_after / 1024,
                    "bytes_per_run": (rss_after - rss_before) * 1024 / big_runs}
                scaling = {}
                for label, runs, prefix in (("runs_1k", 1000, "mem"), (f"runs_{big_runs // 1000}k", big_runs, "mem")):
                    before = daemon.scrape()
                    throughput = pool.submit(phase_spread, daemon.target, prefix, runs, n(30000), 64).result()
                    scaling[label] = {**throughput, **quantiles_between(before, daemon.scrape())}
                daemon.stop()

                daemon = daemons[engine] = start_daemon(
                    "{tools: {loopDetection: {enabled: true, historySize: 300}}}", tmp, engine=engine)
                pool.submit(phase_fill_runs, daemon.target, "h300", 1000, 300).result()
                before = daemon.scrape()
                throughput = pool.submit(phase_spread, daemon.target, "h300", 1000, n(30000), 64).result()
                scaling["history_300_runs_1k"] = {**throughput, **quantiles_between(before, daemon.scrape())}
                results[f"scaling_{engine}"] = scaling
                daemon.stop()
        finally:
            for server in (*daemons.values(), echo):
                if server.process.poll() is None:
                    server.stop()
            pool.shutdown()

    report(results)
    pathlib.Path(args.json).write_text(json.dumps(results, indent=2))
    print(f"figures written to {args.json}")


def report(results: dict) -> None:
    """One table: every engine beside the echo server, ratios to echo."""
    engines = results["engines"]
    e = results["echo"]
    columns = [results[f"daemon_{engine}"] for engine in engines]
    rows = [
        ("single-event pipelined stream (events/s)", "stream_single", "events_per_s", "≥ 0.9 × echo"),
        ("batches of 64 (events/s)", "stream_batch64", "events_per_s", "≥ 0.8 × echo"),
        ("lock-step round trip p50 (µs)", "lockstep", "p50_us", ""),
        ("lock-step round trip p99 (µs)", "lockstep", "p99_us", ""),
    ]
    for c in (1, 8, 64):
        rows.append((f"unary Check c={c} (req/s)", f"unary_c{c}", "requests_per_s", ""))
        if f"ghz_unary_c{c}" in e:
            rows.append((f"ghz Check c={c} (req/s)", f"ghz_unary_c{c}", "requests_per_s", ""))
    header = "".join(f"{engine:>12s} {'ratio':>6s}" for engine in engines)
    print()
    print(f"{'measure':44s}{header} {'echo':>12s}  target")
    for label, phase, key, target in rows:
        cells = "".join(f"{column[phase][key]:12,.0f} {column[phase][key] / e[phase][key]:6.2f}" for column in columns)
        print(f"{label:44s}{cells} {e[phase][key]:12,.0f}  {target}")
    for label, phase, target in (("server-side p50 / p99 µs, single", "server_side_single", "p99 ≤ 50"),
                                 ("server-side p50 / p99 µs, batch64", "server_side_batch64", "p99 ≤ 20")):
        cells = "".join(f"{column[phase].get('p50_us', 0):8.1f} / {column[phase].get('p99_us', 0):<8.1f}"
                        for column in columns)
        print(f"{label:44s} {cells}  {target}")
    for engine in engines:
        m, s = results[f"memory_{engine}"], results[f"scaling_{engine}"]
        keys = list(s)
        base, big, h = s[keys[0]], s[keys[1]], s["history_300_runs_1k"]
        print(f"{engine}: bytes per live run (30 records) {m['bytes_per_run']:,.0f} (target ≤ 3,072); "
              f"batch64 ev/s 1k vs {keys[1]}: {base['events_per_s']:,.0f} vs {big['events_per_s']:,.0f} "
              f"({big['events_per_s'] / base['events_per_s']:.2f}); server p50 µs {base.get('p50_us', 0):.1f} vs "
              f"{big.get('p50_us', 0):.1f}; historySize 300: {h['events_per_s']:,.0f} ev/s, p50 {h.get('p50_us', 0):.1f} µs")


if __name__ == "__main__":
    main()
