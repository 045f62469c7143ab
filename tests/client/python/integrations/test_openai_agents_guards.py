"""Several LoopwardenGuardrails protecting the same agent and tools (a guard made per request around
shared agents): guards do not stack. Real openai-agents Runners, a ScriptedModel, the real daemon."""
from __future__ import annotations

import pytest

from agents import Agent

from loopwarden.integrations.openai_agents import LoopwardenGuardrails
from tests.client.python.integrations.support import CRITICAL, Counters, counter
from tests.client.python.integrations.test_openai_agents import FINAL, counting_read, looping_model, outputs
from tests.client.python.integrations.test_openai_agents_trees import reads, run, script

GUARDS = 3


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return '{tools: {loopDetection: {enabled: true}}, agents: {list: [{id: "asker", loopwarden: {onCritical: "ask"}}]}}'


def three_guards(daemon, **settings) -> list[LoopwardenGuardrails]:
    return [LoopwardenGuardrails(daemon.grpc_target, **settings) for _ in range(GUARDS)]


def test_three_guards_put_one_guardrail_pair_on_a_tool_and_block_at_the_21st_call(daemon, client, run_id):
    runs: list = []
    read = counting_read(runs)
    agent = Agent(name="coder", model=looping_model(CRITICAL + 1), tools=[read])
    guards = three_guards(daemon)
    for guard in guards:
        guard.protect(agent)
    events = counter(daemon.scrape(), "loopwarden_events_total")
    before = Counters.scrape(daemon)

    result = run(guards[-1], agent, "read it", run_id)

    assert (["loopwarden"], ["loopwarden"]) == ([g.name for g in read.tool_input_guardrails],
                                                [g.name for g in read.tool_output_guardrails])
    assert CRITICAL == len(runs) and FINAL == result.final_output
    assert outputs(result)[-1].startswith("CRITICAL")  # the 21st call, and only it, is blocked
    assert Counters(warnings=1, blocks=1, aborts=0) == Counters.scrape(daemon) - before
    # one tool_call and one tool_outcome per call (a block's outcome is reported too), and one
    # model_output for the final answer, not one per guard
    assert 2 * (CRITICAL + 1) + 1 == counter(daemon.scrape(), "loopwarden_events_total") - events


def test_three_asking_guards_interrupt_once_and_any_of_them_knows_the_question(daemon, run_id):
    runs: list = []
    agent = Agent(name="coder", tools=[counting_read(runs)], model=script(*reads(CRITICAL + 1, "call")))
    guards = three_guards(daemon, agent_id="asker", ask=True)
    for guard in guards:
        guard.protect(agent)

    first = run(guards[-1], agent, "read it", run_id)
    assert (CRITICAL, 1) == (len(runs), len(first.interruptions))
    held = first.interruptions[0]
    assert all("held for a person" in (guard.question(held) or "") for guard in guards)
    state = first.to_state()
    state.reject(held)

    second = run(guards[-1], agent, state, run_id)
    assert CRITICAL == len(runs) and FINAL == second.final_output


def test_blocks_through_each_adapter_are_counted_under_its_own_integration(daemon, run_id):
    """The adapters name themselves (the integration header): a block through OpenAI Agents is
    counted as openai_agents, not as a plain gRPC client's; LangChain's settings send langchain."""
    from loopwarden.integrations.langchain import LoopwardenMiddleware

    def blocks(integration: str) -> float:
        return counter(daemon.scrape(), "loopwarden_verdicts_total", action="block", integration=integration)

    before = {name: blocks(name) for name in ("openai_agents", "grpc")}
    guard = LoopwardenGuardrails(daemon.grpc_target)
    agent = guard.protect(Agent(name="coder", model=looping_model(CRITICAL + 1), tools=[counting_read([])]))

    run(guard, agent, "read it", run_id)

    assert (1, 0) == (blocks("openai_agents") - before["openai_agents"], blocks("grpc") - before["grpc"])
    middleware = LoopwardenMiddleware(daemon.grpc_target)
    assert ("x-loopwarden-integration", "langchain") in middleware._gate.settings.client_options()["metadata"]
