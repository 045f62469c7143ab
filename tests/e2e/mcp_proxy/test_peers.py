"""`loopwarden mcp-proxy` when its peers misbehave: Streamable HTTP sessions that end
(a DELETE, a dropped client, several at once), the MCP server behind it dying mid-call, a server
that answers `Unknown tool: …` as an `isError` result, and a daemon that never answers. A real
`mcp` client, the real proxy process, a real MCP server (backend.py), the real daemon."""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.support.metrics import delta

pytestmark = pytest.mark.daemon

BACKEND = pathlib.Path(__file__).with_name("backend.py")
ANSWER = "the same answer"
# Each failure must reach the client well inside the acceptance bound (5 s).
FAST = 5.0


def proxy_command(*options: str, log: pathlib.Path, server: list[str] | None = None) -> list[str]:
    server = server or [sys.executable, str(BACKEND), str(log)]
    return [sys.executable, "-m", "loopwarden", "mcp-proxy", *options, "--", *server]


def ran(log: pathlib.Path, tool: str) -> int:
    return log.read_text().splitlines().count(tool) if log.exists() else 0


@contextlib.contextmanager
def listening_proxy(*options: str, log: pathlib.Path, errlog: pathlib.Path, server: list[str] | None = None):
    """The proxy with --listen on a free port; yields (process, url)."""
    with errlog.open("w") as stderr:
        process = subprocess.Popen(proxy_command(*options, "--listen", "127.0.0.1:0", log=log, server=server),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        url = None
        for _ in range(400):
            found = re.search(r"listening on (\S+)", errlog.read_text())
            if found:
                url = found.group(1)
                break
            assert process.poll() is None, errlog.read_text()
            time.sleep(0.05)
        assert url, errlog.read_text()
        yield process, url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=15)


@contextlib.asynccontextmanager
async def http_session(url: str):
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def texts(result) -> list[str]:
    return [block.text for block in result.content]


class TestHttpSessions:
    def test_sessions_in_a_row_and_one_opened_during_a_call(self, daemon, run_id, tmp_path):
        """Three sessions, one after another, each closed normally (the SDK's DELETE), all work; a
        fourth opened while another is in the middle of a call works too, and the proxy lives on."""
        log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
        with listening_proxy("--address", daemon.grpc_target, "--run-id", run_id, log=log, errlog=errlog) as (
                process, url):
            async def in_a_row():
                answers = []
                for index in range(3):
                    async with http_session(url) as session:
                        answers.append(texts(await session.call_tool("lookup", {"query": f"q{index}"})))
                return answers

            async def alongside():
                async with http_session(url) as busy:
                    async with anyio.create_task_group() as group:
                        group.start_soon(busy.call_tool, "count_slowly", {"steps": 100})
                        await anyio.sleep(0.3)  # the first session is mid-call
                        async with http_session(url) as fourth:
                            answer = texts(await fourth.call_tool("lookup", {"query": "fourth"}))
                return answer

            assert [[ANSWER]] * 3 == anyio.run(in_a_row)
            assert [ANSWER] == anyio.run(alongside)
            assert process.poll() is None, errlog.read_text()
        assert 4 == ran(log, "lookup")
        assert "Traceback" not in errlog.read_text()

    def test_a_dropped_client_and_many_at_once(self, daemon, tmp_path):
        """A client that goes away mid-call without a DELETE, then eight sessions at once: the proxy
        serves them all."""
        log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
        with listening_proxy("--address", daemon.grpc_target, log=log, errlog=errlog) as (process, url):
            async def dropped():
                with anyio.move_on_after(1.0):
                    async with http_session(url) as session:
                        await session.call_tool("wait_forever", {})

            async def many():
                answers = []

                async def one(index):
                    async with http_session(url) as session:
                        answers.append(texts(await session.call_tool("lookup", {"query": f"m{index}"})))

                async with anyio.create_task_group() as group:
                    for index in range(8):
                        group.start_soon(one, index)
                return answers

            anyio.run(dropped)
            assert [[ANSWER]] * 8 == anyio.run(many)
            assert process.poll() is None, errlog.read_text()

    def test_a_2026_07_28_request_is_refused_and_the_sdk_client_falls_back(self, daemon, tmp_path):
        """The proxy speaks the session revisions over HTTP: a 2026-07-28 request (no session) gets
        UNSUPPORTED_PROTOCOL_VERSION naming them, and the SDK's Client at its default (mode "auto":
        probe server/discover, fall back to initialize) works through the proxy."""
        log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
        with listening_proxy("--address", daemon.grpc_target, log=log, errlog=errlog) as (process, url):
            probe = httpx.post(url, headers={"mcp-protocol-version": "2026-07-28",
                                             "accept": "application/json, text/event-stream"},
                               json={"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}})

            async def auto():
                async with Client(url) as client:
                    return texts(await client.call_tool("lookup", {"query": "auto"}))

            answer = anyio.run(auto)
        error = probe.json()["error"]
        assert (400, -32022) == (probe.status_code, error["code"])
        assert ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] == error["data"]["supported"]
        assert [ANSWER] == answer

    def test_a_server_that_cannot_start_fails_that_session_only(self, tmp_path):
        """Each initialize gets a 502 naming why the server did not start; the proxy stays up."""
        log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}
        with listening_proxy("--offline", log=log, errlog=errlog, server=[str(tmp_path / "no-such-server")]) as (
                process, url):
            answers = [httpx.post(url, json=initialize, headers={"accept": "application/json, text/event-stream"})
                       for _ in range(2)]
            assert process.poll() is None, errlog.read_text()
        assert [502, 502] == [a.status_code for a in answers]
        assert all("FileNotFoundError" in a.json()["error"]["message"] for a in answers)


def test_over_stdio_the_sdk_client_speaks_2026_07_28_through_the_proxy(tmp_path):
    """Over stdio the proxy relays the revision the two ends agree on: the SDK's Client at its default
    probes server/discover, the server behind the proxy answers it, and calls are still guarded
    (the 21st identical one is blocked)."""
    log = tmp_path / "backend.log"
    command = proxy_command("--offline", log=log)
    server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))

    async def main():
        async with Client(server) as client:
            results = [await client.call_tool("lookup", {"query": "same"}) for _ in range(21)]
            return client.session.discover_result, results

    discovered, results = anyio.run(main)
    assert discovered is not None and "2026-07-28" in discovered.supported_versions
    assert [False] * 20 + [True] == [r.is_error for r in results]
    assert 20 == ran(log, "lookup")


def kill_mid_call(session: ClientSession, log: pathlib.Path):
    """Start `wait_forever`, kill the server (SIGKILL) once it runs, then call again; the two
    outcomes (a result or the exception) and the seconds each took."""
    async def body():
        pid = int(texts(await session.call_tool("server_pid", {}))[0])
        outcomes = []

        async def pending():
            started = time.monotonic()
            try:
                outcomes.append(await session.call_tool("wait_forever", {}))
            except Exception as exc:  # noqa: BLE001 - the error is the outcome under test
                outcomes.append(exc)
            outcomes.append(time.monotonic() - started)

        async with anyio.create_task_group() as group:
            group.start_soon(pending)
            while not ran(log, "waiting"):
                await anyio.sleep(0.02)
            killed = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            with anyio.fail_after(15):
                while len(outcomes) < 2:
                    await anyio.sleep(0.02)
        first, first_seconds = outcomes[0], time.monotonic() - killed
        started = time.monotonic()
        try:
            second = await session.call_tool("lookup", {"query": "after"})
        except Exception as exc:  # noqa: BLE001
            second = exc
        return first, first_seconds, second, time.monotonic() - started
    return body()


def failed(outcome) -> bool:
    """An error the client can show: an exception from the SDK, or an isError result."""
    return isinstance(outcome, Exception) or bool(getattr(outcome, "is_error", False))


class TestServerCrash:
    def test_stdio_fails_the_pending_and_the_next_call_and_exits_non_zero(self, daemon, tmp_path):
        log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
        command = proxy_command("--address", daemon.grpc_target, log=log)
        server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))

        async def main():
            with errlog.open("a") as stderr:
                async with stdio_client(server, errlog=stderr) as (read, write), ClientSession(read, write) as session:
                    await session.initialize()
                    return await kill_mid_call(session, log)

        first, first_seconds, second, second_seconds = anyio.run(main)

        assert isinstance(first, MCPError) and "exited" in str(first), first
        assert first_seconds < FAST and second_seconds < FAST
        assert failed(second), second
        said = errlog.read_text()
        assert "the MCP server behind loopwarden exited; 1 pending request(s)" in said
        assert "exiting with status 1: the MCP server is gone" in said

    def test_http_fails_the_session_and_a_new_session_gets_a_new_server(self, daemon, tmp_path):
        log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
        with listening_proxy("--address", daemon.grpc_target, log=log, errlog=errlog) as (process, url):
            async def main():
                async with http_session(url) as session:
                    outcomes = await kill_mid_call(session, log)
                async with http_session(url) as fresh:
                    return outcomes, texts(await fresh.call_tool("lookup", {"query": "fresh"}))

            (first, first_seconds, second, second_seconds), fresh = anyio.run(main)
            assert process.poll() is None, errlog.read_text()

        assert isinstance(first, MCPError) and "exited" in str(first), first
        assert isinstance(second, MCPError) and "exited" in str(second), second
        assert first_seconds < FAST and second_seconds < FAST
        assert [ANSWER] == fresh


class TestUnknownTool:
    def test_twelve_calls_of_an_unknown_tool_are_blocked_at_the_eleventh(self, daemon, run_id, tmp_path):
        """The server answers `Unknown tool: deploy_app` with isError (the SDK's own answer); the
        proxy reports it as the error it is, so unknown_tool_repeat blocks call 11 (U = 10)."""
        log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
        command = proxy_command("--address", daemon.grpc_target, "--run-id", run_id, log=log)
        server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
        before = daemon.scrape()

        async def main():
            with errlog.open("a") as stderr:
                async with stdio_client(server, errlog=stderr) as (read, write), ClientSession(read, write) as session:
                    await session.initialize()
                    return [await session.call_tool("deploy_app", {"attempt": index}) for index in range(12)]

        results = anyio.run(main)

        after = daemon.scrape()
        assert [True] * 12 == [r.is_error for r in results]
        assert [["Unknown tool: deploy_app"]] * 10 == [texts(r) for r in results[:10]]
        assert "unavailable tool deploy_app" in texts(results[10])[0]
        assert 2 == delta(before, after, "loopwarden_verdicts_total", action="block",
                          detector="unknown_tool_repeat", agent="default", integration="mcp_proxy")


class TestHungDaemon:
    def test_a_daemon_that_never_answers_costs_at_most_the_check_timeout(self, tmp_path):
        """A listener that accepts connections and never speaks: with --check-timeout 1 each call
        runs (fail open) after at most about a second, and the log line says why."""
        log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
        silent = socket.create_server(("127.0.0.1", 0))
        target = f"127.0.0.1:{silent.getsockname()[1]}"
        command = proxy_command("--address", target, "--check-timeout", "1", log=log)
        server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))

        async def main():
            with errlog.open("a") as stderr:
                async with stdio_client(server, errlog=stderr) as (read, write), ClientSession(read, write) as session:
                    await session.initialize()
                    timed = []
                    for index in range(2):
                        started = time.monotonic()
                        result = await session.call_tool("lookup", {"query": f"h{index}"})
                        timed.append((texts(result), time.monotonic() - started))
                    return timed

        try:
            timed = anyio.run(main)
        finally:
            silent.close()

        assert [[ANSWER]] * 2 == [answer for answer, _ in timed]
        # Each call: the check (<= 1 s) and its outcome report (<= 1 s), plus the server's own time.
        assert all(seconds < 3.0 for _, seconds in timed), timed
        assert "no answer within 1 s (--check-timeout)" in errlog.read_text()


@pytest.fixture(scope="module")
def daemon_args() -> tuple[str, ...]:
    return ()



def test_a_client_that_closes_its_input_still_gets_its_answers_and_the_proxy_exits_0(tmp_path):
    """Over stdio, a half close: the requests written, stdin closed; the answers come, then the
    proxy exits 0 (before, it waited for a server that never saw end of input)."""
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                 "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "count_slowly", "arguments": {"steps": 20}}}]
    done = subprocess.run(proxy_command("--offline", log=tmp_path / "backend.log"), text=True, timeout=60,
                          input="".join(json.dumps(line) + "\n" for line in lines), capture_output=True)
    answers = {answer["id"]: answer for answer in map(json.loads, done.stdout.splitlines())}
    assert 0 == done.returncode, done.stderr
    assert "counted to 20" == answers[2]["result"]["content"][0]["text"]
