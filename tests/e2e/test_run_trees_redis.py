"""Run trees in the shared Redis state store: a tree's runs are keyed under its root's
hash tag (one Redis Cluster slot, one owner), and another replica taking the tree over loads the
child, its parent and its root on the child's first event, so a tree budget keeps counting."""
from __future__ import annotations

import base64

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb

from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import Stream, call, channel
from tests.support.servers import redis_server
from tests.support.state import wait_until_flushed

# A real redis-server from Debian's packages: make test, not make test-fast.
pytestmark = [pytest.mark.system, pytest.mark.daemon]

TREE_BUDGET = "{tools: {loopDetection: {enabled: true}}, loopwarden: {budgets: {toolCallsPerTree: 12}}}"


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def test_another_replica_takes_over_a_tree_with_its_totals():
    root, child = "tree-root", "tree-root/child"
    header = (("x-loopwarden-run-id", root),)
    with redis_server() as redis:
        args = ["--state-store", redis.url, "--state-flush-interval", "0.1"]
        with running_daemon(TREE_BUDGET, args) as first:
            with channel(first.grpc_target) as ch, Stream(ch, metadata=header) as stream:
                for n in range(5):
                    stream.one(call(root, "read", f'{{"n":{n}}}'))
                for n in range(5):
                    stream.one(call(child, "read", f'{{"n":{n}}}', parent_run_id=root))
            wait_until_flushed(first, 2)
        keys = sorted(redis.keys())
        with running_daemon(TREE_BUDGET, args) as second:
            with channel(second.grpc_target) as ch, Stream(ch, metadata=header) as stream:
                more = [stream.one(call(child, "read", f'{{"n":{10 + n}}}')) for n in range(3)]
    tag = "{." + _b64(root) + "}"
    assert [f"loopwarden:{tag}", f"loopwarden:{tag}.{_b64(child)}"] == keys, "the child's key carries its root's hash tag"
    assert [pb.ACTION_ALLOW] * 2 == [v.action for v in more[:2]], "loaded with its history: no mismatch, warned once already"
    assert (pb.ACTION_ABORT, "budget_exhausted") == (more[2].action, more[2].error_code), \
        "12 calls across the tree: the 13th, on the second replica, is past the budget"
