"""The keys that name stored runs, and the little of their values the daemon must tell apart.

Values are the core's (core/src/stored.rs frames them; the daemon moves bytes and never looks
inside): a run's full record, b"LWR" 0x04 + a protobuf message (core/proto/loopwarden/state/v1/
state.proto); a delta, b"LWD" 0x02 + a message, what changed since the run's full record (only
the file store keeps them); a tenant's exemption table, b"LWX" 0x02 + a message. Values of the
JSON era (b"LWR" 0x01..0x03, b"LWD" 0x01, b"LWX" 0x01) are still read, by the core
(core/src/stored_json.rs); nothing writes them any more.

Key: b"{" + base64url(tenant) + b"." + base64url(run_id) + b"}" (base64url without padding, of
the UTF-8 bytes). '.' is not in the base64url alphabet, so no two (tenant, run_id) pairs share a
key; the braces are a Redis Cluster hash tag, so a run's key always lands on one slot whatever
prefix a deployment puts in front of it. A run of a run tree that is not its root (a child run)
is keyed under its root: b"{" + base64url(tenant) + b"." + base64url(root) + b"}." +
base64url(run_id), so the hash tag is the root's and one owner (one Redis slot) holds the whole
tree, while a root run's key stays exactly the plain key (stored runs keep their keys).

A delta is never a run by itself: the core writes one only while it is at most half its base's
size, and applies it only to the base it names (core/src/service/persist.rs).

A tenant's standing exemptions (ASK's "always" answers, core/src/service/exemptions.rs) are one
more value beside its runs, never mistaken for one:

    key:   b"{" + base64url(tenant) + b"}exemptions"   (ends after the brace: key_parts refuses it)
    value: the core's (stored.rs: encode_exemptions)
"""
from __future__ import annotations

import base64

# A run's full record as this daemon writes it (tests and tools tell values apart by it).
MAGIC = b"LWR\x04"


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


DELTA_MAGIC = b"LWD\x02"
# The JSON era's: still read (a state file written before the upgrade holds them).
_DELTA_MAGICS = (DELTA_MAGIC, b"LWD\x01")


def is_delta(value: bytes) -> bool:
    """A stored value that is a delta against a run's full record (not a run by itself)."""
    return value[:4] in _DELTA_MAGICS


EXEMPTIONS_MAGIC = b"LWX\x02"
_EXEMPTIONS_MAGICS = (EXEMPTIONS_MAGIC, b"LWX\x01")
_EXEMPTIONS_SUFFIX = b"exemptions"


def exemptions_key(tenant: str) -> bytes:
    return b"{" + _b64(tenant) + b"}" + _EXEMPTIONS_SUFFIX


def is_exemptions(value: bytes) -> bool:
    """A stored value that is a tenant's exemption table (not a run)."""
    return value[:4] in _EXEMPTIONS_MAGICS
