"""A restarted MCP proxy does not replay its loop: killed mid-loop (SIGKILL) and started again with the same
--run-id, the proxy numbers its events from 1 again and its client numbers its requests from 1
again, so its events repeat the old seqs and call ids. The daemon answers a repeated (seq, content)
with the verdict it gave before (a retry), so each call of the new process would have been let
through again. The proxy's call ids carry a token of its own process, so a restarted proxy's
calls are new events and the loop goes on counting where it was: the wrapped server runs no more
calls than one loop without a restart allows (20 under the reference defaults)."""
from __future__ import annotations

import pytest

from tests.e2e.mcp_proxy.test_refused import lookups, stdio_proxy, stop
from tests.e2e.mcp_proxy.test_hostile import call

pytestmark = pytest.mark.daemon


@pytest.fixture(scope="module")
def daemon_args() -> tuple[str, ...]:
    return ()


def session(daemon, tmp_path, calls: int, *, killed: bool) -> list[dict]:
    """One proxy process for run `restart-1`: `calls` identical lookups (request ids 1..calls),
    then the process is killed (no run_end reaches the daemon: the run stays open) or stopped."""
    process, raw, log, _ = stdio_proxy(daemon, tmp_path, "--run-id", "restart-1")
    try:
        answers = []
        for request_id in range(1, calls + 1):
            raw.send(call(request_id))
            answers.append(raw.answer(request_id))
        return answers
    finally:
        if killed:
            process.kill()
            process.wait(timeout=30)
            process.stdin.close()
            process.stdout.close()
        else:
            stop(process)


def blocked(answer: dict) -> bool:
    result = answer.get("result", {})
    return result.get("isError") is True and "CRITICAL" in result["content"][0]["text"]


def test_a_proxy_restarted_with_the_same_run_id_goes_on_counting(daemon, tmp_path):
    first = session(daemon, tmp_path, 15, killed=True)
    second = session(daemon, tmp_path, 15, killed=False)

    assert not any(blocked(a) for a in first)
    # The 21st call of the loop (the 6th of the second process) is the block, as without a restart.
    assert [blocked(a) for a in second] == [False] * 5 + [True] * 10
    assert 20 == lookups(tmp_path / "backend.log")
