"""Trace replay and evaluation: the shipped labelled set scored at the default thresholds, the importers, the CLI."""
from __future__ import annotations

import gzip
import json
import os
import pathlib
import subprocess
import sys

import pytest

from loopwarden._wire import event_from_dict
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden_server.config import load_config_text, load_default_config
from loopwarden_server.replay.offline import OfflineEngine
from loopwarden.replay import TraceError, conversation_events, read_trace
from loopwarden_server.replay import (
    LOOP_KINDS, LabelledSetError, Prediction, Stats, evaluate_offline, format_report, load_labelled_set,
    text_sha256,
)
from tests.support.daemon import running_daemon

CONFIG = "{tools:{loopDetection:{enabled:true}}}"
REPO = pathlib.Path(__file__).resolve().parents[2]
LABELLED = REPO / "tests" / "replay" / "labelled"
MANIFEST = LABELLED / "manifest.json"
FIXTURES = REPO / "tests" / "replay" / "fixtures"
GENERATOR = REPO / "scripts" / "make_labelled_traces.py"
TAU_BENCH_TRACE = REPO / "traces" / "tau-bench-airline-gpt-4o.jsonl"  # vendored: see traces/README.md

SETTINGS = load_config_text(CONFIG).settings_for("")
W, C, U, N = (SETTINGS.warning_threshold, SETTINGS.critical_threshold, SETTINGS.unknown_tool_threshold,
              SETTINGS.compaction_window_size)

# Calls from the loop's first call (= 1) to the first verdict of the expected detector, its
# action, and the call first blocked/aborted, as spec section 5 and 7 predict them.
THRESHOLD_PREDICTIONS = {
    "generic_repeat": (W + 1, "warn", C + 1),  # the 11th identical call is warned, the 21st blocked
    "process_poll": (W + 1, "warn", C + 1),
    "command_status_poll": (W + 1, "warn", C + 1),
    "ping_pong": (W, "warn", C),  # the count includes the current call
    "unknown_tool": (U + 1, "block", U + 1),
    "post_compaction": (N, "abort", N),  # the N-th identical outcome after the retry
}


def loopwarden(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the console script installed next to this interpreter."""
    script = pathlib.Path(sys.executable).parent / "loopwarden"
    assert script.exists(), f"console script not installed at {script}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWARDEN_")}
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=timeout, env=env)


def write_jsonl(path: pathlib.Path, events: list[dict]) -> pathlib.Path:
    path.write_text("".join(json.dumps(event) + "\n" for event in events), encoding="utf-8")
    return path


def done(run_id: str, seq: int, tool: str, params: dict, text: str) -> list[dict]:
    """A tool_call at seq and its outcome at seq + 1, with result R(text)."""
    result = {"content": [{"type": "text", "text": text}], "details": {"ok": True}}
    return [{"run_id": run_id, "seq": seq, "kind": "tool_call", "tool_name": tool, "params": params},
            {"run_id": run_id, "seq": seq + 1, "kind": "tool_outcome", "tool_name": tool, "params": params,
             "result": result}]


def repeated_reads(run_id: str, times: int, first_seq: int = 1) -> list[dict]:
    return [e for n in range(times) for e in done(run_id, first_seq + 2 * n, "read", {"path": "/x"}, "same")]


def write_manifest(path: pathlib.Path, traces: list[dict], runs: list[dict]) -> pathlib.Path:
    path.write_text(json.dumps({"format": "loopwarden-labelled-set/1", "traces": traces, "runs": runs}),
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def labelled_set():
    assert TAU_BENCH_TRACE.is_file(), f"vendored trace missing: expected {TAU_BENCH_TRACE}"
    return load_labelled_set(MANIFEST)


@pytest.fixture(scope="module")
def report(labelled_set):
    return evaluate_offline(labelled_set, load_config_text(CONFIG))


@pytest.fixture(scope="module")
def manifest_runs() -> dict[str, dict]:
    """The raw manifest rows (with the generator's extra fields) by run id."""
    return {row["run_id"]: row for row in json.loads(MANIFEST.read_text(encoding="utf-8"))["runs"]}


class TestShippedSet:
    def test_every_tau_bench_run_is_labelled_good(self, labelled_set):
        """The negatives are exactly the 200 real τ-bench runs of the shared trace."""
        tau_runs = {event.data["run_id"] for event in read_trace(TAU_BENCH_TRACE)}

        assert 200 == len(tau_runs)
        assert tau_runs == {label.run_id for label in labelled_set.labels if label.label == "good"}

    def test_at_least_twenty_loops_of_every_kind(self, labelled_set):
        """Each of the six loop kinds has at least 20 looping runs, each naming its kind's detector."""
        looping = [label for label in labelled_set.labels if label.looping]
        by_kind = {kind: sum(1 for label in looping if label.kind == kind) for kind in LOOP_KINDS}

        assert set(LOOP_KINDS) == {label.kind for label in looping}
        assert all(count >= 20 for count in by_kind.values()), by_kind
        assert [] == [label.run_id for label in looping if label.detector != LOOP_KINDS[label.kind].detector]

    def test_loops_start_at_varied_positions(self, manifest_runs):
        """Loops are injected at many different points of their runs, from the very first call on."""
        starts = [row["loop_start_seq"] for row in manifest_runs.values() if row["label"] == "looping"]

        assert 1 == min(starts)
        assert len(set(starts)) >= 15

    def test_the_set_stays_small(self):
        """The shipped positives are a few hundred kilobytes, not megabytes."""
        assert (LABELLED / "positives.jsonl.gz").stat().st_size < 2_000_000


class TestNegativesAtDefaults:
    def test_no_tau_bench_run_is_blocked_or_aborted(self, report):
        """No real τ-bench run gets a BLOCK or ABORT at the default thresholds."""
        assert (200, []) == (report.good_runs, report.wrongly_blocked)

    def test_no_tau_bench_run_is_warned(self, report):
        """No real τ-bench run is even warned at the default thresholds."""
        assert [] == report.good_warned

    def test_no_event_is_rejected(self, report):
        """Every event of the set is well-formed input for the daemon."""
        assert 0 == report.rejected_events

    def test_looping_runs_are_clean_before_their_loop(self, report):
        """The copied part of a looping run before its injected loop draws no verdict."""
        assert [] == report.flagged_before_loop


class TestPositivesAtDefaults:
    def test_no_loop_is_missed(self, report):
        """Every injected loop is caught by the detector expected for its kind."""
        assert (144, []) == (report.looping_runs, report.missed)

    @pytest.mark.parametrize("kind", sorted(THRESHOLD_PREDICTIONS))
    def test_each_loop_is_caught_exactly_at_its_threshold(self, report, kind):
        """Every loop of a kind is first flagged, and then blocked or aborted, at the call its thresholds predict."""
        first, action, enforced = THRESHOLD_PREDICTIONS[kind]
        loops = [loop for loop in report.loops if loop.kind == kind]

        assert {(first, action, enforced)} == {(loop.detected_after, loop.detected_action, loop.enforced_after)
                                               for loop in loops}

    @pytest.mark.parametrize("kind", sorted(THRESHOLD_PREDICTIONS))
    def test_report_rows_match_the_thresholds(self, report, kind):
        """The report's per-kind row: all detected, min = median = max = the predicted call, all as predicted."""
        first, action, enforced = THRESHOLD_PREDICTIONS[kind]
        (row,) = [row for row in report.kinds if row.kind == kind]

        assert Prediction(first, action, enforced) == row.predicted
        assert (row.runs, row.runs, row.runs) == (row.detected, row.enforced, row.as_predicted)
        assert (Stats(row.runs, first, first, first), Stats(row.runs, enforced, enforced, enforced)) == (
            row.detection, row.enforcement)

    def test_default_thresholds_are_the_documented_ones(self):
        """The predictions above are the spec's numbers: warned at the 11th repeat, blocked at the 21st."""
        assert (10, 20, 10, 3) == (W, C, U, N)

    def test_only_two_argument_unknown_tool_retries_meet_another_detector_first(self, report, manifest_runs):
        """Retrying a missing tool with two argument sets in turn is also a ping-pong, warned one call before the unknown-tool block."""
        other_first = {loop.run_id: loop.first_detector for loop in report.loops
                       if loop.first_detector != loop.detector}
        two_argument_retries = {run_id for run_id, row in manifest_runs.items()
                                if row.get("kind") == "unknown_tool" and row.get("arg_variants") == 2}

        assert two_argument_retries == set(other_first)
        assert {"ping_pong"} == set(other_first.values())

    def test_headline_figures(self, report):
        """Overall: 144 loops caught after 3 to 11 calls, enforced after 3 to 21; the report passes."""
        assert (144, N, W + 1) == (report.detection.n, report.detection.min, report.detection.max)
        assert (144, N, C + 1) == (report.enforcement.n, report.enforcement.min, report.enforcement.max)
        assert report.ok
        assert "result: PASS" == format_report(report)[-1]


class TestScoring:
    def test_blocked_good_run_fails_and_warned_good_run_is_counted(self, tmp_path):
        """A good run that gets a BLOCK is wrongly blocked (the report fails); one that is only warned is counted apart."""
        trace = write_jsonl(tmp_path / "t.jsonl", repeated_reads("blocked", 21) + repeated_reads("warned", 11))
        labelled = load_labelled_set(write_manifest(tmp_path / "m.json", [{"path": trace.name}], [
            {"run_id": "blocked", "label": "good"}, {"run_id": "warned", "label": "good"}]))

        report = evaluate_offline(labelled, load_config_text(CONFIG))

        assert (["blocked"], ["blocked", "warned"], False) == (report.wrongly_blocked, report.good_warned, report.ok)

    def test_loop_without_its_detector_is_missed(self, tmp_path):
        """A looping run whose expected detector never fires is missed, even when another detector fires."""
        trace = write_jsonl(tmp_path / "t.jsonl", repeated_reads("loop", 12))
        labelled = load_labelled_set(write_manifest(tmp_path / "m.json", [{"path": trace.name}], [
            {"run_id": "loop", "label": "looping", "detector": "ping_pong", "loop_start_seq": 1}]))

        report = evaluate_offline(labelled, load_config_text(CONFIG))

        assert (["loop"], "generic_repeat", False) == (report.missed, report.loops[0].first_detector, report.ok)

    def test_calls_are_counted_from_the_loop_start(self, tmp_path):
        """Calls until detection count the loop's first call as 1, ignoring the calls before it."""
        events = done("loop", 1, "list", {"dir": "/"}, "a") + done("loop", 3, "list", {"dir": "/b"}, "b")
        trace = write_jsonl(tmp_path / "t.jsonl", events + repeated_reads("loop", 21, first_seq=5))
        labelled = load_labelled_set(write_manifest(tmp_path / "m.json", [{"path": trace.name}], [
            {"run_id": "loop", "label": "looping", "kind": "generic_repeat", "loop_start_seq": 5}]))

        report = evaluate_offline(labelled, load_config_text(CONFIG))

        assert (11, "warn", 21) == (report.loops[0].detected_after, report.loops[0].detected_action,
                                    report.loops[0].enforced_after)

    def test_missing_trace_is_named(self, tmp_path):
        """A manifest naming a trace that is not there fails with the trace's path."""
        labelled = load_labelled_set(write_manifest(tmp_path / "m.json", [{"path": "gone.jsonl"}], []))

        with pytest.raises(LabelledSetError, match="trace file missing: .*gone.jsonl"):
            evaluate_offline(labelled, load_config_text(CONFIG))

    def test_changed_trace_is_refused(self, tmp_path):
        """A trace whose sha256 no longer matches the manifest is refused: the labels were made for other runs."""
        trace = write_jsonl(tmp_path / "t.jsonl", repeated_reads("r", 1))
        labelled = load_labelled_set(write_manifest(tmp_path / "m.json", [{"path": trace.name, "sha256": "0" * 64}],
                                                    [{"run_id": "r", "label": "good"}]))

        with pytest.raises(LabelledSetError, match="changed since the labels were made"):
            evaluate_offline(labelled, load_config_text(CONFIG))

    def test_loop_start_must_be_a_tool_call(self, tmp_path):
        """A loop_start_seq that is not the seq of a tool_call of its run is an error naming the run."""
        trace = write_jsonl(tmp_path / "t.jsonl", repeated_reads("r", 2))
        labelled = load_labelled_set(write_manifest(tmp_path / "m.json", [{"path": trace.name}], [
            {"run_id": "r", "label": "looping", "kind": "generic_repeat", "loop_start_seq": 2}]))

        with pytest.raises(LabelledSetError, match="'r' has no tool_call with seq 2"):
            evaluate_offline(labelled, load_config_text(CONFIG))

    def test_manifest_must_declare_its_format(self, tmp_path):
        """A JSON file that is not a labelled-set manifest is refused."""
        (tmp_path / "m.json").write_text("{}")

        with pytest.raises(LabelledSetError, match="not a labelled set"):
            load_labelled_set(tmp_path / "m.json")


class TestEventsImporter:
    def test_gzip_reads_like_plain_text(self, tmp_path):
        """A .gz trace yields the same events as its uncompressed twin."""
        events = repeated_reads("r", 3)
        plain = write_jsonl(tmp_path / "t.jsonl", events)
        (tmp_path / "t.jsonl.gz").write_bytes(gzip.compress(plain.read_bytes()))

        assert [e.data for e in read_trace(plain)] == [e.data for e in read_trace(tmp_path / "t.jsonl.gz")]

    def test_bad_line_is_named(self, tmp_path):
        """A line that is not a JSON object stops the import naming the file and line."""
        trace = tmp_path / "t.jsonl"
        trace.write_text('{"run_id": "r", "kind": "run_end"}\n\n[1, 2]\n')

        with pytest.raises(TraceError, match=f"{trace}:3: an event must be a JSON object"):
            list(read_trace(trace))

    def test_offline_verdicts_are_the_daemons(self):
        """Every τ-bench event gets the same verdict offline (its fields handed to the core) as
        through the protobuf edge (the event encoded and evaluated as a request)."""
        assert TAU_BENCH_TRACE.is_file(), f"vendored trace missing: expected {TAU_BENCH_TRACE}"
        odd = [{"run_id": "r", "seq": 1, "kind": "tool_call", "tool_name": "read", "params_json": "{\"a\":1}"},
               {"run_id": "r", "seq": 2, "kind": "tool_outcome", "tool_name": "read", "result_json": "[1]"},
               {"run_id": "r", "seq": 3, "kind": "tool_outcome", "tool_name": "read"},
               {"run_id": "r", "seq": 4, "kind": "tool_outcome", "tool_name": "x", "error": "boom", "result": {}},
               {"run_id": "r", "seq": 5, "kind": "compaction_retry", "agent_id": "a1", "session_id": "s"},
               {"run_id": "r", "seq": 6}]
        events = [event.data for event in read_trace(TAU_BENCH_TRACE)] + odd

        config = load_default_config()
        offline, edge = OfflineEngine(config), OfflineEngine(config)
        mismatched = []
        for data in events:
            by_fields = offline.judge(data)
            answer = edge.core.evaluate(pb.EvaluateRequest(events=[event_from_dict(data)]).SerializeToString())
            (wire,) = pb.EvaluateResponse.FromString(answer.response).verdicts
            if (by_fields.seq, by_fields.run_id, by_fields.action, by_fields.count, by_fields.message) != (
                    wire.seq, wire.run_id, pb.Action.Name(wire.action).removeprefix("ACTION_").lower(), wire.count,
                    wire.message):
                mismatched.append(data)

        assert 200 < len(events) and [] == mismatched

    def test_offline_replay_reads_a_user_turn(self):
        """The event format's `user_turn`: after a block, a turn and the same call is ALLOW."""
        call = {"run_id": "r", "kind": "tool_call", "tool_name": "read", "params": {"path": "/x"}}
        outcome = {**call, "kind": "tool_outcome", "result": "same"}
        engine = OfflineEngine(load_config_text(CONFIG))
        for _ in range(20):
            engine.judge(call)
            engine.judge(outcome)
        assert "block" == engine.judge(call).action
        assert "allow" == engine.judge({"run_id": "r", "seq": 7, "kind": "user_turn", "prompt_id": "p2"}).action
        assert "allow" == engine.judge(call).action


class TestOpenAIImporter:
    EXPECTED = [
        {"run_id": "support-42", "seq": 1, "kind": "tool_call", "tool_name": "get_reservation_details",
         "tool_call_id": "call_a", "params_json": "{\"reservation_id\": \"ABC123\"}"},
        {"run_id": "support-42", "seq": 2, "kind": "tool_call", "tool_name": "get_flight_status",
         "tool_call_id": "call_b", "params_json": "{\"flight_number\": \"HAT001\"}"},
        {"run_id": "support-42", "seq": 3, "kind": "tool_outcome", "tool_name": "get_reservation_details",
         "tool_call_id": "call_a", "params_json": "{\"reservation_id\": \"ABC123\"}",
         "result": {"content": [{"type": "text", "text": "{\"reservation_id\": \"ABC123\", \"status\": \"confirmed\"}"}],
                    "details": {}}},
        {"run_id": "support-42", "seq": 4, "kind": "tool_outcome", "tool_name": "get_flight_status",
         "tool_call_id": "call_b", "params_json": "{\"flight_number\": \"HAT001\"}",
         "error": "Error: Tool get_flight_status not found"},
        {"run_id": "support-42", "seq": 5, "kind": "tool_call", "tool_name": "think", "tool_call_id": "call_c",
         "params_json": "{\"thought\": \"status tool missing\"}"},
        {"run_id": "support-42", "seq": 6, "kind": "tool_outcome", "tool_name": "think", "tool_call_id": "call_c",
         "params_json": "{\"thought\": \"status tool missing\"}",
         "result": {"content": [{"type": "text", "text": "noted"}], "details": {}}},
        {"run_id": "support-42", "seq": 7, "kind": "run_end"},
        {"run_id": "openai_conversations-1", "seq": 1, "kind": "tool_call", "tool_name": "list_all_airports",
         "tool_call_id": "call_d", "params_json": "{}"},
        {"run_id": "openai_conversations-1", "seq": 2, "kind": "tool_outcome", "tool_name": "list_all_airports",
         "tool_call_id": "call_d", "params_json": "{}",
         "result": {"content": [{"type": "text", "text": "JFK, SEA, SFO"}], "details": {}}},
        {"run_id": "openai_conversations-1", "seq": 3, "kind": "run_end"},
    ]

    def test_json_list_of_conversations(self):
        """Calls come before their results, `Error:` content is an error, content parts keep their text, ids name runs."""
        events = [event.data for event in read_trace(FIXTURES / "openai_conversations.json", "openai")]

        assert self.EXPECTED == events

    def test_jsonl_one_conversation_per_line(self, tmp_path):
        """The same conversations as JSONL, one per line, import to the same events."""
        conversations = json.loads((FIXTURES / "openai_conversations.json").read_text(encoding="utf-8"))
        trace = write_jsonl(tmp_path / "openai_conversations.jsonl", conversations)

        assert self.EXPECTED == [event.data for event in read_trace(trace, "openai")]

    def test_tool_message_without_its_call_is_named(self, tmp_path):
        """A tool message answering no earlier call is an error naming the conversation and message."""
        trace = tmp_path / "c.json"
        trace.write_text(json.dumps([[{"role": "tool", "tool_call_id": "nope", "content": "x"}]]))

        with pytest.raises(TraceError, match="conversation 0: message 0: tool message answers no earlier tool call"):
            list(read_trace(trace, "openai"))

    def test_legacy_function_call_messages(self):
        """An assistant `function_call` answered by a `function` message is one call and its outcome."""
        events = conversation_events([
            {"role": "assistant", "function_call": {"name": "read", "arguments": "{\"path\": \"/x\"}"}},
            {"role": "function", "name": "read", "content": "hello"}], "r")

        assert [("tool_call", "read"), ("tool_outcome", "read"), ("run_end", None)] == [
            (e["kind"], e.get("tool_name")) for e in events]
        assert events[0]["tool_call_id"] == events[1]["tool_call_id"]

    def test_tau_bench_runs_survive_a_round_trip(self, tmp_path):
        """The τ-bench runs written as OpenAI conversations import back to the shared trace's events."""
        assert TAU_BENCH_TRACE.is_file(), f"vendored trace missing: expected {TAU_BENCH_TRACE}"
        originals = [event.data for event in read_trace(TAU_BENCH_TRACE)]
        conversations: dict[str, list] = {}
        for data in originals:
            messages = conversations.setdefault(data["run_id"], [])
            if data["kind"] == "tool_call":
                messages.append({"role": "assistant", "content": None, "tool_calls": [{
                    "id": data["tool_call_id"], "type": "function",
                    "function": {"name": data["tool_name"], "arguments": json.dumps(data["params"])}}]})
            elif data["kind"] == "tool_outcome":
                content = data["error"] if "error" in data else data["result"]["content"][0]["text"]
                messages.append({"role": "tool", "tool_call_id": data["tool_call_id"], "content": content})
        trace = tmp_path / "tau.json"
        trace.write_text(json.dumps([{"id": run_id, "messages": m} for run_id, m in conversations.items()]))

        imported = []
        for event in read_trace(trace, "openai"):
            data = dict(event.data)
            if "params_json" in data:
                data["params"] = json.loads(data.pop("params_json"))
            imported.append(data)

        assert originals == imported


class TestCli:
    def test_offline_replay_prints_every_verdict(self, tmp_path):
        """`replay --offline` needs no daemon: eleven identical reads give ten ALLOW lines, a WARN and the summary."""
        trace = write_jsonl(tmp_path / "repeat.jsonl", [
            {"run_id": "offline-small", "seq": seq, "kind": "tool_call", "tool_name": "read",
             "tool_call_id": f"c{seq}", "params": {"path": "/x"}} for seq in range(1, 12)])

        result = loopwarden("replay", "--offline", str(trace))

        assert (0, "") == (result.returncode, result.stderr)
        lines = result.stdout.splitlines()
        assert [f"offline-small seq={seq} tool_call read -> ALLOW" for seq in range(1, 11)] == lines[:10]
        assert lines[10].startswith("offline-small seq=11 tool_call read -> WARN generic_repeat count=10 ")
        assert "summary: allow=10, warn=1" == lines[11]

    def test_summary_only_prints_the_run_table(self, tmp_path):
        """`--summary-only` prints one row per run with counts and the first warning, block and abort."""
        trace = write_jsonl(tmp_path / "runs.jsonl", repeated_reads("looping", 22) + repeated_reads("calm", 2))

        result = loopwarden("replay", "--offline", "--summary-only", str(trace))

        assert 0 == result.returncode, result.stderr
        header, looping, calm, summary = result.stdout.splitlines()
        assert header.split()[:8] == ["run", "events", "calls", "allow", "warn", "block", "abort", "reject"]
        assert ["looping", "44", "22", "32", "10", "2", "0", "0", "seq", "21", "generic_repeat",
                "seq", "41", "generic_repeat", "-"] == looping.split()
        assert ["calm", "4", "2", "4", "0", "0", "0", "0", "-", "-", "-"] == calm.split()
        assert "summary: allow=36, block=2, warn=10" == summary

    def test_openai_format_offline_with_runs_and_quiet(self):
        """`--format openai --quiet --runs` on the fixture: no verdict lines, no flagged run, just the summary."""
        result = loopwarden("replay", "--offline", "--format", "openai", "--quiet", "--runs",
                            str(FIXTURES / "openai_conversations.json"))

        assert (0, "summary: allow=10\n") == (result.returncode, result.stdout)

    def test_offline_config_file_is_used(self, tmp_path):
        """`--config` sets the in-process engine's thresholds: with W=2 the third identical call is warned."""
        config = tmp_path / "c.json5"
        config.write_text("{tools:{loopDetection:{enabled:true, warningThreshold:2}}}")
        trace = write_jsonl(tmp_path / "t.jsonl", repeated_reads("r", 3))

        result = loopwarden("replay", "--offline", "--config", str(config), "--quiet", str(trace))

        assert 0 == result.returncode, result.stderr
        assert result.stdout.startswith("r seq=5 tool_call read -> WARN generic_repeat count=2 ")

    def test_bad_config_exits_2_naming_the_field(self, tmp_path):
        """An invalid --config stops the offline replay with exit 2 and the field's dotted path."""
        config = tmp_path / "c.json5"
        config.write_text("{tools:{loopDetection:{warningThreshold:0}}}")

        result = loopwarden("replay", "--offline", "--config", str(config), str(config))

        assert 2 == result.returncode
        assert "tools.loopDetection.warningThreshold" in result.stderr

    def test_shadow_mode_shows_what_would_be_enforced(self, tmp_path):
        """Under shadow mode the withheld block is printed (even with --quiet) and counted as a block."""
        config = tmp_path / "c.json5"
        config.write_text("{tools:{loopDetection:{enabled:true}}, loopwarden:{shadowMode:true}}")
        trace = write_jsonl(tmp_path / "t.jsonl", repeated_reads("s", 21))

        result = loopwarden("replay", "--offline", "--config", str(config), "--quiet", str(trace))

        assert 0 == result.returncode, result.stderr
        *_, blocked, summary = result.stdout.splitlines()
        assert blocked.startswith("s seq=41 tool_call read -> ALLOW (shadow: BLOCK) generic_repeat count=20")
        assert "summary: allow=31, block=1, warn=10" == summary

    def test_config_needs_offline(self, tmp_path):
        """`--config` without `--offline` is refused: a daemon replays on its own config."""
        result = loopwarden("replay", "--config", "x.json5", "x.jsonl")

        assert (2, True) == (result.returncode, "--config needs --offline" in result.stderr)

    def test_evaluate_shipped_set_passes(self):
        """`loopwarden evaluate` on the shipped manifest prints the report, ending in PASS, and exits 0."""
        result = loopwarden("evaluate", str(MANIFEST))

        assert 0 == result.returncode, result.stdout + result.stderr
        assert "good runs wrongly blocked (any BLOCK/ABORT): 0" in result.stdout.splitlines()
        assert "result: PASS" == result.stdout.splitlines()[-1]

    def test_evaluate_exits_1_on_a_wrong_block(self, tmp_path):
        """A good run that gets blocked makes `evaluate` exit 1; `--json` gives the report as data."""
        trace = write_jsonl(tmp_path / "t.jsonl", repeated_reads("blocked", 21))
        manifest = write_manifest(tmp_path / "m.json", [{"path": trace.name}], [{"run_id": "blocked", "label": "good"}])

        result = loopwarden("evaluate", str(manifest), "--json")

        assert 1 == result.returncode, result.stderr
        assert (["blocked"], False) == (json.loads(result.stdout)["wrongly_blocked"], json.loads(result.stdout)["ok"])

    def test_evaluate_missing_trace_exits_2(self, tmp_path):
        """A manifest whose trace is missing makes `evaluate` exit 2 naming the file."""
        manifest = write_manifest(tmp_path / "m.json", [{"path": "gone.jsonl"}], [])

        result = loopwarden("evaluate", str(manifest))

        assert 2 == result.returncode
        assert "gone.jsonl" in result.stderr

    @pytest.mark.daemon
    def test_online_evaluation_matches_offline(self, labelled_set, tmp_path):
        """Through a real daemon, a slice of the shipped set scores exactly as it does in-process."""
        wanted = {label.run_id for label in labelled_set.labels if label.label == "good"}
        wanted = set(sorted(wanted)[:10])
        for kind in LOOP_KINDS:
            wanted.add(next(label.run_id for label in labelled_set.labels if label.kind == kind))
        trace = write_jsonl(tmp_path / "slice.jsonl",
                            [event.data for event in labelled_set.events() if event.data["run_id"] in wanted])
        manifest = tmp_path / "slice.json"
        raw = json.loads(MANIFEST.read_text(encoding="utf-8"))
        write_manifest(manifest, [{"path": trace.name, "sha256": text_sha256(trace)}],
                       [row for row in raw["runs"] if row["run_id"] in wanted])

        offline = loopwarden("evaluate", str(manifest), "--json")
        with running_daemon(CONFIG) as daemon:
            online = loopwarden("evaluate", str(manifest), "--json", "--address", daemon.grpc_target,
                                "--run-prefix", "eval/")

        assert (0, 0) == (offline.returncode, online.returncode), offline.stderr + online.stderr
        offline_report, online_report = json.loads(offline.stdout), json.loads(online.stdout)
        for report in (offline_report, online_report):
            for row in report["kinds"]:
                del row["predicted"], row["as_predicted"]  # offline only: needs the effective settings
        assert offline_report == online_report


class TestGenerator:
    def test_regenerates_the_shipped_set_exactly(self, tmp_path):
        """The generator is deterministic: run again, it writes the shipped manifest and positives."""
        assert TAU_BENCH_TRACE.is_file(), f"vendored trace missing: expected {TAU_BENCH_TRACE}"

        result = subprocess.run([sys.executable, str(GENERATOR), "--out", str(tmp_path)],
                                capture_output=True, text=True, timeout=120)

        assert 0 == result.returncode, result.stderr
        shipped, fresh = (json.loads((d / "manifest.json").read_text(encoding="utf-8")) for d in (LABELLED, tmp_path))
        for manifest, directory in ((shipped, LABELLED), (fresh, tmp_path)):
            for trace in manifest["traces"]:  # the vendored negatives: the same file, seen from two directories
                if trace["path"].startswith(".."):
                    # realpath: either directory may sit behind a symlink (the temp folder often does).
                    trace["path"] = os.path.realpath(directory / trace["path"])
        assert shipped == fresh
        assert (gzip.decompress((LABELLED / "positives.jsonl.gz").read_bytes())
                == gzip.decompress((tmp_path / "positives.jsonl.gz").read_bytes()))

    def test_missing_tau_bench_trace_fails_clearly(self, tmp_path):
        """Without the shared trace the generator exits 2, naming the path it looked for and --tau."""
        missing = tmp_path / "nowhere.jsonl"

        result = subprocess.run([sys.executable, str(GENERATOR), "--tau", str(missing), "--out", str(tmp_path)],
                                capture_output=True, text=True, timeout=60)

        assert 2 == result.returncode
        assert str(missing) in result.stderr and "--tau" in result.stderr
        assert not (tmp_path / "manifest.json").exists()

