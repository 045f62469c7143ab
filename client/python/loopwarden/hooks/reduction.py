"""Hook payloads larger than the daemon's event limits, reduced to a value the engine can judge.

A tool's input or output can be far larger than `--max-params-bytes` / `--max-result-bytes` (their
defaults are `daemon_limits.py`'s): a 2 MiB `tool_response` would make the event a `result_too_large` rejection, and the
loop it belongs to would never be caught. Instead, a JSON text over its limit is replaced by a
small JSON value that stands for it:

    {"loopwarden_reduced": {"sha256": "<hex of the whole UTF-8 text>", "bytes": <its length>,
                            "prefix": "<its first PREFIX_CHARS characters>"}}

Identical texts give identical values (so identical calls and outcomes still hash the same), and
different texts differ in their sha256 (so a changing output is still progress). The prefix keeps
what similarity detectors look at first. Both the daemon's endpoint and `loopwarden hook` reduce
(they share `protocol.parse`), so the event that goes on the wire is always within the limits.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

REDUCED_KEY = "loopwarden_reduced"
PREFIX_CHARS = 1024


@dataclass(frozen=True, slots=True)
class Reduction:
    """One reduced field: which, how large it was, and the sha256 that now stands for it."""

    field: str  # "tool_input", "tool_response" or "error"
    size_bytes: int
    sha256: str


def _stand_in(digest: str, size: int, prefix: str) -> str:
    return json.dumps({REDUCED_KEY: {"sha256": digest, "bytes": size, "prefix": prefix}})


def bounded_json(field: str, text: str, limit: int) -> tuple[str, Reduction | None]:
    """`text` (a JSON text) when it fits in `limit` UTF-8 bytes, else its stand-in value."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text, None
    digest = hashlib.sha256(data).hexdigest()
    reduced = _stand_in(digest, len(data), text[:PREFIX_CHARS])
    if len(reduced.encode()) > limit:  # a limit set below the prefix's size: the hash alone
        reduced = _stand_in(digest, len(data), "")
    return reduced, Reduction(field, len(data), digest)


def bounded_text(field: str, text: str, limit: int) -> tuple[str, Reduction | None]:
    """A plain string (a failed call's `error`) when it fits, else its prefix, length and sha256."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text, None
    digest = hashlib.sha256(data).hexdigest()
    note = f" [loopwarden: reduced from {len(data)} bytes, sha256 {digest}]"
    prefix = text[:PREFIX_CHARS] if len((text[:PREFIX_CHARS] + note).encode()) <= limit else ""
    return prefix + note, Reduction(field, len(data), digest)
