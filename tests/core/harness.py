"""The core and the reference engine (the oracle) behind the same service-level API, for the
differential and conformance tests: an event (a dict) goes in as protobuf, a pb.Verdict comes out."""
from __future__ import annotations

import itertools

from loopwarden.v1 import loopwarden_pb2 as pb
from prometheus_client import CollectorRegistry

from loopwarden_server.config import load_config_text
from loopwarden_server.core import CoreService
from loopwarden_server.metrics import Metrics
from loopwarden_server.settings import Limits
from loopwarden_server.transport.convert import inspect_response
from tests.conformance.messages import approval_message, usage_message
from tests.reference import convert
from tests.reference.service import LoopwardenService
from tests.reference.store import RunStore


def pb_event(event: dict) -> pb.Event:
    message = pb.Event(run_id=event["run_id"], agent_id=event.get("agent_id", ""), seq=event.get("seq", 0),
                       parent_run_id=event.get("parent_run_id", ""), accepts_ask=event.get("accepts_ask", False))
    kind = event.get("kind")
    if kind == "tool_call":
        message.tool_call.tool_name = event.get("tool_name", "")
        message.tool_call.params_json = event.get("params_json", "")
        message.tool_call.tool_call_id = event.get("tool_call_id", "")
    elif kind == "tool_outcome":
        outcome = message.tool_outcome
        outcome.tool_name = event.get("tool_name", "")
        outcome.params_json = event.get("params_json", "")
        outcome.tool_call_id = event.get("tool_call_id", "")
        outcome.duration_ms = event.get("duration_ms", 0)
        if event.get("error") is not None:
            outcome.error = event["error"]
        elif event.get("result_json") is not None:
            outcome.result_json = event["result_json"]
    elif kind == "compaction_retry":
        message.compaction_retry.SetInParent()
    elif kind == "run_end":
        message.run_end.SetInParent()
    elif kind == "user_turn":
        message.user_turn.prompt_id = event.get("prompt_id", "")
        message.user_turn.SetInParent()
    elif kind == "usage":
        message.usage.CopyFrom(usage_message(event.get("usage") or {}))
    elif kind == "approval":
        message.approval.CopyFrom(approval_message(event.get("approval") or {}))
    return message



class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ReferenceEngine:
    name = "reference"

    def __init__(self, config_text: str, limits: Limits = Limits(), max_runs: int = 1000, idle_ttl: float = 3600.0):
        self.clock = Clock()
        self.registry = CollectorRegistry()
        self.metrics = Metrics(self.registry)
        # Evictions counted as the daemon counted them when it ran this engine (app.py's on_evict).
        self.store = RunStore(max_runs=max_runs, idle_ttl_seconds=idle_ttl, clock=self.clock,
                              on_evict=lambda reason, _entry: self.metrics.evictions.labels(reason).inc())
        ticks = itertools.count()
        self.service = LoopwardenService(load_config_text(config_text), self.store, self.metrics, limits,
                                         lambda: next(ticks) * 1e-6, instance_id="lw")

    def evaluate(self, events: list[pb.Event], tenant: str = "") -> list[pb.Verdict]:
        return [convert.verdict_message(self.service.evaluate(convert.event_input(e, tenant))) for e in events]

    def inspect(self, run_id: str, tenant: str = "") -> pb.InspectRunResponse | None:
        view = self.service.inspect(run_id, tenant)
        return None if view is None else convert.inspect_response(view)


class CoreEngine:
    name = "core"

    def __init__(self, config_text: str, limits: Limits = Limits(), max_runs: int = 1000, idle_ttl: float = 3600.0):
        self.clock = Clock()
        self.registry = CollectorRegistry()
        self.metrics = Metrics(self.registry)
        self.service = CoreService(load_config_text(config_text), self.metrics, limits, max_runs=max_runs,
                                   idle_ttl_seconds=idle_ttl, clock=self.clock, instance_id="lw")

    def evaluate(self, events: list[pb.Event], tenant: str = "") -> list[pb.Verdict]:
        answer = self.service.evaluate(pb.EvaluateRequest(events=events).SerializeToString(), tenant)
        assert answer.response is not None, answer.refusal
        return list(pb.EvaluateResponse.FromString(answer.response).verdicts)

    def inspect(self, run_id: str, tenant: str = "") -> pb.InspectRunResponse | None:
        view = self.service.inspect(run_id, tenant)
        return None if view is None else inspect_response(view, self.service.config.settings_for(view.agent_id))
