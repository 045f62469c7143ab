"""Pure loop detection: fingerprints, per-run records, detectors, the post-compaction guard.

No gRPC, protobuf, Prometheus, clock or I/O here (a test enforces it). The one entry point is
`evaluate(state, event, settings, catalog) -> Verdict`.
"""
from .evaluate import evaluate, new_run_state
from .events import CompactionRetry, Event, RunEnd, ToolCall, ToolOutcome, UserTurn
from .settings import DEFAULT_TOOL_CATALOG, LoopDetectionSettings, ToolCatalog
from .compaction_guard import GuardWindow
from .state import History, Record, RunState
from .toolnames import normalize_tool_name
from .verdicts import Action, Detector, ErrorCode, Level, Verdict

__all__ = [
    "Action", "CompactionRetry", "DEFAULT_TOOL_CATALOG", "Detector", "ErrorCode", "Event",
    "GuardWindow", "History", "Level", "LoopDetectionSettings", "Record", "RunEnd", "RunState", "ToolCall",
    "ToolCatalog", "ToolOutcome",
    "UserTurn", "Verdict", "evaluate", "new_run_state", "normalize_tool_name",
]
