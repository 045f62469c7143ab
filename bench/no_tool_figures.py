"""The figures the no-tool detectors' thresholds come from, measured on the good runs of the
text-bearing traces (scripts/convert_traces.py): how often a good run repeats itself without
calling a tool.

Per set, over every run (all are good runs; see traces/README.md):
  - the longest streak of one normalised text per output kind (message / thought / final answer)
    with no new tool outcome between (an outcome whose (tool, params, result) triple is new to
    the run, or a user turn, ends it): what repeatedOutput counts;
  - the most copies of one 50-character piece in a single output (non-overlapping occurrences of
    one 50-char window of the normalised text), under four ways of counting them (anywhere or
    each copy close to the previous; with or without fenced code), and how many runs a second
    such output with no new tool outcome between would end: what repeatedOutput's one-chunk rule
    counts;
  - the most text a run adds with no new tool outcome (what a compaction would need);
  - the longest run of one normalised final answer closing successive user turns that called no
    tool, and the longest run of such turns whatever they answered: what repeatedFinalAnswer counts;
  - compactions and stop-hook continuations: counted (the sources have neither).

Normalisation as the core's: trimmed, runs of whitespace to one space, lower case.

Run: .venv/bin/python bench/no_tool_figures.py [--traces DIR]   (DIR holds the *.text.jsonl.gz;
`scripts/convert_traces.py --miniswe-runs 0 --out DIR` writes the whole mini-swe sets there)
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT_SETS = {
    "τ-bench airline": "tau-bench-airline-gpt-4o.text.jsonl.gz",
    "τ-bench retail": "tau-bench-retail-grok3.text.jsonl.gz",
    "SWE-bench gemini": "miniswe-gemini3pro-verified.text.jsonl.gz",
    "SWE-bench deepseek": "miniswe-deepseek-swebench.text.jsonl.gz",
}
OUTPUT_KINDS = ("message", "thought", "final_answer")
CHUNK = 50
CHUNK_REPEATS = 10
# A fenced code block (``` to ``` or to the end): gemini-cli's content-loop check skips these,
# and so does the "outside code" chunk figure.
FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)


def normalise(text: str) -> str:
    return " ".join(text.split()).lower()


def read_runs(path: Path) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = defaultdict(list)
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            event = json.loads(line)
            runs[event["run_id"]].append(event)
    return dict(runs)


def outcome_triple(event: dict) -> str:
    body = {"error": event["error"]} if "error" in event else {"result": event.get("result")}
    return json.dumps([event["tool_name"], event.get("params"), body], sort_keys=True)


@dataclass(frozen=True)
class ChunkRule:
    """One way to count copies of a `CHUNK`-character piece inside one output."""
    label: str
    gap: int | None       # each copy starts within this many characters of the previous; None: anywhere
    outside_code: bool    # fenced code blocks left out (gemini-cli does)


CHUNK_RULES = (
    ChunkRule("anywhere in the output", None, False),
    ChunkRule("anywhere, outside fenced code", None, True),
    ChunkRule("each copy within 1.5 × 50 chars of the previous (gemini-cli's spacing)", 75, False),
    ChunkRule("each copy within 6 × 50 chars of the previous, outside fenced code", 300, True),
)


def chunk_copies(text: str, gap: int | None, size: int = CHUNK) -> int:
    """The most non-overlapping copies of one `size`-character window of `text`, each starting
    within `gap` characters of the previous copy (anywhere when `gap` is None)."""
    if len(text) < size:
        return 0
    positions: dict[str, list[int]] = defaultdict(list)
    for at in range(len(text) - size + 1):
        positions[text[at:at + size]].append(at)
    best = 1
    for found in positions.values():
        if len(found) <= best:
            continue   # overlapping occurrences bound the copies
        run, last = 1, found[0]
        for at in found[1:]:
            if at < last + size:
                continue
            run = run + 1 if gap is None or at - last <= gap else 1
            last = at
            best = max(best, run)
    return best


def rule_copies(text: str) -> tuple[int, ...]:
    """An output's copies under each of CHUNK_RULES."""
    whole, prose = normalise(text), normalise(FENCE.sub(" ", text))
    return tuple(chunk_copies(prose if rule.outside_code else whole, rule.gap) for rule in CHUNK_RULES)


@dataclass
class Streak:
    """Consecutive equal texts of one output kind with no new tool outcome between."""
    text: str | None = None
    length: int = 0

    def see(self, text: str) -> int:
        self.length = self.length + 1 if text == self.text else 1
        self.text = text
        return self.length

    def reset(self) -> None:
        self.text, self.length = None, 0


@dataclass
class SetFigures:
    runs: int = 0
    outputs: Counter = field(default_factory=Counter)
    user_turns: int = 0
    compactions: int = 0
    stop_hook_active: int = 0
    streak_max: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTPUT_KINDS, 0))
    streak_hist: dict[str, Counter] = field(default_factory=lambda: {k: Counter() for k in OUTPUT_KINDS})
    streak_where: dict[str, str] = field(default_factory=dict)
    repeats_in_run: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTPUT_KINDS, 0))
    chunk: list[tuple[tuple[int, ...], str, int, str]] = field(default_factory=list)   # copies per rule, run, seq, kind
    chunk_ended: list[int] = field(default_factory=lambda: [0] * len(CHUNK_RULES))
    streak_any_max: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTPUT_KINDS, 0))
    chars_between_new: int = 0
    chars_between_where: str = ""
    answer_streak_max: int = 0
    answer_streak_where: str = ""
    quiet_turns_max: int = 0
    quiet_turns_hist: Counter = field(default_factory=Counter)


@dataclass
class Turns:
    """Successive user turns of one run: did the turn call a tool, and which final answer closed it."""
    started: bool = False
    tools: bool = False
    answer: str | None = None
    quiet: int = 0   # successive turns so far without a tool call
    same: Streak = field(default_factory=Streak)   # successive quiet turns closed by one answer

    def open(self) -> None:
        self.started, self.tools, self.answer = True, False, None

    def close(self, figures: SetFigures, run_id: str) -> None:
        if not self.started:
            return
        if self.tools or self.answer is None:
            self.same.reset()
            self.end(figures)
            return
        self.quiet += 1
        figures.quiet_turns_max = max(figures.quiet_turns_max, self.quiet)
        if self.same.see(self.answer) > figures.answer_streak_max:
            figures.answer_streak_max, figures.answer_streak_where = self.same.length, run_id

    def end(self, figures: SetFigures) -> None:
        if self.quiet:
            figures.quiet_turns_hist[self.quiet] += 1
        self.quiet = 0


def measure(runs: dict[str, list[dict]]) -> SetFigures:
    figures = SetFigures(runs=len(runs))
    for run_id, events in runs.items():
        seen_outcomes: set[str] = set()
        streaks = {kind: Streak() for kind in OUTPUT_KINDS}
        longest = dict.fromkeys(OUTPUT_KINDS, 0)
        regardless = {kind: Streak() for kind in OUTPUT_KINDS}   # tool work between or not
        chars = 0   # text added to the conversation since the last new tool outcome
        # Per chunk rule, the output kinds whose last output reached CHUNK_REPEATS copies since the
        # last new tool outcome: a second one would end the run.
        flagged: list[dict[str, bool]] = [{} for _ in CHUNK_RULES]
        texts: dict[str, Counter] = {kind: Counter() for kind in OUTPUT_KINDS}
        turns = Turns()
        for event in events:
            kind = event["kind"]
            if kind == "model_output":
                output_kind = event.get("output_kind") or "message"
                figures.outputs[output_kind] += 1
                figures.stop_hook_active += bool(event.get("stop_hook_active"))
                text = normalise(event.get("text", ""))
                texts[output_kind][text] += 1
                longest[output_kind] = max(longest[output_kind], streaks[output_kind].see(text))
                figures.streak_any_max[output_kind] = max(figures.streak_any_max[output_kind],
                                                          regardless[output_kind].see(text))
                copies = rule_copies(event.get("text", ""))
                figures.chunk.append((copies, run_id, event["seq"], output_kind))
                for number, count in enumerate(copies):
                    if count >= CHUNK_REPEATS:
                        figures.chunk_ended[number] += flagged[number].get(output_kind, False)
                        flagged[number][output_kind] = True
                chars += len(event.get("text", ""))
                if output_kind == "final_answer":
                    turns.answer = text
            elif kind == "tool_outcome":
                triple = outcome_triple(event)
                chars += len(json.dumps(event.get("result", event.get("error")), ensure_ascii=False))
                if triple not in seen_outcomes:
                    chars = 0
                    flagged = [{} for _ in CHUNK_RULES]
                    seen_outcomes.add(triple)
                    for streak in streaks.values():
                        streak.reset()
            elif kind == "tool_call":
                turns.tools = True
                chars += len(json.dumps(event.get("params"), ensure_ascii=False))
            elif kind == "user_turn":
                figures.user_turns += 1
                flagged = [{} for _ in CHUNK_RULES]
                for streak in streaks.values():
                    streak.reset()
                turns.close(figures, run_id)
                turns.open()
            if chars > figures.chars_between_new:
                figures.chars_between_new, figures.chars_between_where = chars, run_id
            if kind == "compaction_retry":
                figures.compactions += 1
            elif kind == "run_end":
                turns.close(figures, run_id)
                turns.end(figures)
        for output_kind in OUTPUT_KINDS:
            if texts[output_kind]:
                figures.streak_hist[output_kind][longest[output_kind]] += 1
                figures.repeats_in_run[output_kind] = max(figures.repeats_in_run[output_kind],
                                                          max(texts[output_kind].values()))
            if longest[output_kind] > figures.streak_max[output_kind]:
                figures.streak_max[output_kind] = longest[output_kind]
                figures.streak_where[output_kind] = run_id
    return figures


def percentile(values: list[int], share: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0


def histogram(counts: Counter) -> str:
    return ", ".join(f"{length}: {number}" for length, number in sorted(counts.items())) or "-"


def report(sets: dict[str, SetFigures]) -> Iterator[str]:
    names = list(sets)
    yield "| figure | " + " | ".join(f"{n} ({sets[n].runs} runs)" for n in names) + " |"
    yield "|---" * (len(names) + 1) + "|"

    def row(label: str, cell) -> str:
        return f"| {label} | " + " | ".join(cell(sets[n]) for n in names) + " |"

    yield row("outputs: message / thought / final answer",
              lambda f: " / ".join(f"{f.outputs[k]:,}" for k in OUTPUT_KINDS))
    yield row("user turns; compactions; stop_hook_active outputs",
              lambda f: f"{f.user_turns:,}; {f.compactions}; {f.stop_hook_active}")
    for kind in OUTPUT_KINDS:
        yield row(f"longest same-{kind} streak, no new tool outcome between (runs by their longest)",
                  lambda f, k=kind: (f"**{f.streak_max[k]}** ({histogram(f.streak_hist[k])})" if f.outputs[k] else "-"))
    for kind in OUTPUT_KINDS:
        yield row(f"longest same-{kind} streak, tool work between or not",
                  lambda f, k=kind: str(f.streak_any_max[k]) if f.outputs[k] else "-")
    for kind in OUTPUT_KINDS:
        yield row(f"most times one {kind} text occurs in a run (anywhere, tool work between or not)",
                  lambda f, k=kind: str(f.repeats_in_run[k]) if f.outputs[k] else "-")
    for number, rule in enumerate(CHUNK_RULES):
        yield row(f"copies of one 50-char piece in one output, {rule.label}: most; the most below 100; "
                  f"outputs with ≥ 5 / ≥ {CHUNK_REPEATS}; runs a second such output would end",
                  lambda f, n=number: (f"**{max(c[n] for c, *_ in f.chunk)}**; {max(c[n] for c, *_ in f.chunk if c[n] < 100)}; "
                                       f"{sum(c[n] >= 5 for c, *_ in f.chunk)} / {sum(c[n] >= CHUNK_REPEATS for c, *_ in f.chunk)}; "
                                       f"{f.chunk_ended[n]}"))
    yield row("… anywhere in the output: copies at the 50th / 99th / 99.9th percentile of outputs",
              lambda f: " / ".join(str(percentile([c[0] for c, *_ in f.chunk], p)) for p in (0.5, 0.99, 0.999)))
    yield row("most characters a run adds (texts, params, results) with no new tool outcome",
              lambda f: f"{f.chars_between_new:,}")
    yield row("same final answer closing successive user turns without tool calls, longest",
              lambda f: f"**{f.answer_streak_max}**" if f.user_turns else "- (one task, no turns)")
    yield row("successive user turns without tool calls, longest (runs of such turns by length)",
              lambda f: f"{f.quiet_turns_max} ({histogram(f.quiet_turns_hist)})" if f.user_turns else "-")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=ROOT / "traces")
    parser.add_argument("--top", type=int, default=8, help="list the outputs with the most chunk repeats")
    args = parser.parse_args(argv)
    sets = {name: measure(read_runs(args.traces / file)) for name, file in TEXT_SETS.items()
            if (args.traces / file).exists()}
    for line in report(sets):
        print(line)
    print(f"\nThe {args.top} outputs with the most copies of one chunk (anywhere in the output), and their "
          f"copies under each rule ({'; '.join(rule.label for rule in CHUNK_RULES)}):")
    every = sorted(((copies, run, seq, kind, name) for name, f in sets.items() for copies, run, seq, kind in f.chunk),
                   reverse=True)
    for copies, run_id, seq, kind, name in every[:args.top]:
        print(f"- {' / '.join(map(str, copies))}: the {kind} at seq {seq} of `{run_id}` ({name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
