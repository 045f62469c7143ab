"""The Python client typed for run trees, budgets and ASK: child runs routed by
their tree's root, usage and approval events, duration_ms, the ASK action (and any action the
client does not know read as BLOCK), and InspectRun's tree fields.

Two halves. Against a scripted gRPC service (ScriptedDaemon): what the client puts on the wire and
how it reads what comes back. Against the real daemon: the issue's semantics through the client.
"""
from __future__ import annotations

import asyncio
import json
import threading
from concurrent import futures

import grpc
import pytest
from loopwarden import (
    Action, AsyncLoopwardenClient, AsyncToolGuard, LoopwardenClient, RunAborted, Totals, ToolGuard, events,
)
from loopwarden._wire import inspection_from_message, verdict_from_message
from loopwarden.eventformat import EventFormatError, EventKind, parse_event
from loopwarden.trees import RunTrees
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc


SAME = {"content": [{"type": "text", "text": "same"}], "details": {"ok": True}}
UNKNOWN_ACTION = 99  # an action a newer daemon might send


# ------------------------------------------------------------------------------ scripted service

class ScriptedDaemon(pb_grpc.LoopDetectionServiceServicer):
    """Records every event with the routing header it came under, and answers tool calls with the
    scripted action (ALLOW when none); InspectRun answers a fixed tree view."""

    def __init__(self) -> None:
        self.received: list[tuple[str, pb.Event]] = []  # (x-loopwarden-run-id, event)
        self.streams: list[str] = []  # the routing header of each Evaluate stream opened
        self.inspected: list[tuple[str, str]] = []  # (header, run id)
        self.script: list[int] = []  # actions for the next tool calls, in order
        self.lock = threading.Lock()

    @staticmethod
    def _header(context) -> str:
        return dict(context.invocation_metadata()).get("x-loopwarden-run-id", "")

    def _verdict(self, header: str, event: pb.Event) -> pb.Verdict:
        with self.lock:
            self.received.append((header, event))
            action = self.script.pop(0) if event.WhichOneof("kind") == "tool_call" and self.script else pb.ACTION_ALLOW
        return pb.Verdict(seq=event.seq, run_id=event.run_id, action=action, decision_id=f"d-{event.seq}",
                          message="CRITICAL: held for a human" if action == pb.ACTION_ASK else "")

    def Evaluate(self, request_iterator, context):
        header = self._header(context)
        with self.lock:
            self.streams.append(header)
        for request in request_iterator:
            yield pb.EvaluateResponse(verdicts=[self._verdict(header, e) for e in request.events])

    def Check(self, request, context):
        return pb.CheckResponse(verdict=self._verdict(self._header(context), request.event))

    def InspectRun(self, request, context):
        self.inspected.append((self._header(context), request.run_id))
        return pb.InspectRunResponse(
            run_id=request.run_id, parent_run_id="root", children=["grandchild-1", "grandchild-2"],
            root_run_id="root", depth=1, tree_totals=pb.Totals(tool_calls=31, tool_ms=1500, input_tokens=900,
                                                               output_tokens=100, cost_usd=0.25, wall_seconds=12.5,
                                                               runs=4),
            run_totals=pb.Totals(tool_calls=8, runs=1),
            exemptions=[pb.Exemption(id="ex-1", agent_id="coder", tool_name="read", args_hash="h1", created_at=10.0,
                                     expires_at=3610.0, run_id="root")])

    def kinds(self) -> list[str]:
        return [event.WhichOneof("kind") for _, event in self.received]


@pytest.fixture
def scripted():
    servicer = ScriptedDaemon()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    pb_grpc.add_LoopDetectionServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    servicer.target = f"127.0.0.1:{port}"
    yield servicer
    server.stop(None)


class CountingTool:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, **params: object) -> object:
        self.calls += 1
        return SAME


# ------------------------------------------------------------------------------ actions

class TestActions:
    def test_ask_is_its_own_action_and_may_not_run(self):
        """ACTION_ASK reads as Action.ASK: not may_run, asks."""
        verdict = verdict_from_message(pb.Verdict(action=pb.ACTION_ASK))
        assert (Action.ASK, False, True) == (verdict.action, verdict.may_run, verdict.asks)

    def test_an_action_the_client_does_not_know_is_block(self):
        """A newer daemon's action (and shadow action) reads as BLOCK, never an exception."""
        verdict = verdict_from_message(pb.Verdict(action=UNKNOWN_ACTION, shadow=True, shadow_action=UNKNOWN_ACTION))
        assert (Action.BLOCK, Action.BLOCK, False) == (verdict.action, verdict.shadow_action, verdict.may_run)

    def test_an_unknown_action_over_the_wire_is_block_and_the_guard_does_not_run_the_tool(self, scripted):
        """The daemon answers an action this client does not know: the verb returns BLOCK and the
        guard hands back the blocked result without running the tool."""
        scripted.script = [UNKNOWN_ACTION, UNKNOWN_ACTION]
        tool = CountingTool()
        with LoopwardenClient(scripted.target) as client:
            assert Action.BLOCK is client.tool_call("r", "read", {"p": 1}).action
            result = ToolGuard(client, "r").call("read", tool, {"p": 1})
        assert (0, "blocked") == (tool.calls, result["details"]["status"])


# ------------------------------------------------------------------------------ events

class TestEvents:
    def test_usage_event(self):
        """events.usage carries tokens, cost and model, and the envelope's tree fields."""
        event = events.usage("c1", input_tokens=500, output_tokens=100, cost_usd=0.5, model="m", parent_run_id="root",
                             accepts_ask=True)
        assert ("usage", 500, 100, 0.5, "m", "root", True) == (
            event.WhichOneof("kind"), event.usage.input_tokens, event.usage.output_tokens, event.usage.cost_usd,
            event.usage.model, event.parent_run_id, event.accepts_ask)

    def test_approval_event(self):
        """events.approval names the call and spells the scope as the proto enum."""
        once = events.approval("r", approved=True, tool_call_id="c21")
        always = events.approval("r", approved=True, decision_id="d-9", scope="always", ttl_seconds=60)
        assert (pb.APPROVAL_SCOPE_ONCE, "c21", True) == (once.approval.scope, once.approval.tool_call_id,
                                                         once.approval.approved)
        assert (pb.APPROVAL_SCOPE_ALWAYS, "d-9", 60) == (always.approval.scope, always.approval.decision_id,
                                                         always.approval.ttl_seconds)

    def test_an_approval_must_name_the_call_and_a_known_scope(self):
        """No tool_call_id nor decision_id, or a scope other than once/always: ValueError naming it."""
        with pytest.raises(ValueError, match="tool_call_id or decision_id"):
            events.approval("r", approved=True)
        with pytest.raises(ValueError, match="scope"):
            events.approval("r", approved=True, tool_call_id="c", scope="forever")

    def test_tool_outcome_duration(self):
        """duration_ms rides on the ToolOutcome."""
        assert 1234 == events.tool_outcome("r", "read", {}, result=1, duration_ms=1234).tool_outcome.duration_ms

    def test_model_output_event(self):
        """events.model_output carries the text or a digest, the kind, the stop flag and usage only when given."""
        said = events.model_output("r", "Done.", output_kind="final_answer", stop_hook_active=True, input_tokens=7,
                                   cost_usd=0.25, parent_run_id="root")
        assert ("model_output", "Done.", pb.OUTPUT_KIND_FINAL_ANSWER, True, 7, 0.25, "root") == (
            said.WhichOneof("kind"), said.model_output.text, said.model_output.output_kind,
            said.model_output.stop_hook_active, said.model_output.usage.input_tokens, said.model_output.usage.cost_usd,
            said.parent_run_id)
        thought = events.model_output("r", text_digest="d1", output_kind="thought")
        assert ("d1", pb.OUTPUT_KIND_THOUGHT, False) == (thought.model_output.text_digest,
                                                         thought.model_output.output_kind,
                                                         thought.model_output.HasField("usage"))
        with pytest.raises(ValueError, match="output_kind"):
            events.model_output("r", "x", output_kind="shout")

    def test_every_builder_takes_the_tree_fields(self):
        """parent_run_id and accepts_ask on every kind."""
        built = [events.tool_call("c", "read", parent_run_id="p", accepts_ask=True),
                 events.tool_outcome("c", "read", parent_run_id="p", accepts_ask=True),
                 events.compaction_retry("c", parent_run_id="p", accepts_ask=True),
                 events.user_turn("c", parent_run_id="p", accepts_ask=True),
                 events.run_end("c", parent_run_id="p", accepts_ask=True)]
        assert [("p", True)] * 5 == [(e.parent_run_id, e.accepts_ask) for e in built]


class TestEventFormat:
    def test_usage_and_approval_lines(self):
        """The JSONL format reads the new kinds and fields, and the record becomes the same event."""
        usage = parse_event({"kind": "usage", "run_id": "c", "parent_run_id": "root", "input_tokens": 10,
                             "output_tokens": 2, "cost_usd": 0.01, "model": "m"})
        approval = parse_event({"kind": "approval", "run_id": "c", "tool_call_id": "c21", "approved": False,
                                "scope": "always", "ttl_seconds": 30, "accepts_ask": True})
        outcome = parse_event({"kind": "tool_outcome", "run_id": "c", "tool_name": "read", "duration_ms": 7})
        assert (EventKind.USAGE, 10, 2, 0.01, "m", "root") == (usage.kind, usage.input_tokens, usage.output_tokens,
                                                               usage.cost_usd, usage.model, usage.parent_run_id)
        assert (EventKind.APPROVAL, "c21", False, "always", 30, True) == (
            approval.kind, approval.tool_call_id, approval.approved, approval.scope, approval.ttl_seconds,
            approval.accepts_ask)
        assert 7 == outcome.duration_ms
        wire = events.from_dict({"kind": "approval", "run_id": "c", "decision_id": "d", "approved": True})
        assert (True, "d", pb.APPROVAL_SCOPE_UNSPECIFIED) == (wire.approval.approved, wire.approval.decision_id,
                                                              wire.approval.scope)

    def test_model_output_lines(self):
        """The JSONL form of a model output, its usage nested, becomes the same event."""
        line = {"kind": "model_output", "run_id": "c", "seq": 3, "text": "Same again.", "output_kind": "final_answer",
                "stop_hook_active": True, "usage": {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.01}}
        record = parse_event(line)
        assert (EventKind.MODEL_OUTPUT, "Same again.", "final_answer", True, 10, 2, 0.01) == (
            record.kind, record.text, record.output_kind, record.stop_hook_active, record.input_tokens,
            record.output_tokens, record.cost_usd)
        wire = events.from_dict(line)
        assert ("Same again.", pb.OUTPUT_KIND_FINAL_ANSWER, True, 10) == (
            wire.model_output.text, wire.model_output.output_kind, wire.model_output.stop_hook_active,
            wire.model_output.usage.input_tokens)
        bare = events.from_dict({"kind": "model_output", "run_id": "c", "text_digest": "d"})
        assert ("d", pb.OUTPUT_KIND_UNSPECIFIED, False) == (bare.model_output.text_digest,
                                                            bare.model_output.output_kind,
                                                            bare.model_output.HasField("usage"))

    @pytest.mark.parametrize(("line", "field"), [
        ({"kind": "model_output", "run_id": "r", "text": "x", "output_kind": "shout"}, "output_kind"),
        ({"kind": "model_output", "run_id": "r", "text": 7}, "text"),
        ({"kind": "model_output", "run_id": "r", "text": "x", "usage": [1]}, "usage"),
        ({"kind": "model_output", "run_id": "r", "text": "x", "usage": {"cost_usd": -1}}, "cost_usd"),
        ({"kind": "model_output", "run_id": "r", "text": "x", "stop_hook_active": "yes"}, "stop_hook_active"),
        ({"kind": "usage", "run_id": "r", "cost_usd": -1}, "cost_usd"),
        ({"kind": "usage", "run_id": "r", "cost_usd": float("nan")}, "cost_usd"),
        ({"kind": "usage", "run_id": "r", "input_tokens": -5}, "input_tokens"),
        ({"kind": "usage", "run_id": "r", "output_tokens": "many"}, "output_tokens"),
        ({"kind": "approval", "run_id": "r", "tool_call_id": "c"}, "approved"),
        ({"kind": "approval", "run_id": "r", "tool_call_id": "c", "approved": "yes"}, "approved"),
        ({"kind": "approval", "run_id": "r", "tool_call_id": "c", "approved": True, "scope": "forever"}, "scope"),
        ({"kind": "approval", "run_id": "r", "approved": True}, "tool_call_id or decision_id"),
        ({"kind": "approval", "run_id": "r", "tool_call_id": "c", "approved": True, "ttl_seconds": 2**32},
         "ttl_seconds"),
        ({"kind": "tool_outcome", "run_id": "r", "duration_ms": -1}, "duration_ms"),
        ({"kind": "tool_call", "run_id": "r", "accepts_ask": "true"}, "accepts_ask"),
        ({"kind": "tool_call", "run_id": "r", "parent_run_id": 7}, "parent_run_id"),
    ], ids=lambda value: value if isinstance(value, str) else "")
    def test_bad_fields_are_named(self, line, field):
        """Each bad field fails with an EventFormatError that names it."""
        with pytest.raises(EventFormatError, match=field):
            parse_event(line)


# ------------------------------------------------------------------------------ routing

def headers_by_run(scripted) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for header, event in scripted.received:
        seen.setdefault(event.run_id, set()).add(header)
    return seen


class TestChildRunsRouteByTheRoot:
    def test_run_trees_learn_roots_from_parents(self):
        """A child's root is its parent's root; an explicit root wins; unknown runs are their own root."""
        trees = RunTrees()
        trees.learn("child", "root")
        trees.learn("grandchild", "child")
        trees.learn("remote", "someone", root_run_id="far-root")
        assert ["root", "root", "root", "far-root", "stranger"] == [
            trees.root(r) for r in ("root", "child", "grandchild", "remote", "stranger")]

    def test_run_trees_are_bounded(self):
        """Past its capacity the least recently used child is forgotten (and routes as a root)."""
        trees = RunTrees(capacity=2)
        for index in range(3):
            trees.learn(f"c{index}", "root")
        assert ["c0", "root", "root"] == [trees.root(f"c{index}") for index in range(3)]

    def test_a_guards_children_share_the_roots_stream_in_per_run_mode(self, scripted):
        """guard.child / child.child: parent_run_id set, one stream for the tree, its header the
        root; a child's run_end does not close it, the root's does."""
        tool = CountingTool()
        with LoopwardenClient(scripted.target, streams="per_run") as client:
            root = ToolGuard(client, "root")
            child = root.child("child")
            grandchild = child.child("grandchild")
            for guard in (root, child, grandchild):
                guard.call("read", tool, {"p": 1})
            client.run_end("grandchild")
            assert ["root"] == list(client._run_streams)
            client.run_end("root")
            assert {} == client._run_streams
        assert {"root": {"root"}, "child": {"root"}, "grandchild": {"root"}} == headers_by_run(scripted)
        parents = {event.run_id: event.parent_run_id for _, event in scripted.received
                   if event.WhichOneof("kind") == "tool_call"}
        assert {"root": "", "child": "root", "grandchild": "child"} == parents
        assert ["root"] == scripted.streams

    def test_check_and_inspect_of_a_child_carry_the_roots_header(self, scripted):
        """The unary calls route by the root too, once the client has seen the child's parent."""
        with LoopwardenClient(scripted.target) as client:
            client.check(events.tool_call("child", "read", parent_run_id="root"))
            client.inspect("child")
        assert [("root", "child")] == scripted.inspected
        assert {"child": {"root"}} == headers_by_run(scripted)

    def test_an_explicit_root_routes_a_child_whose_parent_this_client_never_saw(self, scripted):
        """root_run_id: a sub-agent in another process names its tree's root for routing."""
        with LoopwardenClient(scripted.target, streams="per_run") as client:
            client.tool_call("sub", "read", parent_run_id="orchestrator", root_run_id="session-root")
            client.usage("sub", input_tokens=3)
        assert {"sub": {"session-root"}} == headers_by_run(scripted)
        assert ["tool_call", "usage"] == scripted.kinds()

    def test_the_async_client_routes_children_by_the_root(self, scripted):
        """The asyncio client and AsyncToolGuard.child do the same."""
        async def scenario():
            async with AsyncLoopwardenClient(scripted.target, streams="per_run") as client:
                async def tool(**params):
                    return SAME
                await AsyncToolGuard(client, "root").child("child").call("read", tool, {"p": 1})
        asyncio.run(scenario())
        assert {"child": {"root"}} == headers_by_run(scripted)


# ------------------------------------------------------------------------------ ASK in the guard

class TestGuardAsks:
    def test_a_guard_without_a_handler_does_not_accept_ask(self, scripted):
        """No on_ask: the events say accepts_ask false (the daemon answers BLOCK instead)."""
        with LoopwardenClient(scripted.target) as client:
            ToolGuard(client, "r").call("read", CountingTool(), {"p": 1})
        assert {False} == {event.accepts_ask for _, event in scripted.received}

    def test_approved_always_runs_the_tool_and_reports_the_answer(self, scripted):
        """ASK → on_ask sees the verdict → approval(always, the call's id) → the tool runs and its
        outcome (with duration_ms) is reported."""
        scripted.script = [pb.ACTION_ASK]
        asked = []
        tool = CountingTool()
        with LoopwardenClient(scripted.target) as client:
            guard = ToolGuard(client, "r", on_ask=lambda verdict: asked.append(verdict.message) or "always")
            result = guard.call("read", tool, {"p": 1}, tool_call_id="c21")
        assert (1, SAME, ["CRITICAL: held for a human"]) == (tool.calls, result, asked)
        assert ["tool_call", "approval", "tool_outcome"] == scripted.kinds()
        approval = scripted.received[1][1].approval
        assert ("c21", "", True, pb.APPROVAL_SCOPE_ALWAYS) == (approval.tool_call_id, approval.decision_id,
                                                              approval.approved, approval.scope)
        assert all(event.accepts_ask for _, event in scripted.received)
        assert scripted.received[2][1].tool_outcome.duration_ms >= 0

    def test_denied_does_not_run_the_tool(self, scripted):
        """on_ask False → approval(approved false), the blocked result, the tool not run."""
        scripted.script = [pb.ACTION_ASK]
        tool = CountingTool()
        with LoopwardenClient(scripted.target) as client:
            result = ToolGuard(client, "r", on_ask=lambda verdict: False).call("read", tool, {"p": 1})
        assert (0, "blocked") == (tool.calls, result["details"]["status"])
        assert ["tool_call", "approval", "tool_outcome"] == scripted.kinds()
        approval = scripted.received[1][1].approval
        # The call had no tool_call_id: the approval names the ASK's decision id.
        assert (False, "", "d-1") == (approval.approved, approval.tool_call_id, approval.decision_id)

    def test_a_bad_answer_is_refused(self, scripted):
        """on_ask must answer True, 'once', 'always', False or None."""
        scripted.script = [pb.ACTION_ASK]
        with LoopwardenClient(scripted.target) as client:
            with pytest.raises(ValueError, match="on_ask must answer"):
                ToolGuard(client, "r", on_ask=lambda verdict: "sometimes").call("read", CountingTool(), {})

    def test_the_async_guard_awaits_its_handler(self, scripted):
        """AsyncToolGuard accepts a coroutine on_ask; approved once runs the tool."""
        scripted.script = [pb.ACTION_ASK]

        async def scenario():
            async with AsyncLoopwardenClient(scripted.target) as client:
                async def on_ask(verdict):
                    return True

                async def tool(**params):
                    return SAME
                return await AsyncToolGuard(client, "r", on_ask=on_ask).call("read", tool, {"p": 1}, tool_call_id="c")
        assert SAME == asyncio.run(scenario())
        assert pb.APPROVAL_SCOPE_ONCE == scripted.received[1][1].approval.scope


# ------------------------------------------------------------------------------ inspection

class TestInspection:
    def test_the_tree_fields_are_typed(self, scripted):
        """InspectRun's parent, children, root, depth, totals and exemptions as dataclasses."""
        with LoopwardenClient(scripted.target) as client:
            view = client.inspect("child")
        assert ("root", ["grandchild-1", "grandchild-2"], "root", 1) == (
            view.parent_run_id, view.children, view.root_run_id, view.depth)
        assert Totals(tool_calls=31, tool_ms=1500, input_tokens=900, output_tokens=100, cost_usd=0.25,
                      wall_seconds=12.5, runs=4) == view.tree_totals
        assert (8, 1) == (view.run_totals.tool_calls, view.run_totals.runs)
        assert [("ex-1", "coder", "read", "h1", 3610.0, "root")] == [
            (e.id, e.agent_id, e.tool_name, e.args_hash, e.expires_at, e.run_id) for e in view.exemptions]

    def test_the_inspect_command_shows_the_tree(self, scripted):
        """`loopwarden inspect`'s summary has the run's place in its tree and what the tree spent."""
        from loopwarden.commands.inspect import summary
        with LoopwardenClient(scripted.target) as client:
            lines = summary(client.inspect("child"))
        assert ("tree      root root · depth 1 · parent root · 2 children (grandchild-1, grandchild-2)" in lines)
        assert "spent     tree: 31 calls, 1.5 tool s, 1000 tokens, $0.25, 4 runs · this run: 8 calls" in lines
        assert [] == [line for line in summary(inspection_from_message(pb.InspectRunResponse(run_id="r")))
                      if line.startswith(("tree ", "spent "))]

    def test_output_streaks_are_a_line_only_when_one_counts(self):
        """loopwarden inspect shows the no-tool detectors' counts that are not 0, and no line without."""
        from loopwarden.commands.inspect import summary
        counted = pb.InspectRunResponse(run_id="r", output_streaks=pb.OutputStreaks(messages=4, compactions=2))
        lines = summary(inspection_from_message(counted))
        assert "outputs   same message 4 · compactions 2 (in a row, no new tool result)" in lines
        assert [] == [line for line in summary(inspection_from_message(pb.InspectRunResponse(run_id="r")))
                      if line.startswith("outputs ")]

    def test_an_older_daemon_reads_as_a_root_with_zero_totals(self):
        """A response without the fields: a root of depth 0, empty totals and no exemptions."""
        view = inspection_from_message(pb.InspectRunResponse(run_id="r"))
        assert ("", [], 0, Totals(), []) == (view.parent_run_id, view.children, view.depth, view.tree_totals,
                                             view.exemptions)


# ------------------------------------------------------------------------------ the real daemon

@pytest.fixture(scope="module")
def daemon_config() -> str:
    return json.dumps({"tools": {"loopDetection": {"enabled": True}},
                       "agents": {"list": [{"id": "asker", "loopwarden": {"onCritical": "ask"}}]}})


class TestRunTreesOnTheDaemon:
    def test_children_keep_their_own_history_and_the_parent_lists_them(self, daemon, run_id):
        """Three children × 8 identical reads: all ALLOW; InspectRun of the parent lists them."""
        tool = CountingTool()
        warned = []
        with LoopwardenClient(daemon.grpc_target, streams="per_run") as client:
            parent = ToolGuard(client, run_id, on_warning=warned.append)
            parent.call("read", tool, {"path": "/plan"})
            children = [parent.child(f"{run_id}/child-{n}") for n in range(3)]
            results = [child.call("read", tool, {"path": "/README.md"}) for _ in range(8) for child in children]
            view = client.inspect(run_id)
            child_view = client.inspect(children[0].run_id)
        assert ([], 25) == (warned, tool.calls)
        assert all(result == SAME for result in results)
        assert [c.run_id for c in children] == view.children
        assert (run_id, run_id, 1) == (child_view.parent_run_id, child_view.root_run_id, child_view.depth)
        assert 25 == view.tree_totals.tool_calls


class TestAskOnTheDaemon:
    def test_always_approval_lets_the_next_identical_calls_run(self, daemon, run_id):
        """onCritical ask: the 21st identical call asks the guard's handler; "always" runs it and the
        next 5 identical calls, and InspectRun lists the exemption."""
        asked = []
        tool = CountingTool()
        with LoopwardenClient(daemon.grpc_target, agent_id="asker") as client:
            guard = ToolGuard(client, run_id, on_ask=lambda verdict: asked.append(verdict) or "always")
            for n in range(26):
                guard.call("read", tool, {"path": f"/{run_id}"}, tool_call_id=f"c{n + 1}")
            view = client.inspect(run_id)
        assert (1, 26) == (len(asked), tool.calls)
        assert Action.ASK is asked[0].action
        assert ["read"] == [e.tool_name for e in view.exemptions if e.run_id == run_id]

    def test_without_a_handler_the_critical_is_a_block(self, daemon, run_id):
        """The same agent, a guard that cannot ask: the 21st identical call is blocked."""
        tool = CountingTool()
        with LoopwardenClient(daemon.grpc_target, agent_id="asker") as client:
            guard = ToolGuard(client, run_id)
            results = [guard.call("read", tool, {"path": f"/{run_id}"}) for _ in range(21)]
        assert (20, "blocked") == (tool.calls, results[-1]["details"]["status"])

    def test_an_approval_of_nothing_asked_is_rejected(self, client, run_id):
        """REJECT no_pending_ask."""
        verdict = client.approval(run_id, approved=True, tool_call_id="never-asked")
        assert (Action.REJECT, "no_pending_ask") == (verdict.action, verdict.error_code)


@pytest.fixture(scope="module")
def budget_daemon():
    from tests.support.daemon import running_daemon
    config = {"tools": {"loopDetection": {"enabled": True}}, "loopwarden": {"budgets": {"tokensPerTree": 1000}}}
    with running_daemon(json.dumps(config)) as handle:
        yield handle


class TestBudgetsOnTheDaemon:
    @pytest.fixture
    def daemon(self, budget_daemon):
        return budget_daemon

    def test_usage_past_the_token_budget_aborts_the_next_call(self, daemon, run_id):
        """usage events add up over the tree (a child's included): the guard's next call raises RunAborted."""
        with LoopwardenClient(daemon.grpc_target) as client:
            parent = ToolGuard(client, run_id)
            child = parent.child(f"{run_id}/child")
            parent.call("read", CountingTool(), {"path": "/a"})
            client.usage(run_id, input_tokens=600)
            client.usage(child.run_id, parent_run_id=run_id, input_tokens=500)
            with pytest.raises(RunAborted) as aborted:
                parent.call("read", CountingTool(), {"path": "/b"})
            view = client.inspect(run_id)
        assert "budget_exhausted" == aborted.value.verdict.error_code
        assert 1100 == view.tree_totals.input_tokens
