"""Contract hygiene: buf lint, buf breaking against the released baseline image, and every RPC
(and every event kind) of the service reachable from the Python, Node and Go clients."""
from __future__ import annotations

import re
import shutil

import pytest
from loopwarden import AsyncLoopwardenClient, LoopwardenClient
from loopwarden.v1 import loopwarden_pb2 as pb

from tests.support.polyglot import BASELINE_IMAGE, GO_CLIENT, NODE_CLIENT, PROTO, REPO, run, tool

SERVICE = pb.DESCRIPTOR.services_by_name["LoopDetectionService"]
EVENT_KINDS = [field.name for field in pb.Event.DESCRIPTOR.oneofs_by_name["kind"].fields]

# The wrapper method(s) through which each RPC is reached. A new RPC fails
# test_every_rpc_has_a_client_mapping until it is added here and to every client.
RPC_METHODS = {
    "Evaluate": {"python": ["evaluate"], "node": ["evaluate"], "go": ["Evaluate"]},
    "Check": {"python": ["check"], "node": ["check"], "go": ["Check"]},
    "InspectRun": {"python": ["inspect"], "node": ["inspect"], "go": ["Inspect"]},
    "ListExemptions": {"python": ["list_exemptions"], "node": ["listExemptions"], "go": ["ListExemptions"]},
    "RevokeExemption": {"python": ["revoke_exemption"], "node": ["revokeExemption"], "go": ["RevokeExemption"]},
}


def camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(word.title() for word in rest)


def pascal(snake: str) -> str:
    return "".join(word.title() for word in snake.split("_"))


def node_methods() -> set[str]:
    """Methods of `class LoopwardenClient` in the Node client's source."""
    source = (NODE_CLIENT / "src" / "client.js").read_text()
    body = source.split("export class LoopwardenClient", 1)[1].split("\n}\n", 1)[0]
    return set(re.findall(r"^  (?:async )?([A-Za-z_]\w*)\(", body, re.M))


def go_methods() -> set[str]:
    """Exported methods of *Client in the Go wrapper's source."""
    source = "\n".join(p.read_text() for p in (GO_CLIENT / "loopwarden").glob("*.go") if not p.name.endswith("_test.go"))
    return set(re.findall(r"^func \(c \*Client\) ([A-Z]\w*)\(", source, re.M))


class TestBuf:
    def test_lint_passes(self):
        """The contract passes `buf lint` (STANDARD, from buf.yaml)."""
        result = run([tool("buf"), "lint"], REPO)
        assert (0, "") == (result.returncode, result.output.strip())

    def test_no_breaking_change_against_the_baseline(self):
        """The contract has no FILE-level breaking change against the released baseline image."""
        result = run([tool("buf"), "breaking", "proto", "--against", str(BASELINE_IMAGE)], REPO)
        assert (0, "") == (result.returncode, result.output.strip())

    def test_a_renumbered_field_is_caught(self, tmp_path):
        """The breaking check bites: renumbering a released field in a copy of the contract fails it."""
        shutil.copy(REPO / "buf.yaml", tmp_path / "buf.yaml")
        shutil.copytree(PROTO / "loopwarden", tmp_path / "proto" / "loopwarden")
        proto = tmp_path / "proto" / "loopwarden" / "v1" / "loopwarden.proto"
        text = proto.read_text()
        assert "  uint64 seq = 4;" in text
        proto.write_text(text.replace("  uint64 seq = 4;", "  uint64 seq = 40;", 1))
        result = run([tool("buf"), "breaking", "proto", "--against", str(BASELINE_IMAGE)], tmp_path)
        assert result.returncode != 0
        assert 'Previously present field "4" with name "seq" on message "Event"' in result.output


class TestEveryRpcInEveryClient:
    """Like temporalio's client test: walk the service descriptor, fail on an RPC a client lacks."""

    def test_every_rpc_has_a_client_mapping(self):
        """Every RPC of LoopDetectionService is in RPC_METHODS (and nothing else is)."""
        assert sorted(RPC_METHODS) == sorted(method.name for method in SERVICE.methods)

    @pytest.mark.parametrize("client_class", [LoopwardenClient, AsyncLoopwardenClient], ids=lambda c: c.__name__)
    def test_python_clients(self, client_class):
        """The Python clients have a method for every RPC and a verb for every event kind."""
        wanted = [name for rpc in RPC_METHODS.values() for name in rpc["python"]] + EVENT_KINDS
        assert [] == [name for name in wanted if not callable(getattr(client_class, name, None))]

    def test_node_wrapper(self):
        """The Node LoopwardenClient has a method for every RPC and a verb for every event kind,
        and its source calls every RPC of the service."""
        methods = node_methods()
        wanted = [name for rpc in RPC_METHODS.values() for name in rpc["node"]] + [camel(k) for k in EVENT_KINDS]
        assert [] == [name for name in wanted if name not in methods]
        source = (NODE_CLIENT / "src" / "client.js").read_text()
        assert [] == [m.name for m in SERVICE.methods
                      if f".{m.name}(" not in source and f"'{m.name}'" not in source]

    def test_go_wrapper(self):
        """The Go Client has a method for every RPC and a verb for every event kind, and calls
        every RPC through the generated stub."""
        methods = go_methods()
        wanted = [name for rpc in RPC_METHODS.values() for name in rpc["go"]] + [pascal(k) for k in EVENT_KINDS]
        assert [] == [name for name in wanted if name not in methods]
        source = (GO_CLIENT / "loopwarden" / "client.go").read_text()
        assert [] == [m.name for m in SERVICE.methods if f"c.stub.{m.name}(" not in source]
