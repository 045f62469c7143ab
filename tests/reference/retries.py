"""Idempotent retries: a resent event gets the verdict it got the first time and changes nothing.

Runners resend after a reconnect (at-least-once delivery). An event is a retry when its seq
(> 0) AND its content (kind, tool, params, the tool call id when set, result or error) equal
one of the run's recently evaluated events. A reused seq with other content is a new event, so a
client that restarts its numbering, or numbers every call alike but names each afresh, is never
answered with an old verdict; seq 0 means "no dedup".

Design. Each run keeps a ring of its last RETRY_WINDOW evaluated events: their seqs (machine
integers) and 8-byte content digests, in two flat arrays (~1 KB per run, allocated on the
run's first event with a seq). A plain ALLOW, by far the most common answer, is not stored: it
is rebuilt on a retry. Anything else (WARN, BLOCK, ABORT, an ALLOW with a message) is kept by
its slot, so the retry gets the same decision, decision id included.
"""
from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

from .engine import CompactionRetry, RunEnd, ToolCall, ToolOutcome, UserTurn
from .xxh3 import xxh3_64

if TYPE_CHECKING:
    from .service import Decision

RETRY_WINDOW = 64
DIGEST_SIZE = 8


def _text(value: str) -> bytes:
    data = value.encode("utf-8", "surrogatepass")
    return len(data).to_bytes(8, "big") + data


def _call_id(value: str) -> bytes:
    """A tool call id only when there is one: an event without ids keeps its digest."""
    return b"i" + _text(value) if value else b""


def content_digest(payload: ToolCall | ToolOutcome | CompactionRetry | RunEnd | UserTurn) -> bytes:
    """8 bytes naming what an event says (not its seq): kind, tool, params, call id, result or error."""
    # XXH3-64, big-endian, as the core takes it (core/src/service/retries.rs, which says why not
    # sha256): the window is persisted and read by either engine.
    if type(payload) is ToolCall:
        data = b"c" + _text(payload.tool_name) + _text(payload.params_json) + _call_id(payload.tool_call_id)
    elif type(payload) is ToolOutcome:
        data = b"o" + _text(payload.tool_name) + _text(payload.params_json) + _call_id(payload.tool_call_id)
        if payload.error is not None:
            data += b"e" + _text(payload.error)
        elif payload.result_json is not None:
            data += b"r" + _text(payload.result_json)
        else:
            data += b"-"
    elif type(payload) is CompactionRetry:
        data = b"k"
    elif type(payload) is UserTurn:
        data = b"u" + _text(payload.prompt_id)
    else:
        data = b"x"
    return xxh3_64(data).to_bytes(DIGEST_SIZE, "big")


class RetryWindow:
    """The run's last RETRY_WINDOW evaluated events with a seq, oldest overwritten first."""

    __slots__ = ("seqs", "digests", "decisions", "next_slot")

    def __init__(self) -> None:
        self.seqs = array("Q")
        self.digests = bytearray()
        self.decisions: dict[int, Decision] = {}  # slot -> a decision that is not a plain ALLOW
        self.next_slot = 0

    def find(self, seq: int, digest: bytes) -> int:
        """The slot of an earlier event with this seq and content, or -1."""
        seqs, digests = self.seqs, self.digests
        start = 0
        while True:
            try:
                slot = seqs.index(seq, start)
            except ValueError:
                return -1
            if digests[slot * DIGEST_SIZE:(slot + 1) * DIGEST_SIZE] == digest:
                return slot
            start = slot + 1

    def remember(self, seq: int, digest: bytes, decision: Decision | None) -> None:
        """Record an evaluated event; `decision` None for a plain ALLOW."""
        slot = self.next_slot
        if slot == len(self.seqs):
            self.seqs.append(seq)
            self.digests += digest
        else:
            self.seqs[slot] = seq
            self.digests[slot * DIGEST_SIZE:(slot + 1) * DIGEST_SIZE] = digest
        if decision is None:
            self.decisions.pop(slot, None)
        else:
            self.decisions[slot] = decision
        self.next_slot = (slot + 1) % RETRY_WINDOW

    def decision_at(self, slot: int) -> Decision | None:
        return self.decisions.get(slot)
