"""LoopwardenMiddleware inside LangChain's create_agent and a LangGraph graph's ToolNode, driven by
langchain_core's fake chat model that asks for the same tool call 25 times, against the real daemon."""
from __future__ import annotations

import asyncio
import uuid

import pytest

import langchain  # noqa: F401  (the client's langchain extra; make test installs it)

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from loopwarden import LoopwardenUnavailable, RunAborted, RunNotFound
from loopwarden.integrations.langchain import LoopwardenMiddleware
from tests.client.python.integrations.support import (
    CRITICAL, PARAMS, REPEATS, RESULT, TOOL, Counters, abort_run, daemon_messages, dead_target,
)

FINAL = "giving up"
GRAPH_CONFIG = {"recursion_limit": 4 * REPEATS + 10}


class LoopingModel(GenericFakeChatModel):
    """Asks for the same read `repeats` times (a fresh call id each time), then answers FINAL."""

    def bind_tools(self, tools, **kwargs):
        return self

    @classmethod
    def script(cls, repeats: int = REPEATS) -> LoopingModel:
        turns = [AIMessage("", tool_calls=[{"name": TOOL, "args": PARAMS, "id": f"call-{n}"}])
                 for n in range(1, repeats + 1)]
        return cls(messages=iter([*turns, AIMessage(FINAL)]))


def counting_read(runs: list, on_run=None):
    """The `read` tool; every real execution is appended to `runs`."""
    @tool(TOOL)
    def read(path: str) -> str:
        """Read a file."""
        runs.append(path)
        if on_run is not None:
            on_run()
        return RESULT
    return read


@pytest.fixture
def run_id(request) -> str:
    """The test's class and name: a thread's run outlives its invocations, so two classes' tests
    of the same name must not share a thread id."""
    return f"{request.module.__name__.rsplit('.', 1)[-1]}/{request.node.nodeid.split('::', 1)[1]}"


@pytest.fixture
def guard(daemon):
    """Makes LoopwardenMiddleware for the test's daemon and closes them after the test (an open
    stream would hold the daemon's shutdown for its drain grace)."""
    made: list[LoopwardenMiddleware] = []

    def make(target: str | None = None, **options) -> LoopwardenMiddleware:
        made.append(LoopwardenMiddleware(target or daemon.grpc_target, **options))
        return made[-1]

    yield make
    for middleware in made:
        middleware.close()


def tool_messages(state) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def looping_graph(tool_node: ToolNode, model, checkpointer=None):
    """A plain LangGraph agent loop: model -> tools -> model, until the model stops calling tools."""
    graph = StateGraph(MessagesState)
    graph.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_node("tools", tool_node)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def assert_looped_and_blocked(state, runs, counters: Counters, expected) -> None:
    """Twenty real runs; the 21st call (and every later one) got the block message instead of a
    run; one announced warning and five blocks counted; the model saw the result of each call."""
    messages = tool_messages(state)
    assert CRITICAL == len(runs)
    assert REPEATS == len(messages)
    assert expected.block == messages[CRITICAL].content
    assert [(expected.block, "error")] * (REPEATS - CRITICAL) == [(m.content, m.status) for m in messages[CRITICAL:]]
    assert Counters(warnings=1, blocks=REPEATS - CRITICAL, aborts=0) == counters
    assert FINAL == state["messages"][-1].content


class TestCreateAgent:
    def test_the_21st_identical_call_is_blocked_and_never_runs(self, guard, daemon, client, run_id):
        """invoke(): the tool runs 20 times, the 21st..25th calls get the block message, and the
        daemon counts one announced warning and five blocks."""
        runs: list = []
        agent = create_agent(LoopingModel.script(), [counting_read(runs)],
                             middleware=[guard()], checkpointer=InMemorySaver())
        before = Counters.scrape(daemon)

        state = agent.invoke({"messages": [("user", "read it")]}, {"configurable": {"thread_id": run_id}})

        counted = Counters.scrape(daemon) - before
        assert_looped_and_blocked(state, runs, counted, daemon_messages(client, f"{run_id}/reference"))

    def test_ainvoke_blocks_the_same_way(self, guard, daemon, client, run_id):
        """ainvoke() (the asyncio client): the same 20 runs, block message at the 21st call, and counts."""
        runs: list = []
        middleware = guard()
        agent = create_agent(LoopingModel.script(), [counting_read(runs)], middleware=[middleware],
                             checkpointer=InMemorySaver())
        before = Counters.scrape(daemon)

        async def main():
            try:
                return await agent.ainvoke({"messages": [("user", "read it")]}, {"configurable": {"thread_id": run_id}})
            finally:
                await middleware.aclose()

        state = asyncio.run(main())

        counted = Counters.scrape(daemon) - before
        assert_looped_and_blocked(state, runs, counted, daemon_messages(client, f"{run_id}/reference"))

    def test_the_announced_warning_is_appended_to_the_tool_message(self, guard, client, run_id):
        """The 11th result carries the daemon's warning after the tool's own content; no other result does."""
        agent = create_agent(LoopingModel.script(), [counting_read([])],
                             middleware=[guard()])

        state = agent.invoke({"messages": [("user", "read it")]}, {"run_id": uuid.uuid4()})

        warning = daemon_messages(client, f"{run_id}/reference").warning
        contents = [m.content for m in tool_messages(state)[:CRITICAL]]
        assert [RESULT] * 10 + [f"{RESULT}\n\n{warning}"] + [RESULT] * 9 == contents

    def test_blocked_message_carries_the_decision_as_its_artifact(self, guard, run_id):
        """The blocked ToolMessage's artifact names the detector and the count, for the program, not the model."""
        agent = create_agent(LoopingModel.script(CRITICAL + 1), [counting_read([])],
                             middleware=[guard()])

        state = agent.invoke({"messages": [("user", "read it")]}, {"configurable": {"thread_id": run_id}})

        artifact = tool_messages(state)[-1].artifact
        assert ("block", "generic_repeat", CRITICAL) == (artifact["action"], artifact["detector"], artifact["count"])

    def test_an_aborted_run_jumps_to_the_end_without_running_the_tool(self, guard, client, run_id):
        """A call the daemon ABORTs does not run; the agent ends at once with an AIMessage holding the
        abort message, and the model is not asked again."""
        message = abort_run(client, run_id)
        runs: list = []
        model = LoopingModel.script()
        agent = create_agent(model, [counting_read(runs)], middleware=[guard()],
                             checkpointer=InMemorySaver())

        state = agent.invoke({"messages": [("user", "read it")]}, {"configurable": {"thread_id": run_id}})

        assert [] == runs
        (refused,) = tool_messages(state)
        assert (message, "error") == (refused.content, refused.status)
        assert (AIMessage, message) == (type(state["messages"][-1]), state["messages"][-1].content)
        assert REPEATS == len(list(model.messages))  # the other 24 calls and the answer: the model was not asked again

    def test_an_outcome_that_aborts_ends_the_run_after_the_tool_ran(self, guard, client, run_id):
        """After a compaction retry the third identical outcome ABORTs: three runs, the three results
        reach the model's history, and the agent ends with the abort message."""
        client.compaction_retry(run_id)
        runs: list = []
        agent = create_agent(LoopingModel.script(), [counting_read(runs)],
                             middleware=[guard()], checkpointer=InMemorySaver())

        state = agent.invoke({"messages": [("user", "read it")]}, {"configurable": {"thread_id": run_id}})

        assert 3 == len(runs)
        assert [RESULT] * 3 == [m.content for m in tool_messages(state)]
        assert abort_run(client, f"{run_id}/reference") == state["messages"][-1].content

    def test_the_run_id_is_the_configured_run_id_and_ends_with_the_invocation(self, guard, client, run_id):
        """With a run_id in the config the daemon holds that run while the tool runs, and frees it at the end."""
        configured = uuid.uuid4()
        seen: list = []
        read = counting_read([], on_run=lambda: seen.append(len(client.inspect(str(configured)).records)))
        agent = create_agent(LoopingModel.script(2), [read], middleware=[guard()],
                             checkpointer=InMemorySaver())

        agent.invoke({"messages": [("user", "read it")]}, {"run_id": configured, "configurable": {"thread_id": run_id}})

        assert [1, 2] == seen
        with pytest.raises(RunNotFound):
            client.inspect(str(configured))

    def test_each_invocation_of_a_thread_starts_fresh(self, guard, run_id):
        """Two invocations on one thread, 15 identical calls each: the second is a user turn of the
        thread's run, so nothing carries over for loop detection and all 30 run."""
        runs: list = []
        middleware = guard()
        checkpointer = InMemorySaver()
        for _ in range(2):
            agent = create_agent(LoopingModel.script(15), [counting_read(runs)], middleware=[middleware],
                                 checkpointer=checkpointer)
            agent.invoke({"messages": [("user", "read it")]}, {"configurable": {"thread_id": run_id}})

        assert 30 == len(runs)


class TestUnreachableDaemon:
    def test_fails_open_by_default(self, guard):
        """With no daemon listening every call runs, and the run ends normally."""
        runs: list = []
        agent = create_agent(LoopingModel.script(), [counting_read(runs)],
                             middleware=[guard(dead_target())])

        state = agent.invoke({"messages": [("user", "read it")]})

        assert REPEATS == len(runs)
        assert FINAL == state["messages"][-1].content

    def test_fails_closed_when_asked(self, guard):
        """fail_open=False: the first call raises LoopwardenUnavailable out of invoke, and the tool never runs."""
        runs: list = []
        agent = create_agent(LoopingModel.script(), [counting_read(runs)],
                             middleware=[guard(dead_target(), fail_open=False)])

        with pytest.raises(LoopwardenUnavailable):
            agent.invoke({"messages": [("user", "read it")]})

        assert [] == runs


class TestToolNode:
    def test_the_21st_identical_call_is_blocked_and_never_runs(self, guard, daemon, client, run_id):
        """A StateGraph with ToolNode(wrap_tool_call=...): 20 runs, the block message from the 21st call
        on, one announced warning and five blocks."""
        runs: list = []
        middleware = guard()
        tools = ToolNode([counting_read(runs)], wrap_tool_call=middleware.wrap_tool_call)
        graph = looping_graph(tools, LoopingModel.script(), InMemorySaver())
        before = Counters.scrape(daemon)

        state = graph.invoke({"messages": [("user", "read it")]},
                             {**GRAPH_CONFIG, "configurable": {"thread_id": run_id}})

        counted = Counters.scrape(daemon) - before
        assert_looped_and_blocked(state, runs, counted, daemon_messages(client, f"{run_id}/reference"))

    def test_ainvoke_blocks_through_awrap_tool_call(self, guard, daemon, client, run_id):
        """ainvoke() with awrap_tool_call (the asyncio client): the same runs, block message and counts."""
        runs: list = []
        middleware = guard()
        tools = ToolNode([counting_read(runs)], wrap_tool_call=middleware.wrap_tool_call,
                         awrap_tool_call=middleware.awrap_tool_call)
        graph = looping_graph(tools, LoopingModel.script(), InMemorySaver())
        before = Counters.scrape(daemon)

        async def main():
            try:
                return await graph.ainvoke({"messages": [("user", "read it")]},
                                           {**GRAPH_CONFIG, "configurable": {"thread_id": run_id}})
            finally:
                await middleware.aclose()

        state = asyncio.run(main())

        counted = Counters.scrape(daemon) - before
        assert_looped_and_blocked(state, runs, counted, daemon_messages(client, f"{run_id}/reference"))

    def test_an_aborted_run_raises_run_aborted(self, guard, client, run_id):
        """A bare ToolNode cannot end its graph: an ABORT raises RunAborted out of invoke, the tool not run."""
        abort_run(client, run_id)
        runs: list = []
        middleware = guard()
        graph = looping_graph(ToolNode([counting_read(runs)], wrap_tool_call=middleware.wrap_tool_call),
                              LoopingModel.script(), InMemorySaver())

        with pytest.raises(RunAborted) as raised:
            graph.invoke({"messages": [("user", "read it")]}, {**GRAPH_CONFIG, "configurable": {"thread_id": run_id}})

        assert [] == runs
        assert "compaction_loop_persisted" == raised.value.verdict.error_code

    def test_without_a_thread_each_invocation_is_a_run_of_its_own(self, guard):
        """No checkpointer, no run id: the first message's id keeps two invocations apart (15 + 15 runs)."""
        runs: list = []
        middleware = guard()
        for _ in range(2):
            graph = looping_graph(ToolNode([counting_read(runs)], wrap_tool_call=middleware.wrap_tool_call),
                                  LoopingModel.script(15))
            graph.invoke({"messages": [("user", "read it")]}, GRAPH_CONFIG)

        assert 30 == len(runs)
