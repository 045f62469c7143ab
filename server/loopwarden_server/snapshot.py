"""The whole-file snapshot that `--snapshot` wrote before the state store, read once to convert it.

The file is zlib-compressed JSON with a format name and version. Each run in it is the state
store's run record (statestore/encoding.py) with an idle time in place of the wall-clock time of
its latest event, so converting a run is re-dating it: the core takes the record in as it takes
any stored run, and refuses a malformed one naming the field. JSON, not pickle: a snapshot file
must never be able to run code.
"""
from __future__ import annotations

import json
import zlib

import orjson

FORMAT = "loopwarden-run-snapshot"
VERSION = 4  # 2: columnar history; 3: evidence and run-wide breaker state; 4: tenants, retry windows
READABLE_VERSIONS = (3, 4)  # a version-3 file restores with every run in the "" tenant


class SnapshotError(ValueError):
    """The file is not a snapshot this daemon can restore."""


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


def snapshot_records(data: dict, wall_now: float, idle_ttl_seconds: float) -> tuple[list[tuple[str, str, bytes]], int]:
    """The snapshot's runs, oldest first, as (tenant, run_id, record JSON), skipping those idle
    past the TTL; and how many were skipped."""
    offline = max(0.0, wall_now - float(data["written_at"]))
    records: list[tuple[str, str, bytes]] = []
    expired = 0
    try:
        for run in data["runs"]:
            idle = float(run["idle_seconds"]) + offline
            if idle > idle_ttl_seconds:
                expired += 1
                continue
            tenant, run_id = str(run.get("tenant", "")), str(run["run_id"])
            record = {"tenant": tenant, "run_id": run_id, "agent_id": str(run["agent_id"]),
                      "session_id": str(run["session_id"]), "last_seen": wall_now - idle,
                      "events_evaluated": int(run["events_evaluated"]), "state": run["state"],
                      # retry digests of the daemon that wrote the file, not today's (encoding.py)
                      "retries": None}
            records.append((tenant, run_id, orjson.dumps(record)))
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotError(f"snapshot content is malformed: {exc!r}") from None
    return records, expired
