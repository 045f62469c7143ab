"""Request bytes -> protobuf messages, refusing what must not be parsed whole.

Limits are checked before work. A request's events are counted on its raw bytes, reading only
the tags and lengths of its top-level fields and stopping at one past the limit, so refusing a
request of a million tiny events costs what reading 1,001 tags costs, not the ~100 MiB and
seconds that parsing it into protobuf objects would. A request that does not decode (truncated,
invalid UTF-8 in a string field) is refused as a whole too. Either way the deserializer returns
a `Refusal` in place of the message, and the handler ends the RPC with the refusal's status:
gRPC itself would answer a deserializer exception with UNKNOWN and exception text.
"""
from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.protobuf.message import DecodeError
from loopwarden.v1 import loopwarden_pb2 as pb

# Fields of a request beyond the events: a future contract may add a few; many are an attack.
MAX_OTHER_FIELDS = 64


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request refused whole: its status, our message, and the metric reason."""

    code: grpc.StatusCode
    reason: str
    message: str


class _Truncated(Exception):
    pass


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    end = len(data)
    while True:
        if position >= end or shift > 63:
            raise _Truncated
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7


def count_events(data: bytes, field_number: int, limit: int) -> int:
    """How many top-level `field_number` (length-delimited) fields `data` holds, counting at
    most limit + 1. Raises _Truncated when the bytes are not a well-formed message."""
    count = others = 0
    position, end = 0, len(data)
    while position < end:
        tag, position = _varint(data, position)
        field, wire_type = tag >> 3, tag & 7
        if wire_type == 2:
            length, position = _varint(data, position)
            position += length
            if field == field_number:
                count += 1
                if count > limit:
                    return count
                continue
        elif wire_type == 0:
            _, position = _varint(data, position)
        elif wire_type == 1:
            position += 8
        elif wire_type == 5:
            position += 4
        else:
            raise _Truncated
        others += 1
        if others > MAX_OTHER_FIELDS:
            raise _Truncated
    if position != end:
        raise _Truncated
    return count


UNDECODABLE = "undecodable"
TOO_MANY_EVENTS = "too_many_events"


def _undecodable(what: str) -> Refusal:
    return Refusal(grpc.StatusCode.INVALID_ARGUMENT, UNDECODABLE,
                   f"the {what} could not be decoded as loopwarden.v1 protobuf (truncated, or a string field "
                   "that is not valid UTF-8); nothing in it was evaluated")


def evaluate_request_decoder(max_events: int):
    def decode(data: bytes) -> pb.EvaluateRequest | Refusal:
        try:
            count = count_events(data, 1, max_events)
        except _Truncated:
            return _undecodable("request")
        if count > max_events:
            return Refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, TOO_MANY_EVENTS,
                           f"too_many_events: a request may carry at most {max_events} events "
                           "(--max-events-per-request); none of this request's events was evaluated")
        try:
            return pb.EvaluateRequest.FromString(data)
        except DecodeError:
            return _undecodable("request")

    return decode


def message_decoder(message_type, what: str):
    def decode(data: bytes):
        try:
            return message_type.FromString(data)
        except DecodeError:
            return _undecodable(what)

    return decode
