"""The public client library (blocking and asyncio) against the real daemon over gRPC."""
from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from loopwarden import (
    Action, AsyncLoopwardenClient, LoopwardenClient, LoopwardenUnavailable, RunNotFound, Verdict,
)
from loopwarden import events
from tests.support.daemon import running_daemon

CONFIG = "{tools:{loopDetection:{enabled:true}}}"
READ_X = {"path": "/x"}
T = TypeVar("T")


def R(text: str) -> dict:
    """The spec's `R(x)` result."""
    return {"content": [{"type": "text", "text": text}], "details": {"ok": True}}


def same_port_flags(target: str) -> list[str]:
    """Daemon flags for a fixed address; a short drain grace since the test's client keeps its stream open."""
    return ["--listen", target, "--drain-grace", "0.2"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def eventually(attempt: Callable[[], T], timeout: float = 15.0) -> T:
    """`attempt()` once the channel has reconnected (gRPC backs off between connection attempts)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return attempt()
        except LoopwardenUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


async def eventually_async(attempt: Callable[[], Awaitable[T]], timeout: float = 15.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await attempt()
        except LoopwardenUnavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


def done(client: LoopwardenClient, run_id: str, tool: str, params: dict, result: dict) -> tuple[Verdict, Verdict]:
    """The spec's `done(t, p, r)`: the tool_call and then its tool_outcome."""
    return client.tool_call(run_id, tool, params), client.tool_outcome(run_id, tool, params, result=result)


class TestGenericRepeat:
    def test_eleventh_identical_call_is_warned(self, client, run_id):
        """Example 6: after 10 identical pending calls the next one is WARN generic_repeat, count 10, announced."""
        earlier = [client.tool_call(run_id, "read", READ_X) for _ in range(10)]

        verdict = client.tool_call(run_id, "read", READ_X)

        assert [Action.ALLOW] * 10 == [v.action for v in earlier]
        assert (Action.WARN, "generic_repeat", "warning", 10) == (
            verdict.action, verdict.detector, verdict.level, verdict.count)
        assert verdict.announce is True
        assert verdict.may_run is True
        assert "10 times" in verdict.message

    def test_tenth_identical_call_is_allowed(self, client, run_id):
        """Example 6: after 9 identical calls the next one is still ALLOW."""
        for _ in range(9):
            client.tool_call(run_id, "read", READ_X)

        assert Action.ALLOW == client.tool_call(run_id, "read", READ_X).action

    def test_twenty_first_identical_done_call_is_blocked(self, client, run_id):
        """Example 7: after 20 identical done calls with the same result the next call is BLOCK, count 20."""
        for _ in range(20):
            done(client, run_id, "read", READ_X, R("same"))

        verdict = client.tool_call(run_id, "read", READ_X)

        assert (Action.BLOCK, "generic_repeat", "critical", 20) == (
            verdict.action, verdict.detector, verdict.level, verdict.count)
        assert verdict.may_run is False
        assert "read" == verdict.tool_name

    def test_block_is_sticky(self, client, run_id):
        """Example 15: after the blocked outcome is reported, the next identical call is BLOCK again, count 20."""
        for _ in range(20):
            done(client, run_id, "read", READ_X, R("same"))
        client.tool_call(run_id, "read", READ_X)
        client.tool_outcome(run_id, "read", READ_X, result={"details": {"status": "blocked", "deniedReason": "tool-loop"}})

        verdict = client.tool_call(run_id, "read", READ_X)

        assert (Action.BLOCK, 20) == (verdict.action, verdict.count)


class TestPostCompactionGuard:
    def test_three_identical_outcomes_after_compaction_abort_the_run(self, client, run_id):
        """Example 17: compaction_retry arms the guard; the third identical outcome is ABORT compaction_loop_persisted."""
        params = {"action": "lookup", "path": "x"}

        armed = client.compaction_retry(run_id)
        outcomes = [done(client, run_id, "gateway", params, R("r1"))[1] for _ in range(3)]
        after = client.tool_call(run_id, "gateway", params)

        assert (Action.ALLOW, "post-compaction guard armed for 3 attempts") == (armed.action, armed.message)
        assert [Action.ALLOW, Action.ALLOW, Action.ABORT] == [v.action for v in outcomes]
        assert ("compaction_loop_persisted", 3, "gateway") == (
            outcomes[2].error_code, outcomes[2].count, outcomes[2].tool_name)
        assert Action.ABORT == after.action
        assert after.may_run is False

    def test_aborted_run_shows_in_inspection(self, client, run_id):
        """InspectRun reports the abort and its error code."""
        client.compaction_retry(run_id)
        for _ in range(3):
            done(client, run_id, "gateway", {"path": "x"}, R("r1"))

        inspection = client.inspect(run_id)

        assert (True, "compaction_loop_persisted") == (inspection.aborted, inspection.abort_error_code)


class TestRunEnd:
    def test_run_end_frees_the_run(self, client, run_id):
        """After run_end the daemon holds no state for the run: inspect raises RunNotFound."""
        client.tool_call(run_id, "read", READ_X)
        client.inspect(run_id)

        verdict = client.run_end(run_id)

        assert Action.ALLOW == verdict.action
        with pytest.raises(RunNotFound):
            client.inspect(run_id)

    def test_run_reused_after_run_end_starts_from_zero(self, client, run_id):
        """A run id reused after run_end inherits nothing: 10 earlier calls do not make the next one a WARN."""
        for _ in range(10):
            client.tool_call(run_id, "read", READ_X)
        client.run_end(run_id)

        verdict = client.tool_call(run_id, "read", READ_X)

        assert Action.ALLOW == verdict.action
        assert 1 == len(client.inspect(run_id).records)


class TestUserTurn:
    def test_a_user_turn_lifts_the_block(self, client, run_id):
        """After a block, a user_turn and the same call is ALLOW (its streak starts again)."""
        for _ in range(20):
            client.tool_call(run_id, "read", READ_X)
            client.tool_outcome(run_id, "read", READ_X, result="same")
        assert Action.BLOCK == client.tool_call(run_id, "read", READ_X).action

        assert Action.ALLOW == client.user_turn(run_id, prompt_id="prompt-2").action

        assert Action.ALLOW == client.tool_call(run_id, "read", READ_X).action
        inspection = client.inspect(run_id)
        assert (1, 0) == (len(inspection.records), inspection.blocks)

    def test_the_event_format_and_builder_spell_it(self):
        from loopwarden.eventformat import parse_event

        message = events.from_dict({"run_id": "r", "seq": 3, "kind": "user_turn", "prompt_id": "p-1"})
        assert ("user_turn", "p-1", 3) == (message.WhichOneof("kind"), message.user_turn.prompt_id, message.seq)
        assert "p-1" == parse_event({"run_id": "r", "kind": "user_turn", "prompt_id": "p-1"}).prompt_id
        assert "user_turn" == events.user_turn("r").WhichOneof("kind")


class TestUnaryCheck:
    def test_check_agrees_with_the_stream(self, client, run_id):
        """The same 20 done calls plus a 21st call give the same verdicts through Check as through Evaluate."""
        def script(run: str) -> list:
            sequence = []
            for index in range(20):
                sequence.append(events.tool_call(run, "read", READ_X, seq=2 * index + 1))
                sequence.append(events.tool_outcome(run, "read", READ_X, result=R("same"), seq=2 * index + 2))
            sequence.append(events.tool_call(run, "read", READ_X, seq=41))
            return sequence

        streamed = [client.evaluate([event])[0] for event in script(run_id + "/stream")]
        checked = [client.check(event) for event in script(run_id + "/check")]

        def comparable(verdict: Verdict) -> tuple:
            return (verdict.seq, verdict.action, verdict.detector, verdict.level, verdict.count, verdict.message,
                    verdict.announce, verdict.error_code, verdict.tool_name)

        assert [comparable(v) for v in streamed] == [comparable(v) for v in checked]
        assert (Action.BLOCK, 20) == (checked[-1].action, checked[-1].count)

    def test_check_reaches_the_same_run_as_the_stream(self, client, run_id):
        """Check and the stream share run state: 10 streamed calls make the checked 11th a WARN."""
        for _ in range(10):
            client.tool_call(run_id, "read", READ_X)

        verdict = client.check(events.tool_call(run_id, "read", READ_X))

        assert (Action.WARN, 10) == (verdict.action, verdict.count)


class TestInspect:
    def test_records_carry_hashes(self, client, run_id):
        """A done call leaves a completed record and a pending call a record without result hash."""
        done(client, run_id, "read", READ_X, R("same"))
        client.tool_call(run_id, "write", {"path": "/y"}, tool_call_id="call-2")

        inspection = client.inspect(run_id)

        assert run_id == inspection.run_id
        assert ["read", "write"] == [r.tool_name for r in inspection.records]
        completed, pending = inspection.records
        assert re.fullmatch(r"read:[0-9a-f]{64}", completed.args_hash)
        assert "" != completed.result_hash
        assert ("", "call-2") == (pending.result_hash, pending.tool_call_id)
        assert 3 == inspection.events_evaluated

    def test_blocks_are_counted(self, client, run_id):
        """Every BLOCK verdict given to the run is counted in the inspection."""
        for _ in range(20):
            done(client, run_id, "read", READ_X, R("same"))
        client.tool_call(run_id, "read", READ_X)
        client.tool_call(run_id, "read", READ_X)

        assert 2 == client.inspect(run_id).blocks

    def test_effective_config_is_the_resolved_config(self, client, run_id):
        """The effective config shows detection enabled with the documented default thresholds."""
        client.tool_call(run_id, "read", READ_X)

        config = client.inspect(run_id).effective_config

        assert {
            "enabled": True, "history_size": 30, "warning_threshold": 10, "critical_threshold": 20,
            "unknown_tool_threshold": 10, "global_circuit_breaker_threshold": 30, "generic_repeat": True,
            "known_poll_no_progress": True, "ping_pong": True, "post_compaction_window_size": 3,
            "abort_after_blocks": 0, "run_wide_breaker_threshold": 0, "shadow_mode": False,
            "argument_churn_warn_at": 0, "argument_churn_block_at": 0, "error_repeat_threshold": 0, "preset": "",
            "same_outcome_block_at": 0, "same_outcome_inconclusive_block_at": 0,
            "ping_pong_needs_answers": False, "duplicate_side_effect": False, "tool_rules": [],
            "cycle_warn_after": 0, "cycle_block_after": 0, "exec_failure_streak": False, "failure_cascade_threshold": 0,
            "parallel_batches": False, "critical_scope": "call", "progress_resets_repeats": False,
            "user_turn_resets": True, "on_critical": "block", "ask_timeout_seconds": 300, "exemption_ttl_seconds": 86400,
            "run_tree_max_depth": 8, "run_tree_max_children": 100, "budget_tool_calls_per_run": 0,
            "budget_tool_calls_per_tree": 0, "budget_tool_seconds_per_tree": 0, "budget_tokens_per_tree": 0,
            "budget_cost_usd_per_tree": 0.0, "budget_wall_seconds_per_tree": 0, "budget_warn_at": 0.8,
            "on_budget": "abort",
            "repeated_output_warn_at": 0, "repeated_output_abort_at": 0, "repeated_output_chunk_chars": 0,
            "repeated_output_chunk_repeats": 0, "compaction_storm_abort_at": 0, "stop_continuation_abort_at": 0,
            "repeated_final_answer_warn_at": 0, "repeated_final_answer_abort_at": 0,
        } == config

    def test_guard_state_after_compaction(self, client, run_id):
        """After a compaction retry and one outcome the guard is armed with one observation of three."""
        client.compaction_retry(run_id)
        done(client, run_id, "read", READ_X, R("same"))

        inspection = client.inspect(run_id)

        assert (True, 3, 1) == (inspection.guard_armed, inspection.guard_window_size, inspection.guard_observed)

    def test_unknown_run_raises_run_not_found(self, client):
        """Inspecting a run the daemon never saw raises RunNotFound."""
        with pytest.raises(RunNotFound):
            client.inspect("client-lib/never-seen")


class TestEvaluateBatch:
    def test_one_verdict_per_event_in_order(self, client, run_id):
        """Twelve identical calls in one request: ten ALLOWs, then WARN count 10 and WARN count 11, seqs echoed."""
        batch = [events.tool_call(run_id, "read", READ_X, seq=100 + index) for index in range(12)]

        verdicts = client.evaluate(batch)

        assert list(range(100, 112)) == [v.seq for v in verdicts]
        assert [Action.ALLOW] * 10 + [Action.WARN] * 2 == [v.action for v in verdicts]
        assert [10, 11] == [v.count for v in verdicts[10:]]

    def test_mixed_kinds_in_one_request(self, client, run_id):
        """A call, its outcome, a compaction retry and a run_end in one request each get their own verdict."""
        verdicts = client.evaluate([
            events.tool_call(run_id, "read", READ_X, seq=1),
            events.tool_outcome(run_id, "read", READ_X, result=R("same"), seq=2),
            events.compaction_retry(run_id, seq=3),
            events.run_end(run_id, seq=4),
        ])

        assert [1, 2, 3, 4] == [v.seq for v in verdicts]
        assert [Action.ALLOW] * 4 == [v.action for v in verdicts]
        assert "post-compaction guard armed for 3 attempts" == verdicts[2].message
        with pytest.raises(RunNotFound):
            client.inspect(run_id)


class TestSequenceNumbers:
    def test_verbs_number_events_automatically(self, daemon, run_id):
        """A fresh client numbers its events 1, 2, 3, … across verbs and runs."""
        with LoopwardenClient(daemon.grpc_target) as fresh:
            seqs = [
                fresh.tool_call(run_id, "read", READ_X).seq,
                fresh.tool_outcome(run_id, "read", READ_X, result=R("same")).seq,
                fresh.tool_call(run_id + "/other", "read", READ_X).seq,
                fresh.compaction_retry(run_id).seq,
                fresh.run_end(run_id).seq,
            ]

        assert [1, 2, 3, 4, 5] == seqs

    def test_explicit_seq_is_kept(self, client, run_id):
        """An explicit seq is sent as given and echoed in the verdict."""
        assert 4242 == client.tool_call(run_id, "read", READ_X, seq=4242).seq

    def test_records_remember_the_seq(self, client, run_id):
        """Recorded calls keep the increasing seq of the event that created them."""
        for _ in range(3):
            client.tool_call(run_id, "read", READ_X)

        seqs = [r.seq for r in client.inspect(run_id).records]

        assert sorted(seqs) == seqs
        assert 3 == len(set(seqs))


class TestRejects:
    def test_bad_params_json_is_a_reject_verdict(self, client, run_id):
        """Unparseable params_json comes back as a REJECT verdict with error code, not as an exception."""
        verdict = client.tool_call(run_id, "read", params_json="{not json")

        assert (Action.REJECT, "invalid_params_json") == (verdict.action, verdict.error_code)
        assert verdict.may_run is False

    def test_bad_result_json_is_a_reject_verdict(self, client, run_id):
        """Unparseable result_json comes back as a REJECT verdict with error code."""
        verdict = client.tool_outcome(run_id, "read", READ_X, result_json="[1,")

        assert (Action.REJECT, "invalid_result_json") == (verdict.action, verdict.error_code)

    def test_blank_run_id_is_a_reject_verdict(self, client):
        """A blank run id is rejected with missing_run_id."""
        verdict = client.tool_call("   ", "read", READ_X)

        assert (Action.REJECT, "missing_run_id") == (verdict.action, verdict.error_code)

    def test_stream_keeps_working_after_a_reject(self, client, run_id):
        """A reject concerns one event: the next event on the same stream is answered normally."""
        client.tool_call(run_id, "read", params_json="{not json")

        assert Action.ALLOW == client.tool_call(run_id, "read", READ_X).action


class TestAsyncClient:
    def test_example_6_and_7(self, daemon, run_id):
        """The asyncio client reproduces example 6 (WARN count 10, announced) and example 7 (BLOCK count 20)."""
        async def scenario() -> tuple[Verdict, Verdict]:
            async with AsyncLoopwardenClient(daemon.grpc_target) as aclient:
                for _ in range(10):
                    await aclient.tool_call(run_id + "/warn", "read", READ_X)
                warned = await aclient.tool_call(run_id + "/warn", "read", READ_X)
                for _ in range(20):
                    await aclient.tool_call(run_id + "/block", "read", READ_X)
                    await aclient.tool_outcome(run_id + "/block", "read", READ_X, result=R("same"))
                blocked = await aclient.tool_call(run_id + "/block", "read", READ_X)
                return warned, blocked

        warned, blocked = asyncio.run(scenario())

        assert (Action.WARN, "generic_repeat", 10, True) == (warned.action, warned.detector, warned.count, warned.announce)
        assert (Action.BLOCK, "generic_repeat", "critical", 20) == (
            blocked.action, blocked.detector, blocked.level, blocked.count)
        assert blocked.may_run is False

    def test_compaction_abort(self, daemon, run_id):
        """The asyncio client sees the third identical post-compaction outcome ABORT the run."""
        async def scenario() -> list[Verdict]:
            async with AsyncLoopwardenClient(daemon.grpc_target) as aclient:
                await aclient.compaction_retry(run_id)
                outcomes = []
                for _ in range(3):
                    await aclient.tool_call(run_id, "gateway", {"path": "x"})
                    outcomes.append(await aclient.tool_outcome(run_id, "gateway", {"path": "x"}, result=R("r1")))
                return outcomes

        outcomes = asyncio.run(scenario())

        assert [Action.ALLOW, Action.ALLOW, Action.ABORT] == [v.action for v in outcomes]
        assert "compaction_loop_persisted" == outcomes[2].error_code

    def test_run_end_inspect_check_and_batch(self, daemon, run_id):
        """inspect, check, evaluate and run_end work through the asyncio client as through the blocking one."""
        async def scenario():
            async with AsyncLoopwardenClient(daemon.grpc_target) as aclient:
                batch = await aclient.evaluate(
                    [events.tool_call(run_id, "read", READ_X, seq=10 + i) for i in range(10)])
                checked = await aclient.check(events.tool_call(run_id, "read", READ_X, seq=20))
                inspection = await aclient.inspect(run_id)
                ended = await aclient.run_end(run_id)
                try:
                    await aclient.inspect(run_id)
                except RunNotFound:
                    gone = True
                else:
                    gone = False
                return batch, checked, inspection, ended, gone

        batch, checked, inspection, ended, gone = asyncio.run(scenario())

        assert list(range(10, 20)) == [v.seq for v in batch]
        assert [Action.ALLOW] * 10 == [v.action for v in batch]
        assert (20, Action.WARN, 10) == (checked.seq, checked.action, checked.count)
        assert 11 == len(inspection.records)
        assert True is inspection.effective_config["enabled"]
        assert Action.ALLOW == ended.action
        assert gone is True

    def test_verbs_number_events_automatically(self, daemon, run_id):
        """A fresh asyncio client numbers its events 1, 2, 3."""
        async def scenario() -> list[int]:
            async with AsyncLoopwardenClient(daemon.grpc_target) as aclient:
                return [(await aclient.tool_call(run_id, "read", READ_X)).seq for _ in range(3)]

        assert [1, 2, 3] == asyncio.run(scenario())

    def test_bad_params_json_is_a_reject_verdict(self, daemon, run_id):
        """The asyncio client returns a REJECT verdict for bad params_json instead of raising."""
        async def scenario() -> Verdict:
            async with AsyncLoopwardenClient(daemon.grpc_target) as aclient:
                return await aclient.tool_call(run_id, "read", params_json="{not json")

        verdict = asyncio.run(scenario())

        assert (Action.REJECT, "invalid_params_json") == (verdict.action, verdict.error_code)

    def test_cancelled_call_does_not_break_the_async_client(self, daemon, run_id):
        """After calls cancelled at various points (as asyncio.wait_for does), each next call gets its own verdict."""
        async def scenario() -> list[tuple[int, int]]:
            answered = []
            async with AsyncLoopwardenClient(daemon.grpc_target) as aclient:
                for ticks in range(12):
                    doomed = asyncio.create_task(aclient.tool_call(run_id, "read", READ_X, seq=1000 + ticks))
                    for _ in range(ticks):
                        await asyncio.sleep(0)
                    doomed.cancel()
                    try:
                        await doomed
                    except asyncio.CancelledError:
                        pass
                    verdict = await asyncio.wait_for(aclient.tool_call(run_id, "list", {}, seq=2000 + ticks), 10)
                    answered.append((2000 + ticks, verdict.seq))
            return answered

        answered = asyncio.run(scenario())

        assert [expected for expected, _ in answered] == [got for _, got in answered]


class TestUnavailableDaemon:
    def test_no_daemon_raises_unavailable(self):
        """Every call to an address nobody listens on raises LoopwardenUnavailable."""
        with LoopwardenClient(f"127.0.0.1:{free_port()}", timeout=2) as dead:
            with pytest.raises(LoopwardenUnavailable):
                dead.tool_call("run", "read", READ_X)
            with pytest.raises(LoopwardenUnavailable):
                dead.check(events.tool_call("run", "read", READ_X))
            with pytest.raises(LoopwardenUnavailable):
                dead.inspect("run")

    def test_no_daemon_raises_unavailable_async(self):
        """The asyncio client raises LoopwardenUnavailable from every call to an address nobody listens on."""
        async def scenario() -> list[str]:
            raised = []
            async with AsyncLoopwardenClient(f"127.0.0.1:{free_port()}", timeout=2) as dead:
                for attempt in (lambda: dead.tool_call("run", "read", READ_X),
                                lambda: dead.check(events.tool_call("run", "read", READ_X)),
                                lambda: dead.inspect("run")):
                    try:
                        await attempt()
                    except LoopwardenUnavailable as exc:
                        raised.append(type(exc).__name__)
            return raised

        assert ["LoopwardenUnavailable"] * 3 == asyncio.run(scenario())

    @pytest.mark.daemon
    def test_daemon_gone_then_fresh_daemon_on_reconnect(self):
        """A stopped daemon makes the next call raise LoopwardenUnavailable; a fresh daemon on the same port serves the same client."""
        target = f"127.0.0.1:{free_port()}"
        with LoopwardenClient(target) as survivor:
            with running_daemon(CONFIG, extra_args=same_port_flags(target)) as first:
                for _ in range(10):
                    survivor.tool_call("reconnect", "read", READ_X)
                first.process.kill()
                first.process.wait()

            with pytest.raises(LoopwardenUnavailable):
                survivor.tool_call("reconnect", "read", READ_X)

            with running_daemon(CONFIG, extra_args=same_port_flags(target)):
                verdict = eventually(lambda: survivor.tool_call("reconnect", "read", READ_X))

        # The fresh daemon starts with no history: the 11th call overall is not a WARN.
        assert Action.ALLOW == verdict.action

    @pytest.mark.daemon
    def test_daemon_gone_then_fresh_daemon_on_reconnect_async(self):
        """The asyncio client, its loop running while the daemon dies, raises LoopwardenUnavailable and then reconnects."""
        target = f"127.0.0.1:{free_port()}"

        async def scenario() -> tuple[str, Verdict]:
            async with AsyncLoopwardenClient(target) as survivor:
                with running_daemon(CONFIG, extra_args=same_port_flags(target)) as first:
                    await survivor.tool_call("reconnect", "read", READ_X)
                    first.process.kill()
                    first.process.wait()
                    await asyncio.sleep(0.5)  # the loop keeps running: the open stream sees its end
                try:
                    await survivor.tool_call("reconnect", "read", READ_X)
                except LoopwardenUnavailable as exc:
                    raised = type(exc).__name__
                else:
                    raised = "nothing"
                with running_daemon(CONFIG, extra_args=same_port_flags(target)):
                    verdict = await eventually_async(lambda: survivor.tool_call("reconnect", "read", READ_X))
                return raised, verdict

        raised, verdict = asyncio.run(scenario())

        assert "LoopwardenUnavailable" == raised
        assert Action.ALLOW == verdict.action
