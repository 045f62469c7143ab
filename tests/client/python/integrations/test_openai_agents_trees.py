"""LoopwardenGuardrails with run trees, ASK, budgets and user turns: real
openai-agents Runners driven by the SDK's ScriptedModel (no network) against the real daemon.

- agents run as tools and handoff targets are child runs: siblings never count each other's calls,
  a stuck one is blocked and its parent's next call carries the `child_stopped` warning;
- ASK goes through the SDK's tool approval: the run is interrupted, RunState.approve runs the call
  once (always_approve: a standing exemption), RunState.reject is a denial;
- every model response's token usage is a `usage` event, so `tokensPerTree` ends a run;
- a later Runner.run on the same conversation (group id) is a user turn: a blocked call runs again.
"""
from __future__ import annotations

import asyncio
import uuid

import pytest

from agents import (
    Agent, RunConfig, Runner, ToolInputGuardrailTripwireTriggered, Usage, set_trace_processors,
)
from agents.testing import ScriptedModel, assistant_message, function_call

from loopwarden.integrations.openai_agents import LoopwardenGuardrails
from loopwarden.integrations.openai_agents._runs import Place, Scope, Scopes
from tests.client.python.integrations.support import (
    CRITICAL, PARAMS, REPEATS, RESULT, TOOL, Counters, counter, dead_target,
)
from tests.client.python.integrations.test_openai_agents import FINAL, MAX_TURNS, counting_read, outputs

SUB_AGENT_CONFIG = """{
  tools: {loopDetection: {enabled: true}},
  agents: {list: [
    {id: "asker", loopwarden: {onCritical: "ask"}},
    {id: "tokens", loopwarden: {budgets: {tokensPerTree: 1000}}},
  ]},
}"""


# Fewer than the warning threshold (10) in one run; twice this is more.
SIBLING_READS = 8


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return SUB_AGENT_CONFIG


def script(*turns, input_tokens: int = 0) -> ScriptedModel:
    """A model that answers with `turns` in order (each a list of output items), then FINAL; each
    response used `input_tokens`."""
    return ScriptedModel([*turns, [assistant_message(FINAL)]],
                         default_usage=Usage(requests=1, input_tokens=input_tokens, total_tokens=input_tokens))


def reads(count: int, prefix: str, params: dict = PARAMS) -> list:
    """`count` turns, each asking for the same read (fresh call ids)."""
    return [[function_call(TOOL, params, call_id=f"{prefix}-{n}")] for n in range(1, count + 1)]


def reader(name: str, count: int, runs: list, input_tokens: int = 0) -> Agent:
    """A sub-agent that reads the same file `count` times, then answers."""
    return Agent(name=name, model=script(*reads(count, name), input_tokens=input_tokens), tools=[counting_read(runs)])


def as_tool(agent: Agent):
    # The SDK runs an agent tool with its default max_turns (10) unless told.
    return agent.as_tool(tool_name=agent.name, tool_description=f"Ask {agent.name}.", max_turns=MAX_TURNS)


def run(guard: LoopwardenGuardrails, agent: Agent, given, group_id: str):
    """Runner.run on a fresh event loop (tracing off, the group id as the conversation)."""
    async def main():
        try:
            return await Runner.run(agent, given, max_turns=MAX_TURNS,
                                    run_config=RunConfig(tracing_disabled=True, group_id=group_id))
        finally:
            await guard.aclose()
    return asyncio.run(main())


def warnings(daemon, detector: str) -> float:
    return counter(daemon.scrape(), "loopwarden_warnings_total", detector=detector)


@pytest.fixture
def guard(daemon) -> LoopwardenGuardrails:
    return LoopwardenGuardrails(daemon.grpc_target)


class TestAgentsAsTools:
    def test_each_agent_run_as_a_tool_is_a_child_run_of_its_caller(self, guard, client, daemon, run_id):
        """Two sub-agents each read the same file 8 times: 16 identical reads in one conversation
        (a warning at the 11th in one run), but each sub-agent is a run of its own, so nobody is
        warned and every read runs. Their model's token usage is reported in their own runs."""
        runs: list = []
        alpha, beta = (reader(name, SIBLING_READS, runs, input_tokens=10) for name in ("alpha", "beta"))
        lead = guard.protect(Agent(name="lead", tools=[as_tool(alpha), as_tool(beta)], model=script(
            [function_call("alpha", {"input": "look"}, call_id="to-alpha")],
            [function_call("beta", {"input": "look"}, call_id="to-beta")])))
        before = Counters.scrape(daemon)

        result = run(guard, lead, "look twice", run_id)

        assert FINAL == result.final_output
        assert 2 * SIBLING_READS == len(runs)
        assert Counters(warnings=0, blocks=0, aborts=0) == Counters.scrape(daemon) - before
        root = client.inspect(run_id)
        assert [f"{run_id}/to-alpha", f"{run_id}/to-beta"] == root.children
        assert 3 == root.tree_totals.runs
        # Each sub-agent's model answered SIBLING_READS + 1 times, 10 tokens each; the lead's used none.
        assert (2 * (SIBLING_READS + 1) * 10, 0) == (root.tree_totals.input_tokens, root.run_totals.input_tokens)

    def test_a_stuck_sub_agent_is_blocked_and_its_parent_is_warned(self, guard, daemon, run_id):
        """A sibling reads 8 times (never warned); the stuck sub-agent reads 25 times: 20 run, the
        rest get the block. The lead's next call runs with the child_stopped warning naming the
        stuck sub-agent's run."""
        sibling_runs: list = []
        stuck_runs: list = []
        sibling, stuck = reader("sibling", SIBLING_READS, sibling_runs), reader("digger", REPEATS, stuck_runs)
        lead_runs: list = []
        lead = guard.protect(Agent(name="lead", tools=[as_tool(sibling), as_tool(stuck), counting_read(lead_runs)],
                                   model=script(
            [function_call("sibling", {"input": "look"}, call_id="to-sibling")],
            [function_call("digger", {"input": "dig"}, call_id="to-digger")],
            [function_call(TOOL, {"path": "/etc/motd"}, call_id="lead-read")])))
        before, stopped_before = Counters.scrape(daemon), warnings(daemon, "child_stopped")

        result = run(guard, lead, "dig", run_id)

        assert (SIBLING_READS, CRITICAL, 1) == (len(sibling_runs), len(stuck_runs), len(lead_runs))
        # One announced warning (the stuck sub-agent's 11th read), five blocks: the sibling's
        # reads were counted in a run of their own (shared, its 8 and the next 3 would have warned).
        assert Counters(warnings=1, blocks=REPEATS - CRITICAL, aborts=0) == Counters.scrape(daemon) - before
        assert 1 == warnings(daemon, "child_stopped") - stopped_before
        lead_read = outputs(result)[-1]
        assert lead_read.startswith(f"{RESULT}\n\n")
        assert f"sub-agent run '{run_id}/to-digger' was stopped" in lead_read


    def test_a_streamed_run_places_its_sub_agents_the_same_way(self, guard, client, run_id):
        """Runner.run_streamed: the stuck sub-agent is its own child run, blocked after 20 reads."""
        runs: list = []
        lead = guard.protect(Agent(name="lead", tools=[as_tool(reader("digger", REPEATS, runs))], model=script(
            [function_call("digger", {"input": "dig"}, call_id="to-digger")])))

        async def main():
            try:
                streamed = Runner.run_streamed(lead, "dig", max_turns=MAX_TURNS,
                                               run_config=RunConfig(tracing_disabled=True, group_id=run_id))
                async for _event in streamed.stream_events():
                    pass
                return streamed
            finally:
                await guard.aclose()

        assert FINAL == asyncio.run(main()).final_output
        assert CRITICAL == len(runs)
        assert [f"{run_id}/to-digger"] == client.inspect(run_id).children


class TestHandoffs:
    def test_a_stuck_handoff_target_is_blocked_and_the_agent_that_handed_off_is_warned(self, guard, client,
                                                                                       daemon, run_id):
        """triage hands off to worker (a child run of triage's), worker loops and is blocked, hands
        back; triage's next call carries child_stopped."""
        worker_runs: list = []
        triage_runs: list = []
        worker = Agent(name="worker", tools=[counting_read(worker_runs)],
                       model=ScriptedModel([*reads(REPEATS, "worker"),
                                            [function_call("transfer_to_triage", {}, call_id="back")]]))
        triage = Agent(name="triage", tools=[counting_read(triage_runs)], handoffs=[worker], model=ScriptedModel([
            [function_call("transfer_to_worker", {}, call_id="handoff")],
            [function_call(TOOL, {"path": "/etc/motd"}, call_id="triage-read")],
            [assistant_message(FINAL)]]))
        worker.handoffs = [triage]
        guard.protect(triage)
        stopped_before = warnings(daemon, "child_stopped")

        result = run(guard, triage, "route it", run_id)

        assert FINAL == result.final_output
        assert (CRITICAL, 1) == (len(worker_runs), len(triage_runs))
        assert 1 == warnings(daemon, "child_stopped") - stopped_before
        assert f"sub-agent run '{run_id}/worker' was stopped" in outputs(result)[-1]
        assert [f"{run_id}/worker"] == client.inspect(run_id).children


class TestAsk:
    @pytest.fixture
    def guard(self, daemon) -> LoopwardenGuardrails:
        return LoopwardenGuardrails(daemon.grpc_target, agent_id="asker", ask=True)

    def test_approve_runs_the_asked_call_once_and_reject_denies_the_pattern(self, guard, daemon, run_id):
        """The 21st identical call interrupts the run; approved, it runs and the 22nd is asked again;
        rejected, it does not run and the 23rd is blocked (a denied pattern is not asked again)."""
        runs: list = []
        agent = guard.protect(Agent(name="coder", tools=[counting_read(runs)], model=script(*reads(23, "call"))))
        text = daemon.scrape()
        asks = counter(text, "loopwarden_asks_total", agent="asker")
        once = counter(text, "loopwarden_approvals_total", answer="approved_once", agent="asker")
        denied = counter(text, "loopwarden_approvals_total", answer="denied", agent="asker")

        first = run(guard, agent, "read it", run_id)
        assert (CRITICAL, 1) == (len(runs), len(first.interruptions))
        held = first.interruptions[0]
        assert "held for a person" in guard.question(held)
        state = first.to_state()
        state.approve(held)

        second = run(guard, agent, state, run_id)
        assert (CRITICAL + 1, 1) == (len(runs), len(second.interruptions))  # ran once, asked again
        state = second.to_state()
        state.reject(second.interruptions[0])

        third = run(guard, agent, state, run_id)
        assert CRITICAL + 1 == len(runs)
        assert FINAL == third.final_output
        assert outputs(third)[-1].startswith("CRITICAL")  # the 23rd: blocked, not asked
        text = daemon.scrape()
        assert 2 == counter(text, "loopwarden_asks_total", agent="asker") - asks
        assert 1 == counter(text, "loopwarden_approvals_total", answer="approved_once", agent="asker") - once
        assert 1 == counter(text, "loopwarden_approvals_total", answer="denied", agent="asker") - denied

    def test_always_approve_is_a_standing_exemption(self, guard, client, run_id):
        """always_approve: the approval's scope is ALWAYS, the daemon lists the exemption, and the
        later identical calls all run."""
        params = {"path": f"/tmp/{run_id}"}
        runs: list = []
        agent = guard.protect(Agent(name="coder", tools=[counting_read(runs)],
                                    model=script(*reads(REPEATS, "call", params))))

        first = run(guard, agent, "read it", run_id)
        state = first.to_state()
        state.approve(first.interruptions[0], always_approve=True)
        second = run(guard, agent, state, run_id)

        assert (REPEATS, [], FINAL) == (len(runs), second.interruptions, second.final_output)
        assert [run_id] == [exemption.run_id for exemption in client.list_exemptions(agent_id="asker", tool_name=TOOL)
                            if exemption.run_id == run_id]


    def test_a_handoff_target_is_asked_in_its_own_run(self, guard, daemon, run_id):
        """The worker a triage agent handed off to loops: its 21st call is asked, and the approval
        names the worker's run (an approval of a run that asked nothing would be REJECTed)."""
        runs: list = []
        worker = Agent(name="worker", tools=[counting_read(runs)], model=script(*reads(CRITICAL + 1, "worker")))
        triage = guard.protect(Agent(name="triage", handoffs=[worker], model=ScriptedModel(
            [[function_call("transfer_to_worker", {}, call_id="handoff")]])))
        once = counter(daemon.scrape(), "loopwarden_approvals_total", answer="approved_once", agent="asker")

        first = run(guard, triage, "route it", run_id)
        state = first.to_state()
        state.approve(first.interruptions[0])
        second = run(guard, triage, state, run_id)

        assert (CRITICAL + 1, FINAL) == (len(runs), second.final_output)
        assert 1 == counter(daemon.scrape(), "loopwarden_approvals_total", answer="approved_once", agent="asker") - once

    def test_a_sub_agent_run_as_a_tool_is_blocked_not_asked(self, guard, daemon, run_id):
        """Inside Agent.as_tool the SDK would resume the sub-agent without the calling tool's
        guardrails, so its calls are never asked: the stuck sub-agent gets the BLOCK."""
        runs: list = []
        lead = guard.protect(Agent(name="lead", tools=[as_tool(reader("digger", REPEATS, runs))], model=script(
            [function_call("digger", {"input": "dig"}, call_id="to-digger")])))
        asks = counter(daemon.scrape(), "loopwarden_asks_total", agent="asker")
        before = Counters.scrape(daemon)

        result = run(guard, lead, "dig", run_id)

        assert ([], FINAL, CRITICAL) == (result.interruptions, result.final_output, len(runs))
        assert REPEATS - CRITICAL == (Counters.scrape(daemon) - before).blocks
        assert asks == counter(daemon.scrape(), "loopwarden_asks_total", agent="asker")


    def test_an_unreachable_daemon_fails_closed_without_interrupting(self):
        """fail_open=False with ask: the daemon cannot be asked, so the input guardrail trips (an
        error in needs_approval would have made the SDK interrupt the run instead)."""
        guard = LoopwardenGuardrails(dead_target(), fail_open=False, ask=True)
        runs: list = []
        agent = guard.protect(Agent(name="coder", tools=[counting_read(runs)], model=script(*reads(1, "call"))))

        set_trace_processors([])  # tracing on (the run id is known at the approval gate), nothing exported

        async def main():
            try:
                return await Runner.run(agent, "read it", run_config=RunConfig(trace_id=f"trace_{uuid.uuid4().hex}"))
            finally:
                await guard.aclose()

        with pytest.raises(ToolInputGuardrailTripwireTriggered) as raised:
            asyncio.run(main())

        assert ([], "unavailable") == (runs, raised.value.output.output_info["action"])


class TestBudget:
    def test_token_usage_of_the_responses_ends_the_run(self, daemon, client, run_id):
        """tokensPerTree 1000, 400 tokens a response, fed only by the integration's usage events:
        calls 1 and 2 run (the 2nd warned at 80%), the 3rd is ABORT budget_exhausted."""
        guard = LoopwardenGuardrails(daemon.grpc_target, agent_id="tokens")
        runs: list = []
        model = ScriptedModel([[function_call(TOOL, {"path": f"/step/{n}"}, call_id=f"call-{n}")] for n in range(1, 6)],
                              default_usage=Usage(requests=1, input_tokens=300, output_tokens=100, total_tokens=400))
        agent = guard.protect(Agent(name="coder", tools=[counting_read(runs)], model=model))

        with pytest.raises(ToolInputGuardrailTripwireTriggered) as raised:
            run(guard, agent, "read them", run_id)

        assert 2 == len(runs)
        info = raised.value.output.output_info
        assert ("abort", "budget", "budget_exhausted") == (info["action"], info["detector"], info["error_code"])
        totals = client.inspect(run_id).tree_totals
        assert (900, 300) == (totals.input_tokens, totals.output_tokens)


class TestTracing:
    def test_with_a_trace_usage_goes_to_the_trace_run_as_it_comes(self, guard, client):
        """Tracing on: the root run is the trace id, known from the first model response, so the
        usage of a run that calls no tool is reported too."""
        trace_id = f"trace_{uuid.uuid4().hex}"
        agent = guard.protect(Agent(name="coder", model=script(input_tokens=7)))
        set_trace_processors([])  # traces are made, never exported

        async def main():
            try:
                return await Runner.run(agent, "hi", run_config=RunConfig(trace_id=trace_id))
            finally:
                await guard.aclose()

        assert FINAL == asyncio.run(main()).final_output
        assert 7 == client.inspect(trace_id).run_totals.input_tokens


class TestUserTurn:
    def test_a_new_runner_run_on_the_conversation_lifts_the_block(self, guard, run_id):
        """Run 1 loops and is blocked from the 21st call; run 2 on the same group id is a new user
        turn, and the same call runs again."""
        runs: list = []
        agent = guard.protect(Agent(name="coder", tools=[counting_read(runs)], model=script(*reads(REPEATS, "one"))))
        first = run(guard, agent, "read it", run_id)
        assert CRITICAL == len(runs)
        assert outputs(first)[-1].startswith("CRITICAL")

        agent.model = script(*reads(1, "two"))
        second = run(guard, agent, "now read it again", run_id)

        assert CRITICAL + 1 == len(runs)
        assert [RESULT] == outputs(second)


class TestRunPlaces:
    """The bookkeeping alone (loopwarden.integrations.openai_agents._runs): no daemon."""

    def test_a_handoff_target_is_placed_under_its_source_once(self):
        scope, root = Scope(), Place("r")
        scope.started("", "triage")
        scope.handed_off("", "triage", "worker")
        scope.handed_off("", "worker", "checker")
        scope.handed_off("", "worker", "triage")  # back to the root's agent: its run stays the root
        scope.handed_off("", "checker", "worker")  # worker's parent was fixed by its first handoff

        assert Place("r") == scope.place_in("", root, "triage")
        assert Place("r/worker", "r", "r") == scope.place_in("", root, "worker")
        assert Place("r/worker/checker", "r/worker", "r") == scope.place_in("", root, "checker")
        assert Place("r") == scope.place_in("", root, "someone else")

    def test_bases_keep_their_own_handoffs(self):
        """An agent run as a tool hands off inside its own child run."""
        scope, child = Scope(), Place("r/call-1", "r", "r")
        scope.handed_off("r/call-1", "helper", "worker")

        assert Place("r/call-1/worker", "r/call-1", "r") == scope.place_in("r/call-1", child, "worker")
        assert Place("r") == scope.place_in("", Place("r"), "worker")

    def test_a_scope_per_usage_object_and_roots_remembered(self):
        scopes, first, second = Scopes(), Usage(), Usage()

        assert scopes.of(first) is scopes.of(first)
        assert scopes.of(first) is not scopes.of(second)
        assert (False, True) == (scopes.seen_before("r"), scopes.seen_before("r"))


class TestOwnApproval:
    def test_a_tool_that_asks_by_itself_is_still_asked_first(self, daemon, client, run_id):
        """ask=True on a tool whose own needs_approval says yes: the SDK interrupts for it as
        before (no daemon ASK involved), and after the person's approval loopwarden guards the call."""
        guard = LoopwardenGuardrails(daemon.grpc_target, ask=True)
        runs: list = []
        read = counting_read(runs)

        async def always(_context, _params, _call_id) -> bool:
            return True
        read.needs_approval = always
        agent = guard.protect(Agent(name="coder", tools=[read], model=script(*reads(1, "call"))))

        first = run(guard, agent, "read it", run_id)
        assert ([], 1, None) == (runs, len(first.interruptions), guard.question(first.interruptions[0]))
        state = first.to_state()
        state.approve(first.interruptions[0])
        second = run(guard, agent, state, run_id)

        assert ([PARAMS["path"]], FINAL) == (runs, second.final_output)
        assert [TOOL] == [record.tool_name for record in client.inspect(run_id).records]
