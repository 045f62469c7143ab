"""Refusals of a whole request, and the InspectRun request decoder.

Evaluate and Check requests are decoded in the core, which counts a request's events on its raw
bytes before parsing it (so refusing a request of a million tiny events costs what reading 1,001
tags costs) and refuses an undecodable one whole; the transport turns the core's refusal reason
into a `Refusal` here. InspectRun is decoded by protobuf with our deserializer, which returns a
`Refusal` in place of the message: gRPC itself would answer a deserializer exception with
UNKNOWN and exception text.
"""
from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.protobuf.message import DecodeError

UNDECODABLE = "undecodable"
TOO_MANY_EVENTS = "too_many_events"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request refused whole: its status, our message, and the metric reason."""

    code: grpc.StatusCode
    reason: str
    message: str


def undecodable(what: str) -> Refusal:
    return Refusal(grpc.StatusCode.INVALID_ARGUMENT, UNDECODABLE,
                   f"the {what} could not be decoded as loopwarden.v1 protobuf (truncated, or a string field "
                   "that is not valid UTF-8); nothing in it was evaluated")


def message_decoder(message_type, what: str):
    def decode(data: bytes):
        try:
            return message_type.FromString(data)
        except DecodeError:
            return undecodable(what)

    return decode
