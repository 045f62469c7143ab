"""A panic inside the core is that one event's REJECT internal_error: logged with its decision id,
counted, changing nothing; the batch, the stream and the process go on."""
from __future__ import annotations

import logging

from loopwarden.v1 import loopwarden_pb2 as pb

from tests.core.harness import CoreEngine, pb_event

CONFIG = "{tools: {loopDetection: {enabled: true}}}"


def call(run_id: str, tool: str, seq: int = 0) -> pb.Event:
    return pb_event({"run_id": run_id, "kind": "tool_call", "tool_name": tool, "params_json": "{}", "seq": seq})


class TestPanics:
    def test_a_panic_is_one_events_internal_error(self, caplog):
        """The panicking event gets REJECT internal_error; the events around it are evaluated."""
        engine = CoreEngine(CONFIG)
        engine.service.native._panic_tool = "boom"
        with caplog.at_level(logging.ERROR, logger="loopwarden.decisions"):
            before, failed, after = engine.evaluate([call("r1", "read"), call("r2", "boom", 5), call("r1", "read")])
        assert (pb.ACTION_ALLOW, pb.ACTION_REJECT, pb.ACTION_ALLOW) == (before.action, failed.action, after.action)
        assert "internal_error" == failed.error_code
        assert failed.decision_id and failed.decision_id in failed.message
        assert [failed.decision_id] == [r.decision_id for r in caplog.records if r.levelno == logging.ERROR]
        assert 1.0 == engine.registry.get_sample_value("loopwarden_rejected_events_total", {"error_code": "internal_error"})

    def test_a_panic_creates_no_run_and_the_core_goes_on(self):
        """The run the failing event would have created is not kept, and later events are served."""
        engine = CoreEngine(CONFIG)
        engine.service.native._panic_tool = "boom"
        engine.evaluate([call("r2", "boom")])
        assert engine.inspect("r2") is None
        engine.service.native._panic_tool = None
        (verdict,) = engine.evaluate([call("r2", "boom")])
        assert pb.ACTION_ALLOW == verdict.action
        assert 1 == len(engine.inspect("r2").records)
