"""External-content wrappers (spec section 4, step 10): their random ids are not part of an outcome.

OpenClaw wraps fetched or forwarded text as

    <<<EXTERNAL_UNTRUSTED_CONTENT id="3f9a…">>> … <<<END_EXTERNAL_UNTRUSTED_CONTENT id="3f9a…">>>

with a fresh random id per call, so two fetches of one unchanged page would never hash alike.
Outcome hashing blanks the id of every *matching pair* (an opening marker and the next closing
marker with the same id); a lone or mismatched marker is left as it is, so a forged marker inside
the page cannot make different content look the same.

A marker may also sit in JSON-escaped text (a result whose text is itself a JSON document, encoded
once or more): its quotes then carry 2^d - 1 backslashes each, d being how many times it was
encoded. Such markers pair only as upstream (OpenClaw) pairs them: at a valid escape depth, the
same on both sides, and inside one encoded string. A quote between them at a shallower depth
(fewer trailing escapes) ends that string, so an opener that ends one JSON string field and a
closer in the next field are two markers, not a pair. Otherwise text of a fetched page could make
outcomes that differ in such an id hash alike.

NOTE: pairing is done from linear scans (all openers, all closers, and, only when an escaped pair
is in question, all quotes) rather than one regex with a back-reference: `open(.*?)close\\1`
rescans the rest of the text for every unmatched opener, which a hostile result could make
quadratic. For the same reason "is there a shallower quote between these two markers" is answered
by cursors that only move forward (openers come in text order), never by rescanning the span.
"""
from __future__ import annotations

import re
from typing import Any

MARKER = "EXTERNAL_UNTRUSTED_CONTENT"
# Ids are 16 hex digits in the reference; accept any quote-free id up to a sane length. A marker
# may also sit in JSON-escaped text (a result whose text is itself a JSON document): its quotes
# then carry k backslashes each (k = 1, 3, 7, ... for one, two, three levels; up to 63), the same
# k on both sides, and its id stops at a backslash. A pair matches on its id and its k.
_ID = r'(?:"([^"<>\n]{1,128})"|(\\{1,63})"([^"<>\n\\]{1,128})\2")>>>'
_OPEN = re.compile(r'<<<EXTERNAL_UNTRUSTED_CONTENT id=' + _ID)
_CLOSE = re.compile(r'<<<END_EXTERNAL_UNTRUSTED_CONTENT id=' + _ID)
# Every quote with the whole run of backslashes before it (the look-behind starts a match only at
# the run's first backslash, so a long run is read once, not once per backslash in it).
_QUOTE = re.compile(r'(?<!\\)(\\*)"')
# The deepest escaping a marker may carry (63 backslashes: six levels).
_MAX_DEPTH = 6


def _depth(backslashes: int) -> int:
    """How many JSON decodings a quote after this many backslashes survives as a quote.

    Each decoding turns `\\\\` into `\\` and `\\"` into `"`: an odd run keeps the quote escaped
    (one level deeper), an even run leaves it bare. So the depth is the run's trailing one bits:
    1, 3, 7 backslashes are depths 1, 2, 3; 2 is depth 0 (an escaped backslash, then a real quote)."""
    return (~backslashes & (backslashes + 1)).bit_length() - 1


def _valid_escapes(backslashes: int) -> bool:
    """0 (a raw marker) or 2^d - 1: what encoding a marker d times gives. Any other count is not
    an escaped quote at one depth (2 is an escaped backslash before a bare quote)."""
    return backslashes & (backslashes + 1) == 0


def _id(match: re.Match[str]) -> tuple[str, int]:
    """A marker's id and its escaping (backslashes before each quote): what a pair shares."""
    if match.group(1) is not None:
        return match.group(1), 0
    return match.group(3), len(match.group(2))


def _id_span(match: re.Match[str]) -> tuple[int, int]:
    return match.span(1) if match.group(1) is not None else match.span(3)


def _markers(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    return [match for match in pattern.finditer(text) if _valid_escapes(_id(match)[1])]


class _StringEnds:
    """Where an encoded string ends: for an escaped marker at depth d, the first quote after a
    given position whose depth is below d (it closes the string the marker is in, or one around
    it). Queries come with positions in text order, so each depth keeps a cursor that only moves
    forward over the quotes: linear in the text however many markers ask."""

    def __init__(self, text: str):
        # (position, depth) of the quotes that can end a string holding a marker.
        self.quotes = [(match.end() - 1, depth) for match in _QUOTE.finditer(text)
                       if (depth := _depth(len(match.group(1)))) < _MAX_DEPTH]
        self.cursors = [0] * (_MAX_DEPTH + 1)

    def closed_between(self, start: int, end: int, depth: int) -> bool:
        """Whether a quote shallower than `depth` sits in text[start:end] (start never decreases)."""
        quotes, index = self.quotes, self.cursors[depth]
        while index < len(quotes) and (quotes[index][0] < start or quotes[index][1] >= depth):
            index += 1
        self.cursors[depth] = index
        return index < len(quotes) and quotes[index][0] < end


def blank_wrapper_ids(text: str) -> str:
    """`text` with the id of every matching wrapper pair replaced by the empty string."""
    if MARKER not in text:
        return text
    closers: dict[tuple[str, int], list[re.Match[str]]] = {}
    for match in _markers(_CLOSE, text):
        closers.setdefault(_id(match), []).append(match)
    if not closers:
        return text
    next_closer = dict.fromkeys(closers, 0)
    string_ends: _StringEnds | None = None  # read only when an escaped pair is in question
    spans: list[tuple[int, int]] = []  # id spans to blank, in any order
    for opener in _markers(_OPEN, text):
        wrapper_id = _id(opener)
        candidates = closers.get(wrapper_id)
        if not candidates:
            continue
        index = next_closer[wrapper_id]
        while index < len(candidates) and candidates[index].start() < opener.end():
            index += 1
        next_closer[wrapper_id] = index
        if index == len(candidates):
            continue
        closer = candidates[index]
        escapes = wrapper_id[1]
        if escapes:
            # Escaped, both markers must be in one encoded string: a shallower quote between
            # them ends it. The closer stays free for an opener after that quote.
            if string_ends is None:
                string_ends = _StringEnds(text)
            if string_ends.closed_between(opener.end(), closer.start(), _depth(escapes)):
                continue
        next_closer[wrapper_id] = index + 1
        spans.append(_id_span(opener))
        spans.append(_id_span(closer))
    if not spans:
        return text
    spans.sort()
    pieces = []
    position = 0
    for start, end in spans:
        pieces.append(text[position:start])
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def blank_wrapper_ids_in(value: Any) -> Any:
    """The same for every string inside a decoded JSON value (web_fetch puts wrapped text in details)."""
    if isinstance(value, str):
        return blank_wrapper_ids(value)
    if isinstance(value, list):
        return [blank_wrapper_ids_in(item) for item in value]
    if isinstance(value, dict):
        return {key: blank_wrapper_ids_in(item) for key, item in value.items()}
    return value
