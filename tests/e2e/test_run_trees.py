"""Run trees through the real daemon: sub-agents are child runs of their
parent run, each with its own history; a stopped child warns its parent; InspectRun lists the
tree; loopwarden.runTree bounds depth and width; the stream's header names the tree's root."""
from __future__ import annotations

import grpc
import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.support.grpc_helpers import SAME, Stream, call, channel, outcome, run_end
from tests.support.metrics import value

pytestmark = pytest.mark.daemon

READ = '{"path":"README.md"}'


@pytest.fixture(scope="module")
def daemon_config() -> str:
    # The e2e tests' usual config (thresholds 10 / 20), with two agents whose root runs bound their trees.
    return """{
      tools: {loopDetection: {enabled: true}},
      agents: {list: [
        {id: "shallow", loopwarden: {runTree: {maxDepth: 2}}},
        {id: "narrow", loopwarden: {runTree: {maxChildren: 2}}},
      ]},
    }"""


def _inspect(target: str, run_id: str) -> pb.InspectRunResponse:
    with channel(target) as ch:
        return pb_grpc.LoopDetectionServiceStub(ch).InspectRun(pb.InspectRunRequest(run_id=run_id), timeout=5)


def _routed(ch: grpc.Channel, root: str) -> Stream:
    """An Evaluate stream routed to the tree's root, as clients open one."""
    return Stream(ch, metadata=(("x-loopwarden-run-id", root),))


def _reads(stream: Stream, run: str, parent: str, times: int) -> list[pb.Verdict]:
    """`times` identical reads with identical outcomes; the calls' verdicts."""
    verdicts = []
    for _ in range(times):
        verdict, _ = stream.send(call(run, "read", READ, parent_run_id=parent),
                                 outcome(run, "read", READ, SAME, parent_run_id=parent))
        verdicts.append(verdict)
    return verdicts


def test_children_keep_their_own_history_and_a_stopped_child_warns_its_parent(daemon, run_id):
    parent = f"{run_id}/parent"
    children = [f"{parent}/child-{i}" for i in range(1, 5)]
    with channel(daemon.grpc_target) as ch, _routed(ch, parent) as stream:
        assert pb.ACTION_ALLOW == stream.one(call(parent, "plan", '{"step":1}')).action
        for child in children[:3]:
            verdicts = _reads(stream, child, parent, 8)
            assert [pb.ACTION_ALLOW] * 8 == [v.action for v in verdicts], f"{child}: siblings never share history"
        fourth = _reads(stream, children[3], parent, 21)
        assert pb.ACTION_BLOCK == fourth[20].action, "the fourth child is blocked at its 21st identical call"
        assert pb.ACTION_BLOCK not in [v.action for v in fourth[:20]]

        warned = stream.one(call(parent, "plan", '{"step":2}'))
        assert (pb.ACTION_WARN, pb.DETECTOR_CHILD_STOPPED, pb.LEVEL_WARNING) == (warned.action, warned.detector, warned.level)
        assert warned.announce
        assert repr(children[3]) in warned.message and "generic_repeat on read" in warned.message, warned.message
        again = stream.one(call(parent, "plan", '{"step":3}'))
        assert pb.ACTION_ALLOW == again.action, "the notice warns once"

    view = _inspect(daemon.grpc_target, parent)
    assert children == list(view.children)
    assert ("", parent, 0) == (view.parent_run_id, view.root_run_id, view.depth)
    assert 5 == view.tree_totals.runs
    assert 3 + 3 * 8 + 21 == view.tree_totals.tool_calls
    assert 3 == view.run_totals.tool_calls
    child = _inspect(daemon.grpc_target, children[3])
    assert (parent, parent, 1) == (child.parent_run_id, child.root_run_id, child.depth)
    assert 21 == child.run_totals.tool_calls


def test_a_great_grandchild_past_max_depth_is_aborted(daemon, run_id):
    root = f"{run_id}/root"
    chain = [root, f"{root}/a", f"{root}/a/b", f"{root}/a/b/c"]
    before = value(daemon.scrape(), "loopwarden_limit_aborts_total", reason="tree_too_deep", agent="default")
    with channel(daemon.grpc_target) as ch, _routed(ch, root) as stream:
        assert pb.ACTION_ALLOW == stream.one(call(root, "plan", agent_id="shallow")).action
        for parent, run in zip(chain, chain[1:-1]):
            assert pb.ACTION_ALLOW == stream.one(call(run, "plan", parent_run_id=parent)).action
        first = stream.one(call(chain[3], "plan", parent_run_id=chain[2]))
        later = stream.one(call(chain[3], "read"))
    assert (pb.ACTION_ABORT, "tree_too_deep") == (first.action, first.error_code)
    assert "3 levels below" in first.message and "limit of 2" in first.message, first.message
    assert (pb.ACTION_ABORT, "tree_too_deep") == (later.action, later.error_code), "it stays aborted"
    after = value(daemon.scrape(), "loopwarden_limit_aborts_total", reason="tree_too_deep", agent="default")
    assert before + 1 == after, "one abort counted, not one per event"


def test_a_child_past_max_children_is_aborted_and_not_counted(daemon, run_id):
    root = f"{run_id}/root"
    with channel(daemon.grpc_target) as ch, _routed(ch, root) as stream:
        stream.one(call(root, "plan", agent_id="narrow"))
        for i in (1, 2):
            assert pb.ACTION_ALLOW == stream.one(call(f"{root}/c{i}", "plan", parent_run_id=root)).action
        third = stream.one(call(f"{root}/c3", "plan", parent_run_id=root))
    assert (pb.ACTION_ABORT, "too_many_children") == (third.action, third.error_code)
    assert "2 sub-agent runs" in third.message, third.message
    assert [f"{root}/c1", f"{root}/c2"] == list(_inspect(daemon.grpc_target, root).children)


def test_a_parent_is_fixed_by_the_first_event(daemon, run_id):
    root, child = f"{run_id}/root", f"{run_id}/child"
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        stream.one(call(root, "plan"))
        assert pb.ACTION_ALLOW == stream.one(call(child, "read", parent_run_id=root)).action
        assert pb.ACTION_ALLOW == stream.one(call(child, "read", '{"n":2}')).action, "an empty parent repeats it"
        other = stream.one(call(child, "read", parent_run_id=f"{run_id}/other"))
        cycle = stream.one(call(root, "read", parent_run_id=child))
    assert (pb.ACTION_REJECT, "invalid_parent_run_id") == (other.action, other.error_code)
    assert repr(f"{run_id}/other") in other.message and repr(root) in other.message, other.message
    assert (pb.ACTION_REJECT, "invalid_parent_run_id") == (cycle.action, cycle.error_code)


def test_the_header_must_name_the_tree_root(daemon, run_id):
    root, child, stranger = f"{run_id}/root", f"{run_id}/root/child", f"{run_id}/stranger"
    with channel(daemon.grpc_target) as ch:
        with Stream(ch) as plain:
            plain.one(call(stranger, "plan"))
        with _routed(ch, root) as stream:
            # A child whose parent is not held yet takes the header's run as its root.
            grandchild = stream.one(call(f"{child}/g", "read", parent_run_id=child))
            misrouted = stream.one(call(stranger, "read"))
    assert pb.ACTION_ALLOW == grandchild.action
    assert (pb.ACTION_REJECT, "run_id_mismatch") == (misrouted.action, misrouted.error_code)
    assert "tree root" in misrouted.message, misrouted.message
    assert (child, root, 2) == (lambda v: (v.parent_run_id, v.root_run_id, v.depth))(_inspect(daemon.grpc_target, f"{child}/g"))
    assert root == _inspect(daemon.grpc_target, child).parent_run_id


def test_run_end_of_the_root_frees_the_whole_tree(daemon, run_id):
    root = f"{run_id}/root"
    kids = [f"{root}/a", f"{root}/b", f"{root}/a/deep"]
    with channel(daemon.grpc_target) as ch, _routed(ch, root) as stream:
        stream.one(call(root, "plan"))
        stream.one(call(kids[0], "read", parent_run_id=root))
        stream.one(call(kids[1], "read", parent_run_id=root))
        stream.one(call(kids[2], "read", parent_run_id=kids[0]))
        assert pb.ACTION_ALLOW == stream.one(run_end(kids[0])).action
        assert [kids[0], kids[1]] == list(_inspect(daemon.grpc_target, root).children), "an ended child stays listed"
        for gone in kids[0], kids[2]:
            with pytest.raises(grpc.RpcError) as missing:
                _inspect(daemon.grpc_target, gone)
            assert grpc.StatusCode.NOT_FOUND == missing.value.code()
        stream.one(run_end(root))
    for gone in root, kids[1]:
        with pytest.raises(grpc.RpcError) as missing:
            _inspect(daemon.grpc_target, gone)
        assert grpc.StatusCode.NOT_FOUND == missing.value.code()
