"""The MCP proxy's runs, sub-agents, user turns and ASK. A real `mcp`
ClientSession, the real proxy process, a real MCP server (backend.py) and the real daemon with
`onCritical: "ask"`: a client that declared elicitation is asked (its answer is the approval), one
that did not gets the BLOCK; each session is a run, a session naming a parent run in `_meta` is
its child; `_meta` io.loopwarden/userTurn is a user turn."""
from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from loopwarden.daemon_limits import MAX_RUN_ID_CHARS

from tests.e2e.mcp_proxy.test_mcp_proxy import CRITICAL, ANSWER, identical_lookups, proxy, ran, session_run, texts
from tests.e2e.mcp_proxy.test_peers import listening_proxy
from tests.support.metrics import delta

pytestmark = pytest.mark.daemon

PARENT = "io.loopwarden/parentRunId"
USER_TURN = "io.loopwarden/userTurn"
RUN_ID = "io.loopwarden/runId"


class Person:
    """An elicitation callback that answers every question the same way, and keeps them."""

    def __init__(self, action: str, always: bool = False) -> None:
        self.action = action
        self.always = always
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, _context, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        content = {"always": self.always} if self.action == "accept" else None
        return types.ElicitResult(action=self.action, content=content)


class TestAskThroughElicitation:
    def test_an_accepted_ask_runs_the_call_once(self, daemon, run_id, tmp_path):
        """Call 21 of a loop is ASKed: the proxy sends the client an elicitation with the ASK's
        message and a form with an `always` box; the person accepts, the call runs (the server ran
        21 times) and the daemon counts an approval once."""
        log, person = tmp_path / "backend.log", Person("accept")
        before = daemon.scrape()

        results = session_run(proxy("--address", daemon.grpc_target, "--run-id", run_id, log=log),
                              tmp_path / "err", lambda s: identical_lookups(s, CRITICAL + 1),
                              elicitation_callback=person)

        after = daemon.scrape()
        assert [False] * (CRITICAL + 1) == [r.is_error for r in results]
        assert [ANSWER] == texts(results[-1])
        assert CRITICAL + 1 == ran(log, "lookup")
        assert 1 == len(person.asked)
        assert "held for a person" in person.asked[0].message
        assert {"always"} == set(person.asked[0].requested_schema["properties"])
        assert 1 == delta(before, after, "loopwarden_asks_total", detector="generic_repeat", agent="default")
        assert 1 == delta(before, after, "loopwarden_approvals_total", answer="approved_once", agent="default")

    def test_a_declined_ask_refuses_the_call_and_the_next_is_blocked(self, daemon, run_id, tmp_path):
        """Declined: the call is answered isError (a person declined it) without reaching the server;
        the pattern is denied, so the next identical call is a BLOCK without asking again."""
        log, person = tmp_path / "backend.log", Person("decline")
        before = daemon.scrape()

        results = session_run(proxy("--address", daemon.grpc_target, "--run-id", run_id, log=log),
                              tmp_path / "err", lambda s: identical_lookups(s, CRITICAL + 2),
                              elicitation_callback=person)

        after = daemon.scrape()
        assert [False] * CRITICAL + [True, True] == [r.is_error for r in results]
        assert texts(results[CRITICAL])[0].startswith("A person declined this call: CRITICAL")
        assert texts(results[CRITICAL + 1])[0].startswith("CRITICAL: lookup was called 20 times")
        assert (CRITICAL, 1) == (ran(log, "lookup"), len(person.asked))
        assert 1 == delta(before, after, "loopwarden_approvals_total", answer="denied", agent="default")

    def test_always_makes_a_standing_exemption(self, daemon, client, run_id, tmp_path):
        """Accepted with `always` checked: the call runs and the exemption is listed for the
        agent and tool; the calls after it run without asking."""
        log, person = tmp_path / "backend.log", Person("accept", always=True)

        results = session_run(proxy("--address", daemon.grpc_target, "--run-id", run_id, "--agent", "asker", log=log),
                              tmp_path / "err", lambda s: identical_lookups(s, CRITICAL + 3),
                              elicitation_callback=person)

        assert [False] * (CRITICAL + 3) == [r.is_error for r in results]
        assert (CRITICAL + 3, 1) == (ran(log, "lookup"), len(person.asked))
        assert ["lookup"] == [e.tool_name for e in client.list_exemptions(agent_id="asker")]

    def test_over_streamable_http_the_question_comes_on_the_calls_stream(self, daemon, tmp_path):
        """--listen: the elicitation request goes out on the held call's response stream and the
        answer comes back as a POST of its own; the call then runs."""
        log, errlog, person = tmp_path / "backend.log", tmp_path / "proxy.err", Person("accept")
        with listening_proxy("--address", daemon.grpc_target, log=log, errlog=errlog) as (_, url):
            async def main():
                async with streamable_http_client(url) as (read, write), \
                        ClientSession(read, write, elicitation_callback=person) as session:
                    await session.initialize()
                    return await identical_lookups(session, CRITICAL + 1)

            results = anyio.run(main)

        assert [False] * (CRITICAL + 1) == [r.is_error for r in results]
        assert (CRITICAL + 1, 1) == (ran(log, "lookup"), len(person.asked))

    def test_a_call_cancelled_while_held_is_not_run_and_its_question_is_withdrawn(self, daemon, run_id, tmp_path):
        """The person never answers and the client gives up on call 21 (notifications/cancelled):
        the call never reaches the server, the ASK is reported denied, the proxy cancels its
        elicitation request at the client, and the session goes on."""
        log = tmp_path / "backend.log"
        withdrawn = anyio.Event()

        async def never_answers(_context, _params):
            try:
                await anyio.sleep(60)
            except anyio.get_cancelled_exc_class():
                withdrawn.set()
                raise
            return types.ElicitResult(action="accept")

        async def body(session):
            await identical_lookups(session, CRITICAL)
            with anyio.move_on_after(3):
                await session.call_tool("lookup", {"query": "same"})
            with anyio.move_on_after(10):
                await withdrawn.wait()
            return withdrawn.is_set(), await session.call_tool("lookup", {"query": "other"})

        before = daemon.scrape()
        was_withdrawn, other = session_run(proxy("--address", daemon.grpc_target, "--run-id", run_id, log=log),
                                           tmp_path / "err", body, elicitation_callback=never_answers)
        after = daemon.scrape()

        assert (True, False, [ANSWER]) == (was_withdrawn, other.is_error, texts(other))
        assert CRITICAL + 1 == ran(log, "lookup")  # the 20 and "other": never the held call
        assert 1 == delta(before, after, "loopwarden_approvals_total", answer="denied", agent="default")

    def test_a_client_without_elicitation_gets_the_block(self, daemon, run_id, tmp_path):
        log = tmp_path / "backend.log"

        results = session_run(proxy("--address", daemon.grpc_target, "--run-id", run_id, log=log),
                              tmp_path / "err", lambda s: identical_lookups(s, CRITICAL + 1))

        assert [False] * CRITICAL + [True] == [r.is_error for r in results]
        assert texts(results[-1])[0].startswith("CRITICAL: lookup was called 20 times")
        assert CRITICAL == ran(log, "lookup")


class TestUserTurn:
    def test_a_user_turn_lifts_the_block_of_the_same_call(self, daemon, run_id, tmp_path):
        """Blocked at 21; the same call sent with _meta io.loopwarden/userTurn: true runs."""
        log = tmp_path / "backend.log"

        async def body(session):
            looped = await identical_lookups(session, CRITICAL + 1)
            again = await session.call_tool("lookup", {"query": "same"}, meta={USER_TURN: True})
            return looped, again

        looped, again = session_run(proxy("--address", daemon.grpc_target, "--run-id", run_id, log=log),
                                    tmp_path / "err", body)

        assert (True, False) == (looped[-1].is_error, again.is_error)
        assert [ANSWER] == texts(again)
        assert CRITICAL + 1 == ran(log, "lookup")

    def test_a_bad_meta_value_is_that_requests_error(self, daemon, tmp_path):
        """userTurn "yes", a numeric parentRunId and one longer than the daemon takes are each
        refused with INVALID_PARAMS naming the key; nothing is run, and the session goes on."""
        log = tmp_path / "backend.log"

        async def body(session):
            errors = []
            for meta in ({USER_TURN: "yes"}, {PARENT: 5}, {PARENT: "p" * (MAX_RUN_ID_CHARS.default + 1)}):
                with pytest.raises(MCPError) as caught:
                    await session.call_tool("lookup", {"query": "q"}, meta=meta)
                errors.append((caught.value.error.code, caught.value.error.message))
            return errors, await session.call_tool("lookup", {"query": "q"})

        errors, after = session_run(proxy("--address", daemon.grpc_target, log=log), tmp_path / "err", body)

        assert [types.INVALID_PARAMS] * 3 == [code for code, _ in errors]
        assert USER_TURN in errors[0][1] and PARENT in errors[1][1]
        assert PARENT in errors[2][1] and f"at most {MAX_RUN_ID_CHARS.default}" in errors[2][1]
        assert (False, 1) == (after.is_error, ran(log, "lookup"))


class TestSubAgentSessions:
    def test_a_stuck_child_session_is_blocked_its_sibling_is_not_warned_and_its_parent_is(self, daemon, client,
                                                                                             tmp_path):
        """Over --listen, three sessions: a parent (its run id from the initialize answer's _meta)
        and two sub-agents naming it in _meta. The looping child is blocked at 21; its sibling's 10
        identical calls of the same tool are not warned; the parent's next call carries the
        child_stopped warning."""
        log, errlog = tmp_path / "backend.log", tmp_path / "proxy.err"
        with listening_proxy("--address", daemon.grpc_target, "--run-id", "tree", log=log, errlog=errlog) as (_, url):
            async def main():
                async with streamable_http_client(url) as (pr, pw), ClientSession(pr, pw) as parent, \
                        streamable_http_client(url) as (ar, aw), ClientSession(ar, aw) as stuck, \
                        streamable_http_client(url) as (br, bw), ClientSession(br, bw) as sibling:
                    opened = await parent.initialize()
                    parent_run = opened.meta[RUN_ID]
                    await stuck.initialize()
                    await sibling.initialize()
                    first = await parent.call_tool("lookup", {"query": "plan"})
                    child = {PARENT: parent_run}
                    stuck_results, sibling_results = [], []
                    for index in range(CRITICAL + 1):
                        stuck_results.append(await stuck.call_tool("lookup", {"query": "same"}, meta=child))
                        if index < 10:
                            sibling_results.append(await sibling.call_tool("lookup", {"query": "same"}, meta=child))
                    after = await parent.call_tool("lookup", {"query": "next"})
                    children = client.inspect(parent_run).children  # the run ends with its session
                    return parent_run, first, stuck_results, sibling_results, after, children

            parent_run, first, stuck_results, sibling_results, after, children = anyio.run(main)

        assert parent_run.startswith("tree-s")
        assert [False] * CRITICAL + [True] == [r.is_error for r in stuck_results]
        assert texts(stuck_results[-1])[0].startswith("CRITICAL: lookup was called 20 times")
        assert [[ANSWER]] * 10 == [texts(r) for r in sibling_results]
        assert [ANSWER] == texts(first)
        assert ANSWER == texts(after)[0] and "sub-agent run" in texts(after)[1] and "was stopped" in texts(after)[1]
        assert 2 == len(children)


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return '{tools: {loopDetection: {enabled: true}}, loopwarden: {onCritical: "ask"}}'


@pytest.fixture(scope="module")
def daemon_args() -> tuple[str, ...]:
    return ()
