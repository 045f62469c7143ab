"""The text-bearing traces: the converter (scripts/convert_traces.py) on small source-shaped runs,
the committed traces well-formed and aligned with the vendored tool-only ones, and the no-tool
harness (bench/no_tool_traces.py) catching an injected loop through the real core."""
from __future__ import annotations

import gzip
import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

from loopwarden.eventformat import parse_event

REPO = pathlib.Path(__file__).resolve().parents[2]
TRACES = REPO / "traces"
CONVERTER = REPO / "scripts" / "convert_traces.py"


def _load(name: str, path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module   # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


convert = _load("convert_traces", CONVERTER)


def kinds(events: list[dict]) -> list[str]:
    return [e["kind"] if e["kind"] != "model_output" else f"model_output/{e['output_kind']}" for e in events]


# ---------------------------------------------------------------------------------------------
# The converter on source-shaped runs


TAU_TRAJECTORY = [
    {"role": "system", "content": "# Airline Agent Policy"},
    {"role": "user", "content": "Hi, I want to cancel a booking."},
    {"role": "assistant", "content": "Could you give me your user id?"},
    {"role": "user", "content": "mia_li_3668"},
    {"role": "assistant", "content": "Let me look you up.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_user_details", "arguments": '{"user_id":"mia_li_3668"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "name": "get_user_details", "content": '{"name": "Mia"}'},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_2", "type": "function", "function": {"name": "cancel_reservation", "arguments": '{"reservation_id":"X1"}'}}]},
    {"role": "tool", "tool_call_id": "call_2", "name": "cancel_reservation", "content": "Error: reservation not found"},
    {"role": "assistant", "content": "I could not find reservation X1."},
    {"role": "user", "content": "Thanks ###STOP###"},
]


def test_tau_run_keeps_the_conversation_around_the_tool_calls():
    events = convert.tau_run("tau-1", TAU_TRAJECTORY)
    assert kinds(events) == [
        "user_turn", "model_output/final_answer", "user_turn", "model_output/message", "tool_call", "tool_outcome",
        "tool_call", "tool_outcome", "model_output/final_answer", "user_turn", "run_end"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["prompt_id"] for e in events if e["kind"] == "user_turn"] == ["u1", "u2", "u3"]
    outputs = [e["text"] for e in events if e["kind"] == "model_output"]
    assert outputs == ["Could you give me your user id?", "Let me look you up.", "I could not find reservation X1."]
    outcome = events[5]
    assert outcome["params"] == {"user_id": "mia_li_3668"}
    assert outcome["result"] == {"content": [{"type": "text", "text": '{"name": "Mia"}'}], "details": {}}
    assert events[7]["error"] == "Error: reservation not found" and "result" not in events[7]
    for event in events:
        assert parse_event(event).kind is not None   # the replay format's own parser knows every event


MINISWE_1 = {"messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "<pr_description>fix it</pr_description>"},
    {"role": "assistant", "content": "THOUGHT: look around.\n\n```bash\nls\n```",
     "extra": {"response": {"choices": [{"message": {"reasoning": "**Planning** I will list files."}}]}}},
    {"role": "user", "content": "<returncode>0</returncode>\n<output>\nsetup.py\n</output>"},
    {"role": "assistant", "content": "THOUGHT: two commands.\n\n```bash\nls\n```\n\n```bash\npwd\n```"},
    {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."},
    {"role": "assistant", "content": "THOUGHT: done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff\n```"},
    {"role": "user", "content": "diff --git a/x b/x"},
]}


def test_miniswe_1_text_actions_become_calls_and_the_last_text_the_final_answer():
    events = convert.miniswe_run("m1", MINISWE_1)
    assert kinds(events) == [
        "model_output/thought", "model_output/message", "tool_call", "tool_outcome",
        "model_output/message",   # two actions: a format error, no call
        "model_output/final_answer", "tool_call", "tool_outcome", "run_end"]
    calls = [e for e in events if e["kind"] == "tool_call"]
    assert [(c["tool_call_id"], c["params"]) for c in calls] == [
        ("m1-c1", {"command": "ls"}), ("m1-c2", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"})]
    assert events[-2]["result"]["content"][0]["text"] == "diff --git a/x b/x"
    assert events[0]["text"] == "**Planning** I will list files."


MINISWE_2 = {"messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "<pr_description>fix it</pr_description>"},
    {"role": "assistant", "content": "", "reasoning_content": "First find the file.", "tool_calls": [
        {"id": "call_00_a", "type": "function", "function": {"name": "bash", "arguments": '{"command": "grep -rn x ."}'}}]},
    {"role": "tool", "tool_call_id": "call_00_a", "content": "<returncode>0</returncode>\n<output>\n./x.py\n</output>"},
    {"role": "assistant", "content": "Now submit.", "tool_calls": [
        {"id": "call_00_b", "type": "function", "function": {"name": "bash",
                                                              "arguments": '{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}'}}]},
    {"role": "exit", "content": "diff --git a/x.py b/x.py", "extra": {"exit_status": "Submitted"}},
]}


def test_miniswe_2_native_calls_keep_their_reasoning_and_the_submission_answers_the_last_call():
    events = convert.miniswe_run("m2", MINISWE_2)
    assert kinds(events) == ["model_output/thought", "tool_call", "tool_outcome", "model_output/final_answer",
                             "tool_call", "tool_outcome", "run_end"]   # the empty text is left out
    assert events[0]["text"] == "First find the file."
    assert events[5]["tool_call_id"] == "call_00_b"
    assert events[5]["result"]["content"][0]["text"] == "diff --git a/x.py b/x.py"


def test_alignment_check_names_the_run_and_the_first_differing_tool_event():
    events = convert.tau_run("tau-1", TAU_TRAJECTORY)
    vendored = [e for e in events if e["kind"] in ("tool_call", "tool_outcome")]
    convert.check_aligned("tau-1", events, vendored)   # the same tool events: no error
    changed = json.loads(json.dumps(vendored))
    changed[2]["params"] = {"reservation_id": "X2"}
    with pytest.raises(convert.ConversionError, match=r"tau-1: tool event 3 differs"):
        convert.check_aligned("tau-1", events, changed)
    with pytest.raises(convert.ConversionError, match=r"tau-1: 4 tool events, the vendored trace has 3"):
        convert.check_aligned("tau-1", events, vendored[:3])


def test_converter_without_the_source_commit_fails_with_one_clear_line(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path / "empty")], check=True)
    done = subprocess.run([sys.executable, str(CONVERTER), "--tau-bench", str(tmp_path / "empty"), "--check-only"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith("error: tau-airline: ") and "cannot read 7362a17:historical_trajectories" in done.stderr


# ---------------------------------------------------------------------------------------------
# The committed text-bearing traces


def read(path: pathlib.Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


@pytest.mark.parametrize("trace_set", convert.SETS, ids=lambda s: s.name)
def test_committed_text_trace_is_well_formed_and_aligned_with_the_vendored_one(trace_set):
    events = read(TRACES / trace_set.output)
    runs: dict[str, list[dict]] = {}
    for event in events:
        runs.setdefault(event["run_id"], []).append(event)
    runs_file = (TRACES / f"{trace_set.output.removesuffix('.jsonl.gz')}.runs.json" if trace_set.subset
                 else TRACES / f"{trace_set.stem}.runs.json")
    assert list(runs) == [row["run_id"] for row in json.loads(runs_file.read_text())]
    vendored = convert.vendored_runs(TRACES / trace_set.vendored, set(runs))
    for run_id, run in runs.items():
        assert [e["seq"] for e in run] == list(range(1, len(run) + 1)), run_id
        assert run[-1]["kind"] == "run_end" and all(e["kind"] != "run_end" for e in run[:-1]), run_id
        convert.check_aligned(run_id, run, vendored[run_id])
        for event in run:
            if event["kind"] == "model_output":
                assert event["text"].strip() and event["output_kind"] in ("message", "thought", "final_answer")
            assert parse_event(event).kind is not None
    outputs = {e["output_kind"] for e in events if e["kind"] == "model_output"}
    assert {"message", "final_answer"} <= outputs
    assert any(e["kind"] == "user_turn" for e in events) == trace_set.name.startswith("tau")

# ---------------------------------------------------------------------------------------------
# The no-tool harness, through the daemon's service layer and the compiled core


def test_harness_stops_an_injected_repeated_message_and_spares_different_messages():
    from bench import no_tool_traces as harness
    from bench.real_traces import good_run_figures, load_runs
    from loopwarden_server.config import load_config_text

    runs = dict(sorted(load_runs(TRACES / "tau-bench-retail-grok3.text.jsonl.gz").items())[:12])
    setting = next(s for s in harness.SETTINGS if s.name == "repeatedOutput")
    settings = load_config_text(json.dumps(setting.config)).settings_for("")
    warn_at, abort_at = settings.repeated_output_warn_at, settings.repeated_output_abort_at
    loops = {kind: harness.LOOPS[kind] for kind in ("message repeated", "control: 30 different messages")}
    injected = list(harness.injected_runs(runs, 4, 40, loops))
    assert len(injected) == 8

    caught = harness.score(setting.config, injected)
    # One output a step: the warning and the stop land on the step the thresholds name.
    assert [(c.warned, c.stopped, c.detector) for c in caught["message repeated"]] == \
        [((warn_at, warn_at), (abort_at, abort_at), "repeated_output")] * 4
    assert [(c.warned, c.stopped) for c in caught["control: 30 different messages"]] == [(None, None)] * 4
    # The same runs without a loop: nothing stopped.
    assert good_run_figures(setting.config, runs).blocked == 0
