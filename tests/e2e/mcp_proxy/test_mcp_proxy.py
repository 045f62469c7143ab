"""`loopwarden mcp-proxy` between a real `mcp` client session and a real MCP server (backend.py),
with the real daemon judging: blocks, pass-through both ways, fail-open, Streamable HTTP."""
from __future__ import annotations

import json
import os
import pathlib
import signal
import sys

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.support.daemon import running_daemon
from tests.support.metrics import delta

pytestmark = pytest.mark.daemon

BACKEND = pathlib.Path(__file__).with_name("backend.py")
REPEATS, CRITICAL = 25, 20
ANSWER = "the same answer"


def backend_command(log: pathlib.Path) -> list[str]:
    return [sys.executable, str(BACKEND), str(log)]


def proxy(*options: str, log: pathlib.Path) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, env=dict(os.environ),
                                 args=["-m", "loopwarden", "mcp-proxy", *options, "--", *backend_command(log)])


def ran(log: pathlib.Path, tool: str) -> int:
    return log.read_text().splitlines().count(tool) if log.exists() else 0


async def _answer_sampling(_context, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    question = params.messages[0].content.text
    return types.CreateMessageResult(role="assistant", model="test-model",
                                     content=types.TextContent(type="text", text=f"answer to {question}"))


def session_run(server: StdioServerParameters, errlog: pathlib.Path, body, **session_options):
    """Run `body(session)` in a client session with the proxy (over stdio); its result."""
    async def main():
        with errlog.open("a") as stderr:
            async with stdio_client(server, errlog=stderr) as (read, write), \
                    ClientSession(read, write, sampling_callback=_answer_sampling, **session_options) as session:
                await session.initialize()
                return await body(session)
    return anyio.run(main)


async def identical_lookups(session: ClientSession, count: int = REPEATS) -> list[types.CallToolResult]:
    return [await session.call_tool("lookup", {"query": "same"}) for _ in range(count)]


def reference_messages(client, run_id: str) -> tuple[str, str]:
    """The daemon's own announced warning and block message for identical `lookup` calls."""
    warning = block = ""
    for index in range(CRITICAL + 1):
        verdict = client.tool_call(run_id, "lookup", {"query": "same"}, tool_call_id=str(index))
        warning = verdict.message if verdict.announce and verdict.action.value == "warn" else warning
        block = verdict.message if verdict.action.value == "block" else block
        client.tool_outcome(run_id, "lookup", {"query": "same"}, result=ANSWER, tool_call_id=str(index))
    client.run_end(run_id)
    return warning, block


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content]


class TestLoopsThroughTheProxy:
    def test_25_identical_calls_run_the_server_20_times(self, daemon, client, run_id, tmp_path):
        """Calls 1-20 reach the server (the 11th carries the announced warning), 21-25 are answered
        by the proxy with isError and the daemon's block message; the server ran exactly 20 times."""
        log = tmp_path / "backend.log"
        before = daemon.scrape()

        results = session_run(proxy("--address", daemon.grpc_target, "--run-id", run_id, log=log),
                              tmp_path / "proxy.err", identical_lookups)

        after = daemon.scrape()
        warning, block = reference_messages(client, f"{run_id}-reference")
        assert CRITICAL == ran(log, "lookup")
        assert [False] * CRITICAL + [True] * (REPEATS - CRITICAL) == [r.is_error for r in results]
        assert [[block]] * (REPEATS - CRITICAL) == [texts(r) for r in results[CRITICAL:]]
        assert [ANSWER, warning] == texts(results[10])
        assert [[ANSWER]] * 9 == [texts(r) for r in results[11:CRITICAL]]
        assert REPEATS - CRITICAL == delta(before, after, "loopwarden_verdicts_total", action="block",
                                           detector="generic_repeat", agent="default", integration="mcp_proxy")

    def test_an_aborted_run_fails_every_further_call(self, run_id, tmp_path):
        """--offline on a config with abortAfterBlocks: 2: the second block ends the run, and from
        then on every tools/call fails the same way without reaching the server, any tool."""
        config = tmp_path / "config.json5"
        config.write_text("{tools: {loopDetection: {enabled: true}}, loopwarden: {abortAfterBlocks: 2}}")
        log = tmp_path / "backend.log"

        async def body(session):
            results = await identical_lookups(session, CRITICAL + 2)
            other = await session.call_tool("count_slowly", {"steps": 1})
            return results, other

        results, other = session_run(proxy("--offline", "--config", str(config), log=log), tmp_path / "err", body)

        abort = texts(results[-1])[0]
        assert "tool_loop_persisted" in abort
        assert (True, [abort]) == (other.is_error, texts(other))
        assert CRITICAL == ran(log, "lookup")


class TestToolAnnotations:
    def test_only_explicit_hints_give_a_class(self):
        from loopwarden_server.mcp_proxy.guard import tool_classes

        listed = {"tools": [
            {"name": "read", "annotations": {"readOnlyHint": True, "destructiveHint": True}},
            {"name": "send", "annotations": {"destructiveHint": True, "idempotentHint": False}},
            {"name": "plain", "annotations": {"readOnlyHint": False}},
            {"name": "bare"},
        ]}
        assert {"read": "readOnly", "send": "mutating"} == tool_classes(listed)

    @staticmethod
    async def two_identical_notes(session: ClientSession) -> list[types.CallToolResult]:
        await session.list_tools()  # the proxy reads the annotations from the server's answer
        return [await session.call_tool("send_note", {"to": "ana", "text": "hi"}) for _ in range(2)]

    def test_a_destructive_hint_makes_a_second_identical_call_a_duplicate_side_effect(self, run_id, tmp_path):
        """The server annotates send_note destructiveHint: true; with duplicateSideEffect on and no
        tool rule, the proxy sends the class and the second identical call never reaches the server."""
        config = tmp_path / "config.json5"
        config.write_text("{tools: {loopDetection: {enabled: true}}, loopwarden: {duplicateSideEffect: {enabled: true}}}")
        log = tmp_path / "backend.log"

        results = session_run(proxy("--offline", "--config", str(config), log=log), tmp_path / "err",
                              self.two_identical_notes)

        assert [False, True] == [r.is_error for r in results]
        assert "send_note already ran with identical arguments" in texts(results[1])[0]
        assert 1 == ran(log, "send_note")

    def test_a_config_class_wins_over_the_annotation(self, run_id, tmp_path):
        """A config rule classing send_note readOnly beats its destructiveHint: both calls run."""
        config = tmp_path / "config.json5"
        config.write_text("{tools: {loopDetection: {enabled: true}}, loopwarden: {duplicateSideEffect: {enabled: true},"
                          " toolRules: {send_note: {class: 'readOnly'}}}}")
        log = tmp_path / "backend.log"

        results = session_run(proxy("--offline", "--config", str(config), log=log), tmp_path / "err",
                              self.two_identical_notes)

        assert [False, False] == [r.is_error for r in results]
        assert 2 == ran(log, "send_note")

    def test_the_daemon_receives_the_annotated_class(self, run_id, tmp_path):
        """Over gRPC: ToolCall.tool_class carries the annotation to a daemon with duplicateSideEffect
        on, which blocks the second identical call."""
        log = tmp_path / "backend.log"
        config = "{tools: {loopDetection: {enabled: true}}, loopwarden: {duplicateSideEffect: {enabled: true}}}"
        with running_daemon(config) as guarded:
            before = guarded.scrape()
            results = session_run(proxy("--address", guarded.grpc_target, "--run-id", run_id, log=log),
                                  tmp_path / "proxy.err", self.two_identical_notes)
            after = guarded.scrape()
        assert [False, True] == [r.is_error for r in results]
        assert 1 == ran(log, "send_note")
        assert 1 == delta(before, after, "loopwarden_verdicts_total", action="block",
                          detector="duplicate_side_effect", agent="default", integration="mcp_proxy")


class TestPassThrough:
    @staticmethod
    async def catalogue(session: ClientSession) -> dict:
        return {
            "tools": (await session.list_tools()).model_dump(),
            "resources": (await session.list_resources()).model_dump(),
            "greeting": (await session.read_resource("memo://greeting")).model_dump(),
            "prompts": (await session.list_prompts()).model_dump(),
            "review": (await session.get_prompt("review", {"code": "x = 1"})).model_dump(),
        }

    def test_tools_resources_and_prompts_are_the_servers_own(self, daemon, tmp_path):
        """tools/list, resources/list and read, prompts/list and get through the proxy equal the
        server's answers without it."""
        log = tmp_path / "backend.log"
        direct = session_run(StdioServerParameters(command=sys.executable, args=[str(BACKEND), str(log)]),
                             tmp_path / "err", self.catalogue)

        proxied = session_run(proxy("--address", daemon.grpc_target, log=log), tmp_path / "err", self.catalogue)

        assert direct == proxied
        assert "hello from the backend" == proxied["greeting"]["contents"][0]["text"]

    def test_progress_sampling_and_list_changed_pass_both_ways(self, daemon, tmp_path):
        """A tool's progress notifications reach the caller; the server's sampling request reaches the
        client and its answer the server; a tools/list_changed notification reaches the client."""
        notifications = []

        async def on_message(message):
            if isinstance(message, types.ServerNotification | types.ToolListChangedNotification):
                notifications.append(message)

        async def body(session):
            progress = []

            async def on_progress(value, total, message):
                progress.append((value, total, message))

            counted = await session.call_tool("count_slowly", {"steps": 3}, progress_callback=on_progress)
            asked = await session.call_tool("ask_the_model", {"question": "what is 6 x 7?"})
            changed = await session.call_tool("change_tools", {})
            await anyio.sleep(0.2)
            return counted, progress, asked, changed

        counted, progress, asked, changed = session_run(proxy("--address", daemon.grpc_target, log=tmp_path / "l"),
                                                        tmp_path / "err", body, message_handler=on_message)

        assert ["counted to 3"] == texts(counted)
        assert [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")] == progress
        assert ["the model said: answer to what is 6 x 7?"] == texts(asked)
        assert ["changed"] == texts(changed)
        assert any("tools/list_changed" in json.dumps(n.model_dump(mode="json")) for n in notifications)

    def test_a_cancelled_call_is_cancelled_on_the_server_and_recorded(self, daemon, client, run_id, tmp_path):
        """The client gives up on a call: the cancellation reaches the server, which stops the tool,
        and the daemon records the call as done (its outcome: cancelled)."""
        log = tmp_path / "backend.log"

        async def body(session):
            with anyio.move_on_after(1.0):
                await session.call_tool("wait_forever", {})
            for _ in range(100):
                if ran(log, "cancelled"):
                    break
                await anyio.sleep(0.05)
            held = client.inspect(run_id).records  # the proxy ends the run when it exits
            return held, (await session.call_tool("lookup", {"query": "after"})).is_error

        records, after_error = session_run(proxy("--address", daemon.grpc_target, "--run-id", run_id, log=log),
                                  tmp_path / "err", body)

        assert (1, 1, False) == (ran(log, "waiting"), ran(log, "cancelled"), after_error)
        assert (["wait_forever"], True) == ([r.tool_name for r in records], all(r.result_hash for r in records))


class TestDaemonOutage:
    def test_a_stopped_daemon_lets_calls_run_and_the_proxy_says_so(self, tmp_path):
        """With the daemon gone, tools/call still reaches the server (fail open by default) and the
        proxy says so on stderr; calls made while it ran were guarded."""
        log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
        with running_daemon("{tools: {loopDetection: {enabled: true}}}", ["--drain-grace", "1"]) as own:
            target = own.grpc_target

            async def body(session):
                first = await session.call_tool("lookup", {"query": "one"})
                own.process.send_signal(signal.SIGTERM)
                own.process.wait(timeout=15)
                second = await session.call_tool("lookup", {"query": "two"})
                return first, second

            first, second = session_run(proxy("--address", target, log=log), errlog, body)

        assert (False, False) == (first.is_error, second.is_error)
        assert 2 == ran(log, "lookup")
        assert "run unguarded (fail open)" in errlog.read_text()

    def test_fail_closed_refuses_calls_while_the_daemon_is_unreachable(self, tmp_path):
        from tests.client.python.integrations.support import dead_target

        log = tmp_path / "backend.log"

        result = session_run(proxy("--address", dead_target(), "--fail-closed", log=log), tmp_path / "err",
                             lambda session: session.call_tool("lookup", {"query": "x"}))

        assert result.is_error and "fail closed" in texts(result)[0]
        assert 0 == ran(log, "lookup")


class TestStreamableHttp:
    def test_listen_serves_the_same_proxy_over_streamable_http(self, daemon, run_id, tmp_path):
        """--listen: an MCP client over Streamable HTTP gets the same tools, progress and blocks."""
        from tests.e2e.mcp_proxy.test_peers import listening_proxy

        log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
        with listening_proxy("--address", daemon.grpc_target, "--run-id", run_id, log=log, errlog=errlog) as (_, url):
            async def main():
                async with streamable_http_client(url) as (read, write), \
                        ClientSession(read, write, sampling_callback=_answer_sampling) as session:
                    await session.initialize()
                    tools = [tool.name for tool in (await session.list_tools()).tools]
                    progress = []

                    async def on_progress(value, total, message):
                        progress.append(value)

                    await session.call_tool("count_slowly", {"steps": 2}, progress_callback=on_progress)
                    asked = await session.call_tool("ask_the_model", {"question": "ping"})
                    results = await identical_lookups(session, CRITICAL + 1)
                    return tools, progress, asked, results

            tools, progress, asked, results = anyio.run(main)

        assert "lookup" in tools
        assert [1.0, 2.0] == progress
        assert ["the model said: answer to ping"] == texts(asked)
        assert [False] * CRITICAL + [True] == [r.is_error for r in results]
        assert CRITICAL == ran(log, "lookup")


@pytest.fixture(scope="module")
def daemon_args() -> tuple[str, ...]:
    return ()
