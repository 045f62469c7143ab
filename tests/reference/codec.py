"""The reference engine's runs as the JSON-era stored record (version 3: b"LWR\x03" + zlib).

The daemon stored this JSON until its stored format became protobuf (core/src/stored.rs); the
core still reads it (core/src/stored_json.rs). This writes and reads it from the reference
engine's RunEntry objects, so tests write snapshots and stored values the way an older daemon
did, and hold the core's JSON-era reader to the oracle's record.
"""
from __future__ import annotations

import json
import os
import sys
import zlib
from array import array
from dataclasses import asdict

import orjson
from loopwarden_server.snapshot import FORMAT, VERSION
from loopwarden_server.statestore.encoding import EncodingError

from .engine import Action, Detector, ErrorCode, Level, RunState, Verdict
from .engine.compaction_guard import GuardWindow
from .engine.state import DIGEST, History
from .retries import RETRY_WINDOW, RetryWindow
from .store import RunEntry, RunStore


MAGIC_V3 = b"LWR\x03"


def frame(record_json: bytes) -> bytes:
    """A record's JSON as the JSON-era daemon stored it (zlib level 1)."""
    return MAGIC_V3 + zlib.compress(record_json, 1)


def unframe(data: bytes) -> bytes:
    if data[:4] != MAGIC_V3:
        raise EncodingError(f"not a JSON-era run: {data[:4]!r}")
    try:
        return zlib.decompress(data[4:])
    except zlib.error as exc:
        raise EncodingError(f"malformed run: {exc!r}") from None


def encode_state(state: RunState) -> dict:
    history, guard = state.history, state.guard
    triple = guard.first_triple if guard is not None else None
    return {
        "history": {"capacity": history.capacity, "args": history.args.hex(), "results": history.results.hex(),
                    "status": history.status.hex(), "tools": history.tools, "call_ids": history.call_ids,
                    "seqs": list(history.seqs),
                    # null once no record names a missing tool (as the core writes it)
                    "unknown": None if history.unknown is None or all(u is None for u in history.unknown)
                    else history.unknown,
                    # optional, as the core writes it: only when a record's spelling differs
                    **({} if history.spellings is None or all(s is None for s in history.spellings)
                       else {"spellings": history.spellings})},
        "announced": state.announced,
        "guard": None if guard is None else {
            "window_size": guard.window_size, "observed": guard.observed, "all_identical": guard.all_identical,
            "first_triple": None if triple is None else [triple[0], triple[1].hex(), triple[2], triple[3].hex()],
            "seqs": guard.seqs},
        "abort": None if state.abort is None else encode_verdict(state.abort),
        "blocks": state.blocks,
        "seen_triples": None if state.seen_triples is None else sorted(state.seen_triples),
        "no_new_streak": state.no_new_streak,
    }


def encode_verdict(verdict: Verdict) -> dict:
    return {key: (value.value if hasattr(value, "value") else value) for key, value in asdict(verdict).items()}


# The codes a stored verdict may carry (the core's readers, core/src/stored.rs and stored_json.rs, refuse any other alike).
_STORED_ERROR_CODES = frozenset({"", "run_id_mismatch", *(code.value for code in ErrorCode)})


def decode_verdict(data: dict) -> Verdict:
    if data.get("error_code") not in _STORED_ERROR_CODES:
        raise ValueError(f"error_code {data.get('error_code')!r} is not an error code")
    shadow = data.get("shadow_action")
    return Verdict(**{**data, "action": Action(data["action"]), "detector": Detector(data["detector"]),
                      "level": Level(data["level"]), "evidence_seqs": tuple(data["evidence_seqs"]),
                      "evidence_call_ids": tuple(data["evidence_call_ids"]),
                      "shadow_action": None if shadow is None else Action(shadow)})


def encode_retries(window: RetryWindow | None) -> dict | None:
    if window is None:
        return None
    return {"seqs": list(window.seqs), "digests": window.digests.hex(), "next_slot": window.next_slot,
            "decisions": {str(slot): {"seq": d.seq, "decision_id": d.decision_id, "verdict": encode_verdict(d.verdict)}
                          for slot, d in window.decisions.items()}}


def decode_retries(data: dict | None, run_id: str) -> RetryWindow | None:
    if data is None:
        return None
    from .service import Decision  # the service imports this module, not the other way round

    window = RetryWindow()
    window.seqs = array("Q", (int(seq) for seq in data["seqs"]))
    window.digests = bytearray.fromhex(data["digests"])
    window.next_slot = int(data["next_slot"])
    if not 0 <= window.next_slot < RETRY_WINDOW:
        raise ValueError("retries.next_slot is out of range")
    window.decisions = {int(slot): Decision(int(d["seq"]), run_id, decode_verdict(d["verdict"]), str(d["decision_id"]))
                        for slot, d in data["decisions"].items()}
    if len(window.digests) != len(window.seqs) * 8 or len(window.seqs) > RETRY_WINDOW:
        raise ValueError("retry window columns disagree in length")
    return window


def decode_state(data: dict) -> RunState:
    columns = data["history"]
    history = History(int(columns["capacity"]))
    history.args = bytearray.fromhex(columns["args"])
    history.results = bytearray.fromhex(columns["results"])
    history.status = bytearray.fromhex(columns["status"])
    history.tools = [sys.intern(str(tool)) for tool in columns["tools"]]
    history.call_ids = [str(call_id) for call_id in columns["call_ids"]]
    history.seqs = array("Q", (int(seq) for seq in columns["seqs"]))
    history.unknown = None if columns["unknown"] is None else [None if u is None else str(u) for u in columns["unknown"]]
    spellings = columns.get("spellings")
    history.spellings = None if spellings is None else [None if s is None else str(s) for s in spellings]
    size = len(history.tools)
    if history.spellings is not None and len(history.spellings) != size:
        raise ValueError("history columns disagree in length")
    if not (len(history.args) == len(history.results) == size * DIGEST and len(history.status) == len(history.call_ids)
            == len(history.seqs) == size and (history.unknown is None or len(history.unknown) == size)):
        raise ValueError("history columns disagree in length")
    state = RunState(history)
    state.announced = None if data["announced"] is None else {str(k): int(v) for k, v in data["announced"].items()}
    guard = data["guard"]
    if guard is not None:
        triple = guard["first_triple"]
        if triple is not None:
            triple = (str(triple[0]), bytes.fromhex(triple[1]), int(triple[2]), bytes.fromhex(triple[3]))
        state.guard = GuardWindow(int(guard["window_size"]), int(guard["observed"]), triple, bool(guard["all_identical"]),
                                  [int(seq) for seq in guard["seqs"]])
    abort = data["abort"]
    if abort is not None:
        state.abort = decode_verdict(abort)
    state.blocks = int(data["blocks"])
    seen = data["seen_triples"]
    state.seen_triples = None if seen is None else {int(key) for key in seen}
    state.no_new_streak = int(data["no_new_streak"])
    return state


def write_snapshot(path: str, store: RunStore, wall_now: float) -> int:
    """Write every held run as one format-4 file (the converter's counterpart); returns how many. Idle time is stored, not monotonic clock values."""
    mono_now = store.clock()
    runs = [{
        "tenant": entry.tenant, "run_id": entry.run_id, "agent_id": entry.agent_id, "session_id": entry.session_id,
        "idle_seconds": max(0.0, mono_now - entry.last_seen), "events_evaluated": entry.events_evaluated,
        "state": encode_state(entry.state), "retries": encode_retries(entry.retries),
    } for entry in sorted(store.entries(), key=lambda e: e.touch)]
    payload = zlib.compress(json.dumps({"format": FORMAT, "version": VERSION, "written_at": wall_now,
                                        "runs": runs}, separators=(",", ":")).encode())
    directory = os.path.dirname(os.path.abspath(path))
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as handle:
        handle.write(payload)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return len(runs)


def encode_run(entry: RunEntry, wall_now: float, mono_now: float) -> bytes:
    """The run as of now; `mono_now` is the store's clock, to turn last_seen into wall time."""
    record = {
        "tenant": entry.tenant, "run_id": entry.run_id, "agent_id": entry.agent_id,
        "session_id": entry.session_id, "last_seen": wall_now - max(0.0, mono_now - entry.last_seen),
        "events_evaluated": entry.events_evaluated,
        "state": encode_state(entry.state), "retries": encode_retries(entry.retries),
    }
    return frame(orjson.dumps(record))


def decode_run(data: bytes, wall_now: float) -> tuple[RunEntry, float]:
    """(entry, idle seconds). EncodingError for anything that is not a version-1 run."""
    text = unframe(data)
    try:
        record = orjson.loads(text)
        tenant, run_id, agent_id, session_id = (_text(record, key) for key in ("tenant", "run_id", "agent_id", "session_id"))
        entry = RunEntry(tenant, run_id, decode_state(record["state"]), agent_id,
                         session_id, events_evaluated=int(record["events_evaluated"]),
                         retries=decode_retries(record["retries"], run_id))
        idle = max(0.0, wall_now - float(record["last_seen"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise EncodingError(f"malformed run: {exc!r}") from None
    return entry, idle


def _text(record: dict, key: str) -> str:
    value = record[key]
    if type(value) is not str:
        raise ValueError(f"run.{key} is not a string")
    return value
