"""The MCP proxy's share of the resource limits: --listen caps its sessions (so its server children) and
ends idle ones. The real proxy process, real SDK clients over Streamable HTTP, a real MCP server."""
from __future__ import annotations

import pathlib
import subprocess
import tempfile
import time

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.mcp_proxy.test_hostile import INITIALIZE
from tests.e2e.mcp_proxy.test_peers import ANSWER, listening_proxy, ran, texts

pytestmark = pytest.mark.daemon


def children(pid: int) -> int:
    """The proxy's child processes (one MCP server per session)."""
    done = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True, check=False)
    return len(done.stdout.split())


def test_forty_sessions_start_at_most_the_cap_of_server_children(daemon, tmp_path):
    """--max-sessions 4, then 40 sessions opened at once and held: 4 are served, 36 are refused
    503 before any server starts; at most 4 server children ever run; once the 4 end, a new
    session is served."""
    log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
    with listening_proxy("--address", daemon.grpc_target, "--max-sessions", "4", log=log, errlog=errlog) as (
            process, url):
        most_children = 0

        async def flood():
            nonlocal most_children
            served, refused = [], []
            release = anyio.Event()

            async def one(index):
                try:
                    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
                        await session.initialize()
                        served.append(texts(await session.call_tool("lookup", {"query": f"q{index}"})))
                        await release.wait()
                except Exception as exc:  # noqa: BLE001 - a refused session: the SDK raises its own way
                    refused.append(type(exc).__name__)

            async with anyio.create_task_group() as group:
                for index in range(40):
                    group.start_soon(one, index)
                for _ in range(200):
                    most_children = max(most_children, children(process.pid))
                    if len(served) + len(refused) == 40:
                        break
                    await anyio.sleep(0.05)
                most_children = max(most_children, children(process.pid))
                release.set()
            return served, refused

        served, refused = anyio.run(flood)

        async def later():
            async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return texts(await session.call_tool("lookup", {"query": "later"}))

        for _ in range(100):  # the 4 sessions' ends are each their own task: wait for them
            if children(process.pid) == 0:
                break
            time.sleep(0.05)
        after = anyio.run(later)
        alive = process.poll() is None

    assert (4, 36) == (len(served), len(refused))
    assert most_children <= 4
    assert [ANSWER] == after and alive
    assert "refused a new session: 4 open, at most 4 (--max-sessions)" in errlog.read_text()


def test_an_idle_session_is_ended_and_frees_its_place(daemon, tmp_path):
    """--session-idle-seconds 3 and --max-sessions 1: a client that vanishes without a DELETE
    holds its session (and its server child) only until it has been idle that long."""
    log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
    with listening_proxy("--address", daemon.grpc_target, "--max-sessions", "1", "--session-idle-seconds", "3",
                         log=log, errlog=errlog) as (process, url):
        async def vanish():
            client = httpx2.AsyncClient()
            async with client, streamable_http_client(url, http_client=client, terminate_on_close=False) as (
                    read, write), ClientSession(read, write) as session:
                await session.initialize()
                return texts(await session.call_tool("lookup", {"query": "gone"}))

        first = anyio.run(vanish)
        full = httpx.post(url, json=INITIALIZE, headers={"accept": "application/json, text/event-stream"})
        for _ in range(100):
            if "idle for 3 s" in errlog.read_text():
                break
            time.sleep(0.1)
        second = None
        for _ in range(50):  # the session is forgotten just after that line is written
            try:
                second = anyio.run(vanish)
                break
            except Exception:  # noqa: BLE001 - refused while the ended session was being forgotten
                time.sleep(0.1)

    assert [ANSWER] == first
    assert 503 == full.status_code
    assert "session 1 ended: idle for 3 s" in errlog.read_text()
    assert [ANSWER] == second


def test_the_limits_need_listen_and_a_range(tmp_path):
    from tests.e2e.mcp_proxy.test_peers import proxy_command

    for flags, says in ((["--max-sessions", "3"], "--max-sessions needs --listen"),
                        (["--listen", "127.0.0.1:0", "--max-sessions", "0"], "--max-sessions must be 1 to 10000"),
                        (["--listen", "127.0.0.1:0", "--session-idle-seconds", "0.5"],
                         "--session-idle-seconds must be 1 to 86400"),
                        (["--max-sse-event-bytes", "0"], "--max-sse-event-bytes needs --listen"),
                        (["--listen", "127.0.0.1:0", "--max-sse-event-bytes", "-1"],
                         "--max-sse-event-bytes must be 0 (no limit) or a number of bytes")):
        done = subprocess.run(proxy_command("--offline", *flags, log=tmp_path / "log"), capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert (2, True) == (done.returncode, says in done.stderr), done.stderr


SDK_CLIENT_EVENT_LIMIT = 1024 * 1024  # mcp.client.streamable_http.DEFAULT_MAX_SSE_EVENT_SIZE
SSE_LIMIT_FAILURE = f"SSE stream failed: Server-sent event exceeded the {SDK_CLIENT_EVENT_LIMIT} byte limit."


async def big_answers(url: str, sizes, **client_options) -> list:
    """One session of an SDK client (`client_options` for streamable_http_client) calling
    big_answer once per size: each call's text, the proxy's error result ("refused: …"), or the
    client's own error ("failed: …")."""
    answers = []
    async with streamable_http_client(url, **client_options) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for size in sizes:
            try:
                result = await session.call_tool("big_answer", {"size": size})
            except Exception as exc:  # noqa: BLE001 - the SDK's MCPError for the refused event
                answers.append(f"failed: {exc}")
                continue
            answers.append(f"refused: {texts(result)[0]}" if result.is_error else texts(result)[0])
        answers.append(texts(await session.call_tool("lookup", {"query": "after"}))[0])
    return answers


class TestAnswersOverTheClientsEventLimit:
    """Over --listen every answer is one server-sent event, and the MCP Python SDK's client
    (mcp 2.3.0: streamable_http_client's max_sse_event_size, 1 MiB by default, enforced by httpx2's
    EventSource) fails the request whose event is larger, with nothing that says why. The proxy
    answers such a result with an error saying so instead (--max-sse-event-bytes, 1 MiB by default)."""

    def test_a_2_mib_result_breaks_a_default_client_unless_the_proxy_answers_it(self, tmp_path):
        """The bug as users met it: with the limit off (0), a default client's call of a 2 MiB
        result fails with the SDK's SSE error; a client without a limit gets it whole. With the
        default, the same default client gets an isError result that says what happened, the tool
        having run once per call, and the session goes on."""
        log, size = tmp_path / "backend.log", 2 * 1024 * 1024
        with listening_proxy("--offline", "--max-sse-event-bytes", "0", log=log, errlog=tmp_path / "off.err") as (
                _, url):
            unlimited = anyio.run(lambda: big_answers(url, [size]))
            whole = anyio.run(lambda: big_answers(url, [size], max_sse_event_size=None))
        errlog = tmp_path / "default.err"
        with listening_proxy("--offline", log=log, errlog=errlog) as (_, url):
            answered = anyio.run(lambda: big_answers(url, [size, 1000]))

        assert [f"failed: {SSE_LIMIT_FAILURE}", ANSWER] == unlimited
        assert ["x" * size, ANSWER] == whole
        refusal, small, after = answered
        assert refusal.startswith("refused: loopwarden mcp-proxy: the tool ran, but as one server-sent event the "
                                  "answer is ")
        assert f"over the {SDK_CLIENT_EVENT_LIMIT}-byte limit" in refusal and "--max-sse-event-bytes" in refusal
        assert ("x" * 1000, ANSWER) == (small, after)
        assert 4 == ran(log, "big_answer")
        assert "the answer to tools/call 'big_answer' (id 2) is " in errlog.read_text()

    def test_the_proxy_counts_an_event_as_the_client_does(self, tmp_path):
        """Sizes across the boundary of a 20,000-byte limit: a client with that limit behind a proxy
        without one fails from some size on; behind a proxy with the same limit, the same client
        gets every smaller answer whole and the proxy's error for exactly the sizes it would fail on
        (never the SDK's own failure)."""
        limit, sizes = 20_000, range(9_900, 9_980)
        with listening_proxy("--offline", "--max-sse-event-bytes", "0", log=tmp_path / "log",
                             errlog=tmp_path / "off.err") as (_, url):
            bare = anyio.run(lambda: big_answers(url, sizes, max_sse_event_size=limit))
        with listening_proxy("--offline", "--max-sse-event-bytes", str(limit), log=tmp_path / "log",
                             errlog=tmp_path / "on.err") as (_, url):
            guarded = anyio.run(lambda: big_answers(url, sizes, max_sse_event_size=limit))

        failing = [size for size, answer in zip(sizes, bare) if answer.startswith("failed: ")]
        refused = [size for size, answer in zip(sizes, guarded) if answer.startswith("refused: ")]
        assert failing and failing[0] > sizes[0] and failing == list(range(failing[0], sizes[-1] + 1))
        assert failing == refused
        assert all(answer == "x" * size for size, answer in zip(sizes, guarded) if size not in refused)
        assert [ANSWER, ANSWER] == [bare[-1], guarded[-1]]


# The TypeScript SDK's client, as the Claude Agent SDK brings it (scripts/install-claude-agent-sdk.sh):
# a call of big_answer per size given, each printed as its text's length or the error.
TS_CLIENT = """
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
const client = new Client({ name: "probe", version: "1" });
await client.connect(new StreamableHTTPClientTransport(new URL(process.argv[2])));
for (const size of process.argv.slice(3)) {
  try {
    const result = await client.callTool({ name: "big_answer", arguments: { size: Number(size) } });
    console.log(result.isError ? "error" : result.content[0].text.length);
  } catch (error) { console.log(`failed: ${error}`); }
}
await client.close();
"""


@pytest.mark.node
def test_the_typescript_sdks_client_takes_any_event_size(tmp_path):
    """The TypeScript SDK's StreamableHTTPClientTransport parses its SSE with eventsource-parser and
    sets no maxBufferSize, so it has no event limit: behind `--max-sse-event-bytes 0` it takes an
    8 MiB result whole (what the guide tells its users to set)."""
    repo = pathlib.Path(__file__).resolve().parents[3]
    subprocess.run(["bash", str(repo / "scripts" / "install-claude-agent-sdk.sh")], check=True, timeout=600)
    sizes = [2 * 1024 * 1024, 8 * 1024 * 1024]
    with listening_proxy("--offline", "--max-sse-event-bytes", "0", log=tmp_path / "log",
                         errlog=tmp_path / "proxy.err") as (_, url), \
            tempfile.TemporaryDirectory(dir=repo / ".cache" / "claude-agent-sdk") as where:  # node_modules resolves
        script = pathlib.Path(where) / "client.mjs"
        script.write_text(TS_CLIENT)
        done = subprocess.run(["node", str(script), url, *map(str, sizes)], capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)

    assert 0 == done.returncode, done.stderr
    assert [str(size) for size in sizes] == done.stdout.split()


def test_25_identical_huge_results_over_stdio_are_blocked_at_21(daemon, run_id, tmp_path):
    """Results of 2 MiB (over the daemon's 1 MiB --max-result-bytes) are judged by their sha256,
    length and prefix instead of being refused by the daemon, so the loop is caught: the server
    runs the tool 20 times, call 21 is the BLOCK."""
    from tests.e2e.mcp_proxy.test_mcp_proxy import proxy, ran, session_run

    log = tmp_path / "backend.log"

    async def body(session):
        return [await session.call_tool("big_answer", {"size": 2 * 1024 * 1024}) for _ in range(25)]

    results = session_run(proxy("--address", daemon.grpc_target, "--run-id", run_id, log=log), tmp_path / "err", body)

    assert [False] * 20 + [True] * 5 == [r.is_error for r in results]
    assert 20 == ran(log, "big_answer")


def test_slow_or_silent_connections_are_closed_within_the_header_timeout(daemon, tmp_path):
    """A connection that says nothing, and one that sends a request's headers a byte a second,
    are both closed within the header timeout (10 s); the listener serves a session meanwhile."""
    import socket
    import threading
    from urllib.parse import urlsplit

    from loopwarden_server.mcp_proxy.http_protocol import HEADER_TIMEOUT_SECONDS

    log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
    with listening_proxy("--address", daemon.grpc_target, log=log, errlog=errlog) as (_, url):
        address = urlsplit(url)
        closed_after: dict[str, float] = {}

        def hold(name: str, trickle: bool) -> None:
            started = time.monotonic()
            with socket.create_connection((address.hostname, address.port)) as sock:
                sock.settimeout(1.0)
                request = f"POST /mcp HTTP/1.1\r\nHost: {address.netloc}\r\nX-Slow: ".encode() + b"a" * 60
                for byte in request if trickle else b"":
                    try:
                        sock.sendall(bytes([byte]))
                        if sock.recv(1) == b"":
                            break
                    except TimeoutError:
                        continue
                    except OSError:
                        break
                while time.monotonic() - started < 30:
                    try:
                        if sock.recv(1) == b"":
                            break
                    except TimeoutError:
                        continue
                    except OSError:
                        break
            closed_after[name] = time.monotonic() - started

        threads = [threading.Thread(target=hold, args=(name, trickle)) for name, trickle in
                   (("silent", False), ("trickle", True))]
        for thread in threads:
            thread.start()

        async def meanwhile():
            async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return texts(await session.call_tool("lookup", {"query": "meanwhile"}))

        served = anyio.run(meanwhile)
        for thread in threads:
            thread.join(timeout=60)

    assert [ANSWER] == served
    assert HEADER_TIMEOUT_SECONDS <= closed_after["silent"] < HEADER_TIMEOUT_SECONDS + 3
    assert HEADER_TIMEOUT_SECONDS <= closed_after["trickle"] < HEADER_TIMEOUT_SECONDS + 3
