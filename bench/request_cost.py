"""What one Evaluate request costs in the daemon's process, outside gRPC: µs per event, by part.

grpc_bench.py measures the whole daemon against the echo server; this takes gRPC away and times,
on the same traffic (grpc_bench's `traffic()`, the requests it sends), what each server does with
a request once grpc.aio hands it the bytes:

  echo          the echo server's work: decode the request, one ALLOW per event, encode
  native        loopwarden_core's `Core.evaluate` alone (decode, evaluate, encode, the Summary)
  service       CoreService.evaluate: native + the summary applied to metrics and decision logs
  apply         of which: the summary applied (counters, latency counts, log lines)

Decision log lines are formatted by the daemon's JSON formatter and written to /dev/null, as the
daemon writes them to stderr. Each measure is the best of `--rounds` over the whole traffic,
interleaved, with a fresh core per round (a second pass of the same seqs would be retries).

Run: .venv/bin/python bench/request_cost.py [--pairs 20000] [--batch 64] [--rounds 5]
(another venv's python measures that venv's daemon: an A/B)
"""
from __future__ import annotations

import argparse
import logging
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from bench.grpc_bench import ENABLED, _requests, traffic
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden_server.config import load_config_text
from loopwarden_server.core import CoreService
from loopwarden_server import logs
from loopwarden_server.metrics import Metrics
from loopwarden_server.settings import Limits
from prometheus_client import CollectorRegistry


def echo(data: bytes) -> bytes:
    request = pb.EvaluateRequest.FromString(data)
    return pb.EvaluateResponse(verdicts=[
        pb.Verdict(seq=event.seq, run_id=event.run_id, action=pb.ACTION_ALLOW) for event in request.events
    ]).SerializeToString()


def service() -> CoreService:
    return CoreService(load_config_text(ENABLED), Metrics(CollectorRegistry()), Limits(max_events_per_request=1000),
                       max_runs=200_000, idle_ttl_seconds=3600.0, clock=time.monotonic, instance_id="bench")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    devnull = open(os.devnull, "w")
    try:
        logs.configure("INFO", devnull)  # as the daemon logs, to /dev/null
    except TypeError:  # an older daemon (an A/B from another venv): its handler, to /dev/null
        handler = logging.StreamHandler(devnull)
        handler.setFormatter(logs.JsonLineFormatter())
        logging.getLogger().handlers[:] = [handler]
        logging.getLogger().setLevel(logging.INFO)

    requests = _requests(traffic("cost", args.pairs), args.batch)
    events = sum(len(pb.EvaluateRequest.FromString(r).events) for r in requests)
    best = {"echo": float("inf"), "native": float("inf"), "service": float("inf")}
    answers: list = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        for data in requests:
            echo(data)
        best["echo"] = min(best["echo"], time.perf_counter() - started)

        native = service().native.evaluator
        started = time.perf_counter()
        answers = [native.evaluate(data, "", 1000.0, "", False, False) for data in requests]
        best["native"] = min(best["native"], time.perf_counter() - started)

        core = service()
        started = time.perf_counter()
        for data in requests:
            core.evaluate(data)
        best["service"] = min(best["service"], time.perf_counter() - started)
    # The summary applied alone, on the answers the native pass gave (same deltas and lines).
    core = service()
    apply_best = float("inf")
    for _ in range(args.rounds):
        started = time.perf_counter()
        for answer in answers:
            core._apply(answer.summary, "")
        apply_best = min(apply_best, time.perf_counter() - started)
    best["apply"] = apply_best

    lines = sum(len(a.summary.logs) for a in answers)
    deltas = sum(len(a.summary.counters) for a in answers)
    print(f"{events:,} events in {len(requests):,} requests of {args.batch}; per request: "
          f"{deltas / len(requests):.1f} counter deltas, {lines / len(requests):.2f} log lines")
    for name, seconds in best.items():
        print(f"  {name:8s} {seconds * 1e6 / events:6.2f} µs/event  {seconds * 1e6 / len(requests):8.1f} µs/request")


if __name__ == "__main__":
    main()
