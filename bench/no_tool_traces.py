"""Measure the detectors of loops without tool calls (repeatedOutput, compactionStorm,
stopContinuation, repeatedFinalAnswer), each alone and under `fast`, on the text-bearing real
traces: good runs warned / stopped per set, and how early each injected no-tool loop is caught.

Every run of the text-bearing traces (traces/*.text.jsonl.gz; see traces/README.md) is a good run:
a setting that stops one is a false positive. Loops are injected deterministically (fixed seed)
into copies of real runs of each set, one loop per copy, between two events of the run (never
between a call and its outcome). A loop is LOOP_STEPS repetitions ("steps") of one unit:

- message repeated: the same message (a text of the run), no tool work;
- thought repeated: the same thought;
- one 50-char chunk repeated: each message made of one 50-character piece of the run's text,
  12, 13, 14 … times (every message different, so only the one-chunk rule can see it);
- paragraph repeated (Gemini's thought loop): each thought one 140-character piece repeated
  12, 13, … times, like the two real loops of the Gemini set (traces/README.md);
- compaction storm: a compaction, then the run re-reads an earlier call with its earlier result
  (nothing new), again and again;
- stop-hook continuations: a final answer with `stop_hook_active` (a stop hook kept the turn
  going), each a different text, no tool work;
- same final answer over user turns: a user turn answered with the same final answer, no tool work;
and two controls that must never be stopped: 30 different messages with no tool work, and
compactions each followed by new tool work.

"Steps to the stop" counts repetitions from the loop's first (= 1) to the one holding the first
ABORT/BLOCK of the run at or after the loop's start; "events" counts the injected events the same
way. A stop after the loop's last event is not a catch. Everything is replayed through the
daemon's own service layer and compiled core in-process (`loopwarden replay --offline`'s path).

Run: .venv/bin/python bench/no_tool_traces.py [--traces DIR] [--copies N] [--only NAME ...]
The tables of docs/replay-evaluation.md ("Loops without tool calls") are copied from one run.
"""
from __future__ import annotations

import argparse
import copy
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

try:
    from bench.no_tool_figures import TEXT_SETS, normalise
    from bench.real_traces import (
        ENFORCING, REFERENCE, GoodRuns, Setting, completed_calls, detail, good_run_figures, load_runs, replay,
        with_reference,
    )
except ImportError:   # run as a script: bench/ itself is on sys.path
    from no_tool_figures import TEXT_SETS, normalise  # type: ignore[no-redef]
    from real_traces import (  # type: ignore[no-redef]
        ENFORCING, REFERENCE, GoodRuns, Setting, completed_calls, detail, good_run_figures, load_runs, replay,
        with_reference,
    )

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACES = ROOT / "traces"
LOOP_STEPS = 30
CHUNK = 50
PARAGRAPH = 140

SETTINGS = [
    Setting("reference defaults", REFERENCE),
    Setting("repeatedOutput", with_reference({"repeatedOutput": {"enabled": True}}), ("repeated_output",)),
    Setting("compactionStorm", with_reference({"compactionStorm": {"enabled": True}}), ("compaction_storm",)),
    Setting("stopContinuation", with_reference({"stopContinuation": {"enabled": True}}), ("stop_continuation",)),
    Setting("repeatedFinalAnswer", with_reference({"repeatedFinalAnswer": {"enabled": True}}), ("repeated_final_answer",)),
    Setting("preset fast", {"loopwarden": {"preset": "fast"}}),
]

Step = list[dict]


# ---------------------------------------------------------------------------------------------
# Injected loops: each builds its steps from the run it goes into (the events before the
# injection point, and the run's texts).


@dataclass(frozen=True)
class Source:
    """What a loop may borrow from the run it goes into."""
    texts: list[str]                   # the run's model outputs' texts, in order
    before: list[tuple[dict, dict]]    # (call, outcome) pairs completed before the injection point
    pairs: list[tuple[dict, dict]]     # every completed pair of the run


FALLBACK_TEXT = "I will check the reservation details again before making any change to the booking."


def _text(source: Source, rng: random.Random, least: int = 0) -> str:
    """One of the run's texts (at least `least` characters once normalised), or a fixed one."""
    usable = [t for t in source.texts if len(normalise(t)) >= least]
    return rng.choice(usable) if usable else FALLBACK_TEXT * (1 + least // len(FALLBACK_TEXT))


def _output(text: str, output_kind: str = "message", **extra) -> dict:
    return {"kind": "model_output", "text": text, "output_kind": output_kind, **extra}


def loop_message(source: Source, rng: random.Random) -> list[Step]:
    text = _text(source, rng)
    return [[_output(text)] for _ in range(LOOP_STEPS)]


def loop_thought(source: Source, rng: random.Random) -> list[Step]:
    text = _text(source, rng)
    return [[_output(text, "thought")] for _ in range(LOOP_STEPS)]


def _piece(source: Source, rng: random.Random, size: int) -> str:
    """`size` characters of one of the run's texts (normalised), ending in a space so that copies
    stay `size` apart once the daemon normalises them."""
    text = normalise(_text(source, rng, size))
    start = rng.randrange(0, len(text) - size + 1)
    return text[start:start + size - 1].strip().ljust(size - 1, ".") + " "


def loop_chunk(source: Source, rng: random.Random) -> list[Step]:
    unit = _piece(source, rng, CHUNK)
    return [[_output(unit * (12 + i))] for i in range(LOOP_STEPS)]


def loop_paragraph(source: Source, rng: random.Random) -> list[Step]:
    unit = _piece(source, rng, PARAGRAPH)
    return [[_output(unit * (12 + i), "thought")] for i in range(LOOP_STEPS)]


def _repeat(pair: tuple[dict, dict], tag: str) -> Step:
    """A call and its outcome again: same tool, params and result (no new triple)."""
    call, outcome = (copy.deepcopy(event) for event in pair)
    for event in (call, outcome):
        event["tool_call_id"] = tag
    return [call, outcome]


def _new_work(pair: tuple[dict, dict], tag: str, number: int) -> Step:
    """A call the run has not made, with a result it has not seen: new tool work."""
    call, outcome = _repeat(pair, tag)
    params = call.get("params") if isinstance(call.get("params"), dict) else {}
    call["params"] = outcome["params"] = {**params, "_page": number}
    outcome.pop("error", None)
    outcome["result"] = {"content": [{"type": "text", "text": f"page {number} of the listing"}], "details": {}}
    return [call, outcome]


def loop_compaction_storm(source: Source, rng: random.Random) -> list[Step]:
    pair = rng.choice(source.before or source.pairs)
    return [[{"kind": "compaction_retry"}, *_repeat(pair, f"L{i}")] for i in range(LOOP_STEPS)]


def control_compaction_with_work(source: Source, rng: random.Random) -> list[Step]:
    pair = rng.choice(source.pairs)
    return [[{"kind": "compaction_retry"}, *_new_work(pair, f"L{i}", i)] for i in range(LOOP_STEPS)]


def loop_stop_continuation(source: Source, rng: random.Random) -> list[Step]:
    text = normalise(_text(source, rng))[:200]
    return [[_output(f"{text} (pass {i + 1})", "final_answer", stop_hook_active=i > 0)] for i in range(LOOP_STEPS)]


def loop_final_answer(source: Source, rng: random.Random) -> list[Step]:
    text = _text(source, rng)
    return [[{"kind": "user_turn", "prompt_id": f"L{i}"}, _output(text, "final_answer")] for i in range(LOOP_STEPS)]


def control_different_messages(source: Source, rng: random.Random) -> list[Step]:
    text = normalise(_text(source, rng))[:200]
    return [[_output(f"Step {i + 1}: {text}")] for i in range(LOOP_STEPS)]


@dataclass(frozen=True)
class Loop:
    build: Callable[[Source, random.Random], list[Step]]
    targets: str            # the setting that targets it
    control: bool = False   # a pattern that must never be stopped


LOOPS = {
    "message repeated": Loop(loop_message, "repeatedOutput"),
    "thought repeated": Loop(loop_thought, "repeatedOutput"),
    "one 50-char chunk repeated": Loop(loop_chunk, "repeatedOutput"),
    "paragraph repeated (Gemini thought loop)": Loop(loop_paragraph, "repeatedOutput"),
    "compaction storm": Loop(loop_compaction_storm, "compactionStorm"),
    "stop-hook continuations": Loop(loop_stop_continuation, "stopContinuation"),
    "same final answer over user turns": Loop(loop_final_answer, "repeatedFinalAnswer"),
    "control: 30 different messages": Loop(control_different_messages, "repeatedOutput", control=True),
    "control: compactions each followed by new tool work": Loop(control_compaction_with_work, "compactionStorm",
                                                                 control=True),
}


@dataclass(frozen=True)
class Injected:
    kind: str
    run_id: str
    events: list[dict]
    start_seq: int            # seq of the loop's first event
    step_of: dict[int, int]   # seq of each injected event -> its step (1-based)


def injected_runs(runs: dict[str, list[dict]], copies: int, seed: int, loops: dict[str, Loop]) -> Iterator[Injected]:
    """`copies` runs per loop kind, each with one loop injected at a random boundary."""
    rng = random.Random(seed)
    candidates = [run_id for run_id, events in sorted(runs.items()) if completed_calls(events)]
    for kind, loop in loops.items():
        for run_id in rng.sample(candidates, min(copies, len(candidates))):
            events = copy.deepcopy(runs[run_id])
            body = [e for e in events if e["kind"] != "run_end"]
            # Between two events, never between a call and its outcome: after an outcome, or
            # after an event that is not a call when no call is open.
            open_calls = 0
            boundaries = [0]
            for i, event in enumerate(body):
                open_calls += {"tool_call": 1, "tool_outcome": -1}.get(event["kind"], 0)
                if open_calls <= 0:
                    boundaries.append(i + 1)
            at = rng.choice(boundaries)
            source = Source(texts=[e["text"] for e in body if e["kind"] == "model_output"],
                            before=completed_calls(body[:at]), pairs=completed_calls(body))
            steps = loop.build(source, rng)
            new_id = f"loop/{kind}/{run_id}"
            injected = [event for step in steps for event in step]
            merged = body[:at] + injected + body[at:] + [{"kind": "run_end"}]
            for seq, event in enumerate(merged, 1):
                event["run_id"], event["seq"] = new_id, seq
            step_of, seq = {}, at + 1
            for number, step in enumerate(steps, 1):
                for _ in step:
                    step_of[seq] = number
                    seq += 1
            yield Injected(kind, new_id, merged, at + 1, step_of)


# ---------------------------------------------------------------------------------------------
# Scoring


@dataclass(frozen=True)
class Caught:
    """When a loop was first warned and first stopped: (step, injected events), None if not within the loop."""
    warned: tuple[int, int] | None
    stopped: tuple[int, int] | None
    detector: str


def score(config: dict, injected: list[Injected]) -> dict[str, list[Caught]]:
    verdicts = replay(config, ((loop.run_id, loop.events) for loop in injected))
    found: dict[str, list[Caught]] = defaultdict(list)
    for loop in injected:
        warned = stopped = None
        detector = ""
        for event, observed in verdicts[loop.run_id]:
            if event["seq"] < loop.start_seq:
                continue
            step = loop.step_of.get(event["seq"])
            where = (step, event["seq"] - loop.start_seq + 1) if step is not None else None
            if warned is None and observed.action == "warn":
                warned = where or (0, 0)
            if observed.action in ENFORCING:
                stopped, detector = where or (0, 0), observed.detector
                break
        # (0, 0): after the loop's last event, not a catch.
        found[loop.kind].append(Caught(warned if warned != (0, 0) else None,
                                       stopped if stopped != (0, 0) else None, detector))
    return dict(found)


def median_max(values: list[int]) -> str:
    return f"{statistics.median(values):g} / {max(values)}" if values else "-"


def loop_cell(values: list[Caught], control: bool) -> str:
    """Caught / injected, the step of the first warning (median), the step and injected events of
    the stop (median / max), and the detectors that stopped it; for a control, what it got."""
    stops = [c.stopped for c in values if c.stopped is not None]
    warns = [c.warned for c in values if c.warned is not None]
    if control:
        return f"warned {len(warns)}, stopped {len(stops)} / {len(values)}"
    warned = f"warned at {statistics.median([w[0] for w in warns]):g}" if warns else "never warned"
    if not stops:
        return f"0 / {len(values)} ({warned}" + (f", {len(warns)} warned)" if warns else ")")
    by = ", ".join(sorted({c.detector for c in values if c.stopped is not None}))
    return (f"{len(stops)} / {len(values)}: {warned}, stopped at {median_max([s[0] for s in stops])} "
            f"({median_max([s[1] for s in stops])} events; {by})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES,
                        help="the folder of the text-bearing traces (default: traces/ of the repository)")
    parser.add_argument("--copies", type=int, default=20, help="runs of each set per injected loop kind")
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument("--only", nargs="*", default=None, help="names of SETTINGS to measure")
    args = parser.parse_args(argv)
    settings = SETTINGS if not args.only else [s for s in SETTINGS if s.name in args.only]
    if args.only and len(settings) != len(set(args.only)):
        parser.error(f"--only: the settings are {[s.name for s in SETTINGS]}")
    started = time.perf_counter()
    sets = {name: load_runs(args.traces / file) for name, file in TEXT_SETS.items()}
    injected = {name: list(injected_runs(runs, args.copies, args.seed, LOOPS)) for name, runs in sets.items()}
    print(f"traces: {args.traces}; {args.copies} injected loops of each kind per set, seed {args.seed}, loops of "
          f"{LOOP_STEPS} steps; steps (and injected events) counted from the loop's first (= 1) to the first stop")

    good: dict[str, dict[str, GoodRuns]] = {}
    caught: dict[str, dict[str, list[Caught]]] = {}
    for setting in settings:
        good[setting.name] = {name: good_run_figures(setting.config, runs) for name, runs in sets.items()}
        caught[setting.name] = defaultdict(list)
        for name in sets:
            for kind, values in score(setting.config, injected[name]).items():
                caught[setting.name][kind] += values
        for name, figures in good[setting.name].items():
            for run_id in figures.blocked_ids[:5]:
                print(f"  {setting.name}: stopped good run `{run_id}` ({name})", file=sys.stderr)

    print("\n#### Good runs warned / stopped (each detector alone over the reference defaults, and `fast`)\n")
    print("| setting | " + " | ".join(f"{name} ({len(runs)})" for name, runs in sets.items()) + " | by detector |")
    print("|---" * (len(sets) + 2) + "|")
    for setting in settings:
        merged = GoodRuns()
        for figures in good[setting.name].values():
            for d, n in figures.warned_by.items():
                merged.warned_by[d] += n
            for d, n in figures.blocked_by.items():
                merged.blocked_by[d] += n
        cells = " | ".join(f"{f.warned} / {f.blocked}" for f in good[setting.name].values())
        print(f"| {setting.name} | {cells} | {detail(merged)} |")

    shown = [s.name for s in settings if s.name in ("reference defaults", "preset fast")]
    print("\n#### Injected no-tool loops: caught / injected; the step warned (median); the step stopped, median / max "
          "(injected events, median / max; the detectors that stopped it)\n")
    print("| injected loop | " + " | ".join(shown) + " | the detector alone |")
    print("|---" * (len(shown) + 2) + "|")
    for kind, loop in LOOPS.items():
        cells = " | ".join(loop_cell(caught[name][kind], loop.control) for name in shown)
        alone = (f"`{loop.targets}`: {loop_cell(caught[loop.targets][kind], loop.control)}"
                 if loop.targets in caught else "-")
        print(f"| {kind} | {cells} | {alone} |")
    print(f"\n({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
