"""The settings both adapters share, against a daemon that requires a bearer token: the adapters'
`token` reaches the daemon, and a missing one is the daemon being unreachable (open or closed)."""
from __future__ import annotations

import asyncio

import pytest

import agents  # noqa: F401
import langchain  # noqa: F401  (both extras: make test installs them)

from agents import Agent, RunConfig, Runner

from loopwarden import LoopwardenUnavailable
from loopwarden.integrations.langchain import LoopwardenMiddleware
from loopwarden.integrations.openai_agents import LoopwardenGuardrails
from tests.client.python.integrations import test_langchain as lc
from tests.client.python.integrations import test_openai_agents as oa
from tests.client.python.integrations.support import CRITICAL, REPEATS

TOKEN = "adapter-token-3f9c"


@pytest.fixture(scope="module")
def daemon_args(tmp_path_factory) -> tuple[str, ...]:
    token_file = tmp_path_factory.mktemp("auth") / "token"
    token_file.write_text(f"{TOKEN}\n")
    return ("--auth-token-file", str(token_file))


def run_langchain(middleware: LoopwardenMiddleware) -> list:
    runs: list = []
    agent = lc.create_agent(lc.LoopingModel.script(), [lc.counting_read(runs)], middleware=[middleware])
    try:
        agent.invoke({"messages": [("user", "read it")]})
    finally:
        middleware.close()
    return runs


class TestToken:
    def test_langchain_sends_the_token(self, daemon):
        """With the daemon's token the middleware is guarded: 20 runs, then blocks."""
        assert CRITICAL == len(run_langchain(LoopwardenMiddleware(daemon.grpc_target, token=TOKEN)))

    def test_openai_agents_sends_the_token(self, daemon, run_id):
        """With the daemon's token the guardrails are guarded: 20 runs, then blocks."""
        runs: list = []
        guard = LoopwardenGuardrails(daemon.grpc_target, token=TOKEN)
        agent = guard.protect(Agent(name="coder", model=oa.looping_model(), tools=[oa.counting_read(runs)]))

        oa.run(guard, agent, RunConfig(tracing_disabled=True, group_id=run_id))

        assert CRITICAL == len(runs)

    def test_without_the_token_the_tools_run_unguarded(self, daemon):
        """UNAUTHENTICATED is the daemon being unreachable: fail open, all 25 calls run."""
        assert REPEATS == len(run_langchain(LoopwardenMiddleware(daemon.grpc_target)))

    def test_without_the_token_fail_closed_refuses_to_run(self, daemon):
        """With fail_open=False an unauthenticated middleware raises before the first tool runs."""
        with pytest.raises(LoopwardenUnavailable):
            run_langchain(LoopwardenMiddleware(daemon.grpc_target, fail_open=False))

    def test_openai_agents_without_the_token_fail_closed_trips(self, daemon):
        """The guardrails' fail-closed: the first call trips the input guardrail, the tool never runs."""
        runs: list = []
        guard = LoopwardenGuardrails(daemon.grpc_target, fail_open=False)
        agent = guard.protect(Agent(name="coder", model=oa.looping_model(), tools=[oa.counting_read(runs)]))

        with pytest.raises(oa.ToolInputGuardrailTripwireTriggered):
            asyncio.run(Runner.run(agent, "read it", max_turns=oa.MAX_TURNS,
                                   run_config=RunConfig(tracing_disabled=True)))

        assert [] == runs
