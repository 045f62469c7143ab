"""One run's state as bytes, and the key that names it: the format every state store holds.

Value (version 3):

    b"LWR" 0x03 | zlib stream (RFC 1950) of UTF-8 JSON

The JSON object is the run record the core writes and reads (core/src/state.rs); each run of
snapshot format 4 (snapshot.py) is the same record with an idle time instead of the wall-clock
time of the run's latest event:

    {"tenant": str, "run_id": str, "agent_id": str, "session_id": str,
     "last_seen": float (Unix seconds), "events_evaluated": int,
     "state": {history columns (hex digests), announced, guard, abort, blocks, seen_triples,
               no_new_streak}  -- the detector state,
     "retries": null | {seqs, digests (hex), next_slot, decisions}  -- the retry window}

A reader refuses a value whose first four bytes are not a version it knows. Version 1 held the
same record with BLAKE2b retry digests and run-wide triple keys; version 2 took both as the first
8 bytes of a sha256; version 3 takes the retry digests as XXH3-64 (core/src/service/retries.rs
says why; the run-wide triple keys stay sha256). An older value is still read, without what its
old digests name: its retry window is dropped (a resend of an event from before the upgrade is
evaluated again), and a version-1 value's run-wide triples are forgotten (the breaker can only
trip later, never earlier). The core writes and reads the JSON; the framing is
`frame`/`unframe` here. A flush frames with the core instead (`loopwarden_core.frame_records`,
core/src/service/persist.rs: the same magic and a zlib stream at level 1 from miniz_oxide, made
with the GIL let go so it runs beside the event loop); its bytes may differ from zlib's, the
stream they inflate to does not, and `unframe` reads both. tests/core/test_state_encoding.py holds
the core to the reference engine's record (tests/reference/codec.py).

Key: b"{" + base64url(tenant) + b"." + base64url(run_id) + b"}" (base64url without padding, of
the UTF-8 bytes). '.' is not in the base64url alphabet, so no two (tenant, run_id) pairs share a
key; the braces are a Redis Cluster hash tag, so a run's key always lands on one slot whatever
prefix a deployment puts in front of it. A run of a run tree that is not its root (a child run)
is keyed under its root: b"{" + base64url(tenant) + b"." + base64url(root) + b"}." +
base64url(run_id), so the hash tag is the root's and one owner (one Redis slot) holds the whole
tree, while a root run's key stays exactly the plain key (stored runs keep their keys).

A flush to a store that keeps deltas (the file store) may write a run as a *delta* instead:

    b"LWD" 0x01 | UTF-8 JSON, not compressed

the run record as above with a "base" (the 8-byte id, hex, of the full record it applies to:
XXH3-64 of that record's JSON), a history holding only the records after the base's ones it
keeps ("drop", "keep": history = base[drop:drop + keep] + these) and a retry window holding only
the slots written since ("slots", "len"); every other field whole. The core writes one only while
it is at most half its base's size, and applies it only to the base it names
(core/src/service/persist.rs, core/src/state.rs). A delta is never a run by itself: `unframe`
refuses one.

A tenant's standing exemptions (ASK's "always" answers, core/src/service/exemptions.rs) are one
more value beside its runs, never mistaken for one:

    key:   b"{" + base64url(tenant) + b"}exemptions"   (ends after the brace: key_parts refuses it)
    value: b"LWX" 0x01 | zlib stream of the JSON the core writes (state.rs: encode_exemptions)
"""
from __future__ import annotations

import base64
import zlib

import orjson


MAGIC = b"LWR\x03"
MAGIC_V2 = b"LWR\x02"
MAGIC_V1 = b"LWR\x01"
# zlib level 1: a run re-encoded every flush interval is worth a fast codec more than a small one.
LEVEL = 1


class EncodingError(ValueError):
    """Bytes that are not a run this daemon can read."""


def run_key(tenant: str, run_id: str) -> bytes:
    return b"{" + _b64(tenant) + b"." + _b64(run_id) + b"}"


def tree_key(tenant: str, root: str, run_id: str) -> bytes:
    """The key of a run of a run tree: the plain key for the root, else under the root's tag."""
    if not root or root == run_id:
        return run_key(tenant, run_id)
    return run_key(tenant, root) + b"." + _b64(run_id)


def tree_key_parts(key: bytes) -> tuple[str, str, str]:
    """The (tenant, root, run_id) a key names (root == run_id for a root's or a plain run's key)."""
    if not key.startswith(b"{") or key.count(b"}") != 1:
        raise EncodingError(f"not a run key: {key[:80]!r}")
    tag, _, tail = key[1:].partition(b"}")
    if tag.count(b".") != 1 or (tail and (not tail.startswith(b".") or tail.count(b".") != 1)):
        raise EncodingError(f"not a run key: {key[:80]!r}")
    tenant, root = tag.split(b".")
    root_id = _unb64(root)
    return _unb64(tenant), root_id, _unb64(tail[1:]) if tail else root_id


def key_parts(key: bytes) -> tuple[str, str]:
    """The (tenant, run_id) a key names (a root's, a plain run's or a child run's key)."""
    tenant, _root, run_id = tree_key_parts(key)
    return tenant, run_id


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64encode(text.encode("utf-8", "surrogatepass")).rstrip(b"=")


def _unb64(data: bytes) -> str:
    return base64.urlsafe_b64decode(data + b"=" * (-len(data) % 4)).decode("utf-8", "surrogatepass")


DELTA_MAGIC = b"LWD\x01"


def is_delta(value: bytes) -> bool:
    """A stored value that is a delta against a run's full record (not a run by itself)."""
    return value[:4] == DELTA_MAGIC


EXEMPTIONS_MAGIC = b"LWX\x01"
_EXEMPTIONS_SUFFIX = b"exemptions"


def exemptions_key(tenant: str) -> bytes:
    return b"{" + _b64(tenant) + b"}" + _EXEMPTIONS_SUFFIX


def is_exemptions(value: bytes) -> bool:
    """A stored value that is a tenant's exemption table (not a run)."""
    return value[:4] == EXEMPTIONS_MAGIC


def frame_exemptions(record_json: bytes) -> bytes:
    return EXEMPTIONS_MAGIC + zlib.compress(record_json, LEVEL)


def unframe_exemptions(data: bytes) -> bytes:
    """An exemption table's JSON text; EncodingError for anything else."""
    if not is_exemptions(data):
        raise EncodingError(f"not an exemption table: {data[:4]!r}")
    try:
        return zlib.decompress(data[4:])
    except zlib.error as exc:
        raise EncodingError(f"malformed exemption table: {exc!r}") from None


def frame(record_json: bytes) -> bytes:
    """A run record's JSON text as a stored value (the compiled core writes the JSON itself)."""
    return MAGIC + zlib.compress(record_json, LEVEL)


def unframe(data: bytes) -> bytes:
    """A stored value's record JSON text (version 3; an older record is brought to version 3);
    EncodingError for anything else."""
    version = data[:4]
    if version not in (MAGIC, MAGIC_V2, MAGIC_V1):
        raise EncodingError(f"unknown run encoding {version!r}")
    try:
        text = zlib.decompress(data[4:])
    except zlib.error as exc:
        raise EncodingError(f"malformed run: {exc!r}") from None
    return text if version == MAGIC else _from_older(text, version)


def _from_older(text: bytes, version: bytes) -> bytes:
    """Drop what an older version's digests name (see the module docstring)."""
    try:
        record = orjson.loads(text)
        record["retries"] = None
        state = record["state"]
        if version == MAGIC_V1 and state.get("seen_triples") is not None:
            state["seen_triples"], state["no_new_streak"] = [], 0
    except (orjson.JSONDecodeError, TypeError, KeyError, AttributeError) as exc:
        raise EncodingError(f"malformed run: {exc!r}") from None
    return orjson.dumps(record)
