"""Offline replay: the daemon's own service layer in-process, so verdicts are exactly the daemon's.

No gRPC and no daemon: event dicts are converted the way the transport converts protobuf events
(`transport.convert.event_input` after `loopwarden._wire.event_from_dict`), then handed to a
`LoopwardenService` built like the composition root builds it, with a store that never evicts or
expires a run (a replay is not a memory-bounded server) and a private metrics registry.
"""
from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from ..config import Config
from ..engine import CompactionRetry, RunEnd, ToolCall, ToolOutcome
from ..metrics import Metrics
from ..service import EventInput, LoopwardenService
from ..settings import Limits
from ..store import RunStore

_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class Observed:
    """A verdict as replay reports see it, whichever side (daemon or in-process) produced it.

    Plain strings: `action` is "allow" … "reject", `detector` and `level` are "" when none matched.
    `shadow_action` is what shadow mode would have enforced ("" when not in shadow mode).
    """

    seq: int
    run_id: str
    action: str
    detector: str = ""
    level: str = ""
    count: int = 0
    message: str = ""
    error_code: str = ""
    tool_name: str = ""
    shadow_action: str = ""

    @property
    def enforced_action(self) -> str:
        """The action the settings would enforce: the shadow action when shadow mode withheld it."""
        return self.shadow_action or self.action


def _params_text(data: Mapping[str, Any]) -> str:
    params_json = data.get("params_json")
    if params_json is not None:
        return params_json
    params = data.get("params")
    return "" if params is None else json.dumps(params, default=str)


def event_input(data: Mapping[str, Any]) -> EventInput:
    """One event dict (our JSONL event format) as the service input the daemon would build from it."""
    kind = data.get("kind")
    seq = int(data.get("seq", 0))
    payload: ToolCall | ToolOutcome | CompactionRetry | RunEnd | None
    if kind == "tool_call":
        payload = ToolCall(data.get("tool_name", ""), _params_text(data), data.get("tool_call_id", ""), seq)
    elif kind == "tool_outcome":
        error = data.get("error")
        result_json = None
        if error is None:
            result_json = data.get("result_json")
            if result_json is None and (result := data.get("result", _MISSING)) is not _MISSING:
                result_json = json.dumps(result, default=str)
        payload = ToolOutcome(data.get("tool_name", ""), _params_text(data), data.get("tool_call_id", ""),
                              result_json, error, seq)
    elif kind == "compaction_retry":
        payload = CompactionRetry(seq)
    elif kind == "run_end":
        payload = RunEnd(seq)
    else:
        payload = None
    return EventInput(data.get("run_id", ""), payload, data.get("agent_id", ""), data.get("session_id", ""), seq)


def _text(value: Any) -> str:
    """An enum's value, or "" for none."""
    if value is None:
        return ""
    text = getattr(value, "value", value)
    return "" if text == "none" else str(text)


class OfflineEngine:
    """Verdicts for event dicts from an in-process service; runs live until their run_end."""

    def __init__(self, config: Config, limits: Limits | None = None) -> None:
        store = RunStore(max_runs=2**62, idle_ttl_seconds=float("inf"), clock=time.monotonic)
        self.service = LoopwardenService(config, store, Metrics(CollectorRegistry()), limits or Limits(),
                                         time.perf_counter)

    @property
    def config(self) -> Config:
        return self.service.config

    def judge(self, data: Mapping[str, Any]) -> Observed:
        decision = self.service.evaluate(event_input(data))
        verdict = decision.verdict
        return Observed(
            seq=decision.seq, run_id=decision.run_id, action=_text(verdict.action),
            detector=_text(verdict.detector), level=_text(verdict.level), count=verdict.count,
            message=verdict.message, error_code=verdict.error_code, tool_name=verdict.tool_name,
            shadow_action=_text(getattr(verdict, "shadow_action", None)),
        )


@contextlib.contextmanager
def quiet_daemon_logs() -> Iterator[None]:
    """Silence the service's decision log lines (a replay prints its own report) and restore after."""
    logger = logging.getLogger("loopwarden")
    previous = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(previous)
