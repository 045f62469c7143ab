"""The hook endpoint's memory of asked calls (hook_asks) and the command form's (asked_calls), and
the endpoint's flow with a fake engine: an ASKed PreToolUse is remembered, its PostToolUse is sent
as an approval-once ahead of the outcome in one request, PermissionDenied as a denial, a call that
was never asked sends no approval, and every event of a session goes routed by the session's run."""
from __future__ import annotations

import asyncio
import json
import threading
import types

import pytest

from loopwarden.hooks.asked_calls import AskedCallFiles
from loopwarden_server.lifecycle import Lifecycle
from loopwarden_server.hook_asks import HookAsks
from tests.client.python.hooks import payloads


class TestHookAsks:
    def test_an_asked_call_settles_once(self):
        asks = HookAsks()
        asks.asked("t", "s", "s/a1", "toolu_1")

        assert (False, True, False) == (asks.settle("t", "s", "s", "toolu_1"), asks.settle("t", "s", "s/a1", "toolu_1"),
                                        asks.settle("t", "s", "s/a1", "toolu_1"))
        assert 0 == len(asks)

    def test_tenants_and_sessions_are_apart(self):
        asks = HookAsks()
        asks.asked("alpha", "s", "s", "toolu_1")

        assert not asks.settle("beta", "s", "s", "toolu_1")
        assert not asks.settle("alpha", "s2", "s", "toolu_1")

    def test_bounded_and_freed_by_session_end(self):
        asks = HookAsks(max_sessions=2, max_per_session=2)
        for call in ("t1", "t2", "t3"):
            asks.asked("", "s1", "s1", call)
        asks.asked("", "s2", "s2", "t1")
        asks.asked("", "s3", "s3", "t1")  # s1, the least recently used session, goes
        asks.end_session("", "s3")

        assert (1, False, True) == (len(asks), asks.settle("", "s1", "s1", "t3"), asks.settle("", "s2", "s2", "t1"))


class TestUnansweredAsks:
    """Asks Claude Code answered with no hook (a headless session, dontAsk, an interactive "No")
    end when the run shows it moved on without running the call."""

    def test_a_batch_end_declines_every_ask_of_its_run_only(self):
        asks = HookAsks()
        asks.asked("t", "s", "s", "toolu_1", "toolu_1")
        asks.asked("t", "s", "s", "toolu_2", "toolu_1")
        asks.asked("t", "s", "s/a1", "toolu_3", "toolu_3")

        assert ["toolu_1", "toolu_2"] == asks.unanswered("t", "s", "s")
        assert [] == asks.unanswered("t", "s", "s")
        assert 1 == len(asks), "the sub-agent's ask is its own run's"

    def test_a_call_of_another_batch_declines_and_another_of_the_same_batch_does_not(self):
        asks = HookAsks()
        asks.asked("t", "s", "s", "toolu_1", "toolu_1", ("Bash", "loop"))

        assert [] == asks.unanswered("t", "s", "s", tool_call_id="toolu_2", batch_id="toolu_1", call=("Bash", "ls"))
        assert [] == asks.unanswered("t", "s", "s", tool_call_id="toolu_1", batch_id="toolu_9",
                                     call=("Bash", "loop")), "itself, delivered again"
        assert ["toolu_1"] == asks.unanswered("t", "s", "s", tool_call_id="toolu_9", batch_id="toolu_9",
                                              call=("Bash", "ls"))

    def test_the_same_call_asked_again_declines_even_in_the_same_batch(self):
        asks = HookAsks()
        asks.asked("t", "s", "s", "toolu_1", "toolu_1", ("Bash", "loop"))

        assert ["toolu_1"] == asks.unanswered("t", "s", "s", tool_call_id="toolu_2", batch_id="toolu_1",
                                              call=("Bash", "loop"))

    def test_without_batch_ids_only_the_same_call_declines(self):
        """A call of the same turn cannot be told from one of the next turn."""
        asks = HookAsks()
        asks.asked("t", "s", "s", "toolu_1", "", ("Bash", "a"))
        asks.asked("t", "s", "s", "toolu_2", "b", ("Bash", "b"))

        assert [] == asks.unanswered("t", "s", "s", tool_call_id="toolu_3", batch_id="", call=("Bash", "c"))
        assert ["toolu_1"] == asks.unanswered("t", "s", "s", tool_call_id="toolu_4", batch_id="", call=("Bash", "a"))
        assert 1 == len(asks)


class TestAskedCallFiles:
    def test_a_marker_settles_once_and_only_for_its_daemon(self, tmp_path):
        files = AskedCallFiles(tmp_path / "asks")
        files.asked("127.0.0.1:50051", "s/a1", "toolu_1")

        assert not files.settle("10.0.0.1:50051", "s/a1", "toolu_1")
        assert files.settle("127.0.0.1:50051", "s/a1", "toolu_1")
        assert not files.settle("127.0.0.1:50051", "s/a1", "toolu_1")
        assert [] == list((tmp_path / "asks").iterdir())

    def test_a_call_never_asked_settles_nothing_even_without_the_directory(self, tmp_path):
        assert not AskedCallFiles(tmp_path / "missing").settle("d", "s", "t")

    def test_old_and_excess_markers_are_pruned(self, tmp_path):
        now = [1_000_000.0]
        files = AskedCallFiles(tmp_path, max_markers=3, max_age_seconds=100, clock=lambda: now[0])
        for index in range(5):
            files.asked("d", "s", f"t{index}")

        assert 3 == len(list(tmp_path.glob("*.ask")))
        now[0] += 10_000  # every marker is now older than max_age: the next write prunes them
        files.asked("d", "s", "fresh")
        assert 1 == len(list(tmp_path.glob("*.ask"))) and files.settle("d", "s", "fresh")

    def test_an_unwritable_state_dir_is_an_oserror(self, tmp_path):
        blocker = tmp_path / "file"
        blocker.write_text("")
        with pytest.raises(OSError):
            AskedCallFiles(blocker / "asks").asked("d", "s", "t")


ASK = "CRITICAL: a person must decide whether this call runs."


class Engine:
    """A fake engine: asks for a Bash call of `loop`, allows everything else; records each request."""

    def __init__(self) -> None:
        self.requests: list[tuple[list, str]] = []

    async def evaluate(self, records, integration, tenant, routed, agent_only=False):
        self.requests.append((list(records), routed))
        out = []
        for record in records:
            asked = record.kind.value == "tool_call" and json.loads(record.params_json).get("command") == "loop"
            out.append(types.SimpleNamespace(action="ask" if asked else "allow", message=ASK if asked else "",
                                             announce=asked, error_code=""))
        return out


@pytest.fixture
def endpoint():
    from loopwarden_server.hooks_http import HooksEndpoint

    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    endpoint = HooksEndpoint(Engine(), Lifecycle(), None, tokens=None, default_agent="",
                             fail_closed=False, max_body_bytes=1 << 20)
    endpoint.loop = loop
    yield endpoint
    loop.call_soon_threadsafe(loop.stop)
    runner.join()
    loop.close()


def post(endpoint, body: dict) -> dict:
    data = json.dumps(body).encode()
    answering = endpoint.respond("/v1/hooks/claude-code", data)
    status, answer = asyncio.run_coroutine_threadsafe(answering, endpoint.loop).result()
    assert 200 == status, answer
    return answer


def kinds(request) -> list[str]:
    return [record.kind.value for record in request[0]]


class TestEndpointFlow:
    def test_an_asked_calls_post_tool_use_is_an_approval_once_in_the_same_request(self, endpoint):
        pre = payloads.in_subagent(payloads.claude_pre_tool_use("s", "toolu_1", "loop"), "a1")
        post_body = payloads.in_subagent(payloads.claude_post_tool_use("s", "toolu_1", "loop"), "a1")

        asked = post(endpoint, pre)
        assert {} == post(endpoint, post_body)

        assert "ask" == asked["hookSpecificOutput"]["permissionDecision"]
        requests = endpoint._evaluator.requests
        assert [["tool_call"], ["approval", "tool_outcome"]] == [kinds(r) for r in requests]
        approval = requests[1][0][0]
        assert ("s/a1", "s", "toolu_1", True, "once") == (
            approval.run_id, approval.parent_run_id, approval.tool_call_id, approval.approved, approval.scope)
        assert {"s"} == {routed for _, routed in requests}, "routed by the session's run, the tree's root"
        assert 0 == len(endpoint.asks)

    def test_a_call_that_was_not_asked_sends_no_approval(self, endpoint):
        post(endpoint, payloads.claude_pre_tool_use("s", "toolu_1"))
        post(endpoint, payloads.claude_post_tool_use("s", "toolu_1"))
        assert {} == post(endpoint, payloads.claude_permission_denied("s", "toolu_2"))

        assert [["tool_call"], ["tool_outcome"]] == [kinds(r) for r in endpoint._evaluator.requests]

    def test_permission_denied_of_an_asked_call_is_a_denial(self, endpoint):
        post(endpoint, payloads.claude_pre_tool_use("s", "toolu_1", "loop"))

        assert {} == post(endpoint, payloads.claude_permission_denied("s", "toolu_1", "loop"))

        (approval,), _ = endpoint._evaluator.requests[-1]
        assert ("approval", False) == (approval.kind.value, approval.approved)

    def test_the_same_call_asked_again_declines_the_first_ask(self, endpoint):
        """No batch end between (a host that sends none): the same call under a new id is the
        model trying again, so the first ask was not granted."""
        post(endpoint, payloads.claude_pre_tool_use("s", "toolu_1", "loop"))

        post(endpoint, payloads.claude_pre_tool_use("s", "toolu_2", "loop"))

        records, _ = endpoint._evaluator.requests[-1]
        assert [("approval", "toolu_1", False), ("tool_call", "toolu_2", None)] == [
            (r.kind.value, r.tool_call_id, r.approved if r.kind.value == "approval" else None) for r in records]

    def test_a_call_of_the_same_batch_declines_nothing_and_the_batch_end_does(self, endpoint):
        """Claude Code may check a turn's other calls while the person looks at the prompt: only
        the end of the batch shows the asked call did not run."""
        post(endpoint, payloads.claude_pre_tool_use("s", "toolu_1", "loop"))
        post(endpoint, payloads.claude_pre_tool_use("s", "toolu_2", "other"))
        assert [["tool_call"], ["tool_call"]] == [kinds(r) for r in endpoint._evaluator.requests]

        assert {} == post(endpoint, payloads.claude_post_tool_batch("s"))

        (approval,), _ = endpoint._evaluator.requests[-1]
        assert ("approval", "toolu_1", False) == (approval.kind.value, approval.tool_call_id, approval.approved)
        assert 0 == len(endpoint.asks)

    def test_an_approved_call_is_not_declined_by_its_batch_end(self, endpoint):
        post(endpoint, payloads.claude_pre_tool_use("s", "toolu_1", "loop"))
        post(endpoint, payloads.claude_post_tool_use("s", "toolu_1", "loop"))
        assert {} == post(endpoint, payloads.claude_post_tool_batch("s"))

        assert [["tool_call"], ["approval", "tool_outcome"]] == [kinds(r) for r in endpoint._evaluator.requests]
        assert endpoint._evaluator.requests[1][0][0].approved is True

    def test_a_new_prompt_declines_the_runs_asks(self, endpoint):
        post(endpoint, payloads.claude_pre_tool_use("s", "toolu_1", "loop"))
        post(endpoint, payloads.claude_user_prompt_submit("s", "go on"))

        assert ["approval", "user_turn"] == kinds(endpoint._evaluator.requests[-1])

    def test_a_sub_agents_ask_is_not_declined_by_the_main_threads_calls(self, endpoint):
        post(endpoint, payloads.in_subagent(payloads.claude_pre_tool_use("s", "toolu_1", "loop"), "a1"))
        post(endpoint, payloads.claude_post_tool_batch("s"))
        post(endpoint, payloads.claude_pre_tool_use("s", "toolu_2"))

        assert 1 == len(endpoint.asks)
        assert not any(r.kind.value == "approval" for request, _ in endpoint._evaluator.requests for r in request)

    def test_session_end_forgets_the_sessions_asks(self, endpoint):
        post(endpoint, payloads.claude_pre_tool_use("s", "toolu_1", "loop"))
        post(endpoint, payloads.claude_session_end("s"))

        assert 0 == len(endpoint.asks)

    def test_subagent_start_and_stop_are_the_child_runs_first_and_last_events(self, endpoint):
        """SubagentStop: the sub-agent's final answer, then the child's run_end, in one request."""
        post(endpoint, payloads.claude_subagent_start("s", "a1", "Explore"))
        post(endpoint, payloads.in_subagent(payloads.claude_pre_tool_use("s", "toolu_1"), "a1", "Explore"))
        post(endpoint, payloads.claude_subagent_stop("s", "a1", "Explore"))

        records = [r for request, _ in endpoint._evaluator.requests for r in request]
        assert [("user_turn", "s/a1", "s"), ("tool_call", "s/a1", "s"), ("model_output", "s/a1", "s"),
                ("run_end", "s/a1", "s")] == [(r.kind.value, r.run_id, r.parent_run_id) for r in records]
        assert 2 == len(endpoint._evaluator.requests[-1][0])
        assert 0 == len(endpoint.batches), "SubagentStop freed the sub-agent's batches"
