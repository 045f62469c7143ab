"""Fuzzing the real daemon: arbitrary events and raw garbage on the socket.

CI runs a fixed-seed, small budget. For a longer local run:
    LOOPWARDEN_FUZZ_EXAMPLES=2000 .venv/bin/pytest tests/e2e/test_fuzz.py
"""
from __future__ import annotations

import itertools
import os
import random
import socket
import time

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from loopwarden.v1 import loopwarden_pb2 as pb

from tests.support.grpc_helpers import SAME, Stream, call, channel, health_status, outcome

pytestmark = pytest.mark.daemon

EXAMPLES = int(os.environ.get("LOOPWARDEN_FUZZ_EXAMPLES", "40"))
_EXAMPLE_NUMBERS = itertools.count()

# Proto strings must be valid UTF-8, so no lone surrogates; everything else goes.
any_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
json_ish = st.one_of(
    any_text,
    st.sampled_from(["", "{}", "[]", "null", "NaN", "-Infinity", "1e999", "[" * 200 + "]" * 200, '{"a":',
                     '{"a": 1, "a": 2}', "\ufeff{}", '"\\ud800"', "0" * 5000, '{"x": ' + "9" * 400 + "}"]),
    st.recursive(st.one_of(st.integers(), st.floats(allow_nan=False), any_text, st.booleans(), st.none()),
                 lambda c: st.lists(c, max_size=4) | st.dictionaries(any_text, c, max_size=4),
                 max_leaves=20).map(lambda v: __import__("json").dumps(v)),
    st.binary(max_size=60).map(lambda b: b.decode("latin-1")),
)


@st.composite
def fuzz_events(draw):
    kind = draw(st.sampled_from(["tool_call", "tool_outcome", "compaction_retry", "user_turn", "run_end", None]))
    event = pb.Event(run_id=draw(st.one_of(any_text, st.sampled_from(["", " ", "fuzz-run"]))),
                     agent_id=draw(any_text), session_id=draw(any_text),
                     seq=draw(st.integers(min_value=0, max_value=2**64 - 1)))
    if kind == "tool_call":
        event.tool_call.CopyFrom(pb.ToolCall(tool_name=draw(any_text), tool_call_id=draw(any_text),
                                             params_json=draw(json_ish)))
    elif kind == "tool_outcome":
        body = pb.ToolOutcome(tool_name=draw(any_text), tool_call_id=draw(any_text), params_json=draw(json_ish))
        which = draw(st.sampled_from(["result", "error", "none"]))
        if which == "result":
            body.result_json = draw(json_ish)
        elif which == "error":
            body.error = draw(any_text)
        event.tool_outcome.CopyFrom(body)
    elif kind == "compaction_retry":
        event.compaction_retry.SetInParent()
    elif kind == "user_turn":
        event.user_turn.CopyFrom(pb.UserTurn(prompt_id=draw(any_text)))
    elif kind == "run_end":
        event.run_end.SetInParent()
    return event


def _valid_script(run_id: str) -> list[pb.Event]:
    events = []
    for _ in range(21):
        events += [call(run_id, "read", '{"path":"/x"}'), outcome(run_id, "read", '{"path":"/x"}', SAME)]
    return events


def _shape(verdict: pb.Verdict) -> tuple:
    return (verdict.action, verdict.detector, verdict.level, verdict.count, verdict.announce, verdict.message)


@seed(20261129)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(fuzz_events(), min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_arbitrary_events_never_hurt_valid_ones(daemon, noise, rng):
    """One verdict per event, every REJECT has a code, a valid run interleaved gets its solo verdicts, daemon SERVING."""
    # A fresh id per example: the daemon outlives examples, and Hypothesis replays random seeds.
    run_id = f"fuzz-valid-{next(_EXAMPLE_NUMBERS)}"
    solo_id = run_id + "-solo"
    script = _valid_script(run_id)
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        solo = [_shape(stream.one(e)) for e in _valid_script(solo_id)]
        mixed, pending, noise = [], list(script), list(noise)
        while pending or noise:
            batch = []
            for _ in range(rng.randint(1, 4)):
                source = pending if pending and (not noise or rng.random() < 0.6) else noise
                if source:
                    batch.append(source.pop(0))
            verdicts = stream.send(*batch)
            assert len(batch) == len(verdicts)
            for event, verdict in zip(batch, verdicts):
                assert event.seq == verdict.seq
                if verdict.action == pb.ACTION_REJECT:
                    assert verdict.error_code and verdict.message
                if event.run_id == run_id:
                    mixed.append(_shape(verdict))
    assert solo == mixed
    assert "SERVING" == health_status(daemon.grpc_target)


def _port(target: str) -> int:
    return int(target.rsplit(":", 1)[1])


@pytest.mark.parametrize("payload", [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n",  # truncated preface
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x12\x04\x00\x00\x00\x00",  # preface + truncated SETTINGS
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(random.Random(1).getrandbits(8) for _ in range(4096)),
    bytes(random.Random(2).getrandbits(8) for _ in range(65536)),
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 100,  # a TLS ClientHello to a plaintext port
], ids=["http1", "short-preface", "truncated-frame", "random-frames", "random-bytes", "tls-hello"])
def test_garbage_on_the_socket_is_survived(daemon, payload):
    """Raw bytes that are not HTTP/2 (or break off mid-frame) leave the daemon SERVING and answering."""
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", _port(daemon.grpc_target)), timeout=5) as sock:
            try:
                sock.sendall(payload)
                sock.settimeout(0.5)
                sock.recv(4096)
            except OSError:
                pass
    time.sleep(0.1)
    assert "SERVING" == health_status(daemon.grpc_target)
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        assert pb.ACTION_ALLOW == stream.one(call("after-garbage", "read")).action
