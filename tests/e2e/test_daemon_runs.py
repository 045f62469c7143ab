"""Run state: eviction by max-runs and idle TTL, run_end, InspectRun, decision logs."""
from __future__ import annotations

import re
import time

import grpc
import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import SAME, Stream, call, channel, compaction, outcome, run_end
from tests.support.metrics import value

pytestmark = pytest.mark.daemon


def _inspect(target: str, run_id: str) -> pb.InspectRunResponse:
    with channel(target) as ch:
        return pb_grpc.LoopDetectionServiceStub(ch).InspectRun(pb.InspectRunRequest(run_id=run_id), timeout=5)


class TestEviction:
    def test_max_runs_bounds_memory_and_counts_evictions(self):
        """max-runs 100 and 150 runs: 100 held, 50 evictions, and an evicted run starts fresh."""
        with running_daemon("{tools: {loopDetection: {enabled: true}}}", ["--max-runs", "100"]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                for _ in range(10):
                    stream.one(call("evict-0", "read"))
                for index in range(1, 150):
                    stream.one(call(f"evict-{index}", "read"))
                scrape = daemon.scrape()
                assert 100 == value(scrape, "loopwarden_active_runs")
                assert 50 == value(scrape, "loopwarden_run_evictions_total", reason="max_runs")
                fresh = stream.one(call("evict-0", "read"))
            assert pb.ACTION_ALLOW == fresh.action
            assert 51 == value(daemon.scrape(), "loopwarden_run_evictions_total", reason="max_runs")

    def test_idle_runs_expire(self):
        """A run idle past --run-idle-ttl is dropped (reason idle_ttl) and starts from zero."""
        with running_daemon("{tools: {loopDetection: {enabled: true}}}", ["--run-idle-ttl", "0.3"]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                for _ in range(10):
                    stream.one(call("idle-1", "read"))
                time.sleep(1.6)
                scrape = daemon.scrape()
                assert 1 <= value(scrape, "loopwarden_run_evictions_total", reason="idle_ttl")
                assert 0 == value(scrape, "loopwarden_active_runs")
                assert pb.ACTION_ALLOW == stream.one(call("idle-1", "read")).action

    def test_run_end_frees_the_run_at_once(self):
        """After run_end, InspectRun is NOT_FOUND and the same id starts fresh; no eviction is counted."""
        with running_daemon("{tools: {loopDetection: {enabled: true}}}") as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                for _ in range(10):
                    stream.one(call("end-1", "read"))
                assert pb.ACTION_ALLOW == stream.one(run_end("end-1")).action
                with pytest.raises(grpc.RpcError) as missing:
                    _inspect(daemon.grpc_target, "end-1")
                assert grpc.StatusCode.NOT_FOUND == missing.value.code()
                assert pb.ACTION_ALLOW == stream.one(call("end-1", "read")).action
            assert 0 == value(daemon.scrape(), "loopwarden_run_evictions_total", reason="max_runs")


class TestInspectRun:
    def test_shows_records_guard_blocks_and_effective_config(self):
        """InspectRun returns the run's records (hash shapes), guard state, blocks and merged config."""
        config = "{tools: {loopDetection: {enabled: true}}, agents: {list: [{id: 'a1', tools: {loopDetection: {warningThreshold: 4, criticalThreshold: 6}}}]}}"
        with running_daemon(config) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                for _ in range(6):
                    stream.send(call("insp-1", "read", '{"path":"/x"}', agent_id="a1"),
                                outcome("insp-1", "read", '{"path":"/x"}', SAME, agent_id="a1"))
                assert pb.ACTION_BLOCK == stream.one(call("insp-1", "read", '{"path":"/x"}', agent_id="a1")).action
                stream.one(compaction("insp-1"))
                stream.one(call("insp-1", "list", "{}"))
            response = _inspect(daemon.grpc_target, "insp-1")
        assert ("insp-1", "a1", 7, 1, False) == (response.run_id, response.agent_id, len(response.records),
                                                 response.blocks, response.aborted)
        assert all(re.fullmatch(r"(read|list):[0-9a-f]{64}", r.args_hash) for r in response.records)
        assert [True] * 6 + [False] == [bool(r.result_hash) for r in response.records]
        assert (True, 3, 0) == (response.guard.armed, response.guard.window_size, response.guard.observed)
        effective = response.effective_config
        assert (True, 4, 6, 30, 30) == (effective.enabled, effective.warning_threshold, effective.critical_threshold,
                                        effective.global_circuit_breaker_threshold, effective.history_size)
        assert 15 == response.events_evaluated

    def test_unknown_run_is_not_found_and_blank_is_invalid(self):
        """NOT_FOUND for a run the daemon does not hold; INVALID_ARGUMENT for a blank id."""
        with running_daemon() as daemon:
            for run_id, code in (("never-seen", grpc.StatusCode.NOT_FOUND), ("  ", grpc.StatusCode.INVALID_ARGUMENT)):
                with pytest.raises(grpc.RpcError) as failure:
                    _inspect(daemon.grpc_target, run_id)
                assert code == failure.value.code()


class TestDecisionLogs:
    def test_one_json_line_per_announced_warning_block_abort_and_guard_arming(self):
        """Each line carries run, agent, tool, detector and count; unannounced warnings log nothing."""
        with running_daemon("{tools: {loopDetection: {enabled: true}}}") as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                for _ in range(20):
                    stream.send(call("log-1", "read", '{"path":"/x"}', agent_id="ag"),
                                outcome("log-1", "read", '{"path":"/x"}', SAME))
                stream.one(call("log-1", "read", '{"path":"/x"}'))
                stream.one(compaction("log-2"))
                for _ in range(3):
                    stream.send(call("log-2", "gw"), outcome("log-2", "gw", "{}", SAME))
            armed = daemon.wait_for_log(lambda l: l.get("msg") == "post-compaction guard armed for 3 attempts")
            aborted = daemon.wait_for_log(lambda l: l.get("msg") == "run aborted")
            decisions = [l for l in daemon.logs() if l.get("logger") == "loopwarden.decisions" and l.get("run_id") == "log-1"]
        assert [("loop warning", 10), ("tool call blocked", 20)] == [(l["msg"], l["count"]) for l in decisions]
        assert ("ag", "read", "generic_repeat") == (decisions[1]["agent_id"], decisions[1]["tool"], decisions[1]["detector"])
        assert ("log-2", "gw", 3, "compaction_loop_persisted") == (aborted["run_id"], aborted["tool"], aborted["count"], aborted["error_code"])
        assert "log-2" == armed["run_id"]
