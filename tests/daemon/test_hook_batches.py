"""The hook endpoint's Claude Code batches alone: which batch id each PreToolUse is sent with."""
from __future__ import annotations

import threading

import pytest

from loopwarden_server.lifecycle import Lifecycle
from loopwarden_server.hook_batches import MAX_BATCH, HookBatches


def call(batches: HookBatches, tool_use_id: str, *, tenant: str = "", session: str = "s", subagent: str = "",
         args: str | None = None) -> str:
    """A PreToolUse's batch id; its input is distinct per call unless `args` says otherwise."""
    return batches.call(tenant, session, subagent, tool_use_id, ("search", args if args is not None else tool_use_id))


def test_calls_between_two_batch_ends_share_the_first_calls_id():
    batches = HookBatches()
    batches.end_batch("", "s", "")

    first = [call(batches, f"toolu_{i}", args="same") for i in range(3)]  # after a batch end: repeats too
    batches.end_batch("", "s", "")
    second = [call(batches, f"toolu_{i}") for i in range(3, 5)]

    assert ["toolu_0"] * 3 == first
    assert ["toolu_3"] * 2 == second


def test_a_sessions_first_turn_is_a_batch_on_probation():
    """Before its first PostToolBatch a session's distinct calls are grouped at once (a first
    turn's fan-out); a repeated call (what a loop does) ends the grouping until a PostToolBatch:
    with a host that never sends one, a loop must not hide in an endless batch."""
    batches = HookBatches()

    fan_out = [call(batches, f"toolu_{i}") for i in range(3)]
    repeat = [call(batches, "toolu_3", args="toolu_0"), call(batches, "toolu_4")]
    batches.end_batch("", "s", "")
    after = [call(batches, "toolu_5", args="x"), call(batches, "toolu_6", args="x")]

    assert ["toolu_0"] * 3 == fan_out
    assert ["", ""] == repeat
    assert ["toolu_5"] * 2 == after


def test_a_first_batch_of_more_than_the_engines_cap_ends_the_grouping():
    batches = HookBatches()

    ids = [call(batches, f"toolu_{i}") for i in range(MAX_BATCH + 2)]

    assert ["toolu_0"] * MAX_BATCH + ["", ""] == ids


def test_sessions_tenants_and_subagents_are_batched_apart():
    batches = HookBatches()
    batches.end_batch("", "a", "")
    batches.end_batch("", "a", "sub-1")

    ids = [call(batches, "main-1", session="a"), call(batches, "b-1", session="b"),
           call(batches, "t2-1", tenant="t2", session="a"), call(batches, "sub-1", session="a", subagent="sub-1"),
           call(batches, "main-2", session="a"), call(batches, "sub-2", session="a", subagent="sub-2")]

    assert ["main-1", "b-1", "t2-1", "sub-1", "main-1", "sub-2"] == ids


def test_session_end_forgets_the_session():
    batches = HookBatches()
    batches.end_batch("", "s", "")
    call(batches, "toolu_1")

    batches.end_session("", "s")

    assert 0 == len(batches)
    assert "toolu_2" == call(batches, "toolu_2")  # a new first batch


def test_a_call_without_a_tool_use_id_still_gets_an_id_of_its_own():
    batches = HookBatches()
    batches.end_batch("", "s", "")

    batch = call(batches, "", args="a")

    assert batch.startswith("batch-") and batch == call(batches, "toolu_2")


def test_the_least_recently_used_sessions_go_first():
    batches = HookBatches(max_sessions=2)
    batches.end_batch("", "old", "")
    batches.end_batch("", "used", "")
    call(batches, "toolu_old", session="old")  # used again: "used" is now the oldest

    batches.end_batch("", "new", "")

    assert 2 == len(batches)
    assert ("toolu_old", "y") == (call(batches, "x", session="old"), call(batches, "y", session="used"))
    with pytest.raises(ValueError, match="max_sessions"):
        HookBatches(max_sessions=0)


def test_concurrent_calls_of_one_batch_agree_on_its_id():
    """The endpoint serves hooks on many threads: the parallel PreToolUse calls of one turn race."""
    batches = HookBatches()
    for turn in range(20):
        batches.end_batch("", "s", "")
        barrier = threading.Barrier(8)
        seen: list[str] = []

        def one(index: int, turn: int = turn, barrier: threading.Barrier = barrier, seen: list[str] = seen) -> None:
            barrier.wait()
            seen.append(call(batches, f"toolu_{turn}_{index}"))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert 1 == len(set(seen)) and seen[0].startswith(f"toolu_{turn}_")


class TestEndpoint:
    """The hook endpoint sends each PreToolUse's event with its batch id (a fake engine records them)."""

    @pytest.fixture
    def endpoint(self):
        import asyncio
        import types

        from loopwarden_server.hooks_http import HooksEndpoint

        class Recorder:
            def __init__(self) -> None:
                self.records = []

            async def evaluate(self, records, integration, tenant, routed, agent_only=False):
                self.records.extend(records)
                return [types.SimpleNamespace(action="allow", message="", announce=False, error_code="")
                        for _ in records]

        loop = asyncio.new_event_loop()
        runner = threading.Thread(target=loop.run_forever, daemon=True)
        runner.start()
        endpoint = HooksEndpoint(Recorder(), Lifecycle(), None, tokens=None,
                                 default_agent="", fail_closed=False, max_body_bytes=1 << 20)
        endpoint.loop = loop
        yield endpoint
        loop.call_soon_threadsafe(loop.stop)
        runner.join()
        loop.close()

    @staticmethod
    def post(endpoint, dialect: str, body: dict) -> dict:
        import asyncio
        import json

        data = json.dumps(body).encode()
        answering = endpoint.respond(f"/v1/hooks/{dialect}", data)
        status, answer = asyncio.run_coroutine_threadsafe(answering, endpoint.loop).result()
        assert 200 == status, answer
        return answer

    def test_claude_code_calls_carry_their_batch_id(self, endpoint):
        from tests.client.python.hooks import payloads

        for turn in range(2):
            for index in (0, 1):
                self.post(endpoint, "claude-code", payloads.claude_pre_tool_use("s", f"toolu_{turn}_{index}", f"ls {index}"))
            for index in (0, 1):
                self.post(endpoint, "claude-code", payloads.claude_post_tool_use("s", f"toolu_{turn}_{index}", f"ls {index}"))
            assert {} == self.post(endpoint, "claude-code", payloads.claude_post_tool_batch("s"))
        self.post(endpoint, "claude-code", payloads.claude_session_end("s"))

        calls = [r for r in endpoint._evaluator.records if r.kind.value == "tool_call"]
        assert ["toolu_0_0", "toolu_0_0", "toolu_1_0", "toolu_1_0"] == [r.batch_id for r in calls]
        assert 0 == len(endpoint.batches)  # SessionEnd freed the session
        assert {"tool_call", "tool_outcome", "run_end"} == {r.kind.value for r in endpoint._evaluator.records}

    def test_codex_calls_carry_none(self, endpoint):
        from tests.client.python.hooks import payloads

        for index in range(2):
            self.post(endpoint, "codex", payloads.codex_pre_tool_use("s", f"call_{index}", f"ls {index}"))

        assert ["", ""] == [r.batch_id for r in endpoint._evaluator.records]
        assert 0 == len(endpoint.batches)


def test_a_call_delivered_twice_is_one_call_of_its_batch():
    """Two hook setups (the plugin and install-hooks' entries) or a retried hook deliver one
    PreToolUse twice: the second gets the same batch id, is no second call of the batch, and is no
    repeat that ends a first batch's probation."""
    batches = HookBatches()

    first = [call(batches, "toolu_0"), call(batches, "toolu_0"), call(batches, "toolu_1"), call(batches, "toolu_1")]
    batches.end_batch("", "s", "")
    batches.end_batch("", "s", "")  # the batch end delivered twice too
    second = [call(batches, "toolu_2"), call(batches, "toolu_2")]

    assert ["toolu_0"] * 4 == first, "still one batch: no probation repeat"
    assert ["toolu_2"] * 2 == second
    thread = batches._sessions[("", "s")][""]
    assert (1, {"toolu_2"}) == (thread.calls, thread.ids)
