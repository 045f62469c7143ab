"""Sub-agents and sub-graphs as child runs: an agent that a guarded tool runs is
the child run `<calling run>/<tool call id>`, a compiled graph added as a node is the child
`<thread run>/<its namespace>`; real create_agent / StateGraph, scripted fake chat models, the
real daemon."""
from __future__ import annotations

import asyncio

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from tests.client.python.integrations.support import CRITICAL, PARAMS, RESULT, TOOL, counter
from tests.client.python.integrations.test_langchain import (  # noqa: F401  (guard, run_id: fixtures)
    LoopingModel, counting_read, guard, run_id, tool_messages,
)

STUCK, FINE = 25, 8  # the stuck sub-agent's identical reads; its sibling's


def delegating_model(*turns: list[dict]) -> LoopingModel:
    """A parent model: one AIMessage per entry of `turns` (its tool calls), then "done"."""
    return LoopingModel(messages=iter([*(AIMessage("", tool_calls=calls) for calls in turns), AIMessage("done")]))


def delegate_tool(child_middleware, children: dict):
    """`delegate(task)`: runs a sub-agent (create_agent inside the tool) that reads STUCK or FINE times."""
    @tool("delegate")
    def delegate(task: str) -> str:
        """Hand a task to a sub-agent."""
        sub = create_agent(LoopingModel.script(STUCK if task == "stuck" else FINE), [counting_read([])],
                           middleware=[child_middleware])
        children[task] = sub.invoke({"messages": [("user", task)]})
        return f"{task}: {children[task]['messages'][-1].content}"
    return delegate


def read_call(call_id: str) -> dict:
    return {"name": TOOL, "args": PARAMS, "id": call_id}


class TestAgentAsTool:
    def test_a_stuck_sub_agent_is_blocked_its_sibling_is_not_warned_and_its_parent_is(self, guard, daemon, client,
                                                                                   run_id):
        """Two sub-agents started by two parallel tool calls of one parent: the one reading 25 times
        is blocked from its 21st read, the one reading 8 times is never warned, and the parent's
        next call carries the child_stopped warning naming the stuck child's run."""
        children: dict = {}
        parent = create_agent(
            delegating_model([{"name": "delegate", "args": {"task": "stuck"}, "id": "d1"},
                              {"name": "delegate", "args": {"task": "fine"}, "id": "d2"}], [read_call("p1")]),
            [delegate_tool(guard(), children), counting_read([])], middleware=[guard()], checkpointer=InMemorySaver())
        warned_before = counter(daemon.scrape(), "loopwarden_warnings_total", detector="child_stopped")

        state = parent.invoke({"messages": [("user", "split the work")]}, {"configurable": {"thread_id": run_id}})

        stuck = [m.status for m in tool_messages(children["stuck"])]
        assert ["success"] * CRITICAL + ["error"] * (STUCK - CRITICAL) == stuck
        assert [RESULT] * FINE == [m.content for m in tool_messages(children["fine"])], "the sibling was warned"
        parent_read = tool_messages(state)[-1]
        assert parent_read.content.startswith(f"{RESULT}\n\nWARNING: sub-agent run '{run_id}/d1' was stopped")
        assert 1 == counter(daemon.scrape(), "loopwarden_warnings_total", detector="child_stopped") - warned_before
        tree = client.inspect(run_id)
        assert ([f"{run_id}/d1", f"{run_id}/d2"], 3) == (sorted(tree.children), tree.tree_totals.runs)

    def test_the_child_run_names_its_parent_and_ends_with_its_invocation(self, guard, client, run_id):
        """While its tool runs, the sub-agent's run is `<parent>/<call id>` with the parent as its
        parent and root; once the sub-agent returns, its run is freed and the parent lists it."""
        seen: list = []
        child_id = f"{run_id}/d1"
        read = counting_read([], on_run=lambda: seen.append(client.inspect(child_id)))

        @tool("delegate")
        def delegate(task: str) -> str:
            """Hand a task to a sub-agent."""
            return create_agent(LoopingModel.script(1), [read], middleware=[guard()]).invoke(
                {"messages": [("user", task)]})["messages"][-1].content

        parent = create_agent(delegating_model([{"name": "delegate", "args": {"task": "x"}, "id": "d1"}]),
                              [delegate], middleware=[guard()], checkpointer=InMemorySaver())
        parent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": run_id}})

        (inside,) = seen
        assert (run_id, run_id, 1) == (inside.parent_run_id, inside.root_run_id, inside.depth)
        assert [child_id] == client.inspect(run_id).children

    def test_ainvoke_places_the_child_the_same_way(self, guard, client, run_id):
        """ainvoke (the asyncio client, tasks instead of threads): the sub-agent is the same child run."""
        middleware = guard()

        @tool("delegate")
        async def delegate(task: str) -> str:
            """Hand a task to a sub-agent."""
            sub = create_agent(LoopingModel.script(2), [counting_read([])], middleware=[middleware])
            return (await sub.ainvoke({"messages": [("user", task)]}))["messages"][-1].content

        parent = create_agent(delegating_model([{"name": "delegate", "args": {"task": "x"}, "id": "d1"}]),
                              [delegate], middleware=[middleware], checkpointer=InMemorySaver())

        async def main():
            try:
                await parent.ainvoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": run_id}})
            finally:
                await middleware.aclose()

        asyncio.run(main())

        tree = client.inspect(run_id)
        # The tree's calls: the parent's delegate and the child's two reads.
        assert ([f"{run_id}/d1"], 2, 3) == (tree.children, tree.tree_totals.runs, tree.tree_totals.tool_calls)


class TestSubgraphNode:
    def test_a_compiled_agent_added_as_a_node_is_a_child_of_the_thread_run(self, guard, client, run_id):
        """A StateGraph whose node is a guarded create_agent: the agent's run is a child of the
        thread's run, named by its checkpoint namespace, and its calls count in the thread's tree."""
        researcher = create_agent(LoopingModel.script(2), [counting_read([])], middleware=[guard()])
        graph = StateGraph(MessagesState)
        graph.add_node("researcher", researcher)
        graph.add_edge(START, "researcher")

        graph.compile(checkpointer=InMemorySaver()).invoke({"messages": [("user", "go")]},
                                                           {"configurable": {"thread_id": run_id}})

        tree = client.inspect(run_id)
        (child,) = tree.children
        assert child.startswith(f"{run_id}/researcher:")
        assert (2, 2) == (tree.tree_totals.runs, tree.tree_totals.tool_calls)
