"""Drives the engine through its single entry point, the way the daemon does."""
from __future__ import annotations

import json
from typing import Any

from loopwarden_server.config import load_config_text
from loopwarden_server.engine import (
    DEFAULT_TOOL_CATALOG, CompactionRetry, LoopDetectionSettings, RunEnd, RunState, ToolCall,
    ToolCatalog, ToolOutcome, Verdict, evaluate, new_run_state,
)

PROTO_ACTION = {"allow": "ACTION_ALLOW", "warn": "ACTION_WARN", "block": "ACTION_BLOCK",
                "abort": "ACTION_ABORT", "reject": "ACTION_REJECT"}


def verdict_as_proto_dict(verdict: Verdict, seq: int, run_id: str) -> dict:
    """The verdict spelled like the proto (so conformance data can be shared with the daemon)."""
    detector = "DETECTOR_UNSPECIFIED" if verdict.detector.value == "none" else "DETECTOR_" + verdict.detector.value.upper()
    level = "LEVEL_UNSPECIFIED" if verdict.level.value == "none" else "LEVEL_" + verdict.level.value.upper()
    return {
        "seq": seq, "run_id": run_id, "action": PROTO_ACTION[verdict.action.value],
        "detector": detector, "level": level, "count": verdict.count, "message": verdict.message,
        "warning_key": verdict.warning_key, "announce": verdict.announce,
        "paired_tool_name": verdict.paired_tool_name, "error_code": verdict.error_code,
        "tool_name": verdict.tool_name,
    }


def settings_from(config: dict | str) -> LoopDetectionSettings:
    text = config if isinstance(config, str) else json.dumps(config)
    return load_config_text(text).settings_for("")


def R(text: str) -> dict:
    """The examples' R(x): a text result with stable details."""
    return {"content": [{"type": "text", "text": text}], "details": {"ok": True}}


class Run:
    """One run fed through `evaluate`, with the examples' call/done vocabulary."""

    def __init__(self, settings: LoopDetectionSettings | None = None,
                 catalog: ToolCatalog = DEFAULT_TOOL_CATALOG, state: RunState | None = None) -> None:
        self.settings = settings or LoopDetectionSettings(enabled=True)
        self.catalog = catalog
        self.state = state or new_run_state(self.settings)
        self.seq = 0

    def _evaluate(self, event) -> Verdict:
        return evaluate(self.state, event, self.settings, self.catalog)

    def call(self, tool: str, params: Any = None, tool_call_id: str = "") -> Verdict:
        self.seq += 1
        params_json = "" if params is None else json.dumps(params)
        return self._evaluate(ToolCall(tool, params_json, tool_call_id, self.seq))

    def outcome(self, tool: str, params: Any = None, result: Any = None, *, error: str | None = None,
                tool_call_id: str = "", result_json: str | None = None) -> Verdict:
        self.seq += 1
        params_json = "" if params is None else json.dumps(params)
        if result_json is None and error is None and result is not None:
            result_json = json.dumps(result)
        return self._evaluate(ToolOutcome(tool, params_json, tool_call_id, result_json, error, self.seq))

    def done(self, tool: str, params: Any, result: Any = None, *, error: str | None = None) -> tuple[Verdict, Verdict]:
        """A call that was allowed to run, followed by its outcome."""
        return self.call(tool, params), self.outcome(tool, params, result, error=error)

    def compaction_retry(self) -> Verdict:
        self.seq += 1
        return self._evaluate(CompactionRetry(self.seq))

    def run_end(self) -> Verdict:
        self.seq += 1
        return self._evaluate(RunEnd(self.seq))
