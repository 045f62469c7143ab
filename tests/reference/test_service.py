"""LoopwardenService in-process: envelope checks, the run's agent, run_end, decision ids, counters,
decision log lines, config swaps and the InspectRun view. No gRPC here: events go in as EventInputs."""
from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry

from loopwarden_server.config import load_config_text
from tests.reference.engine import Action, CompactionRetry, ErrorCode, RunEnd, ToolCall, ToolOutcome
from loopwarden_server.metrics import Metrics
from tests.reference.service import EventInput, LoopwardenService
from loopwarden_server.settings import Limits
from tests.reference.store import RunStore

ENABLED = "{tools: {loopDetection: {enabled: true}}}"
WITH_AGENT = ("{tools: {loopDetection: {enabled: true}}, agents: {list: [{id: 'tight', tools: {loopDetection: "
              "{warningThreshold: 2, criticalThreshold: 3}}}]}}")
PARAMS = '{"path": "/a"}'
RESULT = '{"content": [{"type": "text", "text": "same"}]}'


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_service(config_text: str = ENABLED, limits: Limits | None = None):
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    store = RunStore(max_runs=100, idle_ttl_seconds=3600, clock=Clock())
    service = LoopwardenService(load_config_text(config_text), store, metrics, limits or Limits(), Clock(),
                                instance_id="test")
    return service, registry


def call(run_id: str, seq: int, agent_id: str = "", tool: str = "read", params: str = PARAMS) -> EventInput:
    """A tool call; its tool_call_id is "c<seq>" (ids are not content: retries ignore them)."""
    return EventInput(run_id, ToolCall(tool, params, f"c{seq}", seq), agent_id, "", seq)


def outcome(run_id: str, seq: int, agent_id: str = "", tool: str = "read", result: str = RESULT) -> EventInput:
    return EventInput(run_id, ToolOutcome(tool, PARAMS, f"c{seq - 1}", result, None, seq), agent_id, "", seq)


def loop(service: LoopwardenService, run_id: str, pairs: int, agent_id: str = "", first_seq: int = 1) -> list:
    """`pairs` identical call + outcome pairs, numbered from first_seq (distinct seqs: no retries)."""
    decisions = []
    for index in range(pairs):
        decisions.append(service.evaluate(call(run_id, first_seq + 2 * index, agent_id)))
        decisions.append(service.evaluate(outcome(run_id, first_seq + 2 * index + 1, agent_id)))
    return decisions


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


class TestEnvelope:
    @pytest.mark.parametrize("event, code", [
        (EventInput("  ", ToolCall("read")), ErrorCode.MISSING_RUN_ID),
        (EventInput("r" * 257, ToolCall("read")), ErrorCode.RUN_ID_TOO_LONG),
        (EventInput("run", None), ErrorCode.MISSING_EVENT_KIND),
        (EventInput("run", ToolCall("t" * 257)), ErrorCode.TOOL_NAME_TOO_LONG),
        (EventInput("run", ToolCall("read", '"' + "x" * 2048 + '"')), ErrorCode.PARAMS_TOO_LARGE),
        (EventInput("run", ToolOutcome("read", "", "", None, "e" * 2048)), ErrorCode.RESULT_TOO_LARGE),
    ], ids=lambda value: value.value if isinstance(value, ErrorCode) else "")
    def test_bad_envelope_is_rejected_and_counted(self, event, code):
        """Each envelope problem is a REJECT with its own code, counted once, and holds no run."""
        service, registry = make_service(limits=Limits(max_params_bytes=1024, max_result_bytes=1024))

        decision = service.evaluate(event)

        assert (Action.REJECT, code.value) == (decision.verdict.action, decision.verdict.error_code)
        assert 1.0 == sample(registry, "loopwarden_rejected_events_total", error_code=code.value)
        assert 0 == len(service.store)

    def test_run_id_is_stripped(self):
        """" run-1 " and "run-1" are the same run."""
        service, _ = make_service()

        service.evaluate(call(" run-1 ", 1))
        service.evaluate(call("run-1", 2))

        assert 2 == len(service.inspect("run-1").records)


class TestRunsAndAgents:
    def test_run_keeps_the_agent_of_its_first_event(self):
        """Later events without an agent id are judged on the run's agent's settings (W=2, C=3)."""
        service, _ = make_service(WITH_AGENT)
        service.evaluate(call("run", 1, agent_id="tight"))
        service.evaluate(outcome("run", 2))

        decisions = loop(service, "run", 3, first_seq=3)

        assert [Action.ALLOW, Action.WARN, Action.BLOCK] == [d.verdict.action for d in decisions[0::2]]
        assert "tight" == service.inspect("run").agent_id

    def test_run_end_drops_the_run(self):
        """run_end answers ALLOW and forgets the run: inspect finds nothing, a new run starts from zero."""
        service, _ = make_service()
        loop(service, "run", 3)

        ended = service.evaluate(EventInput("run", RunEnd(7), seq=7))

        assert Action.ALLOW == ended.verdict.action
        assert service.inspect("run") is None

    def test_agent_label_is_default_for_unknown_agents(self):
        """Verdicts of agents the config does not name count under agent="default"."""
        service, registry = make_service(WITH_AGENT)

        service.evaluate(call("run-a", 1, agent_id="stranger"))
        service.evaluate(call("run-b", 1, agent_id="tight"))

        assert 1.0 == sample(registry, "loopwarden_verdicts_total", action="allow", detector="none", agent="default",
                             integration="grpc")
        assert 1.0 == sample(registry, "loopwarden_verdicts_total", action="allow", detector="none", agent="tight",
                             integration="grpc")


class TestDecisions:
    def test_decision_ids_only_on_flagged_verdicts_and_unique(self):
        """ALLOW carries no decision id; each WARN/BLOCK gets its own "<instance>-<n>"."""
        service, _ = make_service()

        decisions = loop(service, "run", 22)
        flagged = [d for d in decisions if d.verdict.action in (Action.WARN, Action.BLOCK)]

        assert all(d.decision_id == "" for d in decisions if d.verdict.action is Action.ALLOW)
        assert len(flagged) == len({d.decision_id for d in flagged})
        assert all(d.decision_id.startswith("test-") for d in flagged)

    def test_block_counts_and_logs(self, caplog):
        """The 21st identical call is BLOCK: blocks counter +1 and one WARNING decision log line with its id."""
        service, registry = make_service()
        loop(service, "run", 20)

        with caplog.at_level(logging.INFO, logger="loopwarden.decisions"):
            decision = service.evaluate(call("run", 41))

        assert (Action.BLOCK, 20) == (decision.verdict.action, decision.verdict.count)
        assert 1.0 == sample(registry, "loopwarden_blocks_total", detector="generic_repeat", agent="default")
        (record,) = [r for r in caplog.records if r.getMessage() == "tool call blocked"]
        assert (logging.WARNING, decision.decision_id) == (record.levelno, record.decision_id)

    def test_armed_guard_is_logged_by_flag(self, caplog):
        """A compaction retry that arms the guard logs one INFO line; with detection off it logs none."""
        armed_service, _ = make_service()
        off_service, _ = make_service("{tools: {loopDetection: {enabled: false}}}")

        with caplog.at_level(logging.INFO, logger="loopwarden.decisions"):
            armed = armed_service.evaluate(EventInput("run", CompactionRetry(1), seq=1))
            off = off_service.evaluate(EventInput("run", CompactionRetry(1), seq=1))

        assert (True, False) == (armed.verdict.guard_armed, off.verdict.guard_armed)
        assert 1 == len([r for r in caplog.records if "armed" in r.getMessage()])


class TestConfigSwap:
    def test_swapped_config_applies_to_the_next_event_and_keeps_history(self):
        """After a swap to W=2/C=3 the same run (its history kept) is blocked at once."""
        service, _ = make_service()
        loop(service, "run", 5)

        service.swap_config(load_config_text(
            "{tools: {loopDetection: {enabled: true, warningThreshold: 2, criticalThreshold: 3}}}"))

        assert Action.BLOCK == service.evaluate(call("run", 11)).verdict.action


class TestInspect:
    def test_view_is_a_copy_of_the_run(self):
        """The view lists records, counts and settings; later events do not change a view already taken."""
        service, _ = make_service()
        loop(service, "run", 2)

        view = service.inspect("run")
        service.evaluate(call("run", 5))

        assert (2, 4, 30) == (len(view.records), view.events_evaluated, view.settings.history_size)
        assert [1, 3] == [record.seq for record in view.records]
        assert 3 == len(service.inspect("run").records)

    def test_inspect_does_not_touch_recency(self):
        """Inspecting an idle run does not keep it alive: it still expires at its TTL."""
        service, _ = make_service()
        service.evaluate(call("run", 1))
        service.store.clock.now += 3000

        service.inspect("run")
        service.store.clock.now += 601

        assert 1 == service.store.expire_idle()

    def test_unknown_run_is_none(self):
        service, _ = make_service()

        assert service.inspect("nobody") is None


class TestInternalErrors:
    def test_an_engine_failure_is_that_events_reject_and_changes_nothing(self, monkeypatch, caplog):
        """An exception inside the engine answers REJECT internal_error with a decision id (logged,
        counted); the run's records are unchanged, a run it would have created is not kept, and
        the next event is evaluated normally."""
        import tests.reference.service as service_module

        service, registry = make_service()
        loop(service, "run", 2)
        real_evaluate = service_module.evaluate

        def failing(state, payload, *args, **kwargs):
            if getattr(payload, "params_json", "") == '{"boom": true}':
                raise RuntimeError("planted bug")
            return real_evaluate(state, payload, *args, **kwargs)

        monkeypatch.setattr(service_module, "evaluate", failing)
        records_before = service.inspect("run").records
        with caplog.at_level(logging.ERROR, logger="loopwarden.decisions"):
            failed = service.evaluate(call("run", 5, params='{"boom": true}'))
            failed_new = service.evaluate(call("brand-new", 1, params='{"boom": true}'))
        after = service.evaluate(call("run", 6))

        assert (Action.REJECT, "internal_error") == (failed.verdict.action, failed.verdict.error_code)
        assert failed.decision_id and failed.decision_id in failed.verdict.message
        assert "planted bug" not in failed.verdict.message
        assert records_before == service.inspect("run").records[:len(records_before)]
        assert len(records_before) + 1 == len(service.inspect("run").records)  # only the later call
        assert service.inspect("brand-new") is None
        assert Action.ALLOW == after.verdict.action
        assert 2.0 == sample(registry, "loopwarden_rejected_events_total", error_code="internal_error")
        assert {failed.decision_id, failed_new.decision_id} <= {r.decision_id for r in caplog.records}


class TestRetriesInProcess:
    def test_a_retried_block_is_the_same_decision_and_not_counted_again(self):
        """Resending the blocked call (same seq and content) returns that decision, id included,
        and neither the blocks counter nor the run's block count moves."""
        service, registry = make_service()
        loop(service, "run", 20)
        blocked = service.evaluate(call("run", 41))

        again = service.evaluate(call("run", 41))

        assert (Action.BLOCK, blocked.decision_id) == (again.verdict.action, again.decision_id)
        assert 1.0 == sample(registry, "loopwarden_blocks_total", detector="generic_repeat", agent="default")
        assert 1 == service.inspect("run").blocks
        assert 1.0 == sample(registry, "loopwarden_retried_events_total")

    def test_the_window_remembers_the_last_64_events(self):
        """An event 64 evaluations back is still a retry; one 65 back is evaluated anew."""
        service, _ = make_service()
        for seq in range(1, 66):
            service.evaluate(call("run", seq, params=f'{{"i": {seq}}}'))

        oldest = service.evaluate(call("run", 1, params='{"i": 1}'))  # 65 back: forgotten
        recent = service.evaluate(call("run", 3, params='{"i": 3}'))  # 63 back (after the one above): kept

        assert len(service.inspect("run").records) == 30  # history is H=30; the window is separate
        assert Action.ALLOW == oldest.verdict.action and Action.ALLOW == recent.verdict.action
        retried = service.metrics.registry.get_sample_value("loopwarden_retried_events_total")
        assert 1.0 == retried

    def test_tenants_do_not_share_retry_windows_or_runs(self):
        """The same run id and seq from two tenants are two runs, neither a retry of the other."""
        service, registry = make_service()
        first = service.evaluate(EventInput("run", ToolCall("read", PARAMS, "", 1), seq=1, tenant="a"))
        second = service.evaluate(EventInput("run", ToolCall("read", PARAMS, "", 1), seq=1, tenant="b"))

        assert (Action.ALLOW, Action.ALLOW) == (first.verdict.action, second.verdict.action)
        assert 0.0 == sample(registry, "loopwarden_retried_events_total")
        assert (1, 1) == (len(service.inspect("run", "a").records), len(service.inspect("run", "b").records))
        assert service.inspect("run") is None
