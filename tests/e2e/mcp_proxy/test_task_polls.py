"""MCP Tasks polling through the proxy's relay (`tasks/get`), judged by the daemon's own core in
process (--offline): a task polled with no change is warned, then refused with a JSON-RPC error;
a task whose status moves on is never refused. The reference defaults: W 10, C 20."""
from __future__ import annotations

import io

import anyio
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

from loopwarden_server.config import load_config_text
from loopwarden_server.mcp_proxy.guard import OfflineJudge, ProxyGuard, SessionRun
from loopwarden_server.mcp_proxy.relay import REFUSED, Relay

CONFIG = '{"tools": {"loopDetection": {"enabled": true}}}'


def poll_task(polls: int, status_of, *, config: str = CONFIG, accepts_ask: bool = False) -> list:
    """`polls` tasks/get requests through the relay, each answered by a server reporting
    `status_of(i)` for the i-th poll it sees; the client's answers in order."""
    async def main():
        guard = ProxyGuard(OfflineJudge(load_config_text(config)), stderr=io.StringIO())
        relay = Relay(guard, SessionRun("task-run", accepts_ask=accepts_ask), stderr=io.StringIO())
        to_proxy, client_read = anyio.create_memory_object_stream(100)
        client_write, from_proxy = anyio.create_memory_object_stream(100)
        server_write, to_server = anyio.create_memory_object_stream(100)
        from_server, server_read = anyio.create_memory_object_stream(100)
        answers = []

        async def server():
            seen = 0
            async for item in to_server:
                task = {"taskId": "t1", "status": status_of(seen), "createdAt": "2026-01-01T00:00:00Z",
                        "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": None}
                seen += 1
                await from_server.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=item.message.id, result=task)))

        streams = (to_proxy, client_read, client_write, from_proxy, server_write, to_server, from_server, server_read)
        async with anyio.create_task_group() as group:
            group.start_soon(relay.run, client_read, client_write, server_read, server_write)
            group.start_soon(server)
            for i in range(polls):
                await to_proxy.send(SessionMessage(JSONRPCRequest(
                    jsonrpc="2.0", id=i, method="tasks/get", params={"taskId": "t1"})))
                answers.append((await from_proxy.receive()).message)
            group.cancel_scope.cancel()
        for stream in streams:
            stream.close()
        return answers
    return anyio.run(main)


def test_a_task_polled_without_change_is_refused_at_poll_21():
    answers = poll_task(22, lambda i: "working")
    assert all(isinstance(a, JSONRPCResponse) for a in answers[:20])
    refused = answers[20]
    assert isinstance(refused, JSONRPCError) and refused.error.code == REFUSED
    assert "tasks/get was polled 20 times" in refused.error.message
    assert "tasks/result" in refused.error.message


def test_a_task_whose_status_moves_on_is_never_refused():
    statuses = ["submitted"] + ["working"] * 9 + ["input_required"] * 9 + ["working"] * 9 + ["completed"] * 3
    answers = poll_task(len(statuses), lambda i: statuses[i])
    assert all(isinstance(a, JSONRPCResponse) for a in answers)


def test_a_poll_is_never_held_for_a_person_even_in_a_session_that_accepts_asks():
    """onCritical "ask" and a client that declared elicitation: poll 21 still gets the BLOCK's
    JSON-RPC error at once (a poll is sent without accepts_ask), not an elicitation."""
    config = '{"tools": {"loopDetection": {"enabled": true}}, "loopwarden": {"onCritical": "ask"}}'
    answers = poll_task(21, lambda i: "working", config=config, accepts_ask=True)
    assert isinstance(answers[20], JSONRPCError) and answers[20].error.code == REFUSED
