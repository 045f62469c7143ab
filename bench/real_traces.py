"""Measure settings on the real traces: good runs warned / blocked, and calls until the block
of loops injected into copies of real runs.

Every run of `traces/` (vendored in the repository; see its README) is a good run: a setting that
blocks one is a false positive. Loops are injected deterministically (fixed seed) into copies of
real runs of each set, one loop per copy, at a random point; "calls until block" counts tool calls
from the loop's first call (= 1) to the first BLOCK/ABORT of the run at or after it. Everything is
replayed through the daemon's own service layer in-process (the same path as `loopwarden replay
--offline`).

Run: .venv/bin/python bench/real_traces.py [--traces DIR] [--copies N] [--only NAME ...]
The tables of docs/extensions.md are copied from one run of this script.
"""
from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from loopwarden.replay import read_trace
from loopwarden_server.config import load_config_text
from loopwarden_server.replay.offline import OfflineEngine, quiet_daemon_logs

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACES = ROOT / "traces"
TRACE_SETS = {
    "τ-bench airline": "tau-bench-airline-gpt-4o.jsonl",
    "τ-bench retail": "tau-bench-retail-grok3.jsonl.gz",
    "SWE-bench gemini": "miniswe-gemini3pro-verified.jsonl.gz",
    "SWE-bench deepseek": "miniswe-deepseek-swebench.jsonl.gz",
}
ENFORCING = ("block", "abort")

# The settings measured, by name: the loopwarden config each one is.
CONFIGS = {
    "reference defaults": {"tools": {"loopDetection": {"enabled": True}}},
    "argumentChurn (recommended)": {"tools": {"loopDetection": {"enabled": True}},
                                    "loopwarden": {"argumentChurn": {"enabled": True}}},
    "errorRepeat (recommended)": {"tools": {"loopDetection": {"enabled": True}},
                                  "loopwarden": {"errorRepeat": {"enabled": True}}},
    "preset fast": {"loopwarden": {"preset": "fast"}},
}
LOOP_LENGTH = 30


# ---------------------------------------------------------------------------------------------
# Traces


def load_runs(path: Path) -> dict[str, list[dict]]:
    """Events of each run, in order (run_end included)."""
    runs: dict[str, list[dict]] = defaultdict(list)
    for event in read_trace(path):
        runs[event.data["run_id"]].append(event.data)
    return dict(runs)


def completed_calls(events: list[dict]) -> list[tuple[dict, dict]]:
    """(tool_call, tool_outcome) pairs of a run, matched by call id and params, in call order."""
    pending: dict[tuple, dict] = {}
    pairs = []
    for event in events:
        key = (event.get("tool_call_id"), json.dumps(event.get("params"), sort_keys=True), event.get("tool_name"))
        if event["kind"] == "tool_call":
            pending[key] = event
        elif event["kind"] == "tool_outcome" and key in pending:
            pairs.append((pending.pop(key), event))
    return pairs


# ---------------------------------------------------------------------------------------------
# Injected loops: each builds the loop's events from the run it goes into.


def _pair(run_id: str, tool: str, params, outcome: dict, tag: str) -> list[dict]:
    call = {"run_id": run_id, "kind": "tool_call", "tool_name": tool, "tool_call_id": tag, "params": params}
    done = {"run_id": run_id, "kind": "tool_outcome", "tool_name": tool, "tool_call_id": tag, "params": params}
    done.update(outcome)
    return [call, done]


def _result_of(outcome_event: dict) -> dict:
    return {"error": outcome_event["error"]} if "error" in outcome_event else {"result": outcome_event.get("result")}


def loop_identical_call(run_id, pairs, rng):
    call, done = rng.choice(pairs)
    return [e for i in range(LOOP_LENGTH) for e in _pair(run_id, call["tool_name"], call.get("params"), _result_of(done), f"L{i}")]


def loop_identical_error(run_id, pairs, rng):
    call, _ = rng.choice(pairs)
    error = {"error": f"Error: {call['tool_name']} failed: the request was rejected (code 409)"}
    return [e for i in range(LOOP_LENGTH) for e in _pair(run_id, call["tool_name"], call.get("params"), error, f"L{i}")]


def loop_ping_pong(run_id, pairs, rng):
    (a, a_done), (b, b_done) = rng.sample(pairs, 2)
    if json.dumps([a["tool_name"], a.get("params")]) == json.dumps([b["tool_name"], b.get("params")]):
        b = {**b, "params": {"_other": True, **(b.get("params") or {})}}
    sides = [(a, a_done), (b, b_done)]
    events = []
    for i in range(LOOP_LENGTH):
        call, done = sides[i % 2]
        events += _pair(run_id, call["tool_name"], call.get("params"), _result_of(done), f"L{i}")
    return events


def loop_argument_churn(run_id, pairs, rng):
    call, done = rng.choice(pairs)
    params = call.get("params") if isinstance(call.get("params"), dict) else {}
    return [e for i in range(LOOP_LENGTH)
            for e in _pair(run_id, call["tool_name"], {**params, "nonce": f"{rng.getrandbits(48):012x}"}, _result_of(done), f"L{i}")]


def loop_known_poll(run_id, pairs, rng):
    still = {"result": {"content": [{"type": "text", "text": "status: running, no new output"}], "details": {}}}
    return [e for i in range(LOOP_LENGTH) for e in _pair(run_id, "command_status", {"commandId": "c1"}, still, f"L{i}")]


def loop_unknown_tool(run_id, pairs, rng):
    error = {"error": "Tool get_status_report not found"}
    return [e for i in range(LOOP_LENGTH) for e in _pair(run_id, "get_status_report", {"id": i % 3}, error, f"L{i}")]


LOOPS = {
    "identical call": loop_identical_call,
    "identical error": loop_identical_error,
    "ping-pong": loop_ping_pong,
    "argument churn (nonce)": loop_argument_churn,
    "known poll (command_status)": loop_known_poll,
    "unknown tool": loop_unknown_tool,
}


def injected_runs(runs: dict[str, list[dict]], copies: int, seed: int) -> Iterator[tuple[str, str, list[dict], int]]:
    """(loop kind, run id, events, seq of the loop's first call) for `copies` runs per kind."""
    rng = random.Random(seed)
    candidates = [run_id for run_id, events in sorted(runs.items()) if len(completed_calls(events)) >= 2]
    for kind, build in LOOPS.items():
        for run_id in rng.sample(candidates, min(copies, len(candidates))):
            events = copy.deepcopy(runs[run_id])
            pairs = completed_calls(events)
            body = [e for e in events if e["kind"] != "run_end"]
            # Insert between two events, never between a call and its outcome.
            boundaries = [0] + [i + 1 for i, e in enumerate(body) if e["kind"] == "tool_outcome"]
            at = rng.choice(boundaries)
            new_id = f"loop/{kind}/{run_id}"
            loop = build(new_id, pairs, rng)
            merged = body[:at] + loop + body[at:] + [{"kind": "run_end"}]
            for seq, event in enumerate(merged, 1):
                event["run_id"], event["seq"] = new_id, seq
            yield kind, new_id, merged, at + 1


# ---------------------------------------------------------------------------------------------
# Scoring


def replay(config: dict, runs: Iterator[tuple[str, list[dict]]]) -> dict[str, list[tuple[dict, object]]]:
    engine = OfflineEngine(load_config_text(json.dumps(config)))
    verdicts: dict[str, list[tuple[dict, object]]] = {}
    with quiet_daemon_logs():
        for run_id, events in runs:
            verdicts[run_id] = [(event, engine.judge(event)) for event in events]
    return verdicts


def good_run_figures(config: dict, runs: dict[str, list[dict]]) -> tuple[int, int, dict[str, int], dict[str, int], list[str]]:
    """(runs warned, runs blocked, warned runs per detector, blocked runs per detector, blocked run ids)."""
    warned = blocked = 0
    warned_by: dict[str, int] = defaultdict(int)
    by_detector: dict[str, int] = defaultdict(int)
    blocked_ids = []
    for run_id, seen in replay(config, iter(runs.items())).items():
        actions = {observed.action for _, observed in seen}
        warned += "warn" in actions
        for detector in {observed.detector for _, observed in seen if observed.action == "warn"}:
            warned_by[detector] += 1
        if actions & set(ENFORCING):
            blocked += 1
            blocked_ids.append(run_id)
            first = next(observed for _, observed in seen if observed.action in ENFORCING)
            by_detector[first.detector] += 1
    return warned, blocked, dict(warned_by), dict(by_detector), blocked_ids


def calls_until_block(config: dict, injected: list[tuple[str, str, list[dict], int]]) -> dict[str, list[int | None]]:
    verdicts = replay(config, ((run_id, events) for _, run_id, events, _ in injected))
    found: dict[str, list[int | None]] = defaultdict(list)
    for kind, run_id, _, start_seq in injected:
        call_number = 0
        result = None
        for event, observed in verdicts[run_id]:
            if event["seq"] < start_seq:
                continue
            if event["kind"] == "tool_call":
                call_number += 1
            if observed.action in ENFORCING:
                result = call_number
                break
        found[kind].append(result)
    return dict(found)


def describe(values: list[int | None]) -> str:
    caught = sorted(v for v in values if v is not None)
    missed = len(values) - len(caught)
    if not caught:
        return f"never ({missed} missed)"
    text = f"{caught[0]} / {statistics.median(caught):g} / {caught[-1]}"
    return text + (f" ({missed} not blocked)" if missed else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES,
                        help=f"the folder of trace sets (default: {DEFAULT_TRACES.relative_to(ROOT)}/ in the repository)")
    parser.add_argument("--copies", type=int, default=20, help="runs of each set per injected loop kind")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--only", nargs="*", default=None, help="names of CONFIGS to measure")
    parser.add_argument("--config", type=Path, default=None, help="measure this JSON5 config file instead")
    args = parser.parse_args(argv)
    configs = dict(CONFIGS)
    if args.config is not None:
        import json5
        configs = {str(args.config): json5.loads(args.config.read_text())}
    elif args.only:
        configs = {name: configs[name] for name in args.only}
    started = time.perf_counter()
    sets = {name: load_runs(args.traces / file) for name, file in TRACE_SETS.items()}
    injected = {name: list(injected_runs(runs, args.copies, args.seed)) for name, runs in sets.items()}
    print(f"traces: {args.traces}; {args.copies} injected loops of each kind per set, seed {args.seed}, "
          f"loops of {LOOP_LENGTH} calls")
    for config_name, config in configs.items():
        print(f"\n### {config_name}: `{json.dumps(config, separators=(',', ':'))}`\n")
        print("| trace set | runs | good runs warned | warned by (runs) | good runs blocked | blocked by |")
        print("|---|---|---|---|---|---|")
        loops: dict[str, list[int | None]] = defaultdict(list)
        for set_name, runs in sets.items():
            warned, blocked, warned_by, by_detector, blocked_ids = good_run_figures(config, runs)
            warn_detail = ", ".join(f"{d} {n}" for d, n in sorted(warned_by.items())) or "-"
            detail = ", ".join(f"{d} {n}" for d, n in sorted(by_detector.items())) or "-"
            print(f"| {set_name} | {len(runs)} | {warned} | {warn_detail} | {blocked} | {detail} |")
            for run_id in blocked_ids[:5]:
                print(f"|   blocked: `{run_id}` | | | | |", file=sys.stderr)
            for kind, values in calls_until_block(config, injected[set_name]).items():
                loops[kind] += values
        print("\n| injected loop | loops | calls until the block (min / median / max) |")
        print("|---|---|---|")
        for kind, values in loops.items():
            print(f"| {kind} | {len(values)} | {describe(values)} |")
    print(f"\n({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
