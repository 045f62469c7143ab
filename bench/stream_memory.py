"""RSS of the daemon per open idle Evaluate stream (the per-run stream mode's cost).

    .venv/bin/python -m bench.stream_memory --streams 5000

Opens N streams from one asyncio client (each with its x-loopwarden-run-id header and one
event, so each holds a run too), waits until the daemon reports them open, and reports the
daemon's RSS before and after, per stream. The runs' own memory is measured apart (N runs on
one stream) and subtracted.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import grpc  # noqa: E402
from loopwarden.v1 import loopwarden_pb2 as pb  # noqa: E402
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc  # noqa: E402

from tests.support.daemon import running_daemon  # noqa: E402
from tests.support.metrics import value  # noqa: E402


def _event(run_id: str) -> pb.EvaluateRequest:
    return pb.EvaluateRequest(events=[pb.Event(run_id=run_id, tool_call=pb.ToolCall(tool_name="read", params_json="{}"))])


async def _open(target: str, count: int, daemon) -> list:
    channel = grpc.aio.insecure_channel(target)
    stub = pb_grpc.LoopDetectionServiceStub(channel)
    calls = []
    for index in range(count):
        call = stub.Evaluate(metadata=(("x-loopwarden-run-id", f"stream-{index}"),))
        await call.write(_event(f"stream-{index}"))
        await call.read()
        calls.append(call)
    return channel, calls


async def _runs_only(target: str, count: int) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        call = pb_grpc.LoopDetectionServiceStub(channel).Evaluate()
        for index in range(count):
            await call.write(_event(f"run-{index}"))
            await call.read()
        await call.done_writing()


def measure(count: int) -> dict:
    with running_daemon(None, ["--max-streams", str(count + 10)]) as daemon:
        base = daemon.memory_kib("VmRSS")
        asyncio.run(_runs_only(daemon.grpc_target, count))
        runs_only = daemon.memory_kib("VmRSS")

    async def streams() -> tuple[int, int, float]:
        with running_daemon(None, ["--max-streams", str(count + 10)]) as daemon:
            before = daemon.memory_kib("VmRSS")
            channel, calls = await _open(daemon.grpc_target, count, daemon)
            deadline = time.monotonic() + 60
            while value(daemon.scrape(), "loopwarden_active_streams") < count and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            await asyncio.sleep(1)
            after = daemon.memory_kib("VmRSS")
            open_streams = value(daemon.scrape(), "loopwarden_active_streams")
            for call in calls:
                call.cancel()
            await channel.close()
            return before, after, open_streams

    before, after, open_streams = asyncio.run(streams())
    per_stream = ((after - before) - (runs_only - base)) / count
    return {"streams": count, "open_streams_seen": open_streams, "rss_before_kib": before, "rss_after_kib": after,
            "runs_alone_kib": runs_only - base, "per_stream_kib": round(per_stream, 1),
            "per_stream_with_its_run_kib": round((after - before) / count, 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=5000)
    print(json.dumps(measure(parser.parse_args().streams), indent=2))


if __name__ == "__main__":
    main()
