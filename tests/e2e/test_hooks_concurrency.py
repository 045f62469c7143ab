"""The hook listener under a burst of connections: Claude Code fires one HTTP
request per hook, many at once when a model turn calls tools in parallel, and for Claude Code a
reset connection means the call runs unchecked. The old threaded listener (backlog 5) reset 16 of
32; the aiohttp listener on the daemon's loop must answer every one."""
from __future__ import annotations

import http.client
import json
import threading

import pytest

from tests.client.python.hooks import payloads
from tests.e2e.test_hooks_http import daemon_args, hooks_address  # noqa: F401 - the hook tests' shared fixtures

pytestmark = pytest.mark.daemon

CONCURRENT = 32
ROUNDS = 5


def burst(address: str, session: str, round_index: int) -> list[tuple[int, dict] | BaseException]:
    """CONCURRENT PreToolUse requests released at one instant, each on a connection of its own."""
    host, port = address.rsplit(":", 1)
    start = threading.Barrier(CONCURRENT)
    results: list[tuple[int, dict] | BaseException] = [RuntimeError("no answer")] * CONCURRENT

    def one(index: int) -> None:
        body = json.dumps(payloads.claude_pre_tool_use(f"{session}-{index}", f"toolu_{round_index}_{index}",
                                                       f"ls {round_index}")).encode()
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            start.wait(timeout=30)
            connection.request("POST", "/v1/hooks/claude-code", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            results[index] = (response.status, json.loads(response.read()))
        except BaseException as error:  # noqa: BLE001 - a reset is what is counted
            results[index] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(index,)) for index in range(CONCURRENT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def test_32_concurrent_pre_tool_use_requests_5_rounds_get_no_reset(daemon, client, run_id):
    address = hooks_address(daemon)

    results = [result for round_index in range(ROUNDS) for result in burst(address, run_id, round_index)]

    failures = [repr(result) for result in results if isinstance(result, BaseException)]
    assert [] == failures
    assert [(200, {})] * (CONCURRENT * ROUNDS) == results  # every call judged (an allow), none "busy"
    assert ROUNDS == len(client.inspect(f"{run_id}-0").records)
