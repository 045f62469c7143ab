"""The hook endpoints under hostile load: a tenant's flood does not starve another
tenant's session, slow-header connections are closed within the header timeout, a body nested
100,000 deep and a body that never comes get an answer in the host's format."""
from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import aiohttp
import pytest

from loopwarden_server import hooks_http
from loopwarden_server.hook_auth import MAX_IN_FLIGHT, TenantShares
from tests.client.python.hooks import payloads
from tests.e2e.test_hooks_http import CRITICAL, claude_code_sender, hooks_address, post
from tests.support.daemon import running_daemon
from tests.support.metrics import value

pytestmark = pytest.mark.daemon

ENABLED = "{tools: {loopDetection: {enabled: true}}}"
FLOOD_REQUESTS = 10_000
FLOOD_CONCURRENCY = 200


def _tokens(tmp_path) -> str:
    path = tmp_path / "tokens"
    path.write_text("flood flood-token-1\nquiet quiet-token-2\n")
    return str(path)


async def _flood(address: str, quiet_done: threading.Event) -> dict[str, int]:
    """PreToolUse requests from tenant `flood`, FLOOD_CONCURRENCY at a time, as fast as the machine
    sends them: at least FLOOD_REQUESTS, and on until the quiet session is done; how they were
    answered."""
    answered: dict[str, int] = {"judged": 0, "busy": 0, "error": 0}
    sent = 0
    headers = {"Authorization": "Bearer flood-token-1", "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=FLOOD_CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector, headers=headers,
                                     timeout=aiohttp.ClientTimeout(total=30)) as session:
        async def worker() -> None:
            nonlocal sent
            while sent < FLOOD_REQUESTS or not quiet_done.is_set():
                index = sent
                sent += 1
                body = payloads.claude_pre_tool_use(f"flood-{index % 50}", f"f{index}")
                try:
                    async with session.post(f"http://{address}/v1/hooks/claude-code", json=body) as response:
                        answer = await response.json()
                    answered["busy" if "busy" in answer.get("systemMessage", "") else "judged"] += 1
                except (aiohttp.ClientError, TimeoutError):
                    answered["error"] += 1

        await asyncio.gather(*(worker() for _ in range(FLOOD_CONCURRENCY)))
    return answered


class TestFairness:
    def test_a_flooding_tenant_does_not_starve_another_tenant_s_session(self, tmp_path):
        """10,000 requests from tenant `flood` at full speed; meanwhile tenant `quiet` loops one
        Bash call 30 times: every one of its calls is judged (none busy, none timed out), the 21st
        and later denied."""
        args = ["--hooks-listen", "127.0.0.1:0", "--auth-token-file", _tokens(tmp_path)]
        with running_daemon(ENABLED, args) as daemon:
            address = hooks_address(daemon)
            quiet_done = threading.Event()
            result: dict[str, dict[str, int]] = {}
            flood = threading.Thread(target=lambda: result.setdefault("flood", asyncio.run(_flood(address, quiet_done))))
            flood.start()
            time.sleep(1.0)  # the flood is under way
            quiet = []
            try:
                for index in range(1, 31):
                    started = time.monotonic()
                    status, answer = post(address, "/v1/hooks/claude-code",
                                          payloads.claude_pre_tool_use("quiet-session", f"q{index}"),
                                          headers={"Authorization": "Bearer quiet-token-2"})
                    quiet.append((status, answer, time.monotonic() - started))
                    if "permissionDecision" not in answer.get("hookSpecificOutput", {}):
                        post(address, "/v1/hooks/claude-code",
                             payloads.claude_post_tool_use("quiet-session", f"q{index}"),
                             headers={"Authorization": "Bearer quiet-token-2"})
                flooding_meanwhile = flood.is_alive()
            finally:
                quiet_done.set()
                flood.join(timeout=600)
            metrics = daemon.scrape()
        decisions = [a.get("hookSpecificOutput", {}).get("permissionDecision") for _s, a, _t in quiet]
        assert all(status == 200 for status, _a, _t in quiet)
        assert not any("not checked" in a.get("systemMessage", "") for _s, a, _t in quiet), quiet
        assert decisions[:CRITICAL] == [None] * CRITICAL
        assert decisions[CRITICAL:] == ["deny"] * (30 - CRITICAL)
        assert flooding_meanwhile, "the flood ended before the quiet session did"
        counts = result["flood"]
        assert counts["error"] == 0, counts
        assert counts["judged"] + counts["busy"] >= FLOOD_REQUESTS
        assert value(metrics, "loopwarden_hook_requests_unchecked_total", reason="busy") == counts["busy"]
        print(f"\nflood: {counts}; quiet session: slowest answer {max(t for *_x, t in quiet):.3f} s")

    def test_the_share_is_all_for_one_tenant_and_half_each_for_two(self):
        """MAX_IN_FLIGHT is shared by the tenants with requests open."""
        endpoint = hooks_http.HooksEndpoint(None, hooks_http.Lifecycle(), None, tokens=None, default_agent="",
                                            fail_closed=False, max_body_bytes=1 << 20)
        assert endpoint.share("a") == MAX_IN_FLIGHT
        with endpoint.shares.hold("a"):
            assert endpoint.share("b") == MAX_IN_FLIGHT // 2
            assert endpoint.share("a") == MAX_IN_FLIGHT
            with endpoint.shares.hold("b") as held:
                assert held and endpoint.share("a") == endpoint.share("b") == MAX_IN_FLIGHT // 2
        assert endpoint.shares.in_flight == {}  # each hold gives back its request

    def test_a_tenant_over_its_share_holds_nothing(self):
        shares = TenantShares(limit=2)
        with shares.hold("a") as first, shares.hold("a") as second, shares.hold("a") as third:
            assert (first, second, third) == (True, True, False)
            assert shares.in_flight == {"a": 2}
        assert shares.in_flight == {}


@pytest.fixture(scope="module")
def hostile(request):
    with running_daemon(ENABLED, ["--hooks-listen", "127.0.0.1:0"]) as daemon:
        yield daemon


class TestHostileBodies:
    def test_a_body_nested_100000_deep_gets_the_host_s_answer(self, hostile):
        nested = '{"hook_event_name": "PreToolUse", "tool_input": ' + "[" * 100_000 + "]" * 100_000 + "}"
        status, answer = post(hooks_address(hostile), "/v1/hooks/claude-code", nested.encode())
        assert status == 200
        assert "nested too deep" in answer["systemMessage"]
        assert value(hostile.scrape(), "loopwarden_hook_requests_unchecked_total", reason="too_deep") == 1

    def test_slow_header_connections_are_closed_within_the_header_timeout(self, hostile):
        """65 connections that send a request head one byte a second, and one that sends nothing:
        all closed by the daemon within HEADER_TIMEOUT_SECONDS (plus a second of slack), and a
        real session is judged meanwhile."""
        host, port = hooks_address(hostile).rsplit(":", 1)
        sockets = [socket.create_connection((host, int(port))) for _ in range(66)]
        started = time.monotonic()
        for sock in sockets[1:]:
            sock.sendall(b"POST /v1/hooks/claude-code HTTP/1.1\r\nHost: x\r\n")
        open_ = set(range(len(sockets)))
        closed_after: list[float] = []
        answers = []
        while open_ and time.monotonic() - started < hooks_http.HEADER_TIMEOUT_SECONDS + 5:
            for index in list(open_):
                sock = sockets[index]
                sock.settimeout(0.01)
                try:
                    if sock.recv(1) == b"":
                        open_.discard(index)
                        closed_after.append(time.monotonic() - started)
                        continue
                except TimeoutError:
                    pass
                except OSError:
                    open_.discard(index)
                    closed_after.append(time.monotonic() - started)
                    continue
                if index:
                    try:
                        sock.sendall(b"X")
                    except OSError:
                        open_.discard(index)
                        closed_after.append(time.monotonic() - started)
            if len(answers) < 3:
                answers.append(claude_code_sender(hostile)(payloads.claude_pre_tool_use("slow-neighbour", f"s{len(answers)}")))
            time.sleep(0.5)
        for sock in sockets:
            sock.close()
        assert not open_, f"{len(open_)} connections still open after {time.monotonic() - started:.1f} s"
        assert max(closed_after) <= hooks_http.HEADER_TIMEOUT_SECONDS + 1.5
        assert answers == [{}, {}, {}]

    def test_a_body_that_never_comes_gets_the_host_s_answer(self, hostile):
        """A request head announcing 1000 bytes, then 10 of them: answered (not checked) within
        BODY_TIMEOUT_SECONDS, in Claude Code's format."""
        host, port = hooks_address(hostile).rsplit(":", 1)
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(b"POST /v1/hooks/claude-code HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n" + b'{"hook_ev')
            sock.settimeout(hooks_http.BODY_TIMEOUT_SECONDS + 5)
            started = time.monotonic()
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(4096)
                assert chunk, "closed without an answer"
                data += chunk
            waited = time.monotonic() - started
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:")))
            while len(body) < length:
                chunk = sock.recv(4096)
                assert chunk, "closed in the middle of the answer"
                body += chunk
        assert head.startswith(b"HTTP/1.1 200")
        assert waited <= hooks_http.BODY_TIMEOUT_SECONDS + 2
        assert "was not sent within" in json.loads(body)["systemMessage"]
