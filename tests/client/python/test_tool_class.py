"""A tool call's class (ToolCall.tool_class) from the Python client and the event format."""
from __future__ import annotations

import pytest
from loopwarden import _wire
from loopwarden.eventformat import EventFormatError, parse_event
from loopwarden.v1 import loopwarden_pb2 as pb


def test_the_client_sends_a_class_by_its_config_spelling():
    event = _wire.tool_call_event("r1", "send_email", {"to": "a"}, tool_class="mutating")
    assert event.tool_call.tool_class == pb.TOOL_CLASS_MUTATING
    assert _wire.tool_call_event("r1", "read").tool_call.tool_class == pb.TOOL_CLASS_UNSPECIFIED


def test_an_unknown_class_is_refused_by_name():
    with pytest.raises(ValueError, match="tool_class must be one of"):
        _wire.tool_call_event("r1", "read", tool_class="destructive")


def test_the_event_format_reads_a_calls_class():
    record = parse_event({"kind": "tool_call", "run_id": "r1", "tool_name": "read", "tool_class": "readOnly"})
    assert record.tool_class == "readOnly"
    assert _wire.event_from_record(record).tool_call.tool_class == pb.TOOL_CLASS_READ_ONLY
    with pytest.raises(EventFormatError, match="tool_class must be one of"):
        parse_event({"kind": "tool_call", "run_id": "r1", "tool_name": "read", "tool_class": "write"})
