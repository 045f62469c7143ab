"""The MCP proxy's share of the resource limits: --listen caps its sessions (so its server children) and
ends idle ones. The real proxy process, real SDK clients over Streamable HTTP, a real MCP server."""
from __future__ import annotations

import subprocess
import time

import anyio
import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.mcp_proxy.test_hostile import INITIALIZE
from tests.e2e.mcp_proxy.test_peers import ANSWER, listening_proxy, texts


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
                         "--session-idle-seconds must be 1 to 86400")):
        done = subprocess.run(proxy_command("--offline", *flags, log=tmp_path / "log"), capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert (2, True) == (done.returncode, says in done.stderr), done.stderr


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
