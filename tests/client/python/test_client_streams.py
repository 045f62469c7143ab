"""The clients' per-run stream mode: one routed stream per run, reopened transparently."""
from __future__ import annotations

import asyncio
import time

import pytest
from loopwarden import AsyncLoopwardenClient, LoopwardenClient
from loopwarden.types import Action
from loopwarden.v1 import loopwarden_pb2 as pb

from tests.support.metrics import value


@pytest.fixture(scope="module")
def daemon_args():
    return ("--stream-idle-timeout", "0.3")


def _wait_for_idle_close(daemon, before: float) -> None:
    deadline = time.monotonic() + 10
    while value(daemon.scrape(), "loopwarden_idle_streams_closed_total") <= before:
        assert time.monotonic() < deadline, "the daemon never closed the idle stream"
        time.sleep(0.05)


class TestPerRunStreams:
    def test_a_stream_closed_for_idleness_is_reopened_on_the_next_event(self, daemon, run_id):
        """The 11th identical call is still WARN after the daemon closed the idle stream in between."""
        with LoopwardenClient(daemon.grpc_target, streams="per_run") as client:
            for _ in range(5):
                client.tool_call(run_id, "read", {"p": 1})
            before = value(daemon.scrape(), "loopwarden_idle_streams_closed_total")
            _wait_for_idle_close(daemon, before)
            verdicts = [client.tool_call(run_id, "read", {"p": 1}) for _ in range(6)]
        assert [Action.ALLOW] * 5 + [Action.WARN] == [v.action for v in verdicts]

    def test_a_batch_of_several_runs_is_split_by_run_and_answered_in_order(self, daemon, run_id):
        """evaluate() with events of two runs: each goes on its own run's stream; verdicts keep event order."""
        events = [pb.Event(run_id=f"{run_id}-{index % 2}", tool_call=pb.ToolCall(tool_name="read"), seq=index + 1)
                  for index in range(4)]
        with LoopwardenClient(daemon.grpc_target, streams="per_run") as client:
            verdicts = client.evaluate(events)
            inspected = [client.inspect(f"{run_id}-{index}").events_evaluated for index in range(2)]
        assert [Action.ALLOW] * 4 == [v.action for v in verdicts]
        assert [2, 2] == inspected

    def test_streams_past_the_cap_close_least_recently_used_first(self, daemon, run_id):
        """max_run_streams bounds the open streams of one client."""
        with LoopwardenClient(daemon.grpc_target, streams="per_run", max_run_streams=2) as client:
            for index in range(5):
                client.tool_call(f"{run_id}-{index}", "read")
            assert 2 == len(client._run_streams)

    def test_run_end_closes_the_runs_stream(self, daemon, run_id):
        """A finished run holds no stream."""
        with LoopwardenClient(daemon.grpc_target, streams="per_run") as client:
            client.tool_call(run_id, "read")
            client.run_end(run_id)
            assert {} == client._run_streams

    def test_an_unknown_mode_is_refused(self):
        """streams= names one of the two modes."""
        with pytest.raises(ValueError, match="per_run"):
            LoopwardenClient("127.0.0.1:1", streams="per-run")


class TestAsyncPerRunStreams:
    def test_a_stream_closed_for_idleness_is_reopened_on_the_next_event(self, daemon, run_id):
        """The asyncio client reopens its run's stream the same way."""
        async def scenario():
            async with AsyncLoopwardenClient(daemon.grpc_target, streams="per_run") as client:
                for _ in range(5):
                    await client.tool_call(run_id, "read", {"p": 1})
                before = value(daemon.scrape(), "loopwarden_idle_streams_closed_total")
                await asyncio.to_thread(_wait_for_idle_close, daemon, before)
                return [await client.tool_call(run_id, "read", {"p": 1}) for _ in range(6)]
        verdicts = asyncio.run(scenario())
        assert [Action.ALLOW] * 5 + [Action.WARN] == [v.action for v in verdicts]
