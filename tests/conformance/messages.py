"""The conformance data's `usage` and `approval` bodies as proto messages, for the Python runners
(the core's and the daemon's); the Node and Go runners spell the same mapping in their own shapes."""
from __future__ import annotations

from loopwarden.v1 import loopwarden_pb2 as pb


def usage_message(body: dict) -> pb.Usage:
    """The conformance data's `usage` body as the proto message."""
    return pb.Usage(input_tokens=body.get("input_tokens", 0), output_tokens=body.get("output_tokens", 0),
                    cost_usd=body.get("cost_usd", 0.0), model=body.get("model", ""))


# Approval.scope by the conformance data's spelling.
APPROVAL_SCOPES = {"once": pb.APPROVAL_SCOPE_ONCE, "always": pb.APPROVAL_SCOPE_ALWAYS}


def approval_message(body: dict) -> pb.Approval:
    """The conformance data's `approval` body as the proto message."""
    return pb.Approval(tool_call_id=body.get("tool_call_id", ""), decision_id=body.get("decision_id", ""),
                       approved=body.get("approved", False), scope=APPROVAL_SCOPES[body.get("scope", "once")],
                       ttl_seconds=body.get("ttl_seconds", 0))
