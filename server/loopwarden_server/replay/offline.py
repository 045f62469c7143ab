"""Offline replay: the daemon's own service layer in-process, so verdicts are exactly the daemon's.

No gRPC and no daemon: event dicts are read by the same parser the client uses
(`loopwarden.eventformat.parse_event`) into the service inputs the transport builds, then handed to a
`LoopwardenService` built like the composition root builds it, with a store that never evicts or
expires a run (a replay is not a memory-bounded server) and a private metrics registry.
"""
from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

from loopwarden.eventformat import EventKind, EventRecord, parse_event
from loopwarden.replay import Observed
from prometheus_client import CollectorRegistry

from ..config import Config
from ..engine import CompactionRetry, RunEnd, ToolCall, ToolOutcome
from ..metrics import Metrics
from ..service import EventInput, LoopwardenService
from ..settings import Limits
from ..store import RunStore


def event_input(data: Mapping[str, Any]) -> EventInput:
    """One event dict (loopwarden.eventformat) as the service input the daemon would build from it.

    EventFormatError (a ValueError) names the field when the dict is not of the format."""
    return event_input_from_record(parse_event(data))


def event_input_from_record(record: EventRecord) -> EventInput:
    kind = record.kind
    payload: ToolCall | ToolOutcome | CompactionRetry | RunEnd | None
    if kind is EventKind.TOOL_CALL:
        payload = ToolCall(record.tool_name, record.params_json, record.tool_call_id, record.seq)
    elif kind is EventKind.TOOL_OUTCOME:
        payload = ToolOutcome(record.tool_name, record.params_json, record.tool_call_id,
                              record.result_json, record.error, record.seq)
    elif kind is EventKind.COMPACTION_RETRY:
        payload = CompactionRetry(record.seq)
    elif kind is EventKind.RUN_END:
        payload = RunEnd(record.seq)
    else:
        payload = None
    return EventInput(record.run_id, payload, record.agent_id, record.session_id, record.seq)


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


def silence_decision_logs() -> None:
    """For a process that only replays: no decision log lines on stderr."""
    logging.getLogger("loopwarden").setLevel(logging.CRITICAL + 1)
