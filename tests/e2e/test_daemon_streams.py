"""Streams: one verdict per event in order, many runs per stream, runs that move between streams."""
from __future__ import annotations

import random

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb

from tests.support.grpc_helpers import SAME, Stream, call, channel, outcome, verdict_dict

pytestmark = pytest.mark.daemon

ENABLED = "{tools: {loopDetection: {enabled: true}}}"


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return ENABLED


def _script(run_id: str, flavour: int) -> list[pb.Event]:
    """A looping script per run: generic repeats, a poll loop or a ping-pong, 30 events or more."""
    events = []
    for index in range(24):
        if flavour == 0:
            events += [call(run_id, "read", '{"path":"/x"}'), outcome(run_id, "read", '{"path":"/x"}', SAME)]
        elif flavour == 1:
            params = '{"action":"poll","sessionId":"s"}'
            events += [call(run_id, "process", params), outcome(run_id, "process", params, SAME)]
        else:
            tool, params = (("read", '{"path":"/a"}'), ("list", '{"dir":"/w"}'))[index % 2]
            events += [call(run_id, tool, params), outcome(run_id, tool, params, SAME)]
    for seq, event in enumerate(events, 1):
        event.seq = seq
    return events


def _summary(verdicts: list[pb.Verdict]) -> list[tuple]:
    return [(v.seq, v.run_id, v.action, v.detector, v.count, v.announce, v.warning_key) for v in verdicts]


class TestOrdering:
    def test_a_batch_gets_one_verdict_per_event_in_order(self, daemon):
        """A request carrying several events is answered by one response with verdicts in event order."""
        events = [call("batch-1", "read", f'{{"path":"/{i}"}}', seq=i) for i in range(1, 9)]
        events.insert(3, pb.Event(run_id="", seq=100))
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            verdicts = stream.send(*events)
        assert [e.seq for e in events] == [v.seq for v in verdicts]
        assert pb.ACTION_REJECT == verdicts[3].action
        assert {pb.ACTION_ALLOW} == {v.action for i, v in enumerate(verdicts) if i != 3}

    def test_an_empty_request_gets_an_empty_response(self, daemon):
        """Zero events in, zero verdicts out; the stream carries on."""
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            assert [] == stream.send()
            assert pb.ACTION_ALLOW == stream.one(call("empty-1", "read")).action


class TestManyRuns:
    def test_interleaved_runs_get_exactly_the_verdicts_they_get_alone(self, daemon):
        """Six looping runs shuffled together on one stream each see their solo verdicts."""
        flavours = {f"solo-{n}": n % 3 for n in range(6)}
        alone = {}
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            for run_id, flavour in flavours.items():
                alone[run_id] = _summary([stream.one(e) for e in _script(run_id, flavour)])

        queues = {run_id: _script(run_id.replace("solo", "mixed"), f) for run_id, f in flavours.items()}
        mixed: dict[str, list] = {run_id.replace("solo", "mixed"): [] for run_id in flavours}
        rng = random.Random(11)
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            while any(queues.values()):
                run_id = rng.choice([r for r, q in queues.items() if q])
                batch = [queues[run_id].pop(0) for _ in range(min(len(queues[run_id]), rng.randint(1, 3)))]
                other = rng.choice([r for r, q in queues.items() if q] or [run_id])
                if other != run_id and queues[other]:
                    batch.append(queues[other].pop(0))
                for verdict in stream.send(*batch):
                    mixed[verdict.run_id].append(verdict)
        for run_id in flavours:
            expected = [(s, r.replace("solo", "mixed"), *rest) for s, r, *rest in alone[run_id]]
            assert expected == _summary(mixed[run_id.replace("solo", "mixed")])
        # The scripts really loop: every flavour reached a BLOCK.
        assert all(any(row[2] == pb.ACTION_BLOCK for row in rows) for rows in alone.values())

    def test_a_run_keeps_its_counts_on_a_second_stream(self, daemon):
        """Ten calls on one stream, the stream closes, the eleventh on a new stream is warned."""
        with channel(daemon.grpc_target) as ch:
            with Stream(ch) as first:
                for _ in range(10):
                    first.one(call("moved-1", "read", '{"path":"/x"}'))
            with Stream(ch, metadata=(("x-run-id", "moved-1"),)) as second:
                verdict = second.one(call("moved-1", "read", '{"path":"/x"}'))
        assert (pb.ACTION_WARN, pb.DETECTOR_GENERIC_REPEAT, 10) == (verdict.action, verdict.detector, verdict.count)

    def test_a_cancelled_stream_loses_nothing_already_answered(self, daemon):
        """A client that cancels mid-stream and reconnects finds the run as it left it."""
        with channel(daemon.grpc_target) as ch:
            stream = Stream(ch)
            for _ in range(20):
                stream.send(call("cancel-1", "read", '{"path":"/x"}'), outcome("cancel-1", "read", '{"path":"/x"}', SAME))
            stream._responses.cancel()
            with Stream(ch) as again:
                verdict = verdict_dict(again.one(call("cancel-1", "read", '{"path":"/x"}')))
        assert ("ACTION_BLOCK", 20) == (verdict["action"], verdict["count"])
