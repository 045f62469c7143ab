"""What the model wrote, from a real OpenAI Agents SDK Runner (`on_llm_end`): each response's text
is a `model_output` with its usage, judged by the detectors of loops without tool calls, against
the real daemon. A model that says the same thing again and again while its tool brings nothing
new is warned and then ended (RunAborted out of Runner.run)."""
from __future__ import annotations

import asyncio
import logging

import pytest
from agents import Agent, RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message, function_call

from loopwarden import RunAborted
from tests.client.python.integrations.support import PARAMS, TOOL, counter
from tests.client.python.integrations.test_openai_agents import counting_read, guard  # noqa: F401  (fixture)

WARN_AT, ABORT_AT = 3, 5
SAID = "Let me check the hosts file once more."


@pytest.fixture(scope="module")
def daemon_config() -> str:
    # tools.loopDetection.enabled is the gate of every detector.
    return ("{tools: {loopDetection: {enabled: true}}, loopwarden: {repeatedOutput: {enabled: true, warnAt: %d, "
            "abortAt: %d}}}" % (WARN_AT, ABORT_AT))


def run(guard, agent: Agent, group_id: str):
    async def main():
        try:
            return await Runner.run(agent, "find the host", max_turns=30,
                                    run_config=RunConfig(tracing_disabled=True, group_id=group_id))
        finally:
            await guard.aclose()
    return asyncio.run(main())


def aborts(daemon) -> float:
    return counter(daemon.scrape(), "loopwarden_verdicts_total", action="abort", detector="repeated_output",
                   integration="openai_agents")


class TestRepeatedMessages:
    def test_the_same_message_is_warned_then_the_run_is_aborted(self, guard, daemon, client, run_id, caplog):
        runs: list = []
        model = ScriptedModel([[assistant_message(SAID), function_call(TOOL, PARAMS, call_id=f"call-{n}")]
                               for n in range(1, 11)] + [[assistant_message("done")]])
        agent = guard.protect(Agent(name="coder", model=model, tools=[counting_read(runs)]))
        before = aborts(daemon)

        with caplog.at_level(logging.WARNING, logger="loopwarden.integrations"), pytest.raises(RunAborted) as raised:
            run(guard, agent, run_id)

        # The 6th response (five identical before it) ends the run before its read runs.
        assert ("output_loop_persisted", ABORT_AT) == (raised.value.verdict.error_code, len(runs))
        assert any("WARNING: you have written the same" in record.getMessage() for record in caplog.records)
        assert 1 == aborts(daemon) - before

    def test_different_messages_are_never_flagged(self, guard, daemon, run_id):
        runs: list = []
        model = ScriptedModel([[assistant_message(f"Step {n}: the next file."),
                                function_call(TOOL, PARAMS, call_id=f"call-{n}")] for n in range(1, 11)]
                              + [[assistant_message("done")]])
        agent = guard.protect(Agent(name="coder", model=model, tools=[counting_read(runs)]))
        before = aborts(daemon)

        result = run(guard, agent, run_id)

        assert (10, "done") == (len(runs), result.final_output)
        assert 0 == aborts(daemon) - before
