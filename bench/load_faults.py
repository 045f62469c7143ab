"""Load-and-faults run against a real daemon on loopback. Bounded in time and count.

Phase 1 (--seconds, default 60): a mixed workload over several streams from a separate client
process: looping runs (warnings, blocks), ordinary runs, guard aborts after compaction retries,
malformed events and run ends, while the config file is rewritten every 2 s and SIGHUP is sent
every 5 s, and a third process sends the hostile-input requests in a loop (a million events over
and under the message limit, invalid UTF-8, a 4,301-digit integer in a batch, 1 MiB ids). Prints
events sent, answered, rejected and lost (must be 0), how the hostile requests were answered
(all as documented), and the daemon's peak RSS.

Phase 2: --short-runs (default 1,000,000) distinct runs of one event each, never ended, so the
store must evict to stay under --max-runs; prints the daemon's RSS along the way (it must plateau).

Run: .venv/bin/python bench/load_faults.py [--seconds 60] [--short-runs 1000000] [--json out.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import pathlib
import random
import signal
import subprocess
import sys
import tempfile
import time

import grpc

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loopwarden.v1 import loopwarden_pb2 as pb  # noqa: E402
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc  # noqa: E402

CONFIGS = [
    "{tools: {loopDetection: {enabled: true}}}",
    "{tools: {loopDetection: {enabled: true, warningThreshold: 5, criticalThreshold: 8}}}",
]
SAME = '{"content":[{"type":"text","text":"same"}],"details":{}}'


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_daemon(config_path: str, max_runs: int) -> tuple[subprocess.Popen, str]:
    grpc_port, metrics_port = free_port(), free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "loopwarden", "serve", "--config", config_path, "--listen", f"127.0.0.1:{grpc_port}",
         "--metrics-listen", f"127.0.0.1:{metrics_port}", "--config-poll", "0.5", "--max-runs", str(max_runs),
         "--log-level", "ERROR"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # Drain stderr (abort lines are ERROR) so the daemon never blocks on a full pipe.
    import threading
    threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    target = f"127.0.0.1:{grpc_port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"daemon exited with {process.returncode}")
        try:
            with grpc.insecure_channel(target) as ch:
                health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=1)
            return process, target
        except grpc.RpcError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("daemon did not start")


def _event(rng: random.Random, worker: int, n: int) -> list[pb.Event]:
    """One step of the mixed workload: usually a call + outcome pair."""
    roll = rng.random()
    if roll < 0.08:  # malformed
        return [rng.choice([
            pb.Event(run_id="", seq=n, tool_call=pb.ToolCall(tool_name="read")),
            pb.Event(run_id=f"w{worker}-bad", seq=n),
            pb.Event(run_id=f"w{worker}-bad", seq=n, tool_call=pb.ToolCall(tool_name="read", params_json="{nope")),
        ])]
    if roll < 0.10:
        run = f"w{worker}-guard-{n // 50}"
        return [pb.Event(run_id=run, seq=n, compaction_retry=pb.CompactionRetry())]
    if roll < 0.12:
        return [pb.Event(run_id=f"w{worker}-loop-{rng.randrange(40)}", seq=n, run_end=pb.RunEnd())]
    if roll < 0.55:
        run, params, result = f"w{worker}-loop-{rng.randrange(40)}", '{"path":"/same"}', SAME
    elif roll < 0.65:
        run, params, result = f"w{worker}-guard-{n // 50}", '{"action":"lookup"}', SAME
    else:
        i = rng.randrange(10**6)
        size = rng.randint(200, 2000)
        run = f"w{worker}-ok-{rng.randrange(400)}"
        params = json.dumps({"path": f"/f/{i}", "q": "x" * size})
        result = json.dumps({"content": [{"type": "text", "text": f"line {i}"}], "details": {"n": i}})
    tool = "read"
    return [pb.Event(run_id=run, seq=n, tool_call=pb.ToolCall(tool_name=tool, params_json=params)),
            pb.Event(run_id=run, seq=n, tool_outcome=pb.ToolOutcome(tool_name=tool, params_json=params, result_json=result))]


async def _mixed_stream(target: str, worker: int, deadline: float, counts: dict) -> None:
    rng = random.Random(worker)
    async with grpc.aio.insecure_channel(target) as ch:
        call = pb_grpc.LoopDetectionServiceStub(ch).Evaluate()
        n = 0
        while time.monotonic() < deadline:
            events = _event(rng, worker, n)
            n += 1
            await call.write(pb.EvaluateRequest(events=events))
            counts["sent"] += len(events)
            response = await call.read()
            counts["answered"] += len(response.verdicts)
            for verdict in response.verdicts:
                name = pb.Action.Name(verdict.action)
                counts[name] = counts.get(name, 0) + 1
        await call.done_writing()


def mixed_worker(target: str, seconds: float, streams: int, first: int, queue) -> None:
    counts: dict = {"sent": 0, "answered": 0}
    deadline = time.monotonic() + seconds

    async def main() -> None:
        await asyncio.gather(*[_mixed_stream(target, first + i, deadline, counts) for i in range(streams)])

    asyncio.run(main())
    queue.put(counts)


async def _short_runs(target: str, start: int, stop: int, batch: int) -> int:
    sent = 0
    async with grpc.aio.insecure_channel(target) as ch:
        call = pb_grpc.LoopDetectionServiceStub(ch).Evaluate()
        for base in range(start, stop, batch):
            events = [pb.Event(run_id=f"short-{i}", seq=i, tool_call=pb.ToolCall(tool_name="read", params_json='{"p":1}'))
                      for i in range(base, min(base + batch, stop))]
            await call.write(pb.EvaluateRequest(events=events))
            response = await call.read()
            assert len(response.verdicts) == len(events)
            sent += len(events)
        await call.done_writing()
    return sent


def _raw_request(*events: bytes) -> bytes:
    def varint(value: int) -> bytes:
        out = bytearray()
        while True:
            byte, value = value & 0x7F, value >> 7
            out.append(byte | (0x80 if value else 0))
            if not value:
                return bytes(out)
    return b"".join(b"\x0a" + varint(len(event)) + event for event in events)


# The crafted requests of the hostile-input issue, each with the status it must end its stream with.
HOSTILE_REFUSALS = (
    ("million_events_over_message_limit", _raw_request(*[b"\x0a\x01r\x52\x00"] * 1_000_000),
     grpc.StatusCode.RESOURCE_EXHAUSTED),
    ("million_empty_events", _raw_request(*[b""] * 1_000_000), grpc.StatusCode.RESOURCE_EXHAUSTED),
    ("invalid_utf8", _raw_request(b"\x0a\x02\xff\xfe\x52\x00"), grpc.StatusCode.INVALID_ARGUMENT),
)


def hostile_worker(target: str, seconds: float, queue) -> None:
    """Crafted requests in a loop: the refused ones must end with their documented status; the
    accepted ones (a huge integer in a batch, 1 MiB ids) must be answered event by event."""
    counts = {"requests": 0, "refused_as_documented": 0, "unexpected": 0, "events_sent": 0, "events_answered": 0}
    deadline = time.monotonic() + seconds
    huge_id = "i" * (1024 * 1024)
    with grpc.insecure_channel(target, options=[("grpc.max_send_message_length", 16 * 1024 * 1024)]) as ch:
        raw = ch.stream_stream("/loopwarden.v1.LoopDetectionService/Evaluate", request_serializer=None,
                               response_deserializer=pb.EvaluateResponse.FromString)
        stub = pb_grpc.LoopDetectionServiceStub(ch)
        n = 0
        while time.monotonic() < deadline:
            name, request, status = HOSTILE_REFUSALS[n % len(HOSTILE_REFUSALS)]
            n += 1
            counts["requests"] += 1
            try:
                list(raw(iter([request]), timeout=30))
                counts["unexpected"] += 1
            except grpc.RpcError as exc:
                counts["refused_as_documented" if exc.code() == status else "unexpected"] += 1
            batch = [pb.Event(run_id=f"hostile-{n}", seq=1, tool_call=pb.ToolCall(tool_name="read", params_json='{"a":1}')),
                     pb.Event(run_id=f"hostile-{n}", seq=2, tool_call=pb.ToolCall(
                         tool_name="read", params_json='{"a":' + "9" * 4301 + "}")),
                     pb.Event(run_id=f"hostile-{n}", seq=3, agent_id=huge_id, tool_call=pb.ToolCall(tool_name="read"))]
            counts["requests"] += 1
            counts["events_sent"] += len(batch)
            for response in stub.Evaluate(iter([pb.EvaluateRequest(events=batch)]), timeout=30):
                counts["events_answered"] += len(response.verdicts)
                codes = [v.error_code for v in response.verdicts]
                if codes != ["", "invalid_params_json", "agent_id_too_long"]:
                    counts["unexpected"] += 1
    queue.put(counts)


def short_runs_worker(target: str, start: int, stop: int, queue) -> None:
    queue.put(asyncio.run(_short_runs(target, start, stop, 64)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--short-runs", type=int, default=1_000_000)
    parser.add_argument("--max-runs", type=int, default=100_000)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        config_path = os.path.join(tmp, "loopwarden.json5")
        pathlib.Path(config_path).write_text(CONFIGS[0])
        daemon, target = start_daemon(config_path, args.max_runs)
        figures: dict = {"target": target}
        try:
            rss_start = rss_kib(daemon.pid)
            queue: multiprocessing.Queue = multiprocessing.Queue()
            worker = multiprocessing.Process(target=mixed_worker, args=(target, args.seconds, args.streams, 0, queue))
            worker.start()
            hostile_queue: multiprocessing.Queue = multiprocessing.Queue()
            hostile = multiprocessing.Process(target=hostile_worker, args=(target, args.seconds, hostile_queue))
            hostile.start()
            started = time.monotonic()
            reloads = sighups = 0
            while worker.is_alive() and time.monotonic() - started < args.seconds + 30:
                time.sleep(2)
                reloads += 1
                pathlib.Path(config_path + ".tmp").write_text(CONFIGS[reloads % 2])
                os.replace(config_path + ".tmp", config_path)
                if reloads % 3 == 0:
                    daemon.send_signal(signal.SIGHUP)
                    sighups += 1
            counts = queue.get(timeout=60)
            worker.join(timeout=30)
            hostile_counts = hostile_queue.get(timeout=120)
            hostile.join(timeout=30)
            elapsed = time.monotonic() - started
            figures["mixed"] = {
                "seconds": round(elapsed, 1), "streams": args.streams, "config_rewrites": reloads, "sighups": sighups,
                "events_sent": counts["sent"], "events_answered": counts["answered"],
                "lost": counts["sent"] - counts["answered"],
                "rejected": counts.get("ACTION_REJECT", 0), "warned": counts.get("ACTION_WARN", 0),
                "blocked": counts.get("ACTION_BLOCK", 0), "aborted": counts.get("ACTION_ABORT", 0),
                "events_per_second": round(counts["answered"] / elapsed),
                "rss_start_mib": round(rss_start / 1024, 1), "peak_rss_mib": round(rss_kib(daemon.pid, "VmHWM") / 1024, 1),
                "hostile_requests": hostile_counts["requests"],
                "hostile_refused_as_documented": hostile_counts["refused_as_documented"],
                "hostile_unexpected": hostile_counts["unexpected"],
                "hostile_events_lost": hostile_counts["events_sent"] - hostile_counts["events_answered"],
            }
            print("mixed workload with config reloads and malformed events")
            for key, value in figures["mixed"].items():
                print(f"  {key:20s} {value}")

            samples = []
            if args.short_runs:
                print(f"{args.short_runs:,} distinct short-lived runs (max-runs {args.max_runs:,})")
                step = max(args.short_runs // 10, 64)
                done = 0
                t0 = time.monotonic()
                while done < args.short_runs:
                    upto = min(done + step, args.short_runs)
                    halves = [(done, (done + upto) // 2), ((done + upto) // 2, upto)]
                    q2: multiprocessing.Queue = multiprocessing.Queue()
                    procs = [multiprocessing.Process(target=short_runs_worker, args=(target, a, b, q2)) for a, b in halves]
                    for proc in procs:
                        proc.start()
                    sent = sum(q2.get(timeout=600) for _ in procs)
                    for proc in procs:
                        proc.join()
                    assert sent == upto - done
                    done = upto
                    samples.append((done, round(rss_kib(daemon.pid) / 1024, 1)))
                    print(f"  after {done:>9,} runs: RSS {samples[-1][1]:7.1f} MiB")
                rate = args.short_runs / (time.monotonic() - t0)
                plateau = samples[-1][1] / max(s for _, s in samples[len(samples) // 2 - 1: len(samples) // 2 + 1])
                figures["short_runs"] = {"runs": args.short_runs, "rss_mib_samples": samples,
                                         "events_per_second": round(rate), "rss_last_vs_midpoint": round(plateau, 3)}
                print(f"  {rate:,.0f} events/s; RSS at the end / RSS at the midpoint = {plateau:.3f}")
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                daemon.kill()
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(figures, indent=2))
    if figures["mixed"]["lost"] or figures["mixed"]["hostile_events_lost"]:
        raise SystemExit(f"LOST EVENTS: {figures['mixed']['lost']} + {figures['mixed']['hostile_events_lost']} hostile")
    if figures["mixed"]["hostile_unexpected"]:
        raise SystemExit(f"UNEXPECTED ANSWERS TO HOSTILE REQUESTS: {figures['mixed']['hostile_unexpected']}")


if __name__ == "__main__":
    main()
