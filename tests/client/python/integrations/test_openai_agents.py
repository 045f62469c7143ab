"""LoopwardenGuardrails inside the OpenAI Agents SDK: a Runner driven by the SDK's ScriptedModel,
which asks for the same function tool call 25 times, against the real daemon."""
from __future__ import annotations

import asyncio

import pytest

import agents  # noqa: F401  (the client's openai-agents extra; make test installs it)

from agents import (
    Agent, RunConfig, Runner, ToolInputGuardrailTripwireTriggered, ToolOutputGuardrailTripwireTriggered,
    function_tool, set_trace_processors, trace,
)
from agents.items import ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call

from loopwarden.integrations.openai_agents import LoopwardenGuardrails
from tests.client.python.integrations.support import (
    CRITICAL, PARAMS, REPEATS, RESULT, TOOL, Counters, abort_run, daemon_messages, dead_target,
)

FINAL = "giving up"
MAX_TURNS = REPEATS + 5


def looping_model(repeats: int = REPEATS) -> ScriptedModel:
    """Asks for the same read `repeats` times (a fresh call id each time), then answers FINAL."""
    return ScriptedModel([*([function_call(TOOL, PARAMS, call_id=f"call-{n}")] for n in range(1, repeats + 1)),
                          [assistant_message(FINAL)]])


def counting_read(runs: list, on_run=None):
    """The `read` function tool; every real execution is appended to `runs`."""
    @function_tool(name_override=TOOL)
    def read(path: str) -> str:
        """Read a file."""
        runs.append(path)
        if on_run is not None:
            on_run()
        return RESULT
    return read


def run(guard: LoopwardenGuardrails, agent: Agent, run_config: RunConfig | None = None):
    """Runner.run on a fresh event loop, the guard's asyncio client closed inside it."""
    async def main():
        try:
            return await Runner.run(agent, "read it", max_turns=MAX_TURNS,
                                    run_config=run_config or RunConfig(tracing_disabled=True))
        finally:
            await guard.aclose()
    return asyncio.run(main())


def outputs(result) -> list:
    return [item.output for item in result.new_items if isinstance(item, ToolCallOutputItem)]


@pytest.fixture
def guard(daemon) -> LoopwardenGuardrails:
    return LoopwardenGuardrails(daemon.grpc_target)


class TestLoop:
    def test_the_21st_identical_call_is_rejected_and_never_runs(self, guard, daemon, client, run_id):
        """Runner.run: the tool runs 20 times, the 21st..25th calls get the block message as their
        result, and the daemon counts one announced warning and five blocks."""
        runs: list = []
        agent = guard.protect(Agent(name="coder", model=looping_model(), tools=[counting_read(runs)]))
        before = Counters.scrape(daemon)

        result = run(guard, agent, RunConfig(tracing_disabled=True, group_id=run_id))

        counted = Counters.scrape(daemon) - before
        expected = daemon_messages(client, f"{run_id}/reference")
        assert CRITICAL == len(runs)
        assert REPEATS == len(outputs(result))
        assert expected.block == outputs(result)[CRITICAL]
        assert [expected.block] * (REPEATS - CRITICAL) == outputs(result)[CRITICAL:]
        assert Counters(warnings=1, blocks=REPEATS - CRITICAL, aborts=0) == counted
        assert FINAL == result.final_output

    def test_the_announced_warning_is_appended_to_the_result(self, guard, client, run_id):
        """The 11th result carries the daemon's warning after the tool's own text; no other result does."""
        agent = guard.protect(Agent(name="coder", model=looping_model(), tools=[counting_read([])]))

        result = run(guard, agent, RunConfig(tracing_disabled=True, group_id=run_id))

        warning = daemon_messages(client, f"{run_id}/reference").warning
        assert [RESULT] * 10 + [f"{RESULT}\n\n{warning}"] + [RESULT] * 9 == outputs(result)[:CRITICAL]

    def test_run_sync_blocks_the_same_way(self, guard, run_id):
        """Runner.run_sync: 20 runs, then blocked calls."""
        runs: list = []
        agent = guard.protect(Agent(name="coder", model=looping_model(), tools=[counting_read(runs)]))

        result = Runner.run_sync(agent, "read it", max_turns=MAX_TURNS,
                                 run_config=RunConfig(tracing_disabled=True, group_id=run_id))
        asyncio.get_event_loop_policy().get_event_loop().run_until_complete(guard.aclose())  # run_sync's loop

        assert CRITICAL == len(runs)
        assert FINAL == result.final_output


class TestAbort:
    def test_an_aborted_run_trips_the_input_guardrail_without_running_the_tool(self, guard, client, run_id):
        """A call the daemon ABORTs does not run: Runner.run raises the SDK's input tripwire, whose
        output_info holds the decision."""
        message = abort_run(client, run_id)
        runs: list = []
        agent = guard.protect(Agent(name="coder", model=looping_model(), tools=[counting_read(runs)]))

        with pytest.raises(ToolInputGuardrailTripwireTriggered) as raised:
            run(guard, agent, RunConfig(tracing_disabled=True, group_id=run_id))

        assert [] == runs
        info = raised.value.output.output_info
        assert ("abort", "compaction_loop_persisted", message) == (info["action"], info["error_code"], info["message"])

    def test_an_outcome_that_aborts_trips_the_output_guardrail(self, guard, client, run_id):
        """After a compaction retry the third identical outcome ABORTs: three runs, then the output tripwire."""
        client.compaction_retry(run_id)
        runs: list = []
        agent = guard.protect(Agent(name="coder", model=looping_model(), tools=[counting_read(runs)]))

        with pytest.raises(ToolOutputGuardrailTripwireTriggered) as raised:
            run(guard, agent, RunConfig(tracing_disabled=True, group_id=run_id))

        assert 3 == len(runs)
        assert "compaction_loop_persisted" == raised.value.output.output_info["error_code"]


class TestRunIds:
    def test_the_run_id_is_the_trace_id(self, guard, client):
        """With tracing on, the run is the trace the SDK runs in: the daemon holds it while the tool runs."""
        trace_id = "trace_0123456789abcdef0123456789abcdef"
        seen: list = []
        read = counting_read([], on_run=lambda: seen.append(len(client.inspect(trace_id).records)))
        agent = guard.protect(Agent(name="coder", model=looping_model(2), tools=[read]))
        set_trace_processors([])  # traces are made, never exported

        async def main():
            try:
                with trace("loopwarden test", trace_id=trace_id):
                    return await Runner.run(agent, "read it", max_turns=MAX_TURNS)
            finally:
                await guard.aclose()

        asyncio.run(main())

        assert [1, 2] == seen

    def test_without_trace_or_group_each_run_is_a_run_of_its_own(self, guard):
        """No trace, no group id: two runs of 15 identical calls share nothing, and all 30 run."""
        runs: list = []
        for _ in range(2):
            run(guard, guard.protect(Agent(name="coder", model=looping_model(15), tools=[counting_read(runs)])))

        assert 30 == len(runs)


class TestUnreachableDaemon:
    def test_fails_open_by_default(self):
        """With no daemon listening every call runs and the run ends normally."""
        runs: list = []
        guard = LoopwardenGuardrails(dead_target())

        result = run(guard, guard.protect(Agent(name="coder", model=looping_model(), tools=[counting_read(runs)])))

        assert REPEATS == len(runs)
        assert FINAL == result.final_output

    def test_fails_closed_when_asked(self):
        """fail_open=False: the first call trips the input guardrail and the tool never runs."""
        runs: list = []
        guard = LoopwardenGuardrails(dead_target(), fail_open=False)
        agent = guard.protect(Agent(name="coder", model=looping_model(), tools=[counting_read(runs)]))

        with pytest.raises(ToolInputGuardrailTripwireTriggered) as raised:
            run(guard, agent)

        assert [] == runs
        assert "unavailable" == raised.value.output.output_info["action"]


class TestProtect:
    def test_protect_reaches_handoffs_and_is_idempotent(self):
        """protect() guards the tools of an agent and of the agents it hands off to, once each;
        the output guardrail goes first so the daemon sees the real result."""
        guard = LoopwardenGuardrails(dead_target())
        shared, own = counting_read([]), counting_read([])
        helper = Agent(name="helper", tools=[shared])
        agent = Agent(name="coder", tools=[shared, own], handoffs=[helper])

        guard.protect(guard.protect(agent))

        for tool in (shared, own):
            assert ["loopwarden"] == [g.name for g in tool.tool_input_guardrails]
            assert ["loopwarden"] == [g.name for g in tool.tool_output_guardrails]
