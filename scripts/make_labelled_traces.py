#!/usr/bin/env python3
"""Build the labelled replay set: real τ-bench runs as negatives, loops injected into copies as positives.

Negatives: the 200 real GPT-4o τ-bench airline runs of traces/ (none loops), referenced by the
manifest, not copied. Positives: copies of those runs (new run ids) with one loop injected
at a random point, of six kinds (see loopwarden_server.replay.labelled.LOOP_KINDS): generic
repeats, `process` polls, `command_status` polls, ping-pongs, unknown-tool retries and
post-compaction repeats. Injected calls reuse the run's own tools, arguments and results where
the kind allows; poll and unknown-tool loops use tools an agent could plausibly have, with
arguments taken from the run (its reservations, user, flights).

A trace is what the agent did *without* loopwarden: the calls after a block still happen and
keep their original results. Replaying it shows where loopwarden would have stepped in.

Deterministic: a fixed seed, and the gzip output carries no timestamp. Run from anywhere:

    python scripts/make_labelled_traces.py            # writes tests/replay/labelled/
    python scripts/make_labelled_traces.py --out DIR --tau PATH
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import string
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TAU = REPO / "traces" / "tau-bench-airline-gpt-4o.jsonl"
DEFAULT_OUT = REPO / "tests" / "replay" / "labelled"
MANIFEST_NAME = "manifest.json"
POSITIVES_NAME = "positives.jsonl.gz"

SEED = 20250808
PER_KIND = 24
MANIFEST_FORMAT = "loopwarden-labelled-set/1"  # = loopwarden_server.replay.labelled.MANIFEST_FORMAT

# The documented default thresholds: loops are made long enough to reach the level each kind is
# enforced at (block or abort), plus a few calls, so a replay shows both the first verdict and
# the enforcement. The generator does not need the thresholds to be right: the evaluation measures.
WARNING, CRITICAL, UNKNOWN_TOOL, COMPACTION_WINDOW = 10, 20, 10, 3
EXTRA_CALLS = 5

KINDS = {  # kind -> expected detector
    "generic_repeat": "generic_repeat",
    "process_poll": "known_poll_no_progress",
    "command_status_poll": "known_poll_no_progress",
    "ping_pong": "ping_pong",
    "unknown_tool": "unknown_tool_repeat",
    "post_compaction": "post_compaction_guard",
}

READ_ONLY_PREFIXES = ("get_", "search_", "list_")
THINKING_TOOLS = ("calculate", "think")

# Plausible airline tools the τ-bench agent does not have.
UNKNOWN_TOOLS = ("get_flight_status", "lookup_reservation", "check_seat_availability", "get_baggage_policy",
                 "search_flights", "refund_reservation", "modify_booking", "get_fare_rules")
UNKNOWN_TOOL_ERRORS = (
    "Error: Tool {name} not found",
    "Error: Unknown tool: {name}",
    "Error: tool '{name}' is not available",
    'Unknown tool "{name}". Available tools: book_reservation, calculate, cancel_reservation, get_reservation_details, '
    "get_user_details, list_all_airports, search_direct_flight, search_onestop_flight, send_certificate, think, "
    "transfer_to_human_agents, update_reservation_baggages, update_reservation_flights, update_reservation_passengers",
)
SESSION_WORDS = ("amber", "brisk", "calm", "dusty", "eager", "faint", "gentle", "hollow", "keen", "lucky",
                 "otter", "harbor", "meadow", "falcon", "cedar", "ember", "summit", "willow", "comet", "delta")


class GeneratorError(Exception):
    pass


@dataclass
class Step:
    """One tool call of a real run and its outcome (the τ-bench trace pairs them)."""

    call: dict[str, Any]
    outcome: dict[str, Any]

    @property
    def tool(self) -> str:
        return self.call["tool_name"]

    @property
    def signature(self) -> str:
        return self.tool.strip().lower() + ":" + json.dumps(self.call.get("params"), sort_keys=True)

    @property
    def failed(self) -> bool:
        return "error" in self.outcome


@dataclass
class Run:
    run_id: str
    steps: list[Step]

    def seen_before(self, index: int) -> set[str]:
        return {step.signature for step in self.steps[:index]}


# ---------------------------------------------------------------------------------------------
# Reading the real runs


def read_runs(path: Path) -> list[Run]:
    if not path.is_file():
        raise GeneratorError(
            f"τ-bench trace not found: {path}\n"
            f"The negatives are the real runs vendored at {os.path.relpath(DEFAULT_TAU, REPO)} in the "
            f"repository; pass --tau PATH if they live elsewhere.")
    events: dict[str, list[dict[str, Any]]] = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                event = json.loads(line)
                events.setdefault(event["run_id"], []).append(event)
    runs = []
    for run_id, run_events in events.items():
        if run_events[-1]["kind"] != "run_end":
            raise GeneratorError(f"{path}: run {run_id} does not end with run_end")
        body = run_events[:-1]
        steps = [Step(call, outcome) for call, outcome in zip(body[::2], body[1::2])]
        if len(body) % 2 or any(s.call["kind"] != "tool_call" or s.outcome["kind"] != "tool_outcome"
                                or s.call["tool_call_id"] != s.outcome["tool_call_id"] for s in steps):
            raise GeneratorError(f"{path}: run {run_id} is not a sequence of (tool_call, tool_outcome) pairs")
        runs.append(Run(run_id, steps))
    return runs


def strip(event: dict[str, Any]) -> dict[str, Any]:
    """An event without its run id and seq (they are assigned when the copy is assembled)."""
    return {key: value for key, value in event.items() if key not in ("run_id", "seq")}


def facts(run: Run) -> dict[str, list[str]]:
    """Identifiers the run talks about, in order of appearance: for realistic injected arguments."""
    found: dict[str, list[str]] = {"reservation_id": [], "user_id": [], "flight_number": [], "date": []}

    def visit(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in found and isinstance(item, str) and item not in found[key]:
                    found[key].append(item)
                visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)

    for step in run.steps:
        visit(step.call.get("params"))
    return found


# ---------------------------------------------------------------------------------------------
# Injection


class Injector:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def call_id(self) -> str:
        return "call_" + "".join(self.rng.choice(string.ascii_letters + string.digits) for _ in range(24))

    def repeat(self, step: Step) -> list[dict[str, Any]]:
        """The call again, with the result it had, under a fresh call id."""
        call_id = self.call_id()
        return [{**strip(step.call), "tool_call_id": call_id}, {**strip(step.outcome), "tool_call_id": call_id}]

    def call(self, tool: str, params: dict[str, Any], outcome: dict[str, Any]) -> list[dict[str, Any]]:
        call_id = self.call_id()
        common = {"tool_name": tool, "tool_call_id": call_id, "params": params}
        return [{"kind": "tool_call", **common}, {"kind": "tool_outcome", **common, **outcome}]

    # Each kind returns (insert before step index, injected events, index of the loop's first call
    # in them, loop length in calls[, extra label fields]), or None when the run offers no place for it.

    def generic_repeat(self, run: Run):
        # A call the agent has not made before, with a result that would come back identical: a
        # lookup, a thought, or a failing write (re-sending a write that succeeded would not).
        places = [j for j, step in enumerate(run.steps)
                  if (step.tool.startswith(READ_ONLY_PREFIXES) or step.tool in THINKING_TOOLS or step.failed)
                  and step.signature not in run.seen_before(j)]
        if not places:
            return None
        j = self.rng.choice(places)
        length = self.rng.randint(CRITICAL + 1, CRITICAL + 1 + EXTRA_CALLS)
        events = [event for _ in range(length) for event in self.repeat(run.steps[j])]
        return j, events, 0, length

    def process_poll(self, run: Run):
        known = facts(run)
        subject = (known["reservation_id"] or known["user_id"] or ["all"])[0]
        session = f"{self.rng.choice(SESSION_WORDS[:10])}-{self.rng.choice(SESSION_WORDS[10:])}"
        pid = self.rng.randint(2000, 60000)
        start = self.call("exec", {"command": f"python3 scripts/fare_audit.py --reservation {subject}",
                                   "background": True},
                          {"result": {"content": [{"type": "text", "text":
                                                   f"Command still running (session {session}, pid {pid}). "
                                                   "Use process (list/poll/log/write/kill) for follow-up."}],
                                      "details": {"status": "running", "sessionId": session, "pid": pid,
                                                  "cwd": "/workspace/airline-ops", "tail": ""}}})
        length = self.rng.randint(CRITICAL + 1, CRITICAL + 1 + EXTRA_CALLS)
        polls = []
        elapsed = self.rng.randint(800, 3000)
        for _ in range(length):
            elapsed += self.rng.randint(4000, 15000)
            # durationMs changes every poll; the spec leaves it out of a poll's result hash.
            polls += self.call("process", {"action": "poll", "sessionId": session},
                               {"result": {"content": [{"type": "text", "text": "(no new output)\n\nProcess still running."}],
                                           "details": {"status": "running", "sessionId": session, "durationMs": elapsed,
                                                       "aggregated": f"auditing fare rules for {subject}...\n"}}})
        return self.rng.randint(0, len(run.steps)), start + polls, 2, length

    def command_status_poll(self, run: Run):
        known = facts(run)
        flight = (known["flight_number"] or ["HAT001"])[0]
        date = (known["date"] or ["2024-05-15"])[0]
        command_id = f"{self.rng.getrandbits(32):08x}-{self.rng.getrandbits(16):04x}"
        start = self.call("run_command", {"CommandLine": f"python3 sync_fares.py --flight {flight} --date {date}",
                                          "Cwd": "/workspace/airline-ops", "Blocking": False,
                                          "WaitMsBeforeAsync": 500, "SafeToAutoRun": True},
                          {"result": {"content": [{"type": "text", "text":
                                                   f"Command is running in the background with ID: {command_id}"}],
                                      "details": {}}})
        length = self.rng.randint(CRITICAL + 1, CRITICAL + 1 + EXTRA_CALLS)
        status = {"result": {"content": [{"type": "text", "text":
                                          f"Status: RUNNING\nOutput:\nfetching fare buckets for {flight} on {date}..."}],
                             "details": {}}}
        polls = []
        for _ in range(length):
            polls += self.call("command_status", {"CommandId": command_id, "OutputPriority": "bottom",
                                                  "OutputCharacterCount": 500, "WaitDurationSeconds": 10}, status)
        return self.rng.randint(0, len(run.steps)), start + polls, 2, length

    def ping_pong(self, run: Run):
        # Two lookups the agent had not made yet, alternated, each answering the same every time.
        pairs = []
        for j, first in enumerate(run.steps):
            before = run.seen_before(j)
            if not first.tool.startswith(READ_ONLY_PREFIXES) or first.signature in before:
                continue
            for k in range(j + 1, len(run.steps)):
                second = run.steps[k]
                if any(not s.tool.startswith(READ_ONLY_PREFIXES + THINKING_TOOLS) for s in run.steps[j:k]):
                    break  # a write in between: the second lookup's result may not hold earlier
                if (second.tool.startswith(READ_ONLY_PREFIXES) and second.signature != first.signature
                        and second.signature not in before):
                    pairs.append((j, k))
        if not pairs:
            return None
        j, k = self.rng.choice(pairs)
        length = self.rng.randint(CRITICAL, CRITICAL + EXTRA_CALLS)
        events = [event for n in range(length) for event in self.repeat(run.steps[j if n % 2 == 0 else k])]
        return j, events, 0, length

    def unknown_tool(self, run: Run):
        known = facts(run)
        name = self.rng.choice(UNKNOWN_TOOLS)
        reservations = known["reservation_id"] or ["ZFA04Y"]
        flights = known["flight_number"] or ["HAT001"]
        dates = known["date"] or ["2024-05-15"]
        variants = {
            "get_flight_status": [{"flight_number": f, "date": d} for f in flights for d in dates],
            "lookup_reservation": [{"reservation_id": r} for r in reservations],
            "check_seat_availability": [{"flight_number": f, "date": d, "cabin": c}
                                        for f in flights for d in dates for c in ("economy", "business")],
            "get_baggage_policy": [{"membership": m, "cabin": c} for m in ("regular", "silver", "gold")
                                   for c in ("basic_economy", "economy", "business")],
            "search_flights": [{"origin": o, "destination": t, "date": d} for (o, t) in (("JFK", "SEA"), ("SFO", "JFK"))
                               for d in dates],
            "refund_reservation": [{"reservation_id": r, "reason": why} for r in reservations
                                   for why in ("change of plan", "cancelled by airline")],
            "modify_booking": [{"reservation_id": r, "cabin": c} for r in reservations for c in ("economy", "business")],
            "get_fare_rules": [{"flight_number": f, "cabin": c} for f in flights for c in ("economy", "business")],
        }[name]
        # Half the agents retry verbatim; the others keep rewording the arguments.
        vary = self.rng.random() < 0.5 and len(variants) > 1
        error = self.rng.choice(UNKNOWN_TOOL_ERRORS).format(name=name)
        length = self.rng.randint(UNKNOWN_TOOL + 1, UNKNOWN_TOOL + 1 + EXTRA_CALLS)
        events = []
        used = variants if vary else variants[:1]
        for n in range(length):
            events += self.call(name, used[n % len(used)], {"error": error})
        # Two argument sets in turn are also a ping-pong: the label says how many there were.
        return self.rng.randint(0, len(run.steps)), events, 0, length, {"arg_variants": min(len(used), length)}

    def post_compaction(self, run: Run):
        # After the context overflowed and was compacted, the agent re-issues its last call.
        places = [i for i in range(1, len(run.steps) + 1)
                  if run.steps[i - 1].tool.startswith(READ_ONLY_PREFIXES) or run.steps[i - 1].failed
                  or run.steps[i - 1].tool in THINKING_TOOLS]
        if not places:
            return None
        i = self.rng.choice(places)
        length = self.rng.randint(COMPACTION_WINDOW, COMPACTION_WINDOW + 2)
        events = [{"kind": "compaction_retry"}]
        events += [event for _ in range(length) for event in self.repeat(run.steps[i - 1])]
        return i, events, 1, length


def assemble(run: Run, new_run_id: str, insert_at: int, injected: list[dict[str, Any]], loop_start: int):
    """The copied run with the injected events, renumbered; returns (events, seq of the loop's first call)."""
    body = [strip(e) for step in run.steps[:insert_at] for e in (step.call, step.outcome)]
    start_position = len(body) + loop_start
    body += injected
    body += [strip(e) for step in run.steps[insert_at:] for e in (step.call, step.outcome)]
    body.append({"kind": "run_end"})
    events = [{"run_id": new_run_id, "seq": seq, **event} for seq, event in enumerate(body, 1)]
    assert events[start_position]["kind"] == "tool_call"
    return events, events[start_position]["seq"]


def build(runs: list[Run], seed: int = SEED, per_kind: int = PER_KIND):
    """(labels of the looping runs, their events), deterministic for a seed."""
    rng = random.Random(seed)
    injector = Injector(rng)
    labels, events = [], []
    for kind, detector in KINDS.items():
        candidates = runs[:]
        rng.shuffle(candidates)
        made = 0
        for run in candidates:
            if made == per_kind:
                break
            placed = getattr(injector, kind)(run)
            if placed is None:
                continue
            insert_at, injected, loop_start, length, *extra = placed
            run_id = f"loop-{kind}-{made:02d}/{run.run_id}"
            run_events, start_seq = assemble(run, run_id, insert_at, injected, loop_start)
            events += run_events
            loop_tool = run_events[start_seq - 1]["tool_name"]
            labels.append({"run_id": run_id, "label": "looping", "kind": kind, "detector": detector,
                           "loop_start_seq": start_seq, "loop_calls": length, "tool": loop_tool,
                           "source_run": run.run_id, **(extra[0] if extra else {})})
            made += 1
        if made < per_kind:
            raise GeneratorError(f"only {made} runs can host a {kind} loop; wanted {per_kind}")
    return labels, events


# ---------------------------------------------------------------------------------------------
# Output


def manifest_text(tau_path: str, tau_sha: str, positives_sha: str, good: list[str], looping: list[dict]) -> str:
    head = {
        "format": MANIFEST_FORMAT,
        "about": "Runs labelled good (the real τ-bench airline runs) or looping (copies of them with one "
                 "injected loop; loop_start_seq is the seq of the loop's first tool call). Made by "
                 "scripts/make_labelled_traces.py; evaluate with `loopwarden evaluate` on this file.",
        "generator": {"script": "scripts/make_labelled_traces.py", "seed": SEED, "per_kind": PER_KIND},
        "traces": [
            {"path": tau_path, "format": "events", "sha256": tau_sha},
            {"path": POSITIVES_NAME, "format": "events", "sha256": positives_sha},
        ],
    }
    lines = json.dumps(head, indent=2, ensure_ascii=False)[:-2] + ',\n  "runs": [\n'
    rows = [{"run_id": run_id, "label": "good"} for run_id in good] + looping
    lines += ",\n".join("    " + json.dumps(row, ensure_ascii=False) for row in rows)
    return lines + "\n  ]\n}\n"


def sha256_text(text: str) -> str:
    import hashlib
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tau", type=Path, default=DEFAULT_TAU,
                        help=f"the τ-bench event trace (default: {os.path.relpath(DEFAULT_TAU, REPO)} from the repo root)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"output directory (default: {DEFAULT_OUT.relative_to(REPO)})")
    args = parser.parse_args(argv)
    try:
        runs = read_runs(args.tau)
        looping, events = build(runs)
    except GeneratorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    positives = "".join(json.dumps(event) + "\n" for event in events)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / POSITIVES_NAME).write_bytes(gzip.compress(positives.encode("utf-8"), compresslevel=9, mtime=0))
    tau_text = args.tau.read_text(encoding="utf-8")
    manifest = manifest_text(os.path.relpath(os.path.abspath(args.tau), os.path.abspath(args.out)), sha256_text(tau_text),
                             sha256_text(positives), [run.run_id for run in runs], looping)
    (args.out / MANIFEST_NAME).write_text(manifest, encoding="utf-8")
    print(f"wrote {args.out / MANIFEST_NAME}: {len(runs)} good runs, {len(looping)} looping runs "
          f"({PER_KIND} per kind); {args.out / POSITIVES_NAME}: {len(events)} events")
    return 0


if __name__ == "__main__":
    sys.exit(main())
