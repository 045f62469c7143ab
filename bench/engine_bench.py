"""Per-event cost of the engine on typical events (200-2,000 byte params, full 30-record history).

Prints µs/event for tool_call and tool_outcome, and a same-run baseline: the bare cost of one
json parse + canonical dump + sha256 of the same payloads (what any hashing detector must pay).
Run: .venv/bin/python bench/engine_bench.py [--events N] [--preset fast]
(`--preset fast` measures the settings of `loopwarden: {preset: "fast"}`: every opt-in detector on.)
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import time

from tests.reference.engine import LoopDetectionSettings, ToolCall, ToolOutcome, evaluate, new_run_state


def settings_for(preset: str) -> LoopDetectionSettings:
    if preset == "none":
        return LoopDetectionSettings(enabled=True)
    from loopwarden_server.config import load_config_text

    return load_config_text(f'{{loopwarden: {{preset: "{preset}"}}}}').settings_for("")


def payloads(rng: random.Random, count: int) -> list[tuple[str, str, str]]:
    tools = ["read", "exec", "search", "write", "list"]
    out = []
    for index in range(count):
        size = rng.randint(200, 2000)
        params = {"path": f"/src/module_{index % 40}.py", "query": "x" * (size // 2),
                  "options": {"limit": 50, "recursive": True, "tags": ["a", "b", "c"]}}
        result = {"content": [{"type": "text", "text": "y" * size}], "details": {"ok": True, "lines": index % 7}}
        out.append((tools[index % len(tools)], json.dumps(params), json.dumps(result)))
    return out


def measure(fn, items) -> float:
    start = time.perf_counter_ns()
    for item in items:
        fn(item)
    return (time.perf_counter_ns() - start) / len(items) / 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--preset", default="none", help='"none" (enabled: true, reference defaults) or a preset name')
    args = parser.parse_args()
    rng = random.Random(7)
    items = payloads(rng, args.events)
    settings = settings_for(args.preset)
    state = new_run_state(settings)
    # Fill history to its 30-record cap first, so every measured event scans a full history.
    for tool, params, result in items[:40]:
        evaluate(state, ToolCall(tool, params), settings)
        evaluate(state, ToolOutcome(tool, params, result_json=result), settings)

    def call(item):
        evaluate(state, ToolCall(item[0], item[1]), settings)

    def outcome(item):
        evaluate(state, ToolOutcome(item[0], item[1], result_json=item[2]), settings)

    def baseline(item):
        for text in (item[1], item[2]):
            value = json.loads(text)
            hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    rows = {"tool_call": [], "tool_outcome": [], "baseline parse+dump+sha256 (params+result)": []}
    for _ in range(args.rounds):
        rows["tool_call"].append(measure(call, items))
        rows["tool_outcome"].append(measure(outcome, items))
        rows["baseline parse+dump+sha256 (params+result)"].append(measure(baseline, items))
    print(f"engine per-event cost, {args.events} events x {args.rounds} rounds, history {len(state.records)} records")
    for name, values in rows.items():
        print(f"  {name:45s} median {statistics.median(values):7.2f} µs/event   min {min(values):7.2f}")
    pair = statistics.median(rows["tool_call"]) + statistics.median(rows["tool_outcome"])
    base = statistics.median(rows["baseline parse+dump+sha256 (params+result)"])
    print(f"  call+outcome pair {pair:.2f} µs vs baseline {base:.2f} µs: ratio {pair / base:.2f}")


if __name__ == "__main__":
    main()
