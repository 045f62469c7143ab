"""Convert the public runs behind traces/ into text-bearing traces: the same runs and tool events as
the vendored tool-only traces, plus what the model said (`model_output`) and, where the source has
a conversation, the user's turns (`user_turn`).

Sources (each a git repository; `fetch github:OWNER/NAME` or `git clone` + `git fetch origin
pull/N/head` gives one; the commits are pinned below):
  --tau-bench    sierra-research/tau-bench: historical_trajectories/gpt-4o-airline.json at 7362a17,
                 and pull request #68's tool-calling-grok-3-…json at 33f79e7
  --gemini       gruckion/mini-swe-agent: swebench_results/20251118_gemini-3-pro-74pct/trajs/ at 9fbbfc5
  --deepseek     SWE-agent/mini-swe-agent: output/ of pull request #814 (41a1e33, deepseek_lite_dev)
                 and #816 (e5e0fbc, every other folder)

Which runs: exactly the runs of the vendored `traces/NAME.runs.json`, in its order, under its run
ids. The mini-swe sets are cut to a deterministic subset (--miniswe-runs, default 100 a set: the
runs whose run id's SHA-256 is smallest, plus the Gemini runs of GEMINI_KEEP), to keep the
repository small; the τ-bench sets are whole. `--miniswe-runs 0` converts every run.

What is emitted, per run, in the source's order:
  - `user_turn` {"prompt_id": "uN"} for each user message of a τ-bench conversation (the simulated
    customer's turns; mini-swe's user messages are tool observations and format-error notices, no turns);
  - per assistant message: its reasoning as `model_output` `thought` (Gemini's `reasoning`,
    deepseek-reasoner's `reasoning_content`), its text as `message` or `final_answer`, then its
    tool calls, then their outcomes as the source returns them. A τ-bench text that closes a
    turn (no tool call, the last assistant message before the next user message or the end) is
    a `final_answer`; in mini-swe the run's last assistant message with text is the
    `final_answer`. Empty texts are not emitted;
  - `run_end`.
Tool events are built from the source the way the vendored traces are (τ-bench `Error:` results
as `error`; mini-swe observations as result text), and every run is checked against the vendored
trace: the same tool events (tool, call id, params, result or error) in the same order, or the
conversion fails naming the first difference.

Run: python3 scripts/convert_traces.py --tau-bench DIR --gemini DIR --deepseek DIR [--out traces]
     [--sets NAME ...] [--check-only]
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"

TAU_AIRLINE = ("7362a1708d720a4d697d042f21fd8637ea144c3b", "historical_trajectories/gpt-4o-airline.json")
TAU_RETAIL = ("33f79e758d5ac350903db78b467ab70527697f5a",
              "tau_bench/tool-calling-grok-3-0.0_range_0--1_user-grok-3-llm_0921131646.json")
GEMINI_COMMIT = "9fbbfc548133d5a6109819349a3e19f022681868"
DEEPSEEK_COMMITS = {"deepseek_lite_dev": "41a1e33ba94bbf7a0d2410dec46f99a8690113c0"}   # pull request #814
DEEPSEEK_DEFAULT_COMMIT = "e5e0fbca1c60561bde25fa473b78717aa4b3f9ec"                   # pull request #816
MINISWE_RUNS = 100
TOOL_KINDS = ("tool_call", "tool_outcome")


class ConversionError(Exception):
    """A source that does not convert to the vendored runs: the message names run and event."""


def git_show(repo: Path, commit: str, path: str) -> bytes:
    done = subprocess.run(["git", f"--git-dir={repo}", "show", f"{commit}:{path}"], capture_output=True)
    if done.returncode != 0:
        raise ConversionError(f"{repo}: cannot read {commit[:7]}:{path}: {done.stderr.decode().strip()}")
    return done.stdout


def git_dir(path: Path) -> Path:
    """The git directory of a clone (PATH/.git) or of a bare snapshot (PATH itself)."""
    return path / ".git" if (path / ".git").exists() else path


# ---------------------------------------------------------------------------------------------
# Events


class RunWriter:
    """The events of one run, numbered as they are added."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.events: list[dict] = []

    def add(self, kind: str, **fields) -> None:
        self.events.append({"run_id": self.run_id, "seq": len(self.events) + 1, "kind": kind, **fields})

    def said(self, text: str | None, output_kind: str) -> None:
        if isinstance(text, str) and text.strip():
            self.add("model_output", text=text, output_kind=output_kind)

    def call(self, tool: str, call_id: str, params) -> None:
        self.add("tool_call", tool_name=tool, tool_call_id=call_id, params=params)

    def outcome(self, tool: str, call_id: str, params, text: str, error: bool = False) -> None:
        body = {"error": text} if error else {"result": {"content": [{"type": "text", "text": text}], "details": {}}}
        self.add("tool_outcome", tool_name=tool, tool_call_id=call_id, params=params, **body)

    def end(self) -> list[dict]:
        self.add("run_end")
        return self.events


def parse_arguments(raw) -> object:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


# ---------------------------------------------------------------------------------------------
# τ-bench: a conversation of user turns; the agent calls tools (OpenAI function calls) and answers.


def tau_run(run_id: str, trajectory: list[dict]) -> list[dict]:
    run = RunWriter(run_id)
    calls: dict[str, tuple[str, object]] = {}
    turns = 0
    for index, message in enumerate(trajectory):
        role = message.get("role")
        if role == "user":
            turns += 1
            run.add("user_turn", prompt_id=f"u{turns}")
        elif role == "assistant":
            tool_calls = message.get("tool_calls") or []
            later = [m.get("role") for m in trajectory[index + 1:]]
            closes_turn = not tool_calls and (not later or later[0] == "user")
            run.said(message.get("content"), "final_answer" if closes_turn else "message")
            for tool_call in tool_calls:
                function = tool_call["function"]
                params = parse_arguments(function.get("arguments"))
                calls[tool_call["id"]] = (function["name"], params)
                run.call(function["name"], tool_call["id"], params)
        elif role == "tool":
            name, params = calls[message["tool_call_id"]]
            content = message.get("content") or ""
            run.outcome(message.get("name") or name, message["tool_call_id"], params, content,
                        error=content.startswith("Error:"))
    return run.end()


def tau_set(repo: Path, where: tuple[str, str], meta: list[dict]) -> Iterator[tuple[dict, list[dict]]]:
    results = json.loads(git_show(repo, *where))
    if len(results) != len(meta):
        raise ConversionError(f"{where[1]}: {len(results)} runs, the vendored set has {len(meta)}")
    for row, result in zip(meta, results, strict=True):
        if (result["task_id"], result["trial"]) != (row["task_id"], row["trial"]):
            raise ConversionError(f"{row['run_id']}: the source's run is task {result['task_id']} trial {result['trial']}")
        yield row, tau_run(row["run_id"], result["traj"])


# ---------------------------------------------------------------------------------------------
# mini-swe-agent: one task, then the agent's steps. 1.x puts one ```bash block in the text; 2.x
# calls a `bash` tool natively.

BASH_BLOCK = r"```bash\s*\n(.*?)\n```"
SUBMITTED = ("MINI_SWE_AGENT_FINAL_OUTPUT", "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")


def _reasoning(message: dict) -> str | None:
    """The model's reasoning, where the source kept it: deepseek-reasoner's `reasoning_content`,
    or the provider response's `reasoning` (Gemini through OpenRouter)."""
    if message.get("reasoning_content"):
        return message["reasoning_content"]
    response = (message.get("extra") or {}).get("response") or {}
    for choice in response.get("choices") or []:
        said = choice.get("message") or {}
        if said.get("reasoning_content") or said.get("reasoning"):
            return said.get("reasoning_content") or said.get("reasoning")
    return None


def miniswe_run(run_id: str, document: dict) -> list[dict]:
    run = RunWriter(run_id)
    messages = document["messages"]
    agent = ((document.get("info") or {}).get("config") or {}).get("agent") or {}
    action_regex = agent.get("action_regex") or BASH_BLOCK
    assistant_at = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    last_text = max((i for i in assistant_at if (messages[i].get("content") or "").strip()), default=None)
    pending: list[tuple[str, object]] = []   # 1.x: the call whose observation comes next
    calls: dict[str, object] = {}
    step = 0
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            run.said(_reasoning(message), "thought")
            run.said(message.get("content"), "final_answer" if index == last_text else "message")
            if message.get("tool_calls"):
                for tool_call in message["tool_calls"]:
                    params = parse_arguments(tool_call["function"].get("arguments"))
                    calls[tool_call["id"]] = params
                    run.call(tool_call["function"]["name"], tool_call["id"], params)
            elif "tool_calls" not in message:
                actions = re.findall(action_regex, message.get("content") or "", re.DOTALL)
                if len(actions) == 1:
                    step += 1
                    call_id = f"{run_id}-c{step}"
                    params = {"command": actions[0].strip()}
                    pending = [(call_id, params)]
                    run.call("bash", call_id, params)
        elif role == "tool":
            params = calls.pop(message["tool_call_id"])
            run.outcome("bash", message["tool_call_id"], params, message.get("content") or "")
        elif role == "exit" and calls:
            # 2.x ends on the submission: its output (the patch) is the answer to the submit call.
            for call_id, params in list(calls.items()):
                run.outcome("bash", call_id, params, message.get("content") or "")
            calls.clear()
        elif role == "user" and pending:
            call_id, params = pending.pop()
            run.outcome("bash", call_id, params, message.get("content") or "")
    return run.end()


# The Gemini runs with an output holding one 50-character piece 15 times or more: the two real
# thought loops (a paragraph repeated 1,421 and 902 times inside one message) and the runs whose
# code repeats a line. They carry the evidence for the one-chunk rule, so the subset keeps them.
GEMINI_KEEP = tuple(f"miniswe-gemini3pro/{name}" for name in (
    "scikit-learn__scikit-learn-25102", "sympy__sympy-15976", "sympy__sympy-13091", "django__django-13212",
    "sphinx-doc__sphinx-7462", "django__django-14053", "astropy__astropy-14369"))


def subset(meta: list[dict], count: int | None, keep: tuple[str, ...] = ()) -> list[dict]:
    """The `count` runs whose run id hashes smallest (SHA-256), plus `keep`, in the vendored order."""
    if count is None or count >= len(meta):
        return meta
    chosen = set(sorted((row["run_id"] for row in meta), key=lambda r: hashlib.sha256(r.encode()).hexdigest())[:count])
    missing = set(keep) - {row["run_id"] for row in meta}
    if missing:
        raise ConversionError(f"runs to keep that the set does not have: {sorted(missing)}")
    return [row for row in meta if row["run_id"] in chosen or row["run_id"] in keep]


def gemini_set(repo: Path, meta: list[dict]) -> Iterator[tuple[dict, list[dict]]]:
    for row in meta:
        yield row, miniswe_run(row["run_id"], json.loads(git_show(repo, GEMINI_COMMIT, row["source_path"])))


def deepseek_set(repo: Path, meta: list[dict]) -> Iterator[tuple[dict, list[dict]]]:
    for row in meta:
        folder = row["source_path"].split("/")[1]
        commit = DEEPSEEK_COMMITS.get(folder, DEEPSEEK_DEFAULT_COMMIT)
        yield row, miniswe_run(row["run_id"], json.loads(git_show(repo, commit, row["source_path"])))


# ---------------------------------------------------------------------------------------------
# The sets, and the check against the vendored traces


@dataclass(frozen=True)
class TraceSet:
    name: str
    vendored: str          # the tool-only trace of traces/
    output: str            # the text-bearing trace written next to it
    source: str            # the command-line option naming its repository
    convert: Callable[[Path, list[dict]], Iterable[tuple[dict, list[dict]]]]
    subset: bool = False
    keep: tuple[str, ...] = ()

    @property
    def stem(self) -> str:
        return self.vendored.removesuffix(".gz").removesuffix(".jsonl")


SETS = [
    TraceSet("tau-airline", "tau-bench-airline-gpt-4o.jsonl", "tau-bench-airline-gpt-4o.text.jsonl.gz", "tau_bench",
             lambda repo, meta: tau_set(repo, TAU_AIRLINE, meta)),
    TraceSet("tau-retail", "tau-bench-retail-grok3.jsonl.gz", "tau-bench-retail-grok3.text.jsonl.gz", "tau_bench",
             lambda repo, meta: tau_set(repo, TAU_RETAIL, meta)),
    TraceSet("gemini", "miniswe-gemini3pro-verified.jsonl.gz", "miniswe-gemini3pro-verified.text.jsonl.gz", "gemini",
             gemini_set, subset=True, keep=GEMINI_KEEP),
    TraceSet("deepseek", "miniswe-deepseek-swebench.jsonl.gz", "miniswe-deepseek-swebench.text.jsonl.gz", "deepseek",
             deepseek_set, subset=True),
]


def read_jsonl(path: Path) -> Iterator[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def tool_events(events: Iterable[dict]) -> list[dict]:
    """A run's tool events without their seq: what must match between the two traces."""
    return [{k: v for k, v in event.items() if k != "seq"} for event in events if event["kind"] in TOOL_KINDS]


def vendored_runs(path: Path, wanted: set[str]) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {run_id: [] for run_id in wanted}
    for event in read_jsonl(path):
        if event["run_id"] in runs:
            runs[event["run_id"]].append(event)
    return runs


def check_aligned(run_id: str, converted: list[dict], vendored: list[dict]) -> None:
    ours, theirs = tool_events(converted), tool_events(vendored)
    for number, (mine, old) in enumerate(zip(ours, theirs, strict=False), 1):
        if mine != old:
            raise ConversionError(f"{run_id}: tool event {number} differs from the vendored trace:\n"
                                  f"  converted {json.dumps(mine)[:300]}\n  vendored  {json.dumps(old)[:300]}")
    if len(ours) != len(theirs):
        raise ConversionError(f"{run_id}: {len(ours)} tool events, the vendored trace has {len(theirs)}")


def convert(trace_set: TraceSet, repo: Path, traces: Path, count: int | None) -> tuple[list[dict], list[list[dict]]]:
    meta = json.loads((traces / f"{trace_set.stem}.runs.json").read_text())
    if trace_set.subset:
        meta = subset(meta, count, trace_set.keep)
    vendored = vendored_runs(traces / trace_set.vendored, {row["run_id"] for row in meta})
    rows, runs = [], []
    for row, events in trace_set.convert(git_dir(repo), meta):
        check_aligned(row["run_id"], events, vendored[row["run_id"]])
        rows.append(row)
        runs.append(events)
    return rows, runs


def write_gzip(path: Path, lines: Iterable[str]) -> None:
    """gzip without a timestamp or file name, so the same input gives the same bytes."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as out:
        for line in lines:
            out.write(line.encode("utf-8"))
    path.write_bytes(buffer.getvalue())


def summary(runs: list[list[dict]]) -> str:
    counts: dict[str, int] = {}
    for events in runs:
        for event in events:
            key = event["kind"] if event["kind"] != "model_output" else f"model_output/{event['output_kind']}"
            counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tau-bench", type=Path, help="a clone or snapshot of sierra-research/tau-bench")
    parser.add_argument("--gemini", type=Path, help="a clone or snapshot of gruckion/mini-swe-agent")
    parser.add_argument("--deepseek", type=Path, help="a clone or snapshot of SWE-agent/mini-swe-agent with pull requests #814 and #816")
    parser.add_argument("--traces", type=Path, default=TRACES, help="the vendored traces (their runs and tool events)")
    parser.add_argument("--out", type=Path, default=TRACES, help="where the text-bearing traces go")
    parser.add_argument("--sets", nargs="*", default=None, help=f"of {[s.name for s in SETS]} (default: those whose source is given)")
    parser.add_argument("--miniswe-runs", type=int, default=MINISWE_RUNS, help="runs kept of each mini-swe set (0: all)")
    parser.add_argument("--check-only", action="store_true", help="convert and check, write nothing")
    args = parser.parse_args(argv)
    chosen = [s for s in SETS if (s.name in args.sets if args.sets is not None else getattr(args, s.source) is not None)]
    if not chosen:
        parser.error("name at least one source (--tau-bench, --gemini, --deepseek)")
    for trace_set in chosen:
        repo = getattr(args, trace_set.source)
        if repo is None:
            parser.error(f"set {trace_set.name} needs --{trace_set.source.replace('_', '-')}")
        try:
            rows, runs = convert(trace_set, repo, args.traces, args.miniswe_runs or None)
        except ConversionError as problem:
            print(f"error: {trace_set.name}: {problem}", file=sys.stderr)
            return 1
        print(f"{trace_set.name}: {len(runs)} runs aligned with {trace_set.vendored}; {summary(runs)}")
        if not args.check_only:
            write_gzip(args.out / trace_set.output,
                       (json.dumps(event, ensure_ascii=False) + "\n" for events in runs for event in events))
            if trace_set.subset:
                (args.out / f"{trace_set.output.removesuffix('.jsonl.gz')}.runs.json").write_text(
                    json.dumps(rows, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
