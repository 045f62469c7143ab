"""What the model wrote, from a real create_agent (`after_model`): each response's text is a
`model_output` (with its usage), judged by the detectors of loops without tool calls, against the
real daemon. A model that writes the same message again and again while its tool brings nothing
new is warned and then ended; the same final answer at the end of turn after turn is too."""
from __future__ import annotations

import asyncio
import logging

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from tests.client.python.integrations.support import PARAMS, TOOL, counter
from tests.client.python.integrations.test_langchain import (  # noqa: F401  (guard, run_id: fixtures)
    LoopingModel, counting_read, guard, run_id, tool_messages,
)

WARN_AT, ABORT_AT = 3, 5
# The output that ends the run is the one with abortAt identical ones before it.
ENDED_OUTPUT = ABORT_AT + 1
SAID = "Let me check the hosts file once more."
ANSWER = "I cannot find the host you asked about."
USAGE = {"input_tokens": 30, "output_tokens": 10, "total_tokens": 40}


@pytest.fixture(scope="module")
def daemon_config() -> str:
    # tools.loopDetection.enabled is the gate of every detector; the call detectors stay at their
    # defaults, far from the five identical reads here.
    return ("{tools: {loopDetection: {enabled: true}}, loopwarden: {repeatedOutput: {enabled: true, warnAt: %d, "
            "abortAt: %d}, repeatedFinalAnswer: {enabled: true, warnAt: %d, abortAt: %d}}}"
            % (WARN_AT, ABORT_AT, WARN_AT, ABORT_AT))


def repeating_model(turns: int) -> LoopingModel:
    """Writes SAID and asks for the same read (the same result each time) `turns` times, then answers."""
    messages = [AIMessage(SAID, tool_calls=[{"name": TOOL, "args": PARAMS, "id": f"call-{n}"}], usage_metadata=USAGE,
                          response_metadata={"model_name": "scripted"}) for n in range(1, turns + 1)]
    return LoopingModel(messages=iter([*messages, AIMessage("done")]))


def aborts(daemon, detector: str) -> float:
    return counter(daemon.scrape(), "loopwarden_verdicts_total", action="abort", detector=detector,
                   integration="langchain")


class TestRepeatedMessages:
    def test_the_same_message_is_warned_then_ends_the_run(self, guard, daemon, client, run_id, caplog):
        runs: list = []
        agent = create_agent(repeating_model(10), [counting_read(runs)], middleware=[guard()],
                             checkpointer=InMemorySaver())
        before = aborts(daemon, "repeated_output")

        with caplog.at_level(logging.WARNING, logger="loopwarden.integrations"):
            state = agent.invoke({"messages": [("user", "find the host")]}, {"configurable": {"thread_id": run_id}})

        warned = [r.getMessage() for r in caplog.records if "WARNING: you have written the same" in r.getMessage()]
        messages = tool_messages(state)
        # Responses 1-5 ran their read; the 6th response's read is refused: the run is over.
        assert (ENDED_OUTPUT - 1, ENDED_OUTPUT) == (len(runs), len(messages))
        assert "error" == messages[-1].status
        last = state["messages"][-1]
        assert isinstance(last, AIMessage) and last.content.startswith("CRITICAL:") and "output_loop_persisted" in \
            messages[-1].artifact["error_code"]
        assert warned, "the announced warning is logged"
        assert 2 == aborts(daemon, "repeated_output") - before  # the 6th response, then its refused read
        # The responses' usage reached the tree with their text.
        assert ENDED_OUTPUT * USAGE["input_tokens"] == client.inspect(run_id).tree_totals.input_tokens

    def test_ainvoke_judges_the_same_way(self, guard, daemon, run_id):
        runs: list = []
        middleware = guard()
        agent = create_agent(repeating_model(10), [counting_read(runs)], middleware=[middleware],
                             checkpointer=InMemorySaver())

        async def main():
            try:
                return await agent.ainvoke({"messages": [("user", "find the host")]},
                                           {"configurable": {"thread_id": run_id}})
            finally:
                await middleware.aclose()

        state = asyncio.run(main())

        assert ENDED_OUTPUT - 1 == len(runs)
        assert state["messages"][-1].content.startswith("CRITICAL:")

    def test_different_messages_are_never_flagged(self, guard, daemon, run_id):
        runs: list = []
        turns = [AIMessage(f"Step {n}: looking at the next file.", tool_calls=[
            {"name": TOOL, "args": PARAMS, "id": f"call-{n}"}]) for n in range(1, 11)]
        agent = create_agent(LoopingModel(messages=iter([*turns, AIMessage("done")])), [counting_read(runs)],
                             middleware=[guard()], checkpointer=InMemorySaver())
        before = aborts(daemon, "repeated_output")

        state = agent.invoke({"messages": [("user", "find the host")]}, {"configurable": {"thread_id": run_id}})

        assert (10, "done") == (len(runs), state["messages"][-1].content)
        assert 0 == aborts(daemon, "repeated_output") - before


class TestRepeatedFinalAnswers:
    def test_the_same_final_answer_turn_after_turn_ends_the_run(self, guard, daemon, run_id):
        """A thread whose every invocation (a new human message, a user turn) ends on the same answer
        with no tool work: the abortAt-th answer is followed by the abort message."""
        answers = [AIMessage(ANSWER) for _ in range(10)]  # one message each: a thread keeps them by id
        agent = create_agent(LoopingModel(messages=iter(answers)), [counting_read([])],
                             middleware=[guard()], checkpointer=InMemorySaver())
        before = aborts(daemon, "repeated_final_answer")
        config = {"configurable": {"thread_id": run_id}}

        last = []
        for turn in range(1, ABORT_AT + 1):
            state = agent.invoke({"messages": [("user", f"where is the host? ({turn})")]}, config)
            last.append(state["messages"][-1].content)

        assert [ANSWER] * (ABORT_AT - 1) == last[:-1]
        assert last[-1].startswith("CRITICAL:") and state["messages"][-2].content == ANSWER
        assert 1 == aborts(daemon, "repeated_final_answer") - before
