"""Token usage from model responses (`AIMessage.usage_metadata`) as `usage` events: a
`tokensPerTree` budget fed by nothing else warns at 80% and ends the run with
`budget_exhausted`, also when a sub-agent spent it; real create_agent, a scripted fake chat model
that reports usage, the real daemon."""
from __future__ import annotations

import asyncio

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from loopwarden import RunAborted

from tests.client.python.integrations.support import RESULT, TOOL, counter
from tests.client.python.integrations.test_langchain import (  # noqa: F401  (guard, run_id: fixtures)
    GRAPH_CONFIG, LoopingModel, counting_read, guard, run_id, tool_messages,
)

CAP = 1000  # tokensPerTree
INPUT, OUTPUT = 300, 100  # what each scripted response used: 400 tokens


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return f"{{tools: {{loopDetection: {{enabled: true}}}}, loopwarden: {{budgets: {{tokensPerTree: {CAP}}}}}}}"


def spending_model(calls: int, *, tool_name: str = TOOL) -> LoopingModel:
    """`calls` responses asking for reads of different files (no loop), each using 400 tokens, then an answer."""
    usage = {"input_tokens": INPUT, "output_tokens": OUTPUT, "total_tokens": INPUT + OUTPUT}
    turns = [AIMessage("", tool_calls=[{"name": tool_name, "args": {"path": f"/f{n}"}, "id": f"call-{n}"}],
                       usage_metadata=usage, response_metadata={"model_name": "scripted"})
             for n in range(1, calls + 1)]
    return LoopingModel(messages=iter([*turns, AIMessage("finished", usage_metadata=usage)]))


def budget_aborts(daemon) -> float:
    return counter(daemon.scrape(), "loopwarden_limit_aborts_total", reason="budget_exhausted")


class TestTokensPerTree:
    def test_usage_events_warn_at_80_percent_and_end_the_run_past_the_budget(self, guard, daemon, client, run_id):
        """400 tokens per response: the 1st call runs, the 2nd (800 used) runs with the budget warning,
        the 3rd (1200 used) is ABORT budget_exhausted: the agent ends with the abort message and the
        tree's totals are the three responses' tokens."""
        runs: list = []
        agent = create_agent(spending_model(6), [counting_read(runs)], middleware=[guard()],
                             checkpointer=InMemorySaver())
        before = budget_aborts(daemon)

        state = agent.invoke({"messages": [("user", "read them")]}, {"configurable": {"thread_id": run_id}})

        messages = tool_messages(state)
        assert (["/f1", "/f2"], 3) == (runs, len(messages))
        assert RESULT == messages[0].content
        assert messages[1].content.startswith(f"{RESULT}\n\n") and "budget" in messages[1].content
        assert "error" == messages[2].status
        assert (AIMessage, messages[2].content) == (type(state["messages"][-1]), state["messages"][-1].content)
        assert 1 == budget_aborts(daemon) - before
        totals = client.inspect(run_id).tree_totals
        assert (3 * INPUT, 3 * OUTPUT) == (totals.input_tokens, totals.output_tokens)

    def test_ainvoke_sends_usage_the_same_way(self, guard, client, run_id):
        """aafter_model (the asyncio client): the same three responses counted, the same end."""
        runs: list = []
        middleware = guard()
        agent = create_agent(spending_model(6), [counting_read(runs)], middleware=[middleware],
                             checkpointer=InMemorySaver())

        async def main():
            try:
                return await agent.ainvoke({"messages": [("user", "read them")]},
                                           {"configurable": {"thread_id": run_id}})
            finally:
                await middleware.aclose()

        asyncio.run(main())

        assert (2, 3 * INPUT) == (len(runs), client.inspect(run_id).tree_totals.input_tokens)

    def test_a_sub_agents_usage_spends_its_parents_tree(self, guard, client, run_id):
        """A sub-agent whose three responses spend 1200 tokens of the tree's 1000 is ended by the
        budget, and so is its parent's next call: the budget is the tree's."""
        runs: list = []
        middleware = guard()

        @tool("delegate")
        def delegate(task: str) -> str:
            """Hand a task to a sub-agent."""
            sub = create_agent(spending_model(6), [counting_read(runs)], middleware=[middleware])
            return sub.invoke({"messages": [("user", task)]})["messages"][-1].content

        parent = create_agent(
            LoopingModel(messages=iter([
                AIMessage("", tool_calls=[{"name": "delegate", "args": {"task": "x"}, "id": "d1"}]),
                AIMessage("", tool_calls=[{"name": TOOL, "args": {"path": "/p"}, "id": "p1"}]),
                AIMessage("done")])),
            [delegate, counting_read(runs)], middleware=[middleware], checkpointer=InMemorySaver())

        state = parent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": run_id}})

        parents_read = tool_messages(state)[-1]
        assert ["/f1", "/f2"] == runs, "the sub-agent's third call and the parent's read must not run"
        assert ("error", "budget_exhausted") == (parents_read.status, parents_read.artifact["error_code"])
        totals = client.inspect(run_id).tree_totals
        assert 3 * (INPUT + OUTPUT) == totals.input_tokens + totals.output_tokens


class TestGraphOfYourOwn:
    def test_report_usage_in_the_model_node_feeds_the_budget_of_the_tool_nodes_run(self, guard, client, run_id):
        """A StateGraph whose model node calls guard.report_usage: the usage lands in the run of the
        ToolNode's calls (the thread's), and the 3rd call past the budget raises RunAborted."""
        runs: list = []
        middleware = guard()
        model = spending_model(6)

        def agent(state):
            response = model.invoke(state["messages"])
            middleware.report_usage(response, state)
            return {"messages": [response]}

        graph = StateGraph(MessagesState)
        graph.add_node("agent", agent)
        graph.add_node("tools", ToolNode([counting_read(runs)], wrap_tool_call=middleware.wrap_tool_call))
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", tools_condition)
        graph.add_edge("tools", "agent")

        with pytest.raises(RunAborted) as raised:
            graph.compile(checkpointer=InMemorySaver()).invoke(
                {"messages": [("user", "read them")]}, {**GRAPH_CONFIG, "configurable": {"thread_id": run_id}})

        assert (["/f1", "/f2"], "budget_exhausted") == (runs, raised.value.verdict.error_code)
        assert 3 * INPUT == client.inspect(run_id).tree_totals.input_tokens
