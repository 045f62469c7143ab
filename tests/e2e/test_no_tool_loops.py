"""Loops without tool calls through the real daemon: model_output events and compactions judged by
repeated_output, compaction_storm, stop_continuation and repeated_final_answer, each switched on
alone and all of them under the `fast` preset, over one Evaluate stream per run. Their WARN and
ABORT verdicts, the good runs they leave alone, a model output's usage stopping a run on
tokensPerTree, retries counted once, refusals of bad outputs, the counts surviving a restart of
the daemon on its state file and a trip through Redis to another daemon, and `loopwarden replay`
reading the JSONL form."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import Stream, call, channel, compaction, outcome
from tests.support.metrics import delta
from tests.support.servers import redis_server
from tests.support.state import wait_until_flushed

pytestmark = pytest.mark.daemon

# Each detector alone (at its defaults: repeatedOutput warnAt 3 abortAt 5, chunk 50 x 10;
# compactionStorm 3; stopContinuation 3; repeatedFinalAnswer warnAt 3 abortAt 5), and `fast`.
CONFIG = """{
  tools: {loopDetection: {enabled: true}},
  agents: {list: [
    {id: "output", loopwarden: {repeatedOutput: {enabled: true}}},
    {id: "storm", loopwarden: {compactionStorm: {enabled: true}}},
    {id: "stop", loopwarden: {stopContinuation: {enabled: true}}},
    {id: "answers", loopwarden: {repeatedFinalAnswer: {enabled: true}}},
    {id: "fast", loopwarden: {preset: "fast"}},
    {id: "tokens", loopwarden: {preset: "fast", budgets: {tokensPerTree: 1000}}},
  ]},
}"""

MESSAGE = pb.OUTPUT_KIND_MESSAGE
THOUGHT = pb.OUTPUT_KIND_THOUGHT
FINAL = pb.OUTPUT_KIND_FINAL_ANSWER
# One 50-character piece: ten of them in a row are one output's generation loop.
PIECE = "I need to check the file again before I answer you."[:50]


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


@pytest.fixture(scope="module")
def daemon_args() -> tuple[str, ...]:
    return ("--max-output-text-bytes", "8192")


def said(run: str, agent: str, text: str = "", kind: int = MESSAGE, seq: int = 0, stop_hook_active: bool = False,
         usage: pb.Usage | None = None, text_digest: str = "") -> pb.Event:
    output = pb.ModelOutput(text=text, text_digest=text_digest, output_kind=kind, stop_hook_active=stop_hook_active)
    if usage is not None:
        output.usage.CopyFrom(usage)
    return pb.Event(run_id=run, agent_id=agent, seq=seq, model_output=output)


def turn(run: str, agent: str) -> pb.Event:
    return pb.Event(run_id=run, agent_id=agent, user_turn=pb.UserTurn())


def new_work(stream: Stream, run: str, agent: str, n: int) -> None:
    """One tool call and its outcome, new to the run (its arguments and result are the n-th)."""
    params = json.dumps({"page": n})
    assert stream.one(call(run, "read", params, agent_id=agent)).action == pb.ACTION_ALLOW
    assert stream.one(outcome(run, "read", params, json.dumps({"text": f"page {n}"}), agent_id=agent)).action == pb.ACTION_ALLOW


def seen(v: pb.Verdict) -> tuple[str, str, int]:
    return pb.Action.Name(v.action), pb.Detector.Name(v.detector), v.count


def inspect(target: str, run: str) -> pb.InspectRunResponse:
    with channel(target) as ch:
        return pb_grpc.LoopDetectionServiceStub(ch).InspectRun(pb.InspectRunRequest(run_id=run), timeout=5)


ALLOW = ("ACTION_ALLOW", "DETECTOR_UNSPECIFIED", 0)


@pytest.mark.parametrize("agent", ["output", "fast"])
def test_a_message_repeated_is_warned_at_3_and_ends_the_run_at_5(daemon, run_id, agent):
    before = daemon.scrape()
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        verdicts = [stream.one(said(run_id, agent, "Let me look at that   once more.", seq=n)) for n in range(1, 6)]
        after_end = stream.one(said(run_id, agent, "Something new at last.", seq=6))
    warn, abort = ("ACTION_WARN", "DETECTOR_REPEATED_OUTPUT"), ("ACTION_ABORT", "DETECTOR_REPEATED_OUTPUT")
    assert [seen(v) for v in verdicts] == [ALLOW, ALLOW, (*warn, 3), (*warn, 4), (*abort, 5)]
    assert [v.announce for v in verdicts[2:]] == [True, False, True], "a warning is announced once per decade"
    assert verdicts[2].message.startswith("WARNING: you have written the same message 3 times in a row")
    assert (verdicts[4].error_code, list(verdicts[4].evidence.seqs)) == ("output_loop_persisted", [1, 2, 3, 4, 5])
    assert verdicts[4].message.startswith("CRITICAL: run aborted: the same message was written 5 times")
    assert (after_end.action, after_end.error_code) == (pb.ACTION_ABORT, "output_loop_persisted"), "the run is over"
    assert 1 == delta(before, daemon.scrape(), "loopwarden_output_loop_aborts_total", detector="repeated_output", agent=agent)
    view = inspect(daemon.grpc_target, run_id)
    assert (view.aborted, view.abort_error_code, view.output_streaks.messages) == (True, "output_loop_persisted", 5)


@pytest.mark.parametrize("agent", ["output", "fast"])
def test_an_output_of_one_50_character_piece_repeated_is_warned_then_ends_the_run(daemon, run_id, agent):
    assert len(PIECE) == 50
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        nine = stream.one(said(run_id, agent, PIECE * 9, kind=THOUGHT))
        first = stream.one(said(run_id, agent, PIECE * 10, kind=THOUGHT))
        second = stream.one(said(run_id, agent, "Thinking it over. " + PIECE * 12, kind=THOUGHT))
    assert seen(nine) == ALLOW, "nine copies are no loop"
    assert seen(first) == ("ACTION_WARN", "DETECTOR_REPEATED_OUTPUT", 10)
    assert "this thought repeats one piece of text 10 times over" in first.message
    assert (seen(second), second.error_code) == (("ACTION_ABORT", "DETECTOR_REPEATED_OUTPUT", 12), "output_loop_persisted")


@pytest.mark.parametrize("agent", ["storm", "fast"])
def test_compactions_with_no_new_tool_work_end_the_run_with_compaction_storm(daemon, run_id, agent):
    before = daemon.scrape()
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        new_work(stream, run_id, agent, 0)
        first = stream.one(compaction(run_id, agent_id=agent, seq=10))
        # The same call and result again: no new tool work.
        assert stream.one(call(run_id, "read", json.dumps({"page": 0}), agent_id=agent)).action == pb.ACTION_ALLOW
        stream.one(outcome(run_id, "read", json.dumps({"page": 0}), json.dumps({"text": "page 0"}), agent_id=agent))
        second = stream.one(compaction(run_id, agent_id=agent, seq=11))
        third = stream.one(compaction(run_id, agent_id=agent, seq=12))
        later = stream.one(call(run_id, "read", json.dumps({"page": 1}), agent_id=agent))
    assert [first.action, second.action] == [pb.ACTION_ALLOW, pb.ACTION_ALLOW]
    assert "post-compaction guard armed" in second.message, "the guard still arms"
    assert seen(third) == ("ACTION_ABORT", "DETECTOR_COMPACTION_STORM", 3)
    assert (third.error_code, list(third.evidence.seqs)) == ("compaction_storm", [10, 11, 12])
    assert "compacted 3 times with no new tool result" in third.message
    assert (later.action, later.error_code) == (pb.ACTION_ABORT, "compaction_storm")
    assert 1 == delta(before, daemon.scrape(), "loopwarden_output_loop_aborts_total", detector="compaction_storm", agent=agent)
    assert 0 == delta(before, daemon.scrape(), "loopwarden_guard_aborts_total", agent=agent), "not the guard's abort"


@pytest.mark.parametrize("agent", ["storm", "fast"])
def test_compactions_each_followed_by_new_tool_work_never_end_the_run(daemon, run_id, agent):
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        verdicts = []
        for n in range(12):
            verdicts.append(stream.one(compaction(run_id, agent_id=agent)))
            new_work(stream, run_id, agent, n)
    assert all(v.action == pb.ACTION_ALLOW for v in verdicts), [seen(v) for v in verdicts]
    view = inspect(daemon.grpc_target, run_id)
    assert (view.aborted, view.output_streaks.compactions) == (False, 0)


@pytest.mark.parametrize("agent", ["output", "stop", "answers", "fast"])
def test_thirty_different_messages_are_never_flagged(daemon, run_id, agent):
    texts = [f"Step {n}: I read section {n} and it says something new about item {n * 7}." for n in range(30)]
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        verdicts = [stream.one(said(run_id, agent, text, kind=(MESSAGE, THOUGHT, FINAL)[n % 3]))
                    for n, text in enumerate(texts)]
    assert [seen(v) for v in verdicts] == [ALLOW] * 30


@pytest.mark.parametrize("agent", ["answers", "fast"])
def test_the_same_final_answer_over_ten_user_turns_with_no_tool_work_is_flagged(daemon, run_id, agent):
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        verdicts = []
        for n in range(10):
            assert stream.one(turn(run_id, agent)).action in (pb.ACTION_ALLOW, pb.ACTION_ABORT)
            verdicts.append(stream.one(said(run_id, agent, "I'm sorry, I can't help with that.", kind=FINAL, seq=n + 1)))
    warn, abort = ("ACTION_WARN", "DETECTOR_REPEATED_FINAL_ANSWER"), ("ACTION_ABORT", "DETECTOR_REPEATED_FINAL_ANSWER")
    assert [seen(v) for v in verdicts[:5]] == [ALLOW, ALLOW, (*warn, 3), (*warn, 4), (*abort, 5)]
    assert verdicts[2].message.startswith("WARNING: you have ended 3 turns in a row with the same final answer")
    assert (verdicts[4].error_code, list(verdicts[4].evidence.seqs)) == ("final_answer_loop", [1, 2, 3, 4, 5])
    assert all(v.action == pb.ACTION_ABORT for v in verdicts[5:]), "the run stays aborted"


@pytest.mark.parametrize("agent", ["answers", "fast"])
def test_the_same_answer_after_new_tool_work_in_each_turn_is_not_flagged(daemon, run_id, agent):
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        verdicts = []
        for n in range(10):
            stream.one(turn(run_id, agent))
            new_work(stream, run_id, agent, n)
            verdicts.append(stream.one(said(run_id, agent, "All tests pass.", kind=FINAL)))
    assert [seen(v) for v in verdicts] == [ALLOW] * 10


@pytest.mark.parametrize("agent", ["stop", "fast"])
def test_stop_hook_continuations_with_no_tool_work_are_ended_at_abort_at(daemon, run_id, agent):
    before = daemon.scrape()
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        stops = [stream.one(said(run_id, agent, "The task is complete.", kind=FINAL, seq=1))]
        for n in range(2, 5):  # the stop hook said "keep going": continuations 1, 2, 3
            stops.append(stream.one(said(run_id, agent, f"Done (check {n}).", kind=FINAL, seq=n, stop_hook_active=True)))
    assert [v.action for v in stops[:3]] == [pb.ACTION_ALLOW] * 3
    assert seen(stops[3]) == ("ACTION_ABORT", "DETECTOR_STOP_CONTINUATION", 3)
    assert (stops[3].error_code, list(stops[3].evidence.seqs)) == ("stop_hook_loop", [2, 3, 4])
    assert "a stop hook kept this turn going 3 times" in stops[3].message
    assert 1 == delta(before, daemon.scrape(), "loopwarden_output_loop_aborts_total", detector="stop_continuation", agent=agent)


@pytest.mark.parametrize("agent", ["stop", "fast"])
def test_stop_hook_continuations_with_new_tool_work_between_are_never_ended(daemon, run_id, agent):
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        stops = [stream.one(said(run_id, agent, "First pass done.", kind=FINAL))]
        for n in range(10):
            new_work(stream, run_id, agent, n)
            stops.append(stream.one(said(run_id, agent, f"Pass {n} done.", kind=FINAL, stop_hook_active=True)))
    assert [seen(v) for v in stops] == [ALLOW] * 11


def test_a_model_outputs_usage_stops_the_run_on_tokens_per_tree(daemon, run_id):
    spent = pb.Usage(input_tokens=400, output_tokens=200, cost_usd=0.01, model="m")
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        first = stream.one(said(run_id, "tokens", "Reading the spec.", usage=spent))
        second = stream.one(said(run_id, "tokens", "Still reading the spec.", usage=spent))
        totals = inspect(daemon.grpc_target, run_id).tree_totals
        third = stream.one(said(run_id, "tokens", "Almost there.", usage=spent))
        tool = stream.one(call(run_id, "read", "{}", agent_id="tokens"))
    assert [first.action, second.action] == [pb.ACTION_ALLOW, pb.ACTION_ALLOW]
    assert (totals.input_tokens, totals.output_tokens) == (800, 400)
    assert (third.action, third.detector, third.error_code) == (pb.ACTION_ABORT, pb.DETECTOR_BUDGET, "budget_exhausted")
    assert "tokensPerTree" in third.message and "1200 tokens" in third.message
    assert (tool.action, tool.error_code) == (pb.ACTION_ABORT, "budget_exhausted")


def test_a_retried_output_counts_once(daemon, run_id):
    spent = pb.Usage(input_tokens=10, output_tokens=5)
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        resent = [stream.one(said(run_id, "fast", "Working on it.", seq=7, usage=spent)) for _ in range(6)]
        other = stream.one(said(run_id, "fast", "Working on it.", seq=8))
    assert [v.action for v in resent] == [pb.ACTION_ALLOW] * 6
    view = inspect(daemon.grpc_target, run_id)
    assert view.output_streaks.messages == 2, "six sends of seq 7 are one output, seq 8 the second"
    assert (view.run_totals.input_tokens, view.run_totals.output_tokens, view.events_evaluated) == (10, 5, 2)
    assert other.action == pb.ACTION_ALLOW


def test_bad_model_outputs_are_refused_alone(daemon, run_id):
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        empty, large, costly, fine = stream.send(
            said(run_id, "fast"),
            said(run_id, "fast", "x" * 8193),
            said(run_id, "fast", "hi", usage=pb.Usage(cost_usd=-1.0)),
            said(run_id, "fast", text_digest="sha256:abc", kind=THOUGHT),
        )
    assert (empty.action, empty.error_code) == (pb.ACTION_REJECT, "missing_output_text")
    assert "neither text nor text_digest" in empty.message
    assert (large.action, large.error_code, large.message) == (
        pb.ACTION_REJECT, "output_text_too_large", "model_output.text is 8193 bytes; the limit is 8192")
    assert (costly.action, costly.error_code) == (pb.ACTION_REJECT, "invalid_usage")
    assert fine.action == pb.ACTION_ALLOW, "the rest of the request goes on"
    assert inspect(daemon.grpc_target, run_id).events_evaluated == 1


def test_the_counts_survive_a_restart_on_the_state_file(tmp_path):
    state = f"file:{tmp_path / 'runs.state'}"
    run = "no-tool-restart"
    with running_daemon(CONFIG, ["--state-store", state]) as daemon:
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            before = [stream.one(said(run, "fast", "Retrying the same thing.")) for _ in range(4)]
            stream.one(compaction(run, agent_id="fast"))
    assert [v.action for v in before] == [pb.ACTION_ALLOW] * 2 + [pb.ACTION_WARN] * 2
    with running_daemon(CONFIG, ["--state-store", state]) as daemon:
        daemon.wait_for_log(lambda line: line.get("msg") == "state restored")
        kept = inspect(daemon.grpc_target, run).output_streaks
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            fifth = stream.one(said(run, "fast", "Retrying the same thing."))
    assert (kept.messages, kept.compactions) == (4, 1)
    assert (fifth.action, fifth.error_code) == (pb.ACTION_ABORT, "output_loop_persisted")


@pytest.mark.system  # a real redis-server from Debian's packages
def test_the_counts_round_trip_through_redis_to_another_daemon():
    """Two daemons on one Redis: the first's streaks (and its compactions) reach the second,
    which loads the run from the store and ends it at the fifth identical output."""
    run = "no-tool-redis"
    with redis_server() as redis:
        args = ["--state-store", redis.url, "--state-flush-interval", "0.1"]
        with running_daemon(CONFIG, args) as first:
            with channel(first.grpc_target) as ch, Stream(ch) as stream:
                before = [stream.one(said(run, "fast", "Same answer again.", kind=FINAL)) for _ in range(4)]
                stream.one(compaction(run, agent_id="fast"))
            wait_until_flushed(first)
        with running_daemon(CONFIG, args) as second:
            with channel(second.grpc_target) as ch, Stream(ch) as stream:
                fifth = stream.one(said(run, "fast", "same   ANSWER again.", kind=FINAL))
            kept = inspect(second.grpc_target, run).output_streaks
    assert [v.action for v in before] == [pb.ACTION_ALLOW] * 2 + [pb.ACTION_WARN] * 2
    assert (fifth.action, fifth.error_code) == (pb.ACTION_ABORT, "output_loop_persisted")
    assert (kept.final_answers, kept.compactions) == (5, 1)


def test_replay_reads_model_outputs_from_jsonl(daemon, tmp_path):
    trace = tmp_path / "talk.jsonl"
    lines = [{"run_id": "replayed-talk", "agent_id": "fast", "seq": n, "kind": "model_output",
              "text": "Let me try that again.", "output_kind": "message", "stop_hook_active": False,
              "usage": {"input_tokens": 3, "output_tokens": 2, "cost_usd": 0.001}} for n in range(1, 6)]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    shown = subprocess.run([sys.executable, "-m", "loopwarden", "replay", str(trace), "--address", daemon.grpc_target],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"replayed-talk seq=3 model_output +-> WARN repeated_output count=3 ", shown.stdout), shown.stdout
    assert re.search(r"seq=5 model_output +-> ABORT repeated_output count=5 \[output_loop_persisted\]", shown.stdout)
    assert inspect(daemon.grpc_target, "replayed-talk").run_totals.input_tokens == 15


def test_the_python_clients_verb_and_inspection(daemon, run_id):
    from loopwarden import Action, LoopwardenClient

    with LoopwardenClient(daemon.grpc_target, agent_id="fast") as client:
        verdicts = [client.model_output(run_id, "Checking.", output_kind="thought", input_tokens=5, output_tokens=1)
                    for _ in range(3)]
        stop = client.model_output(run_id, text_digest="d-1", output_kind="final_answer", stop_hook_active=True)
        view = client.inspect(run_id)
    assert [v.action for v in verdicts] == [Action.ALLOW, Action.ALLOW, Action.WARN]
    assert (verdicts[2].detector, verdicts[2].count) == ("repeated_output", 3)
    assert stop.action == Action.ALLOW
    assert (view.output_streaks.thoughts, view.output_streaks.stop_continuations) == (3, 1)
    assert view.run_totals.input_tokens == 15
