"""Hook event records as the core's Evaluate request, and its verdicts back as the client's type.

The hook endpoints' events carry what the core's per-field entry (`CoreService.decide`) does not
take (a sub-agent's parent_run_id, accepts_ask, an approval, ToolOutcome.duration_ms) and go on a
routed request (the session's run, the run tree's root): so they travel as the contract spells
them, converted by the same functions as the command form's (`loopwarden hook`) gRPC requests.
The protobuf round trip costs microseconds beside the HTTP request that carries the hook.
"""
from __future__ import annotations

from collections.abc import Sequence

from loopwarden._wire import event_from_record, verdict_from_message
from loopwarden.eventformat import EventRecord
from loopwarden.types import Verdict
from loopwarden.v1 import loopwarden_pb2 as pb


def evaluate_request(records: Sequence[EventRecord]) -> bytes:
    """One EvaluateRequest of `records`, in order (an approval ahead of the outcome it settles)."""
    return pb.EvaluateRequest(events=[event_from_record(record) for record in records]).SerializeToString()


def verdicts(response: bytes) -> list[Verdict]:
    """The EvaluateResponse's verdicts, one per event, in order."""
    return [verdict_from_message(verdict) for verdict in pb.EvaluateResponse.FromString(response).verdicts]
