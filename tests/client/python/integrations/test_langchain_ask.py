"""ASK as LangGraph's interrupt() under `loopwarden.onCritical: "ask"`: the 21st
identical call interrupts the graph with a payload describing it, and the `Command(resume=...)`
answer goes to the daemon as an approval; real create_agent / ToolNode, scripted fake chat
models, the real daemon."""
from __future__ import annotations

import asyncio

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolNode
from langgraph.types import Command
from pydantic import ValidationError

from tests.client.python.integrations.support import CRITICAL, PARAMS, RESULT, TOOL, counter
from tests.client.python.integrations.test_langchain import (  # noqa: F401  (guard, run_id: fixtures)
    FINAL, GRAPH_CONFIG, LoopingModel, counting_read, guard, looping_graph, run_id, tool_messages,
)

ASKED = CRITICAL + 1  # the call the daemon asks about


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return """{
  tools: {loopDetection: {enabled: true}},
  loopwarden: {onCritical: "ask"},
  agents: {list: [{id: "budgeted", loopwarden: {budgets: {toolCallsPerRun: 3}, onBudget: "ask"}}]},
}"""


def asks_and_answers(daemon) -> tuple[float, ...]:
    text = daemon.scrape()
    return (counter(text, "loopwarden_asks_total"),
            *(counter(text, "loopwarden_approvals_total", answer=answer)
              for answer in ("approved_once", "approved_always", "denied")))


def delta(after: tuple, before: tuple) -> tuple:
    return tuple(a - b for a, b in zip(after, before))


def asking_agent(guard, runs: list, **options):
    return create_agent(LoopingModel.script(ASKED), [counting_read(runs)], middleware=[guard(**options)],
                        checkpointer=InMemorySaver())


def interrupted(state) -> dict:
    (pending,) = state["__interrupt__"]
    return pending.value


class TestInterrupt:
    def test_the_asked_call_interrupts_the_graph_and_an_approval_runs_it(self, guard, daemon, run_id):
        """The 21st call does not run: the invocation ends with an interrupt describing it. Resumed
        with True, the call runs (21 runs), the model gets its result, and the daemon counts one
        ask and one approval: the call LangGraph ran again on resume was a retry, not a second ask."""
        runs: list = []
        agent = asking_agent(guard, runs)
        config = {"configurable": {"thread_id": run_id}}
        before = asks_and_answers(daemon)

        state = agent.invoke({"messages": [("user", "read it")]}, config)

        ask = interrupted(state)
        assert CRITICAL == len(runs)
        assert ("loopwarden_ask", TOOL, PARAMS, f"call-{ASKED}", "generic_repeat", run_id) == (
            ask["type"], ask["tool"], ask["args"], ask["tool_call_id"], ask["detector"], ask["run_id"])
        assert ask["message"].startswith("CRITICAL: this call is held for a person") and ask["decision_id"]

        state = agent.invoke(Command(resume=True), config)

        assert ASKED == len(runs)
        assert (RESULT, FINAL) == (tool_messages(state)[-1].content, state["messages"][-1].content)
        assert (1, 1, 0, 0) == delta(asks_and_answers(daemon), before)

    def test_a_declined_call_is_not_run_and_the_model_is_told(self, guard, daemon, run_id):
        """Resumed with False: the call does not run, the model gets an error ToolMessage saying a
        person declined it, and the daemon counts a denial."""
        runs: list = []
        agent = asking_agent(guard, runs)
        config = {"configurable": {"thread_id": run_id}}
        before = asks_and_answers(daemon)
        agent.invoke({"messages": [("user", "read it")]}, config)

        state = agent.invoke(Command(resume=False), config)

        refused = tool_messages(state)[-1]
        assert CRITICAL == len(runs)
        assert "error" == refused.status and refused.content.startswith("A person was asked and declined this call")
        assert (1, 0, 0, 1) == delta(asks_and_answers(daemon), before)

    def test_always_makes_a_standing_exemption(self, guard, client, run_id):
        """Resumed with {"approved": true, "scope": "always"}: the call runs and the daemon lists an
        exemption for the agent's read with these arguments, made from this run's ask."""
        runs: list = []
        agent = asking_agent(guard, runs, agent_id="always-reader")
        config = {"configurable": {"thread_id": run_id}}
        agent.invoke({"messages": [("user", "read it")]}, config)

        agent.invoke(Command(resume={"approved": True, "scope": "always", "ttl_seconds": 600}), config)

        (exemption,) = client.list_exemptions(agent_id="always-reader")
        assert (ASKED, TOOL, run_id) == (len(runs), exemption.tool_name, exemption.run_id)
        assert 599 <= exemption.expires_at - exemption.created_at <= 601

    @pytest.mark.parametrize(("answer", "field"), [({"approved": "yes"}, "AnswerFields.approved"),
                                                   ({"approved": True, "scope": "forever"}, "AnswerFields.scope"),
                                                   ({"approved": True, "ttl": 5}, "AnswerFields.ttl"),
                                                   ({"approved": True, "ttl_seconds": -1}, "AnswerFields.ttl_seconds"),
                                                   ("maybe", "literal['once','always']")])
    def test_a_resume_value_that_is_no_answer_is_refused_and_can_be_answered_again(self, guard, run_id, answer,
                                                                                  field):
        """A resume value that is no answer raises pydantic's ValidationError naming the field, the
        call does not run, and the same interrupt then takes a real answer."""
        runs: list = []
        agent = asking_agent(guard, runs)
        config = {"configurable": {"thread_id": run_id}}
        agent.invoke({"messages": [("user", "read it")]}, config)

        with pytest.raises(ValidationError) as refused:
            agent.invoke(Command(resume=answer), config)
        assert field in str(refused.value) and CRITICAL == len(runs)

        agent.invoke(Command(resume=True), config)
        assert ASKED == len(runs)

    def test_ainvoke_interrupts_and_resumes_the_same_way(self, guard, run_id):
        """ainvoke (the asyncio client): the same interrupt, and the approved call runs on resume."""
        runs: list = []
        middleware = guard()
        agent = create_agent(LoopingModel.script(ASKED), [counting_read(runs)], middleware=[middleware],
                             checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": run_id}}

        async def main():
            try:
                first = await agent.ainvoke({"messages": [("user", "read it")]}, config)
                return first, await agent.ainvoke(Command(resume="once"), config)
            finally:
                await middleware.aclose()

        first, last = asyncio.run(main())

        assert f"call-{ASKED}" == interrupted(first)["tool_call_id"]
        assert (ASKED, FINAL) == (len(runs), last["messages"][-1].content)


class TestWhereNobodyCanBeAsked:
    def test_without_a_checkpointer_the_call_is_blocked(self, guard, run_id):
        """No checkpointer, no interrupt: the events do not say accepts_ask, so the 21st call is blocked."""
        runs: list = []
        agent = create_agent(LoopingModel.script(ASKED), [counting_read(runs)], middleware=[guard()])

        state = agent.invoke({"messages": [("user", "read it")]}, {"run_id": None})

        assert (CRITICAL, "error") == (len(runs), tool_messages(state)[-1].status)

    def test_ask_false_blocks_instead(self, guard, run_id):
        """LoopwardenMiddleware(ask=False) never interrupts, checkpointer or not."""
        runs: list = []
        state = asking_agent(guard, runs, ask=False).invoke({"messages": [("user", "read it")]},
                                                            {"configurable": {"thread_id": run_id}})

        assert "__interrupt__" not in state
        assert (CRITICAL, "error") == (len(runs), tool_messages(state)[-1].status)


class TestToolNodeAndSubAgents:
    def test_a_bare_tool_node_interrupts_and_resumes(self, guard, run_id):
        """A StateGraph with ToolNode(wrap_tool_call=...) and a checkpointer: the same interrupt and resume."""
        runs: list = []
        middleware = guard()
        graph = looping_graph(ToolNode([counting_read(runs)], wrap_tool_call=middleware.wrap_tool_call),
                              LoopingModel.script(ASKED), InMemorySaver())
        config = {**GRAPH_CONFIG, "configurable": {"thread_id": run_id}}

        assert f"call-{ASKED}" == interrupted(graph.invoke({"messages": [("user", "read it")]}, config))["tool_call_id"]
        state = graph.invoke(Command(resume=True), config)

        assert (ASKED, RESULT) == (len(runs), tool_messages(state)[-1].content)

    def test_a_sub_agents_ask_interrupts_the_parent_graph(self, guard, run_id):
        """A sub-agent run by a tool asks: the parent's invocation ends with the interrupt (naming
        the child run), and resuming the parent runs the child's call."""
        runs: list = []
        middleware = guard()
        # Made once: LangGraph runs the tool again on resume, and the sub-agent goes on from its
        # checkpoint, so its scripted model must go on too.
        sub = create_agent(LoopingModel.script(ASKED), [counting_read(runs)], middleware=[middleware])

        @tool("delegate")
        def delegate(task: str) -> str:
            """Hand a task to a sub-agent."""
            return sub.invoke({"messages": [("user", task)]})["messages"][-1].content

        parent = create_agent(
            LoopingModel(messages=iter([AIMessage("", tool_calls=[{"name": "delegate", "args": {"task": "x"},
                                                                   "id": "d1"}]), AIMessage("done")])),
            [delegate], middleware=[middleware], checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": run_id}}

        ask = interrupted(parent.invoke({"messages": [("user", "go")]}, config))
        state = parent.invoke(Command(resume=True), config)

        assert (f"{run_id}/d1", ASKED) == (ask["run_id"], len(runs))
        assert (FINAL, "done") == (tool_messages(state)[-1].content.split(": ")[-1], state["messages"][-1].content)


class TestBudgetAsk:
    def test_an_approved_budget_ask_gives_the_run_another_allowance(self, guard, run_id):
        """onBudget "ask", toolCallsPerRun 3, six reads of different files: the 4th call interrupts
        (detector budget); approved, calls 4 to 6 run (the cap is now 6) and the agent ends normally."""
        runs: list = []
        turns = [AIMessage("", tool_calls=[{"name": TOOL, "args": {"path": f"/f{n}"}, "id": f"call-{n}"}])
                 for n in range(1, 7)]
        agent = create_agent(LoopingModel(messages=iter([*turns, AIMessage(FINAL)])), [counting_read(runs)],
                             middleware=[guard(agent_id="budgeted")], checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": run_id}}

        ask = interrupted(agent.invoke({"messages": [("user", "read them")]}, config))
        assert (3, "budget", "call-4") == (len(runs), ask["detector"], ask["tool_call_id"])

        state = agent.invoke(Command(resume=True), config)

        assert (6, FINAL) == (len(runs), state["messages"][-1].content)
