"""A new human message in a thread is a `user_turn` of the thread's run: the run
starts fresh for loop detection, so a call blocked in one turn runs in the next; real create_agent
and a StateGraph with a ToolNode, scripted fake chat models, the real daemon."""
from __future__ import annotations

import asyncio

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolNode

from tests.client.python.integrations.support import CRITICAL, PARAMS, RESULT, TOOL, counter
from tests.client.python.integrations.test_langchain import (  # noqa: F401  (guard, run_id: fixtures)
    GRAPH_CONFIG, LoopingModel, counting_read, guard, looping_graph, run_id, tool_messages,
)


def two_turns_model() -> LoopingModel:
    """Turn 1: the same read CRITICAL + 1 times (the last is blocked), then an answer; turn 2: that
    read once more, then an answer."""
    def read(n: int) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": TOOL, "args": PARAMS, "id": f"call-{n}"}])
    first = [read(n) for n in range(1, CRITICAL + 2)]
    return LoopingModel(messages=iter([*first, AIMessage("stuck"), read(CRITICAL + 2), AIMessage("read it")]))


def user_turns(daemon) -> float:
    return counter(daemon.scrape(), "loopwarden_events_total", kind="user_turn")


class TestCreateAgent:
    def test_a_new_human_message_lifts_the_block_on_the_same_call(self, guard, daemon, client, run_id):
        """Turn 1 ends with the 21st read blocked; turn 2 on the same thread (a new human message) is
        a user_turn, so the same read runs and the run's history starts again from it."""
        runs: list = []
        agent = create_agent(two_turns_model(), [counting_read(runs)], middleware=[guard()],
                             checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": run_id}}
        before = user_turns(daemon)

        first = agent.invoke({"messages": [("user", "read it")]}, config)
        assert (CRITICAL, "error") == (len(runs), tool_messages(first)[-1].status)
        second = agent.invoke({"messages": [("user", "try once more")]}, config)

        assert (CRITICAL + 1, RESULT) == (len(runs), tool_messages(second)[-1].content)
        assert 1 == user_turns(daemon) - before
        assert 1 == len(client.inspect(run_id).records)

    def test_ainvoke_sends_the_user_turn_the_same_way(self, guard, daemon, run_id):
        """abefore_agent (the asyncio client): the same two turns, the same read running again."""
        runs: list = []
        middleware = guard()
        agent = create_agent(two_turns_model(), [counting_read(runs)], middleware=[middleware],
                             checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": run_id}}
        before = user_turns(daemon)

        async def main():
            try:
                await agent.ainvoke({"messages": [("user", "read it")]}, config)
                return await agent.ainvoke({"messages": [("user", "try once more")]}, config)
            finally:
                await middleware.aclose()

        second = asyncio.run(main())

        assert (CRITICAL + 1, RESULT) == (len(runs), tool_messages(second)[-1].content)
        assert 1 == user_turns(daemon) - before

    def test_the_first_invocation_of_a_thread_sends_no_user_turn(self, guard, daemon, run_id):
        """A thread's first invocation creates its run: there is no earlier turn to end."""
        agent = create_agent(LoopingModel.script(1), [counting_read([])], middleware=[guard()],
                             checkpointer=InMemorySaver())
        before = user_turns(daemon)

        agent.invoke({"messages": [("user", "read it")]}, {"configurable": {"thread_id": run_id}})

        assert 0 == user_turns(daemon) - before


class TestToolNode:
    def test_a_new_human_message_lifts_the_block_on_the_same_call(self, guard, daemon, run_id):
        """A StateGraph with ToolNode(wrap_tool_call=...) in a thread: the same two turns, the same
        user_turn, the same read running again."""
        runs: list = []
        middleware = guard()
        graph = looping_graph(ToolNode([counting_read(runs)], wrap_tool_call=middleware.wrap_tool_call),
                              two_turns_model(), InMemorySaver())
        config = {**GRAPH_CONFIG, "configurable": {"thread_id": run_id}}
        before = user_turns(daemon)

        first = graph.invoke({"messages": [("user", "read it")]}, config)
        assert (CRITICAL, "error") == (len(runs), tool_messages(first)[-1].status)
        second = graph.invoke({"messages": [("user", "try once more")]}, config)

        assert (CRITICAL + 1, RESULT) == (len(runs), tool_messages(second)[-1].content)
        assert 1 == user_turns(daemon) - before
