"""loopwarden client library: ask before each tool call, report each outcome.

    from loopwarden import LoopwardenClient
    with LoopwardenClient("127.0.0.1:50051") as client:
        verdict = client.tool_call("run-1", "read", {"path": "/x"})
        if verdict.may_run: ...

Names are loaded on first use (PEP 562), so `import loopwarden.v1` or `loopwarden.eventformat`
does not pull in the client, grpc channels or the tool guard.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name -> the submodule that defines it
_EXPORTS = {
    "AsyncLoopwardenClient": "client", "LoopwardenClient": "client",
    "AsyncToolGuard": "runner", "ToolGuard": "runner", "blocked_tool_result": "runner",
    "Action": "types", "Exemption": "types", "LoopwardenError": "types", "LoopwardenUnavailable": "types",
    "RunAborted": "types", "RunInspection": "types", "RunNotFound": "types", "RunRecord": "types", "Totals": "types",
    "Verdict": "types", "ExemptionNotFound": "types", "OutputStreaks": "types",
}
_SUBMODULES = ("events", "eventformat", "replay")

__all__ = sorted([*_EXPORTS, "events"])

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from . import events
    from .client import AsyncLoopwardenClient, LoopwardenClient
    from .runner import AsyncToolGuard, ToolGuard, blocked_tool_result
    from .types import (
        Action, Exemption, LoopwardenError, LoopwardenUnavailable, OutputStreaks, RunAborted, RunInspection,
        RunNotFound, RunRecord, Totals, Verdict,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(f".{module}", __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
