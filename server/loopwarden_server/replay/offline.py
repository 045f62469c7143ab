"""Offline replay: the daemon's own compiled core in-process, so verdicts are exactly the daemon's.

No gRPC and no daemon: event dicts are read by the same parser the client uses
(`loopwarden.eventformat.parse_event`) into event records, and each record goes to a `CoreService`
built like the composition root builds it, with a store that never evicts or expires a run (a
replay is not a memory-bounded server) and a private metrics registry.
"""
from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any, cast

from loopwarden.eventformat import EventRecord, parse_event
from loopwarden.replay import Observed
from prometheus_client import CollectorRegistry

from ..config import Config
from ..core import CoreService, CoreVerdict
from ..metrics import Metrics
from ..settings import Limits

# A replay holds every run until its run_end: no max-runs eviction, no idle expiry.
UNBOUNDED_RUNS = 2**31


class OfflineEngine:
    """Verdicts for event dicts or records from an in-process core; runs live until their run_end."""

    def __init__(self, config: Config, limits: Limits | None = None) -> None:
        self.core = CoreService(config, Metrics(CollectorRegistry()), limits or Limits(), max_runs=UNBOUNDED_RUNS,
                                idle_ttl_seconds=float("inf"), clock=time.monotonic)

    @property
    def config(self) -> Config:
        return self.core.config

    def decide(self, record: EventRecord) -> CoreVerdict:
        """One event record's verdict. EventFormatError never: a record is already parsed."""
        return cast(CoreVerdict, self.core.decide(record).verdict)  # an event's answer holds its verdict

    def judge(self, data: Mapping[str, Any]) -> Observed:
        """One event dict (loopwarden.eventformat) as the replay reports it; EventFormatError (a
        ValueError) names the field when the dict is not of the format."""
        verdict = self.decide(parse_event(data))
        return Observed(
            seq=verdict.seq, run_id=verdict.run_id, action=verdict.action, detector=verdict.detector,
            level=verdict.level, count=verdict.count, message=verdict.message, error_code=verdict.error_code,
            tool_name=verdict.tool_name, shadow_action=verdict.shadow_action or "",
        )


@contextlib.contextmanager
def quiet_daemon_logs() -> Iterator[None]:
    """Silence the core's decision log lines (a replay prints its own report) and restore after."""
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
