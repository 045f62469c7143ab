"""Stored values read in tests: the core's protobuf messages (core/proto/loopwarden/state/v1/
state.proto) decoded in Python, so a test can look inside what a store holds. The daemon never
does: it moves the bytes. The .proto is compiled once per test process (grpc_tools' protoc)."""
from __future__ import annotations

import functools
import importlib.util
import sys
import tempfile
from pathlib import Path


PROTO_ROOT = Path(__file__).resolve().parents[2] / "core" / "proto"
PROTO = "loopwarden/state/v1/state.proto"
HEADER = 8  # magic (4) + checksum (4): core/src/stored.rs


@functools.cache
def state_pb2():
    from grpc_tools import protoc

    out = Path(tempfile.mkdtemp(prefix="loopwarden-state-pb-"))
    assert protoc.main(["protoc", f"-I{PROTO_ROOT}", f"--python_out={out}", PROTO]) == 0, "protoc failed"
    spec = importlib.util.spec_from_file_location("loopwarden_state_pb2", out / PROTO.replace(".proto", "_pb2.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["loopwarden_state_pb2"] = module
    spec.loader.exec_module(module)
    return module


def run_message(value: bytes):
    """A run's stored value (b"LWR\\x04") as its message."""
    assert value[:4] == b"LWR\x04", value[:4]
    return state_pb2().Run.FromString(value[HEADER:])


def delta_message(value: bytes):
    assert value[:4] == b"LWD\x02", value[:4]
    return state_pb2().Delta.FromString(value[HEADER:])


def history_seqs(value: bytes) -> list[int]:
    return [r.seq for r in run_message(value).state.history]


def frame_run(message) -> bytes:
    """A Run message as the core frames it (for tests that build or alter stored runs)."""
    import xxhash

    body = message.SerializeToString()
    return b"LWR\x04" + (xxhash.xxh3_64_intdigest(body) & 0xFFFFFFFF).to_bytes(4, "little") + body


def frame_delta(message) -> bytes:
    import xxhash

    body = message.SerializeToString()
    return b"LWD\x02" + (xxhash.xxh3_64_intdigest(body) & 0xFFFFFFFF).to_bytes(4, "little") + body
