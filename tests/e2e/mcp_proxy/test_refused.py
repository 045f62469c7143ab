"""The MCP proxy and calls loopwarden cannot judge, against a real daemon and proxy process: a
tools/call the daemon refuses (arguments nested 70 deep: json_too_deep) is a JSON-RPC error naming
the reason under --fail-closed and never reaches the server; without it, it runs and stderr says
why. Messages that are no JSON-RPC the proxy can relay (a list or object `id`, no `method`, a
tools/call naming no tool) get JSON-RPC's own errors, over stdio and over Streamable HTTP, and
the session goes on."""
from __future__ import annotations

import json
import subprocess

import httpx
import pytest

from tests.e2e.mcp_proxy.test_hostile import INITIALIZE, INITIALIZED, RawStdio, call
from tests.e2e.mcp_proxy.test_peers import ANSWER, listening_proxy, proxy_command

pytestmark = pytest.mark.daemon


def _nested(depth: int):
    value: object = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


DEEP_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
             "params": {"name": "lookup", "arguments": {"query": "q", "deep": _nested(70)}}}


@pytest.fixture(scope="module")
def daemon_args() -> tuple[str, ...]:
    return ()


def stdio_proxy(daemon, tmp_path, *flags: str):
    log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
    with errlog.open("w") as stderr:
        process = subprocess.Popen(proxy_command("--address", daemon.grpc_target, *flags, log=log),
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    raw = RawStdio(process)
    raw.send(INITIALIZE)
    assert "result" in raw.answer(0)
    raw.send(INITIALIZED)
    return process, raw, log, errlog


def stop(process: subprocess.Popen) -> None:
    process.stdin.close()
    process.wait(timeout=30)
    process.stdout.close()


def lookups(log) -> int:
    return log.read_text().splitlines().count("lookup") if log.exists() else 0


class TestRefusedCall:
    def test_fail_closed_answers_a_json_rpc_error_naming_the_reason(self, daemon, tmp_path):
        process, raw, log, errlog = stdio_proxy(daemon, tmp_path, "--fail-closed")
        try:
            raw.send(DEEP_CALL)
            refused = raw.answer(1)
            raw.send(call(2))
            served = raw.answer(2)
        finally:
            stop(process)

        assert -32602 == refused["error"]["code"]
        assert "json_too_deep" in refused["error"]["message"] and "fail closed" in refused["error"]["message"]
        assert ANSWER == served["result"]["content"][0]["text"]
        assert 1 == lookups(log)  # only call 2 reached the server
        assert "json_too_deep" in errlog.read_text()

    def test_fail_open_runs_it_and_says_why_on_stderr(self, daemon, tmp_path):
        process, raw, log, errlog = stdio_proxy(daemon, tmp_path)
        try:
            raw.send(DEEP_CALL)
            ran = raw.answer(1)
        finally:
            stop(process)

        assert ANSWER == ran["result"]["content"][0]["text"]
        assert 1 == lookups(log)
        err = errlog.read_text()
        assert "runs unchecked" in err and "json_too_deep" in err


# Each bad message, and the JSON-RPC error code (and id) its answer has.
INVALID = [
    pytest.param({"jsonrpc": "2.0", "id": [2], "method": "tools/call", "params": {"name": "lookup"}},
                 -32600, None, id="list-id"),
    pytest.param({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}, -32600, None, id="object-id"),
    pytest.param({"jsonrpc": "2.0", "id": 7}, -32600, 7, id="no-method"),
    pytest.param({"jsonrpc": "2.0", "id": 8, "method": 3}, -32600, 8, id="method-not-a-string"),
    pytest.param({"jsonrpc": "1.0", "id": 9, "method": "ping"}, -32600, 9, id="not-jsonrpc-2"),
    pytest.param({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"arguments": {}}},
                 -32602, 10, id="tools-call-without-name"),
    pytest.param({"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": [1]}, -32602, 11,
                 id="params-not-an-object"),
]


class TestInvalidJsonRpc:
    @pytest.mark.parametrize(("message", "code", "answer_id"), INVALID)
    def test_over_stdio_each_gets_its_error_and_the_session_goes_on(self, daemon, tmp_path, message, code,
                                                                     answer_id):
        process, raw, log, errlog = stdio_proxy(daemon, tmp_path)
        try:
            raw.send(message)
            error = raw.answer(answer_id)
            raw.send(call(100))
            served = raw.answer(100)
        finally:
            stop(process)

        assert code == error["error"]["code"], error
        assert ANSWER == served["result"]["content"][0]["text"]
        assert 1 == lookups(log)
        assert "refused an invalid message from the client" in errlog.read_text()

    def test_over_http_each_gets_a_400_with_its_error_and_the_session_goes_on(self, daemon, tmp_path):
        log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
        with listening_proxy("--address", daemon.grpc_target, log=log, errlog=errlog) as (_process, url):
            headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
            with httpx.Client(timeout=60) as http:
                opened = http.post(url, json=INITIALIZE, headers=headers)
                headers = {**headers, "mcp-session-id": opened.headers["mcp-session-id"],
                           "mcp-protocol-version": "2025-06-18"}
                http.post(url, json=INITIALIZED, headers=headers)
                answers = [http.post(url, content=json.dumps(param.values[0]), headers=headers) for param in INVALID]
                served = http.post(url, json=call(100), headers=headers)

        for param, answer in zip(INVALID, answers):
            _message, code, answer_id = param.values
            assert (400, code, answer_id) == (answer.status_code, answer.json()["error"]["code"],
                                              answer.json()["id"]), (param.id, answer.text)
        assert ANSWER in served.text
        assert 1 == lookups(log)

    def test_over_http_a_refused_call_under_fail_closed_is_a_json_rpc_error(self, daemon, tmp_path):
        log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
        with listening_proxy("--address", daemon.grpc_target, "--fail-closed", log=log, errlog=errlog) as (_p, url):
            headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
            with httpx.Client(timeout=60) as http:
                opened = http.post(url, json=INITIALIZE, headers=headers)
                headers = {**headers, "mcp-session-id": opened.headers["mcp-session-id"],
                           "mcp-protocol-version": "2025-06-18"}
                http.post(url, json=INITIALIZED, headers=headers)
                refused = http.post(url, json=DEEP_CALL, headers=headers)

        assert "json_too_deep" in refused.text and "-32602" in refused.text
        assert 0 == lookups(log)
