"""loopwarden client library: ask before each tool call, report each outcome.

    from loopwarden import LoopwardenClient
    with LoopwardenClient("127.0.0.1:50051") as client:
        verdict = client.tool_call("run-1", "read", {"path": "/x"})
        if verdict.may_run: ...
"""
from . import events
from .client import AsyncLoopwardenClient, LoopwardenClient
from .runner import AsyncToolGuard, ToolGuard, blocked_tool_result
from .types import (
    Action, LoopwardenError, LoopwardenUnavailable, RunAborted, RunInspection, RunNotFound, RunRecord, Verdict,
)

__all__ = [
    "Action", "AsyncLoopwardenClient", "AsyncToolGuard", "LoopwardenClient", "LoopwardenError",
    "LoopwardenUnavailable", "RunAborted", "RunInspection", "RunNotFound", "RunRecord", "ToolGuard", "Verdict",
    "blocked_tool_result", "events",
]
