"""Snapshot format 4: the per-run JSON encoding the state stores reuse (statestore.encoding), and
the whole-file snapshot that `--snapshot` wrote before the state store, read once to convert it.

The file is zlib-compressed JSON with a format name and version; it is written to a temporary
file in the same directory, fsynced and renamed into place, so a crash mid-write never leaves a
half snapshot behind. JSON, not pickle: a snapshot file must never be able to run code.
"""
from __future__ import annotations

import json
import os
import sys
import zlib
from array import array
from dataclasses import asdict

from .engine import Action, Detector, ErrorCode, Level, RunState, Verdict
from .engine.compaction_guard import GuardWindow
from .engine.state import DIGEST, History
from .retries import RETRY_WINDOW, RetryWindow
from .store import RunEntry, RunStore

FORMAT = "loopwarden-run-snapshot"
VERSION = 4  # 2: columnar history; 3: evidence and run-wide breaker state; 4: tenants, retry windows
READABLE_VERSIONS = (3, 4)  # a version-3 file restores with every run in the "" tenant



class SnapshotError(ValueError):
    """The file is not a snapshot this daemon can restore."""


def _encode_state(state: RunState) -> dict:
    history, guard = state.history, state.guard
    triple = guard.first_triple if guard is not None else None
    return {
        "history": {"capacity": history.capacity, "args": history.args.hex(), "results": history.results.hex(),
                    "status": history.status.hex(), "tools": history.tools, "call_ids": history.call_ids,
                    "seqs": list(history.seqs),
                    # null once no record names a missing tool (as the core writes it)
                    "unknown": None if history.unknown is None or all(u is None for u in history.unknown)
                    else history.unknown},
        "announced": state.announced,
        "guard": None if guard is None else {
            "window_size": guard.window_size, "observed": guard.observed, "all_identical": guard.all_identical,
            "first_triple": None if triple is None else [triple[0], triple[1].hex(), triple[2], triple[3].hex()],
            "seqs": guard.seqs},
        "abort": None if state.abort is None else _encode_verdict(state.abort),
        "blocks": state.blocks,
        "seen_triples": None if state.seen_triples is None else sorted(state.seen_triples),
        "no_new_streak": state.no_new_streak,
    }


def _encode_verdict(verdict: Verdict) -> dict:
    return {key: (value.value if hasattr(value, "value") else value) for key, value in asdict(verdict).items()}


# The codes a stored verdict may carry (core/src/state.rs refuses any other alike).
_STORED_ERROR_CODES = frozenset({"", "run_id_mismatch", *(code.value for code in ErrorCode)})


def _decode_verdict(data: dict) -> Verdict:
    if data.get("error_code") not in _STORED_ERROR_CODES:
        raise ValueError(f"error_code {data.get('error_code')!r} is not an error code")
    shadow = data.get("shadow_action")
    return Verdict(**{**data, "action": Action(data["action"]), "detector": Detector(data["detector"]),
                      "level": Level(data["level"]), "evidence_seqs": tuple(data["evidence_seqs"]),
                      "evidence_call_ids": tuple(data["evidence_call_ids"]),
                      "shadow_action": None if shadow is None else Action(shadow)})


def _encode_retries(window: RetryWindow | None) -> dict | None:
    if window is None:
        return None
    return {"seqs": list(window.seqs), "digests": window.digests.hex(), "next_slot": window.next_slot,
            "decisions": {str(slot): {"seq": d.seq, "decision_id": d.decision_id, "verdict": _encode_verdict(d.verdict)}
                          for slot, d in window.decisions.items()}}


def _decode_retries(data: dict | None, run_id: str) -> RetryWindow | None:
    if data is None:
        return None
    from .service import Decision  # the service imports this module's callers, not this module

    window = RetryWindow()
    window.seqs = array("Q", (int(seq) for seq in data["seqs"]))
    window.digests = bytearray.fromhex(data["digests"])
    window.next_slot = int(data["next_slot"])
    if not 0 <= window.next_slot < RETRY_WINDOW:
        raise ValueError("retries.next_slot is out of range")
    window.decisions = {int(slot): Decision(int(d["seq"]), run_id, _decode_verdict(d["verdict"]), str(d["decision_id"]))
                        for slot, d in data["decisions"].items()}
    if len(window.digests) != len(window.seqs) * 8 or len(window.seqs) > RETRY_WINDOW:
        raise ValueError("retry window columns disagree in length")
    return window


def _decode_state(data: dict) -> RunState:
    columns = data["history"]
    history = History(int(columns["capacity"]))
    history.args = bytearray.fromhex(columns["args"])
    history.results = bytearray.fromhex(columns["results"])
    history.status = bytearray.fromhex(columns["status"])
    history.tools = [sys.intern(str(tool)) for tool in columns["tools"]]
    history.call_ids = [str(call_id) for call_id in columns["call_ids"]]
    history.seqs = array("Q", (int(seq) for seq in columns["seqs"]))
    history.unknown = None if columns["unknown"] is None else [None if u is None else str(u) for u in columns["unknown"]]
    size = len(history.tools)
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
        state.abort = _decode_verdict(abort)
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
        "state": _encode_state(entry.state), "retries": _encode_retries(entry.retries),
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


def read_snapshot(path: str) -> dict:
    with open(path, "rb") as handle:
        raw = handle.read()
    try:
        data = json.loads(zlib.decompress(raw))
    except (zlib.error, ValueError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"not a loopwarden snapshot: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SnapshotError("not a loopwarden snapshot: wrong format marker")
    if data.get("version") not in READABLE_VERSIONS:
        raise SnapshotError(f"snapshot version {data.get('version')!r} is not one of {READABLE_VERSIONS}")
    return data


def restore_snapshot(data: dict, store: RunStore, wall_now: float) -> tuple[int, int]:
    """Load runs into the store, oldest first, skipping those idle past the TTL. (restored, expired)"""
    offline = max(0.0, wall_now - float(data["written_at"]))
    restored = expired = 0
    try:
        for run in data["runs"]:
            idle = float(run["idle_seconds"]) + offline
            if idle > store.idle_ttl_seconds:
                expired += 1
                continue
            run_id = str(run["run_id"])
            entry = RunEntry(str(run.get("tenant", "")), run_id, _decode_state(run["state"]), str(run["agent_id"]),
                             str(run["session_id"]), events_evaluated=int(run["events_evaluated"]),
                             retries=_decode_retries(run.get("retries"), run_id))
            store.restore(entry, idle)
            restored += 1
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotError(f"snapshot content is malformed: {exc!r}") from None
    return restored, expired
