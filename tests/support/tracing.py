"""Helpers the tracing tests share: the caller's trace context and a loop that ends in a block."""
from __future__ import annotations

import time

from loopwarden import LoopwardenClient, events

SERVICE = "loopwarden.v1.LoopDetectionService"
RESULT = '{"content": [{"type": "text", "text": "same"}], "details": {}}'
TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
PARENT_SPAN_ID = 0x00F067AA0BA902B7


def traceparent(trace_id: int = TRACE_ID, sampled: bool = True) -> tuple[str, str]:
    return ("traceparent", f"00-{trace_id:032x}-{PARENT_SPAN_ID:016x}-{'01' if sampled else '00'}")


def until(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s")


def loop_until_block(client: LoopwardenClient, run_id: str):
    """Twenty identical calls and outcomes on the client's stream, then the 21st call through Check."""
    for _ in range(20):
        client.tool_call(run_id, "read", {"path": "/x"})
        client.tool_outcome(run_id, "read", {"path": "/x"}, result_json=RESULT)
    return client.check(events.tool_call(run_id, "read", {"path": "/x"}))
