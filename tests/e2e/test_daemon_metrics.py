"""Prometheus metrics, read from a real scrape of /metrics over HTTP."""
from __future__ import annotations

import pytest

from tests.support.grpc_helpers import SAME, Stream, call, channel, compaction, outcome, run_end
from tests.support.metrics import samples, value

pytestmark = pytest.mark.daemon

CONFIG = """{
  tools: {loopDetection: {enabled: true}},
  agents: {list: [{id: "named-agent", tools: {loopDetection: {warningThreshold: 5}}}]},
}"""


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


def _loop_to_block(stream: Stream, run_id: str, agent_id: str = "") -> None:
    for _ in range(20):
        stream.send(call(run_id, "read", '{"path":"/x"}', agent_id=agent_id),
                    outcome(run_id, "read", '{"path":"/x"}', SAME, agent_id=agent_id))
    stream.one(call(run_id, "read", '{"path":"/x"}', agent_id=agent_id))


class TestDecisionCounters:
    def test_warnings_blocks_and_aborts_move_by_exactly_what_happened(self, daemon):
        """A run warned at 10 (11-19 unannounced) then blocked twice, and one guard abort, count exactly that."""
        before = daemon.scrape()
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            _loop_to_block(stream, "m-loop")
            stream.one(call("m-loop", "read", '{"path":"/x"}'))  # sticky: a second block
            stream.one(compaction("m-guard"))
            for _ in range(3):
                stream.send(call("m-guard", "gw", '{"a":1}'), outcome("m-guard", "gw", '{"a":1}', SAME))
            stream.one(call("m-guard", "gw", '{"a":1}'))  # aborted run: ABORT again, not a new abort
        after = daemon.scrape()

        def delta(name, **labels):
            return value(after, name, **labels) - value(before, name, **labels)

        assert 1 == delta("loopwarden_warnings_total", detector="generic_repeat", agent="default")
        assert 2 == delta("loopwarden_blocks_total", detector="generic_repeat", agent="default")
        assert 1 == delta("loopwarden_guard_aborts_total", agent="default")
        grpc = {"integration": "grpc"}
        assert 2 == delta("loopwarden_verdicts_total", action="abort", detector="post_compaction_guard", agent="default",
                          **grpc)
        assert 2 == delta("loopwarden_verdicts_total", action="block", detector="generic_repeat", agent="default", **grpc)
        assert 10 == delta("loopwarden_verdicts_total", action="warn", detector="generic_repeat", agent="default", **grpc)
        assert 1 == delta("loopwarden_events_total", kind="compaction_retry")
        assert 26 == delta("loopwarden_events_total", kind="tool_call")
        assert 23 == delta("loopwarden_events_total", kind="tool_outcome")

    def test_named_agents_get_their_own_label_and_others_default(self, daemon):
        """The agent label is an agent named in the config, else `default` (labels stay bounded)."""
        before = daemon.scrape()
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            for _ in range(5):
                stream.one(call("m-agent-1", "read", '{"path":"/y"}', agent_id="named-agent"))
            stream.one(call("m-agent-1", "read", '{"path":"/y"}', agent_id="named-agent"))
            for _ in range(10):
                stream.one(call("m-agent-2", "read", '{"path":"/y"}', agent_id="unlisted-agent"))
            stream.one(call("m-agent-2", "read", '{"path":"/y"}', agent_id="unlisted-agent"))
        after = daemon.scrape()
        assert 1 == value(after, "loopwarden_warnings_total", detector="generic_repeat", agent="named-agent") - value(
            before, "loopwarden_warnings_total", detector="generic_repeat", agent="named-agent")
        assert 1 == value(after, "loopwarden_warnings_total", detector="generic_repeat", agent="default") - value(
            before, "loopwarden_warnings_total", detector="generic_repeat", agent="default")
        assert "unlisted-agent" not in after

    def test_rejects_are_counted_by_error_code(self, daemon):
        """Each reject moves loopwarden_rejected_events_total{error_code} by one."""
        before = daemon.scrape()
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            stream.send(call("m-rej", "read", "{bad"), call("", "read"), call("m-rej", "read", "[1,"))
        after = daemon.scrape()
        assert 2 == value(after, "loopwarden_rejected_events_total", error_code="invalid_params_json") - value(
            before, "loopwarden_rejected_events_total", error_code="invalid_params_json")
        assert 1 == value(after, "loopwarden_rejected_events_total", error_code="missing_run_id") - value(
            before, "loopwarden_rejected_events_total", error_code="missing_run_id")


class TestGaugesAndHistogram:
    def test_active_runs_streams_and_latency(self, daemon):
        """Runs held and open streams are gauges; every event is observed in the latency histogram."""
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            stream.send(call("m-gauge-1", "read"), call("m-gauge-2", "read"))
            during = daemon.scrape()
            stream.send(run_end("m-gauge-1"), run_end("m-gauge-2"))
            after = daemon.scrape()
        assert 1 <= value(during, "loopwarden_active_streams")
        assert 2 == value(during, "loopwarden_active_runs") - value(after, "loopwarden_active_runs")
        assert 2 == value(after, "loopwarden_evaluation_duration_seconds_count") - value(
            during, "loopwarden_evaluation_duration_seconds_count")

    def test_build_info_and_reload_gauge_exist(self, daemon):
        """build_info is 1; the reload gauge starts at 1 (nothing refused)."""
        scrape = samples(daemon.scrape())
        assert [1.0] == [v for (name, _), v in scrape.items() if name == "loopwarden_build_info"]
        assert 1.0 == scrape[("loopwarden_config_last_reload_successful", frozenset())]

    def test_no_label_carries_a_run_id_or_arguments(self, daemon):
        """Label values come from bounded sets: no run id, path or tool argument appears."""
        text = daemon.scrape()
        for needle in ("m-loop", "m-guard", "/x", "named-agent-run", "m-gauge"):
            assert needle not in text
