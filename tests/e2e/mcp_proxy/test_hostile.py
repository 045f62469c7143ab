"""The MCP proxy survives any message, and its HTTP listener authenticates.

Raw JSON-RPC written to the real proxy process (stdio) and POSTed to its --listen port: an object
`progressToken`, a list `id`, a list `requestId` in a cancellation and a 50 MB message are each
that message's error (a JSON-RPC error with the request's id, or id null for the list id, or for
a notification a dropped message and a log line), and the proxy goes on serving, its other sessions included. --listen with the daemon's
token file and TLS options: a missing or wrong bearer token is 401, a client without a
certificate the CA signed never gets through the handshake."""
from __future__ import annotations

import json
import os
import selectors
import ssl
import subprocess
import time

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.mcp_proxy.test_peers import ANSWER, http_session, listening_proxy, proxy_command, texts

pytestmark = pytest.mark.daemon

INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
HUGE_BYTES = 50 * 1024 * 1024


def call(request_id, query: str = "q", **params) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "lookup", "arguments": {"query": query}, **params}}


class RawStdio:
    """The proxy over stdio, spoken to in raw JSON-RPC lines."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self._selector = selectors.DefaultSelector()
        self._selector.register(process.stdout, selectors.EVENT_READ)
        self._pending = b""

    def send(self, message: dict | bytes) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def answer(self, request_id, timeout: float = 30.0) -> dict:
        """The next message with this id (server requests and notifications skipped)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\n" in self._pending:
                line, self._pending = self._pending.split(b"\n", 1)
                message = json.loads(line)
                if message.get("id") == request_id and "method" not in message:
                    return message
            if self._selector.select(timeout=0.2):
                chunk = os.read(self.process.stdout.fileno(), 1 << 20)
                assert chunk, "the proxy closed its output"
                self._pending += chunk
        raise AssertionError(f"no answer to request {request_id!r}")


def test_hostile_messages_over_stdio_are_each_their_own_error(daemon, tmp_path):
    log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
    with errlog.open("w") as stderr:
        process = subprocess.Popen(proxy_command("--address", daemon.grpc_target, log=log),
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    raw = RawStdio(process)
    try:
        raw.send(INITIALIZE)
        assert "result" in raw.answer(0)
        raw.send(INITIALIZED)

        raw.send(call(1, _meta={"progressToken": {"an": "object"}}))
        token_error = raw.answer(1)
        raw.send({"jsonrpc": "2.0", "id": [2], "method": "tools/call", "params": {"name": "lookup"}})
        list_id_error = raw.answer(None)
        raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [2]}})
        raw.send(call(3, _meta="not an object"))
        meta_error = raw.answer(3)
        raw.send(json.dumps(call(4, query="x" * HUGE_BYTES)).encode())
        huge_error = raw.answer(4, timeout=60)
        raw.send(call(5))
        served = raw.answer(5)
    finally:
        process.stdin.close()
        process.wait(timeout=30)
        process.stdout.close()

    assert (-32602, "progressToken") == (token_error["error"]["code"], "progressToken")
    assert "params._meta.progressToken must be a string or an integer" in token_error["error"]["message"]
    assert "params._meta must be an object" in meta_error["error"]["message"]
    assert -32600 == list_id_error["error"]["code"]
    assert "id must be a string or an integer" in list_id_error["error"]["message"]
    assert -32600 == huge_error["error"]["code"] and "too large" in huge_error["error"]["message"]
    assert ANSWER == served["result"]["content"][0]["text"]
    assert 1 == log.read_text().splitlines().count("lookup")  # only call 5 reached the server
    assert 0 == process.returncode
    err = errlog.read_text()
    assert "refused an invalid message from the client" in err  # the list id
    assert "dropped an unreadable message from the client" in err  # the cancellation's list requestId
    assert "requestId of notifications/cancelled must be a string or an integer" in err
    assert "refused a message of" in err and "Traceback" not in err


def test_hostile_messages_over_http_leave_the_other_sessions_working(daemon, tmp_path):
    """One session (raw POSTs) sends the same messages while another (the SDK's client) keeps
    calling; the 50 MB POST is answered 413 with its request's id."""
    log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
    with listening_proxy("--address", daemon.grpc_target, log=log, errlog=errlog) as (process, url):
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        with httpx.Client(timeout=60) as http:
            opened = http.post(url, json=INITIALIZE, headers=headers)
            headers = {**headers, "mcp-session-id": opened.headers["mcp-session-id"],
                       "mcp-protocol-version": "2025-06-18"}
            http.post(url, json=INITIALIZED, headers=headers)

            async def other_session():
                async with http_session(url) as session:
                    return texts(await session.call_tool("lookup", {"query": "other"}))

            before = anyio.run(other_session)
            token = http.post(url, json=call(1, _meta={"progressToken": {"an": "object"}}), headers=headers)
            listed = http.post(url, json={"jsonrpc": "2.0", "id": [2], "method": "ping"}, headers=headers)
            cancelled = http.post(url, json={"jsonrpc": "2.0", "method": "notifications/cancelled",
                                             "params": {"requestId": {"x": 1}}}, headers=headers)
            huge = http.post(url, content=json.dumps(call(4, query="x" * HUGE_BYTES)), headers=headers)
            after = anyio.run(other_session)
            same_session = http.post(url, json=call(5), headers=headers)
        alive = process.poll() is None

    assert [ANSWER] == before == after
    assert "progressToken" in token.text and "-32602" in token.text
    # A list id is no JSON-RPC request: Invalid Request, id null. A notification is never answered:
    # the transport accepts it, the relay drops it with a log line.
    assert (400, -32600, None) == (listed.status_code, listed.json()["error"]["code"], listed.json()["id"])
    assert 202 == cancelled.status_code
    assert (413, 4) == (huge.status_code, huge.json()["id"])
    assert ANSWER in same_session.text
    assert alive, errlog.read_text()
    err = errlog.read_text()
    assert "dropped an unreadable message from the client" in err
    assert "requestId of notifications/cancelled must be a string or an integer" in err
    assert "Traceback" not in err


class TestListenerAuthentication:
    def test_a_missing_or_wrong_token_is_401_and_the_right_one_serves(self, daemon, tmp_path):
        log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
        tokens = tmp_path / "tokens"
        tokens.write_text("s3cret-listener-token\n")
        with listening_proxy("--address", daemon.grpc_target, "--listen-auth-token-file", str(tokens),
                             log=log, errlog=errlog) as (_, url):
            missing = httpx.post(url, json=INITIALIZE)
            wrong = httpx.post(url, json=INITIALIZE, headers={"authorization": "Bearer nope"})

            async def authorized():
                client = httpx2.AsyncClient(headers={"authorization": "Bearer s3cret-listener-token"})
                async with client, streamable_http_client(url, http_client=client) as (read, write), \
                        ClientSession(read, write) as session:
                    await session.initialize()
                    return texts(await session.call_tool("lookup", {"query": "q"}))

            served = anyio.run(authorized)

        assert (401, 401) == (missing.status_code, wrong.status_code)
        assert "missing bearer token" in missing.json()["error"]["message"]
        assert "invalid bearer token" in wrong.json()["error"]["message"]
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert [ANSWER] == served
        assert 1 == log.read_text().splitlines().count("lookup")

    def test_mtls_admits_a_signed_client_only(self, daemon, certs, tmp_path):
        log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
        with listening_proxy("--address", daemon.grpc_target, "--listen-tls-cert", str(certs / "server.pem"),
                             "--listen-tls-key", str(certs / "server.key"),
                             "--listen-tls-client-ca", str(certs / "ca.pem"), log=log, errlog=errlog) as (_, url):
            assert url.startswith("https://")
            signed = ssl.create_default_context(cafile=str(certs / "ca.pem"))
            signed.load_cert_chain(str(certs / "client.pem"), str(certs / "client.key"))
            anonymous = ssl.create_default_context(cafile=str(certs / "ca.pem"))

            async def with_context(context):
                client = httpx2.AsyncClient(verify=context)
                async with client, streamable_http_client(url, http_client=client) as (read, write), \
                        ClientSession(read, write) as session:
                    await session.initialize()
                    return texts(await session.call_tool("lookup", {"query": "q"}))

            served = anyio.run(with_context, signed)
            with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
                httpx.post(url, json=INITIALIZE, verify=anonymous)

        assert [ANSWER] == served

    def test_listener_flags_without_listen_or_half_given_are_refused(self, tmp_path):
        tokens = tmp_path / "tokens"
        tokens.write_text("t\n")
        for flags, says in ((["--listen-auth-token-file", str(tokens)], "--listen-auth-token-file needs --listen"),
                            (["--listen", "127.0.0.1:0", "--listen-tls-cert", "x.pem"],
                             "--listen-tls-cert and --listen-tls-key go together")):
            done = subprocess.run(proxy_command("--offline", *flags, log=tmp_path / "log"), capture_output=True,
                                  text=True, timeout=60, stdin=subprocess.DEVNULL)
            assert (2, True) == (done.returncode, says in done.stderr), done.stderr


@pytest.fixture(scope="module")
def daemon_args() -> tuple[str, ...]:
    return ()


def test_a_server_notification_with_an_object_progress_token_is_relayed_not_fatal():
    """The server side too: a progress notification whose token is an object (no request owns it)
    reaches the client unrouted, and the relay goes on (the in-process relay, an offline judge)."""
    import io

    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

    from loopwarden_server.config import load_config_text
    from loopwarden_server.mcp_proxy.guard import OfflineJudge, ProxyGuard, SessionRun
    from loopwarden_server.mcp_proxy.relay import Relay

    async def main():
        guard = ProxyGuard(OfflineJudge(load_config_text('{"tools": {"loopDetection": {"enabled": true}}}')),
                           stderr=io.StringIO())
        relay = Relay(guard, SessionRun("hostile-server"), stderr=io.StringIO())
        to_proxy, client_read = anyio.create_memory_object_stream(10)
        client_write, from_proxy = anyio.create_memory_object_stream(10)
        server_write, to_server = anyio.create_memory_object_stream(10)
        from_server, server_read = anyio.create_memory_object_stream(10)
        async with anyio.create_task_group() as group:
            group.start_soon(relay.run, client_read, client_write, server_read, server_write)
            await to_proxy.send(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=1, method="ping",
                                                              params={"_meta": {"progressToken": 7}})))
            await to_server.receive()
            await from_server.send(SessionMessage(JSONRPCNotification(
                jsonrpc="2.0", method="notifications/progress", params={"progressToken": {"a": 1}, "progress": 1})))
            await from_server.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=1, result={})))
            received = [(await from_proxy.receive()).message for _ in range(2)]
            group.cancel_scope.cancel()
        for stream in (to_proxy, client_read, client_write, from_proxy, server_write, to_server, from_server,
                       server_read):
            stream.close()
        return received

    progress, answer = anyio.run(main)
    assert {"a": 1} == progress.params["progressToken"]
    assert (1, {}) == (answer.id, answer.result)
