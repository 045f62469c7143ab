"""Measure every detector, and the `fast` preset, on the real traces: good runs warned / blocked
per trace set, and how early each injected loop pattern is blocked.

Every run of `traces/` (vendored in the repository; see its README) is a good run: a setting that
blocks one is a false positive. Loops are injected deterministically (fixed seed) into copies of
real runs of each set, one loop per copy, at a random point; "calls until block" counts tool calls
from the loop's first call (= 1) to the first BLOCK/ABORT of the run at or after it. Everything is
replayed through the daemon's own service layer in-process (the same path as `loopwarden replay
--offline`).

Each opt-in detector is measured alone: the reference defaults plus only that setting, so a figure
belongs to that detector (under `fast` several detectors overlap). The `exec` view of the coding
sets replays their `bash` calls as OpenClaw `exec` results (status, exit code, output), the shape
the exec failure streak reads: the same real commands and outputs, so its false positives are
measured on real failures.

Run: .venv/bin/python bench/real_traces.py [--traces DIR] [--copies N] [--only NAME ...] [--head-to-head]
The tables of docs/extensions.md are copied from one run of this script.

`--head-to-head` replays the same good runs and the same injected loops through three peers'
published tool-call loop rules (bench/peers.py: OpenRouter doomLoop, gemini-cli loop detection,
OpenHands StuckDetector) beside loopwarden's `reference defaults` and `preset fast` (or the
settings named by --only), and prints one table per measure and one per loop kind; the tables of
docs/replay-evaluation.md ("Head-to-head with peers' loop rules") are copied from one run.
"""
from __future__ import annotations

import argparse
import copy
import json
import random
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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
LOOP_LENGTH = 30
REFERENCE = {"tools": {"loopDetection": {"enabled": True}}}

# The τ-bench tools that change something (a booking, an order, a message sent), as an operator
# would declare them: what `duplicateSideEffect` judges. Every other tool of those sets only reads.
MUTATING_TOOLS = [
    "book_reservation", "cancel_reservation", "update_reservation_flights", "update_reservation_baggages",
    "update_reservation_passengers", "send_certificate", "transfer_to_human_agents", "cancel_pending_order",
    "modify_pending_order_items", "modify_pending_order_address", "modify_pending_order_payment",
    "modify_user_address", "return_delivered_order_items", "exchange_delivered_order_items", "send_email",
]
READ_ONLY_TOOLS = ["get_*", "search_*", "find_*", "list_*", "calculate", "think"]
TOOL_CLASSES = {**{name: {"class": "mutating"} for name in MUTATING_TOOLS},
                **{name: {"class": "readOnly"} for name in READ_ONLY_TOOLS}}


def with_reference(loopwarden: dict) -> dict:
    return {**REFERENCE, "loopwarden": loopwarden}


@dataclass(frozen=True)
class Setting:
    """One measured setting: its config and the detector ids it adds (blocks by others are the
    reference's own)."""
    name: str
    config: dict
    detectors: tuple[str, ...] = ()


SETTINGS = [
    Setting("reference defaults", REFERENCE),
    Setting("argumentChurn", with_reference({"argumentChurn": {"enabled": True}}), ("argument_churn",)),
    Setting("errorRepeat", with_reference({"errorRepeat": {"enabled": True}}), ("error_repeat",)),
    Setting("runWideBreaker", with_reference({"runWideBreaker": {"enabled": True}}), ("run_wide_no_progress",)),
    Setting("cycles", with_reference({"cycles": {"enabled": True}}), ("cycle",)),
    Setting("execFailureStreak", with_reference({"execFailureStreak": {"enabled": True}}), ("generic_repeat",)),
    Setting("failureCascade", with_reference({"failureCascade": {"enabled": True}}), ("failure_cascade",)),
    Setting("duplicateSideEffect", with_reference({"duplicateSideEffect": {"enabled": True}, "toolRules": TOOL_CLASSES}),
            ("duplicate_side_effect",)),
    Setting("toolRules ignoreArgs $.nonce", with_reference({"toolRules": {"*": {"ignoreArgs": ["$.nonce"]}}})),
    Setting("sameOutcome", with_reference({"sameOutcome": {"enabled": True}}), ("generic_repeat", "known_poll_no_progress")),
    Setting("preset fast", {"loopwarden": {"preset": "fast"}}),
    Setting("preset fast + tool classes", {"loopwarden": {"preset": "fast", "toolRules": TOOL_CLASSES}}),
]


# ---------------------------------------------------------------------------------------------
# Traces


def load_runs(path: Path) -> dict[str, list[dict]]:
    """Events of each run, in order (run_end included)."""
    runs: dict[str, list[dict]] = defaultdict(list)
    for event in read_trace(path):
        runs[event.data["run_id"]].append(event.data)
    return dict(runs)


MINISWE_OBSERVATION = re.compile(r"\A<returncode>(-?\d+)</returncode>\n(.*)\Z", re.S)


def as_exec(runs: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The coding runs with each `bash` call as an OpenClaw `exec` call: a mini-swe observation
    (`<returncode>N</returncode>` + output) becomes exec's details (status, exitCode, output)."""
    converted = {}
    for run_id, events in runs.items():
        out = []
        for event in events:
            event = dict(event)
            if event.get("tool_name") == "bash":
                event["tool_name"] = "exec"
                if event["kind"] == "tool_outcome" and isinstance(event.get("result"), dict):
                    text = "".join(part.get("text", "") for part in event["result"].get("content", []))
                    match = MINISWE_OBSERVATION.match(text)
                    if match:
                        code, output = int(match.group(1)), match.group(2)
                        event["result"] = exec_result(code, output)
            out.append(event)
        converted[run_id] = out
    return converted


def exec_result(exit_code: int, output: str) -> dict:
    """An OpenClaw exec tool result: the output as text, the process's end in details."""
    return {"content": [{"type": "text", "text": output}],
            "details": {"status": "completed" if exit_code == 0 else "failed", "exitCode": exit_code,
                        "durationMs": 1200, "aggregated": output, "cwd": "/repo"}}


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


def _call_key(call: dict) -> str:
    return json.dumps([call["tool_name"], call.get("params")], sort_keys=True)


def loop_identical_call(run_id, pairs, rng):
    call, done = rng.choice(pairs)
    return [e for i in range(LOOP_LENGTH) for e in _pair(run_id, call["tool_name"], call.get("params"), _result_of(done), f"L{i}")]


def loop_identical_error(run_id, pairs, rng):
    call, _ = rng.choice(pairs)
    error = {"error": f"Error: {call['tool_name']} failed: the request was rejected (code 409)"}
    return [e for i in range(LOOP_LENGTH) for e in _pair(run_id, call["tool_name"], call.get("params"), error, f"L{i}")]


def _distinct_calls(pairs, count: int, rng) -> list[tuple[dict, dict]]:
    """`count` calls of the run with distinct (tool, params); made distinct with a marker when
    the run has fewer."""
    chosen: dict[str, tuple[dict, dict]] = {}
    for call, done in rng.sample(pairs, len(pairs)):
        chosen.setdefault(_call_key(call), (call, done))
    picked = list(chosen.values())[:count]
    while len(picked) < count:
        call, done = pairs[len(picked) % len(pairs)]
        params = call.get("params") if isinstance(call.get("params"), dict) else {}
        picked.append(({**call, "params": {**params, "_step": len(picked)}}, done))
    return picked


def _cycle(period: int):
    def build(run_id, pairs, rng):
        sides = _distinct_calls(pairs, period, rng)
        events = []
        for i in range(LOOP_LENGTH):
            call, done = sides[i % period]
            events += _pair(run_id, call["tool_name"], call.get("params"), _result_of(done), f"L{i}")
        return events
    build.__name__ = f"loop_cycle_{period}"
    return build


def loop_argument_churn(run_id, pairs, rng):
    call, done = rng.choice(pairs)
    params = call.get("params") if isinstance(call.get("params"), dict) else {}
    return [e for i in range(LOOP_LENGTH)
            for e in _pair(run_id, call["tool_name"], {**params, "nonce": f"{rng.getrandbits(48):012x}"}, _result_of(done), f"L{i}")]


def loop_known_poll(run_id, pairs, rng):
    still = {"result": {"content": [{"type": "text", "text": "status: running, no new output"}], "details": {}}}
    return [e for i in range(LOOP_LENGTH) for e in _pair(run_id, "command_status", {"commandId": "c1"}, still, f"L{i}")]


def loop_codex_poll(run_id, pairs, rng):
    """Codex polling an exec session with an empty write_stdin that never shows new output."""
    still = {"result": "Process running with session ID 7\nOutput:\n"}
    return [e for i in range(LOOP_LENGTH)
            for e in _pair(run_id, "write_stdin", {"session_id": 7, "chars": "", "yield_time_ms": 1000}, still, f"L{i}")]


def loop_unknown_tool(run_id, pairs, rng):
    error = {"error": "Tool get_status_report not found"}
    return [e for i in range(LOOP_LENGTH) for e in _pair(run_id, "get_status_report", {"id": i % 3}, error, f"L{i}")]


TRACEBACK = ("Traceback (most recent call last):\n  File \"/repo/run.py\", line 12, in <module>\n    main()\n"
             "ModuleNotFoundError: No module named 'torch'\n")


def loop_exec_failure(run_id, pairs, rng):
    """One failing job under ever-new names (OpenClaw #117637): the command changes in one slice,
    the failure does not, apart from the clock and the pid."""
    events = []
    for i in range(LOOP_LENGTH):
        output = f"[2026-12-02 10:{i // 60:02d}:{i % 60:02d}] worker pid {4100 + i} starting (attempt {i + 1})\n" + TRACEBACK
        events += _pair(run_id, "exec", {"command": f"python job-{i}.py"}, {"result": exec_result(1, output)}, f"L{i}")
    return events


def loop_failure_cascade(run_id, pairs, rng):
    """Every call fails, each a different call with a different error: nothing repeats, nothing works."""
    sides = _distinct_calls(pairs, LOOP_LENGTH, rng)
    events = []
    for i, (call, _) in enumerate(sides):
        error = {"error": f"Error: {call['tool_name']} failed: upstream unavailable (request {rng.getrandbits(32):08x})"}
        events += _pair(run_id, call["tool_name"], call.get("params"), error, f"L{i}")
    return events


def loop_duplicate_send(run_id, pairs, rng):
    """The same e-mail sent again and again, each send succeeding."""
    params = {"to": "customer@example.com", "subject": "Your refund", "body": "Your refund has been issued."}
    sent = {"result": {"content": [{"type": "text", "text": "sent"}], "details": {}}}
    return [e for i in range(LOOP_LENGTH) for e in _pair(run_id, "send_email", params, sent, f"L{i}")]


@dataclass(frozen=True)
class Loop:
    build: Callable
    sets: str = "all"   # "all", or "exec": injected into the coding sets' exec view only
    targets: str = ""   # the setting that targets it (shown beside the reference and fast)


LOOPS = {
    "identical call": Loop(loop_identical_call, targets="sameOutcome"),
    "identical error": Loop(loop_identical_error, targets="errorRepeat"),
    "ping-pong": Loop(_cycle(2), targets="reference defaults"),
    **{f"cycle of {p}": Loop(_cycle(p), targets="cycles") for p in (3, 4, 5, 6)},
    "argument churn (nonce)": Loop(loop_argument_churn, targets="argumentChurn"),
    "nonce, loop key without it": Loop(loop_argument_churn, targets="toolRules ignoreArgs $.nonce"),
    "known poll (command_status)": Loop(loop_known_poll, targets="sameOutcome"),
    "Codex poll (write_stdin, empty)": Loop(loop_codex_poll, targets="sameOutcome"),
    "unknown tool": Loop(loop_unknown_tool, targets="reference defaults"),
    "exec failure, changing command": Loop(loop_exec_failure, sets="exec", targets="execFailureStreak"),
    "failure cascade": Loop(loop_failure_cascade, targets="failureCascade"),
    "duplicate send": Loop(loop_duplicate_send, targets="duplicateSideEffect"),
}


def injected_runs(runs: dict[str, list[dict]], copies: int, seed: int,
                  loops: dict[str, Loop]) -> Iterator[tuple[str, str, list[dict], int]]:
    """(loop kind, run id, events, seq of the loop's first call) for `copies` runs per kind."""
    rng = random.Random(seed)
    candidates = [run_id for run_id, events in sorted(runs.items()) if len(completed_calls(events)) >= 2]
    for kind, loop in loops.items():
        for run_id in rng.sample(candidates, min(copies, len(candidates))):
            events = copy.deepcopy(runs[run_id])
            pairs = completed_calls(events)
            body = [e for e in events if e["kind"] != "run_end"]
            # Insert between two events, never between a call and its outcome.
            boundaries = [0] + [i + 1 for i, e in enumerate(body) if e["kind"] == "tool_outcome"]
            at = rng.choice(boundaries)
            new_id = f"loop/{kind}/{run_id}"
            injected = loop.build(new_id, pairs, rng)
            merged = body[:at] + injected + body[at:] + [{"kind": "run_end"}]
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


@dataclass
class GoodRuns:
    runs: int = 0
    warned: int = 0
    blocked: int = 0
    warned_by: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    blocked_by: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    blocked_ids: list[str] = field(default_factory=list)


def good_run_figures(config: dict, runs: dict[str, list[dict]]) -> GoodRuns:
    figures = GoodRuns(runs=len(runs))
    for run_id, seen in replay(config, iter(runs.items())).items():
        actions = {observed.action for _, observed in seen}
        figures.warned += "warn" in actions
        for detector in {observed.detector for _, observed in seen if observed.action == "warn"}:
            figures.warned_by[detector] += 1
        if actions & set(ENFORCING):
            figures.blocked += 1
            figures.blocked_ids.append(run_id)
            first = next(observed for _, observed in seen if observed.action in ENFORCING)
            figures.blocked_by[first.detector] += 1
    return figures


def calls_until_block(config: dict, injected: list[tuple[str, str, list[dict], int]]) -> dict[str, list[tuple[int, str] | None]]:
    """Per loop kind: (calls until the first block, its detector) of each copy, None if never."""
    verdicts = replay(config, ((run_id, events) for _, run_id, events, _ in injected))
    found: dict[str, list[tuple[int, str] | None]] = defaultdict(list)
    for kind, run_id, _, start_seq in injected:
        call_number = 0
        result = None
        for event, observed in verdicts[run_id]:
            if event["seq"] < start_seq:
                continue
            if event["kind"] == "tool_call":
                call_number += 1
            if observed.action in ENFORCING:
                result = (call_number, observed.detector)
                break
        found[kind].append(result)
    return dict(found)


def describe(values: list[tuple[int, str] | None]) -> str:
    caught = sorted(v[0] for v in values if v is not None)
    missed = len(values) - len(caught)
    if not caught:
        return "never"
    text = f"{caught[0]} / {statistics.median(caught):g} / {caught[-1]}"
    by = sorted({v[1] for v in values if v is not None})
    text += f" ({', '.join(by)})"
    return text + (f", {missed} not blocked" if missed else "")


def cell(figures: GoodRuns) -> str:
    return f"{figures.warned} / {figures.blocked}"


def detail(merged: GoodRuns) -> str:
    warned = ", ".join(f"{d} {n}" for d, n in sorted(merged.warned_by.items())) or "-"
    blocked = ", ".join(f"{d} {n}" for d, n in sorted(merged.blocked_by.items())) or "-"
    return f"warned by: {warned}; blocked by: {blocked}"


# ---------------------------------------------------------------------------------------------
# Head-to-head: loopwarden beside the peers' loop rules of bench/peers.py, on the same events.

HEAD_TO_HEAD_SETTINGS = ("reference defaults", "preset fast")
# The same injected loop as "argument churn (nonce)"; it is there to measure a loopwarden setting
# (toolRules ignoreArgs) that the head-to-head does not run, and would count one pattern twice.
HEAD_TO_HEAD_SKIPPED = ("nonce, loop key without it",)
WARN, STOP = "warn", "stop"
LOOPWARDEN_ENDS = {"warn": WARN, "block": STOP, "abort": STOP}

Verdicts = dict[str, list[tuple[dict, str]]]


def loopwarden_system(config: dict) -> Callable[[Iterator[tuple[str, list[dict]]]], Verdicts]:
    def judge(runs):
        return {run_id: [(event, LOOPWARDEN_ENDS.get(observed.action, "allow")) for event, observed in seen]
                for run_id, seen in replay(config, runs).items()}
    return judge


def peer_system(peer_class) -> Callable[[Iterator[tuple[str, list[dict]]]], Verdicts]:
    def judge(runs):
        verdicts = {}
        for run_id, events in runs:
            peer = peer_class()   # one per run, as each agent run has its own
            verdicts[run_id] = [(event, peer.observe(event)) for event in events]
        return verdicts
    return judge


def calls_until(seen: list[tuple[dict, str]], start_seq: int, wanted: str) -> int | None:
    """The loop call (its first call = 1) that the first `wanted` verdict at or after the loop's
    start comes with; a verdict between calls (on an outcome, or at the run's end) counts as the
    next call, the one it comes before. None within LOOP_LENGTH calls: not within the loop."""
    number = 0
    for event, verdict in seen:
        if event["seq"] < start_seq:
            continue
        if event["kind"] == "tool_call":
            number += 1
        if verdict == wanted:
            if event["kind"] != "tool_call":
                number += 1
            return number if number <= LOOP_LENGTH else None
    return None


@dataclass
class Standing:
    """One system's figures: good runs per set, and each injected loop's calls to warn / stop."""
    good: dict[str, tuple[int, int, int]] = field(default_factory=dict)   # set -> runs, warned, stopped
    stopped_ids: list[str] = field(default_factory=list)
    loops: dict[str, list[tuple[str, int | None, int | None]]] = field(default_factory=lambda: defaultdict(list))


def stand(judge, good_sets: dict[str, dict[str, list[dict]]], injected: dict[str, list]) -> Standing:
    standing = Standing()
    for set_name, runs in good_sets.items():
        warned = stopped = 0
        for run_id, seen in judge(iter(runs.items())).items():
            verdicts = {verdict for _, verdict in seen}
            warned += WARN in verdicts
            if STOP in verdicts:
                stopped += 1
                standing.stopped_ids.append(run_id)
        standing.good[set_name] = (len(runs), warned, stopped)
    for set_name, loops in injected.items():
        seen_by_run = judge((run_id, events) for _, run_id, events, _ in loops)
        for kind, run_id, _, start_seq in loops:
            seen = seen_by_run[run_id]
            standing.loops[set_name].append((kind, calls_until(seen, start_seq, WARN), calls_until(seen, start_seq, STOP)))
    return standing


def median_max(values: list[int]) -> str:
    return f"{statistics.median(values):g} / {max(values)}" if values else "-"


def head_to_head(args, settings: list[Setting]) -> int:
    try:
        from bench import peers
    except ImportError:   # run as a script: bench/ itself is on sys.path
        import peers

    started = time.perf_counter()
    sets = {name: load_runs(args.traces / file) for name, file in TRACE_SETS.items()}
    exec_sets = {f"{name} (exec view)": as_exec(runs) for name, runs in sets.items() if name.startswith("SWE")}
    # The same injected loops as the tables of the main mode (same seed, same order of kinds),
    # without the duplicate kind; a set's exec-view loops count under the set.
    general = {kind: loop for kind, loop in LOOPS.items() if loop.sets == "all"}
    exec_only = {kind: loop for kind, loop in LOOPS.items() if loop.sets == "exec"}
    injected = {name: [i for i in injected_runs(runs, args.copies, args.seed, general) if i[0] not in HEAD_TO_HEAD_SKIPPED]
                for name, runs in sets.items()}
    for name, runs in exec_sets.items():
        injected[name.removesuffix(" (exec view)")] += list(injected_runs(runs, args.copies, args.seed, exec_only))
    kinds = [kind for kind in LOOPS if kind not in HEAD_TO_HEAD_SKIPPED]

    systems = {**{name: peer_system(peer) for name, peer in peers.PEERS.items()},
               **{f"loopwarden {s.name}": loopwarden_system(s.config) for s in settings}}
    standings = {}
    for name, judge in systems.items():
        standings[name] = stand(judge, {**sets, **exec_sets}, injected)
        for run_id in standings[name].stopped_ids[:5]:
            print(f"  {name}: stopped good run `{run_id}`", file=sys.stderr)

    print(f"traces: {args.traces}; {args.copies} injected loops of each kind per set (the exec failure loop in the "
          f"coding sets' exec view), seed {args.seed}, loops of {LOOP_LENGTH} calls; calls counted from the loop's "
          f"first call (= 1); caught = stopped within the loop's {LOOP_LENGTH} calls")
    set_names, good_names = list(sets), [*sets, *exec_sets]

    def good_table(title: str, column: int) -> None:
        print(f"\n#### {title}\n")
        print("| system | " + " | ".join(f"{n} ({len(r)})" for n, r in {**sets, **exec_sets}.items())
              + f" | all four sets ({sum(len(r) for r in sets.values())}) |")
        print("|---" * (len(good_names) + 2) + "|")
        for name, standing in standings.items():
            cells = [str(standing.good[n][column]) for n in good_names]
            print(f"| {name} | " + " | ".join(cells) + f" | {sum(standing.good[n][column] for n in set_names)} |")

    good_table("Good runs warned (any warning)", 1)
    good_table("Good runs stopped (a call refused or the run halted)", 2)

    def loop_table(title: str, cell: Callable[[list[tuple[str, int | None, int | None]]], str]) -> None:
        print(f"\n#### {title}\n")
        print("| system | " + " | ".join(f"{n} ({len(injected[n])})" for n in set_names)
              + f" | all ({sum(len(injected[n]) for n in set_names)}) |")
        print("|---" * (len(set_names) + 2) + "|")
        for name, standing in standings.items():
            every = [row for n in set_names for row in standing.loops[n]]
            print(f"| {name} | " + " | ".join(cell(standing.loops[n]) for n in set_names) + f" | {cell(every)} |")

    loop_table("Injected loops caught (stopped within the loop)",
               lambda rows: f"{sum(stop is not None for _, _, stop in rows)} / {len(rows)}")
    loop_table("Calls to the first warning, median / max (in brackets: the loops warned within the loop)",
               lambda rows: (f"{median_max([w for _, w, _ in rows if w is not None])} "
                             f"({sum(w is not None for _, w, _ in rows)})"))
    loop_table("Calls to the stop, median / max (loops caught)",
               lambda rows: median_max([stop for _, _, stop in rows if stop is not None]))

    print("\n#### Per injected loop kind: caught / injected, calls to the stop median / max\n")
    print("| injected loop | " + " | ".join(standings) + " |")
    print("|---" * (len(standings) + 1) + "|")
    for kind in kinds:
        cells = []
        for standing in standings.values():
            stops = [stop for n in set_names for k, _, stop in standing.loops[n] if k == kind]
            caught = [stop for stop in stops if stop is not None]
            cells.append(f"{len(caught)} / {len(stops)}" + (f": {median_max(caught)}" if caught else ""))
        print(f"| {kind} | " + " | ".join(cells) + " |")
    print(f"\n({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES,
                        help=f"the folder of trace sets (default: {DEFAULT_TRACES.relative_to(ROOT)}/ in the repository)")
    parser.add_argument("--copies", type=int, default=20, help="runs of each set per injected loop kind")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--only", nargs="*", default=None, help="names of SETTINGS to measure")
    parser.add_argument("--config", type=Path, default=None, help="measure this JSON5 config file instead")
    parser.add_argument("--head-to-head", action="store_true",
                        help="loopwarden beside three peers' loop rules (bench/peers.py); --only picks the "
                             f"loopwarden settings (default: {', '.join(HEAD_TO_HEAD_SETTINGS)})")
    args = parser.parse_args(argv)
    settings = list(SETTINGS)
    if args.head_to_head and args.config is None and not args.only:
        settings = [s for s in settings if s.name in HEAD_TO_HEAD_SETTINGS]
    if args.config is not None:
        import json5
        settings = [Setting(str(args.config), json5.loads(args.config.read_text()))]
    elif args.only:
        unknown = set(args.only) - {s.name for s in settings}
        if unknown:
            parser.error(f"--only: no setting named {sorted(unknown)}; the settings: {[s.name for s in SETTINGS]}")
        settings = [s for s in settings if s.name in args.only]
    if args.head_to_head:
        return head_to_head(args, settings)
    started = time.perf_counter()
    sets = {name: load_runs(args.traces / file) for name, file in TRACE_SETS.items()}
    exec_sets = {f"{name} (exec view)": as_exec(runs) for name, runs in sets.items() if name.startswith("SWE")}
    general = {kind: loop for kind, loop in LOOPS.items() if loop.sets == "all"}
    exec_only = {kind: loop for kind, loop in LOOPS.items() if loop.sets == "exec"}
    injected = {name: list(injected_runs(runs, args.copies, args.seed, general)) for name, runs in sets.items()}
    injected.update({name: list(injected_runs(runs, args.copies, args.seed, exec_only)) for name, runs in exec_sets.items()})
    all_sets = {**sets, **exec_sets}
    print(f"traces: {args.traces}; {args.copies} injected loops of each kind per set, seed {args.seed}, "
          f"loops of {LOOP_LENGTH} calls; the exec view replays the coding sets' bash calls as exec results")

    good: dict[str, dict[str, GoodRuns]] = {}
    loops: dict[str, dict[str, list]] = {}
    for setting in settings:
        good[setting.name] = {}
        loops[setting.name] = defaultdict(list)
        for set_name, runs in all_sets.items():
            figures = good_run_figures(setting.config, runs)
            good[setting.name][set_name] = figures
            for run_id in figures.blocked_ids[:5]:
                print(f"  {setting.name}: blocked good run `{run_id}`", file=sys.stderr)
            for kind, values in calls_until_block(setting.config, injected[set_name]).items():
                loops[setting.name][kind] += values

    print("\n#### Good runs warned / blocked, per setting (each opt-in detector alone over the reference defaults)\n")
    print("| setting | " + " | ".join(f"{name} ({len(runs)})" for name, runs in all_sets.items()) + " | by detector |")
    print("|---" * (len(all_sets) + 2) + "|")
    for setting in settings:
        merged = GoodRuns()
        for figures in good[setting.name].values():
            for d, n in figures.warned_by.items():
                merged.warned_by[d] += n
            for d, n in figures.blocked_by.items():
                merged.blocked_by[d] += n
        cells = " | ".join(cell(good[setting.name][name]) for name in all_sets)
        print(f"| {setting.name} | {cells} | {detail(merged)} |")

    names = [s.name for s in settings]
    print("\n#### Injected loops: calls until the block, min / median / max (the detectors that blocked)\n")
    shown = [n for n in ("reference defaults", "preset fast", "preset fast + tool classes") if n in names]
    print("| injected loop | copies | " + " | ".join(shown) + " | the setting that targets it alone |")
    print("|---" * (len(shown) + 3) + "|")
    for kind, loop in LOOPS.items():
        copies = len(next(iter(loops.values()))[kind]) if loops else 0
        cells = " | ".join(describe(loops[n][kind]) for n in shown)
        target = (f"`{loop.targets}`: {describe(loops[loop.targets][kind])}"
                  if loop.targets in names and loop.targets not in shown else "-")
        print(f"| {kind} | {copies} | {cells} | {target} |")
    print(f"\n({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
