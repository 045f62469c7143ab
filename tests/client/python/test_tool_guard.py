"""ToolGuard and AsyncToolGuard: wrapped tools ask the real daemon first and report their outcome after."""
from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from loopwarden import (
    Action, AsyncLoopwardenClient, AsyncToolGuard, LoopwardenClient, LoopwardenUnavailable, RunAborted,
    ToolGuard, Verdict,
)

CONFIG = "{tools:{loopDetection:{enabled:true}}}"
SAME = {"content": [{"type": "text", "text": "same"}], "details": {"ok": True}}


class CountingTool:
    """A tool that counts its runs and returns the same result every time."""

    def __init__(self, result: object = SAME) -> None:
        self.calls: list[dict] = []
        self.result = result

    def __call__(self, **params: object) -> object:
        self.calls.append(params)
        return self.result


class AsyncCountingTool(CountingTool):
    async def __call__(self, **params: object) -> object:  # type: ignore[override]
        return super().__call__(**params)


class MissingTool(Exception):
    pass


def dead_target() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


def run_async(daemon, scenario):
    """Run `scenario(aclient)` with an asyncio client of the daemon in a fresh event loop."""
    async def main():
        async with AsyncLoopwardenClient(daemon.grpc_target) as aclient:
            return await scenario(aclient)
    return asyncio.run(main())


class TestAllow:
    def test_allowed_tool_runs_and_its_outcome_is_recorded(self, client, run_id):
        """On ALLOW the tool runs with its params, its result is returned and the daemon records a result hash."""
        tool = CountingTool()
        read = ToolGuard(client, run_id).wrap("read", tool)

        result = read(path="/x")

        assert SAME == result
        assert [{"path": "/x"}] == tool.calls
        (record,) = client.inspect(run_id).records
        assert ("read", True) == (record.tool_name, record.result_hash != "")

    def test_tool_call_id_reaches_the_record(self, client, run_id):
        """The guard's tool_call_id reaches the daemon: its outcome fills its own call, not an older identical one.

        (A completed record lets go of its call id, so the pending one still shows "tc-0".)"""
        client.tool_call(run_id, "read", {"path": "/x"}, tool_call_id="tc-0")
        ToolGuard(client, run_id).call("read", CountingTool(), {"path": "/x"}, tool_call_id="tc-1")

        records = client.inspect(run_id).records
        assert [("tc-0", False), ("", True)] == [(r.tool_call_id, r.result_hash != "") for r in records]

    def test_allowed_async_tool_runs_and_its_outcome_is_recorded(self, daemon, client, run_id):
        """AsyncToolGuard runs an allowed coroutine tool and its outcome is recorded."""
        tool = AsyncCountingTool()

        result = run_async(daemon, lambda aclient: AsyncToolGuard(aclient, run_id).wrap("read", tool)(path="/x"))

        assert SAME == result
        assert [{"path": "/x"}] == tool.calls
        (record,) = client.inspect(run_id).records
        assert record.result_hash != ""


class TestBlock:
    def test_blocked_tool_does_not_run_and_gets_the_blocked_result(self, client, run_id):
        """After 20 identical runs the 21st is blocked: the tool is not called and the spec's blocked result comes back."""
        tool = CountingTool()
        read = ToolGuard(client, run_id).wrap("read", tool)
        for _ in range(20):
            read(path="/x")

        blocked = read(path="/x")

        assert 20 == len(tool.calls)
        assert ("blocked", "tool-loop") == (blocked["details"]["status"], blocked["details"]["deniedReason"])
        assert ("generic_repeat", 20) == (blocked["details"]["detector"], blocked["details"]["count"])
        assert "text" == blocked["content"][0]["type"]
        assert "20 times" in blocked["content"][0]["text"]

    def test_block_is_sticky(self, client, run_id):
        """The call after a block is blocked again with the same count, and neither blocked call is recorded."""
        tool = CountingTool()
        read = ToolGuard(client, run_id).wrap("read", tool)
        for _ in range(20):
            read(path="/x")

        first, second = read(path="/x"), read(path="/x")

        assert 20 == len(tool.calls)
        assert [20, 20] == [first["details"]["count"], second["details"]["count"]]
        inspection = client.inspect(run_id)
        assert (2, 20) == (inspection.blocks, len(inspection.records))

    def test_async_blocked_tool_does_not_run(self, daemon, run_id):
        """AsyncToolGuard returns the blocked result twice without calling the tool after 20 identical runs."""
        tool = AsyncCountingTool()

        async def scenario(aclient):
            read = AsyncToolGuard(aclient, run_id).wrap("read", tool)
            for _ in range(20):
                await read(path="/x")
            return [await read(path="/x"), await read(path="/x")]

        blocked = run_async(daemon, scenario)

        assert 20 == len(tool.calls)
        assert [("blocked", "tool-loop")] * 2 == [(b["details"]["status"], b["details"]["deniedReason"]) for b in blocked]


class TestAbort:
    def test_third_identical_outcome_after_compaction_raises_run_aborted(self, client, run_id):
        """After a compaction retry the third identical outcome raises RunAborted carrying compaction_loop_persisted."""
        tool = CountingTool()
        lookup = ToolGuard(client, run_id).wrap("gateway", tool)
        client.compaction_retry(run_id)
        lookup(path="x")
        lookup(path="x")

        with pytest.raises(RunAborted) as raised:
            lookup(path="x")

        assert 3 == len(tool.calls)
        verdict = raised.value.verdict
        assert (Action.ABORT, "compaction_loop_persisted", 3) == (verdict.action, verdict.error_code, verdict.count)

    def test_aborted_run_refuses_the_next_tool_before_it_runs(self, client, run_id):
        """Once the run is aborted the next guarded call raises RunAborted without running the tool."""
        tool = CountingTool()
        guard = ToolGuard(client, run_id)
        client.compaction_retry(run_id)
        for _ in range(2):
            guard.call("gateway", tool, {"path": "x"})
        with pytest.raises(RunAborted):
            guard.call("gateway", tool, {"path": "x"})
        other = CountingTool()

        with pytest.raises(RunAborted) as raised:
            guard.call("read", other, {"path": "/elsewhere"})

        assert [] == other.calls
        assert "compaction_loop_persisted" == raised.value.verdict.error_code

    def test_async_abort_raises_run_aborted(self, daemon, run_id):
        """AsyncToolGuard raises RunAborted on the third identical post-compaction outcome and before the next tool."""
        tool = AsyncCountingTool()

        async def scenario(aclient):
            lookup = AsyncToolGuard(aclient, run_id).wrap("gateway", tool)
            await aclient.compaction_retry(run_id)
            errors = []
            for _ in range(4):
                try:
                    await lookup(path="x")
                except RunAborted as exc:
                    errors.append(exc.verdict.error_code)
            return errors

        errors = run_async(daemon, scenario)

        assert ["compaction_loop_persisted"] * 2 == errors
        assert 3 == len(tool.calls)


class TestToolErrors:
    def test_exception_is_reported_as_error_outcome_and_reraised(self, client, run_id):
        """A tool that raises is reported as an error outcome (the unknown tool named) and the same exception propagates."""
        failure = MissingTool("Tool exec not found")

        def broken_exec(**_params):
            raise failure

        with pytest.raises(MissingTool) as raised:
            ToolGuard(client, run_id).call("exec", broken_exec, {"command": "ls"})

        assert failure is raised.value
        (record,) = client.inspect(run_id).records
        assert ("exec", "exec", True) == (record.tool_name, record.unknown_tool_name, record.result_hash != "")

    def test_repeated_failures_block_the_unknown_tool(self, client, run_id):
        """Ten guarded calls failing with "Tool exec not found" make the eleventh a blocked result (example 13)."""
        attempts = []

        def broken_exec(**params):
            attempts.append(params)
            raise MissingTool("Tool exec not found")

        guard = ToolGuard(client, run_id)
        for index in range(10):
            with pytest.raises(MissingTool):
                guard.call("exec", broken_exec, {"command": f"try {index}"})

        blocked = guard.call("exec", broken_exec, {"command": "try again"})

        assert 10 == len(attempts)
        assert ("blocked", "unknown_tool_repeat", 10) == (
            blocked["details"]["status"], blocked["details"]["detector"], blocked["details"]["count"])

    def test_async_exception_is_reported_and_reraised(self, daemon, client, run_id):
        """AsyncToolGuard reports a raising coroutine tool as an error outcome and re-raises."""
        async def broken_exec(**_params):
            raise MissingTool("Tool exec not found")

        async def scenario(aclient):
            try:
                await AsyncToolGuard(aclient, run_id).call("exec", broken_exec, {"command": "ls"})
            except MissingTool as exc:
                return exc
            return None

        assert isinstance(run_async(daemon, scenario), MissingTool)
        (record,) = client.inspect(run_id).records
        assert "exec" == record.unknown_tool_name


class TestWarnings:
    def test_warning_calls_on_warning_and_runs_the_tool(self, client, run_id):
        """The eleventh identical call is WARN: on_warning gets the verdict once and the tool still runs."""
        warnings: list[Verdict] = []
        tool = CountingTool()
        read = ToolGuard(client, run_id, on_warning=warnings.append).wrap("read", tool)

        for _ in range(11):
            read(path="/x")

        assert 11 == len(tool.calls)
        assert [(Action.WARN, "generic_repeat", 10, True)] == [
            (w.action, w.detector, w.count, w.announce) for w in warnings]

    def test_default_warning_handler_logs_announced_warnings(self, client, run_id, caplog):
        """Without on_warning an announced warning is logged on the loopwarden.runner logger."""
        read = ToolGuard(client, run_id).wrap("read", CountingTool())

        with caplog.at_level(logging.WARNING, logger="loopwarden.runner"):
            for _ in range(11):
                read(path="/x")

        assert 1 == len(caplog.records)
        assert "10 times" in caplog.records[0].getMessage()

    def test_async_warning_calls_on_warning(self, daemon, run_id):
        """AsyncToolGuard hands the WARN verdict of the eleventh identical call to on_warning."""
        warnings: list[Verdict] = []
        tool = AsyncCountingTool()

        async def scenario(aclient):
            read = AsyncToolGuard(aclient, run_id, on_warning=warnings.append).wrap("read", tool)
            for _ in range(11):
                await read(path="/x")

        run_async(daemon, scenario)

        assert 11 == len(tool.calls)
        assert [(Action.WARN, 10)] == [(w.action, w.count) for w in warnings]


class TestUnreachableDaemon:
    def test_fail_open_runs_the_tool(self):
        """With fail_open=True an unreachable daemon does not stop the tool: it runs and its result is returned."""
        tool = CountingTool()
        with LoopwardenClient(dead_target()) as dead:
            result = ToolGuard(dead, "run", fail_open=True).call("read", tool, {"path": "/x"})

        assert SAME == result
        assert [{"path": "/x"}] == tool.calls

    def test_fail_closed_raises_unavailable(self):
        """With fail_open=False an unreachable daemon raises LoopwardenUnavailable and the tool does not run."""
        tool = CountingTool()
        with LoopwardenClient(dead_target()) as dead:
            with pytest.raises(LoopwardenUnavailable):
                ToolGuard(dead, "run", fail_open=False).call("read", tool, {"path": "/x"})

        assert [] == tool.calls

    def test_async_fail_open_and_fail_closed(self):
        """AsyncToolGuard runs the tool when failing open and raises LoopwardenUnavailable when failing closed."""
        tool = AsyncCountingTool()

        async def scenario():
            async with AsyncLoopwardenClient(dead_target()) as dead:
                opened = await AsyncToolGuard(dead, "run", fail_open=True).call("read", tool, {"path": "/x"})
                try:
                    await AsyncToolGuard(dead, "run", fail_open=False).call("read", tool, {"path": "/y"})
                except LoopwardenUnavailable:
                    return opened, "unavailable"
                return opened, "nothing"

        opened, closed = asyncio.run(scenario())

        assert (SAME, "unavailable") == (opened, closed)
        assert [{"path": "/x"}] == tool.calls
