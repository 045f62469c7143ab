"""The reference service layer (the tests' oracle; the daemon runs the compiled core): envelope validation, run store, retries, engine, metrics and decision logs.

It sees neither protobuf nor grpc: the transport hands it `EventInput`s and gets `Decision`s.
Every run is keyed by the pair (tenant, run_id): a run id is scoped to the tenant that sent it.

Every event gets exactly one decision. A failure inside the engine (a bug, or an input nothing
anticipated) is that event's REJECT `internal_error`, logged with its decision id and counted;
the event changes no state (the engine computes all it needs before it changes the run, and a
run the failing event would have created is not kept), and the rest of the batch goes on.
"""
from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from loopwarden.eventformat import EventKind
from loopwarden_server.config import Config
from loopwarden_server.integration import current_integration
from loopwarden_server.metrics import DEFAULT_AGENT, Metrics
from loopwarden_server.settings import Limits

from .engine import (
    Action, CompactionRetry, ErrorCode, LoopDetectionSettings, Record, RunEnd, ToolCall, ToolOutcome, UserTurn, Verdict,
    evaluate, new_run_state, normalize_tool_name,
)
from .engine.verdicts import ALLOW, reject
from .retries import RetryWindow, content_digest
from .store import RunEntry, RunStore

decision_log = logging.getLogger("loopwarden.decisions")


# NOTE: not frozen: a frozen dataclass's __init__ goes through object.__setattr__ per field, which
# costs microseconds on the per-event path. Instances are never mutated after construction.
@dataclass(slots=True)
class EventInput:
    """One event as received: the envelope, and the engine event it carries (None: no kind)."""

    run_id: str
    payload: ToolCall | ToolOutcome | CompactionRetry | RunEnd | UserTurn | None
    agent_id: str = ""
    session_id: str = ""
    seq: int = 0
    tenant: str = ""  # who sent it ("" without authentication); set by the transport, never by the event
    # Which integration it came through (the `integration` label, see integration.py).
    integration: str = field(default_factory=current_integration.get)

    @property
    def kind(self) -> str | None:
        return _KIND_OF.get(type(self.payload))


# Metric label of each engine event: the event kinds as the event format names them.
_KIND_OF = {ToolCall: EventKind.TOOL_CALL.value, ToolOutcome: EventKind.TOOL_OUTCOME.value,
            CompactionRetry: EventKind.COMPACTION_RETRY.value, RunEnd: EventKind.RUN_END.value,
            UserTurn: EventKind.USER_TURN.value}


@dataclass(slots=True)
class Decision:
    seq: int
    run_id: str
    verdict: Verdict
    decision_id: str = ""  # WARN/BLOCK/ABORT: names this decision in logs and InspectRun


@dataclass(frozen=True, slots=True)
class RunView:
    """One run as InspectRun shows it: a copy, so the transport never touches store internals."""

    tenant: str
    run_id: str
    agent_id: str
    records: tuple[Record, ...]
    guard_armed: bool
    guard_window_size: int
    guard_observed: int
    blocks: int
    aborted: bool
    abort_error_code: str
    settings: LoopDetectionSettings
    events_evaluated: int
    recent_decisions: tuple[Decision, ...]
    agent_label: str = DEFAULT_AGENT  # the agent as the metrics spell it


RECENT_DECISIONS = 10
# REJECT code of an event whose run id is not the one its stream was opened (and routed) for.
# NOTE: kept here, not in engine.ErrorCode: it is a routing error the engine never sees.
RUN_ID_MISMATCH = "run_id_mismatch"


class LoopwardenService:
    def __init__(
        self,
        config: Config,
        store: RunStore,
        metrics: Metrics,
        limits: Limits,
        timer: Callable[[], float],
        instance_id: str = "lw",
    ) -> None:
        self._config = config
        self._instance_id = instance_id
        self._decisions = 0
        self.store = store
        self.metrics = metrics
        self.limits = limits
        self._timer = timer
        metrics.active_runs.set_function(lambda: len(store))

    @property
    def config(self) -> Config:
        return self._config

    def swap_config(self, config: Config) -> None:
        """Atomic: every event reads the config reference once, so none sees half of two."""
        self._config = config

    def agent_label(self, agent_id: str, config: Config) -> str:
        agent = agent_id.strip()
        return agent if agent in config.agent_ids else DEFAULT_AGENT

    def evaluate(self, event: EventInput) -> Decision:
        started = self._timer()
        config = self._config
        self.metrics.event_of(event.kind or "unknown").inc()
        run_id = event.run_id.strip()
        invalid = self._envelope_error(event, run_id)
        if invalid is not None:
            decision = self._rejected(event, run_id, invalid, config)
        else:
            decision = self._decide(event, run_id, config)
        self.metrics.evaluation_seconds.observe(self._timer() - started)
        return decision

    def refuse_misrouted(self, event: EventInput, stream_run_id: str) -> Decision:
        """REJECT `run_id_mismatch`: the event names another run than its stream's routing header,
        so a router may have sent it to a replica that does not own its run."""
        self.metrics.event_of(event.kind or "unknown").inc()
        run_id = event.run_id.strip()
        verdict = Verdict(action=Action.REJECT, error_code=RUN_ID_MISMATCH, message=(
            f"run_id {run_id[:80]!r} differs from this stream's x-loopwarden-run-id {stream_run_id[:80]!r}; "
            "open one Evaluate stream per run (the header routes the stream to the run's replica)"))
        return self._rejected(event, run_id, verdict, self._config)

    def _rejected(self, event: EventInput, run_id: str, verdict: Verdict, config: Config) -> Decision:
        self.metrics.rejected_of(verdict.error_code).inc()
        self.metrics.verdict_of(Action.REJECT.value, "none", self.agent_label(event.agent_id, config),
                                event.integration, *self.metrics.tenant_labels(event.tenant)).inc()
        return Decision(event.seq, run_id, verdict)

    def _envelope_error(self, event: EventInput, run_id: str) -> Verdict | None:
        limits = self.limits
        if not run_id:
            return reject(ErrorCode.MISSING_RUN_ID, "run_id is required (a non-blank string)")
        if len(run_id) > limits.max_run_id_chars:
            return reject(ErrorCode.RUN_ID_TOO_LONG, f"run_id is {len(run_id)} characters; the limit is {limits.max_run_id_chars}")
        if len(event.agent_id) > limits.max_agent_id_chars:
            return reject(ErrorCode.AGENT_ID_TOO_LONG,
                          f"agent_id is {len(event.agent_id)} characters; the limit is {limits.max_agent_id_chars}")
        if len(event.session_id) > limits.max_session_id_chars:
            return reject(ErrorCode.SESSION_ID_TOO_LONG,
                          f"session_id is {len(event.session_id)} characters; the limit is {limits.max_session_id_chars}")
        payload = event.payload
        if payload is None:
            return reject(ErrorCode.MISSING_EVENT_KIND, "event has no kind: set one of tool_call, tool_outcome, compaction_retry, user_turn, usage, model_output, approval, run_end")
        if not isinstance(payload, (ToolCall, ToolOutcome)):
            return None
        if len(payload.tool_name) > limits.max_tool_name_chars:
            return reject(ErrorCode.TOOL_NAME_TOO_LONG, f"tool_name is {len(payload.tool_name)} characters; the limit is {limits.max_tool_name_chars}")
        if len(payload.tool_call_id) > limits.max_tool_call_id_chars:
            return reject(ErrorCode.TOOL_CALL_ID_TOO_LONG,
                          f"tool_call_id is {len(payload.tool_call_id)} characters; the limit is {limits.max_tool_call_id_chars}")
        # Byte limits: len(str) <= bytes <= 4 * len(str), so encode only when it could matter.
        if len(payload.params_json) * 4 > limits.max_params_bytes:
            size = len(payload.params_json.encode("utf-8", "surrogatepass"))
            if size > limits.max_params_bytes:
                return reject(ErrorCode.PARAMS_TOO_LARGE, f"params_json is {size} bytes; the limit is {limits.max_params_bytes}")
        if not isinstance(payload, ToolOutcome):
            return None
        for name, text in (("result_json", payload.result_json), ("error", payload.error)):
            if text is not None and len(text) * 4 > limits.max_result_bytes:
                size = len(text.encode("utf-8", "surrogatepass"))
                if size > limits.max_result_bytes:
                    return reject(ErrorCode.RESULT_TOO_LARGE, f"{name} is {size} bytes; the limit is {limits.max_result_bytes}")
        return None

    def _decide(self, event: EventInput, run_id: str, config: Config) -> Decision:
        payload = event.payload
        tenant = event.tenant
        if type(payload) is RunEnd:
            self.store.remove(tenant, run_id)
            self.metrics.verdict_of(Action.ALLOW.value, "none", self.agent_label(event.agent_id, config),
                                    event.integration, *self.metrics.tenant_labels(tenant)).inc()
            return Decision(event.seq, run_id, ALLOW)

        entry = self.store.touch(tenant, run_id)
        digest = None
        if event.seq and entry is not None and entry.retries is not None:
            digest = content_digest(payload)
            slot = entry.retries.find(event.seq, digest)
            if slot >= 0:
                return self._retried(event, run_id, entry, slot)
        # An event without an agent id keeps the run's agent (runs do not change agents).
        agent_id = event.agent_id.strip() or (entry.agent_id if entry is not None else "")
        settings = config.settings_for(agent_id)
        created = entry is None
        if created:
            entry = self.store.create(tenant, run_id, new_run_state(settings))
        was_aborted = entry.state.abort is not None
        try:
            verdict = evaluate(entry.state, payload, settings, config.tool_catalog,
                               max_json_depth=self.limits.max_json_depth)
        except Exception:  # noqa: BLE001 - one event's failure must not take the batch or stream down
            return self._internal_error(event, run_id, entry, created, config)
        entry.agent_id = agent_id
        if event.session_id:
            entry.session_id = event.session_id
        if verdict.action is Action.REJECT:
            decision = Decision(event.seq, run_id, verdict)
        else:
            entry.events_evaluated += 1
            decision = Decision(event.seq, run_id, verdict, self._decision_id(verdict))
            if decision.decision_id:
                if entry.recent is None:
                    entry.recent = deque(maxlen=RECENT_DECISIONS)
                entry.recent.append(decision)
            if event.seq:
                if entry.retries is None:
                    entry.retries = RetryWindow()
                plain = verdict.action is Action.ALLOW and not verdict.message and verdict.shadow_action is None
                entry.retries.remember(event.seq, digest or content_digest(payload), None if plain else decision)
        self._account(event, entry, decision, self.agent_label(agent_id, config), was_aborted)
        return decision

    def _retried(self, event: EventInput, run_id: str, entry: RunEntry, slot: int) -> Decision:
        """A resent event: its first decision again (a plain ALLOW is rebuilt); nothing changes."""
        self.metrics.retried_events.inc()
        kept = entry.retries.decision_at(slot)
        if kept is not None:
            return Decision(event.seq, run_id, kept.verdict, kept.decision_id)
        tool_name = ""
        if isinstance(event.payload, (ToolCall, ToolOutcome)):  # as the host spelled it (blank: normalised)
            tool_name = event.payload.tool_name.strip() or normalize_tool_name(event.payload.tool_name)
        return Decision(event.seq, run_id, Verdict(action=Action.ALLOW, tool_name=tool_name))

    def _internal_error(self, event: EventInput, run_id: str, entry: RunEntry, created: bool, config: Config) -> Decision:
        if created:
            self.store.remove(entry.tenant, run_id)
        decision_id = self._next_decision_id()
        decision_log.exception("internal error evaluating an event; answered REJECT internal_error", extra={
            "decision_id": decision_id, "tenant": event.tenant, "run_id": run_id, "seq": event.seq,
            "kind": event.kind,
        })
        verdict = reject(ErrorCode.INTERNAL_ERROR,
                         f"loopwarden could not evaluate this event (decision {decision_id}); it changed nothing. "
                         "The daemon log has the details under that id.")
        decision = self._rejected(event, run_id, verdict, config)
        decision.decision_id = decision_id
        return decision

    def _next_decision_id(self) -> str:
        self._decisions += 1
        return f"{self._instance_id}-{self._decisions:x}"

    def _decision_id(self, verdict: Verdict) -> str:
        if verdict.action is Action.ALLOW and verdict.shadow_action is None:
            return ""
        return self._next_decision_id()

    def _account(self, event: EventInput, entry: RunEntry, decision: Decision, agent: str, was_aborted: bool) -> None:
        verdict = decision.verdict
        action = verdict.action
        metrics = self.metrics
        tenant = metrics.tenant_labels(event.tenant)
        metrics.verdict_of(action.value, verdict.detector.value, agent, event.integration, *tenant).inc()
        if verdict.shadow_action is not None:
            metrics.shadow_verdict_of(verdict.shadow_action.value, verdict.detector.value).inc()
            self._log(logging.WARNING, f"shadow {verdict.shadow_action.value} (not enforced)", event, entry, decision)
            return
        if action is Action.ALLOW:
            if verdict.guard_armed:
                self._log(logging.INFO, verdict.message, event, entry, decision)
            return
        if action is Action.REJECT:
            metrics.rejected_of(verdict.error_code).inc()
        elif action is Action.WARN:
            if verdict.announce:
                metrics.warning_of(verdict.detector.value, agent, *tenant).inc()
                self._log(logging.WARNING, "loop warning", event, entry, decision)
            elif decision_log.isEnabledFor(logging.DEBUG):
                self._log(logging.DEBUG, "loop warning (not announced)", event, entry, decision)
        elif action is Action.BLOCK:
            metrics.block_of(verdict.detector.value, agent, *tenant).inc()
            self._log(logging.WARNING, "tool call blocked", event, entry, decision)
        elif action is Action.ABORT:
            if was_aborted:
                if decision_log.isEnabledFor(logging.DEBUG):
                    self._log(logging.DEBUG, "run already aborted", event, entry, decision)
                return
            if verdict.error_code == ErrorCode.TOOL_LOOP_PERSISTED.value:
                metrics.escalation_abort_of(verdict.detector.value, agent, *tenant).inc()
            else:
                metrics.guard_abort_of(agent, *tenant).inc()
            self._log(logging.ERROR, "run aborted", event, entry, decision)

    @staticmethod
    def _log(level: int, message: str, event: EventInput, entry: RunEntry, decision: Decision) -> None:
        verdict = decision.verdict
        decision_log.log(level, message, extra={
            "decision_id": decision.decision_id, "tenant": entry.tenant,
            "run_id": entry.run_id, "agent_id": entry.agent_id, "session_id": entry.session_id,
            "seq": event.seq, "tool": verdict.tool_name, "action": verdict.action.value,
            "detector": verdict.detector.value, "count": verdict.count,
            "warning_key": verdict.warning_key, "error_code": verdict.error_code,
            "evidence_seqs": list(verdict.evidence_seqs), "loop_started_seq": verdict.loop_started_seq,
        })

    def inspect(self, run_id: str, tenant: str = "") -> RunView | None:
        """What is held for a run of this tenant, read without touching its recency (inspection
        must not keep a run alive). None when no state is held."""
        entry = self.store.get(tenant, run_id.strip())
        if entry is None:
            return None
        state = entry.state
        guard = state.guard
        return RunView(
            tenant=entry.tenant, run_id=entry.run_id, agent_id=entry.agent_id, records=tuple(state.records),
            guard_armed=guard is not None, guard_window_size=guard.window_size if guard else 0,
            guard_observed=guard.observed if guard else 0, blocks=state.blocks,
            aborted=state.abort is not None, abort_error_code=state.abort.error_code if state.abort else "",
            settings=self._config.settings_for(entry.agent_id), events_evaluated=entry.events_evaluated,
            recent_decisions=tuple(entry.recent or ()), agent_label=self.agent_label(entry.agent_id, self._config),
        )
