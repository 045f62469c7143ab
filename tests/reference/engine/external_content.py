"""External-content wrappers (spec section 4, step 10): their random ids are not part of an outcome.

OpenClaw wraps fetched or forwarded text as

    <<<EXTERNAL_UNTRUSTED_CONTENT id="3f9a…">>> … <<<END_EXTERNAL_UNTRUSTED_CONTENT id="3f9a…">>>

with a fresh random id per call, so two fetches of one unchanged page would never hash alike.
Outcome hashing blanks the id of every *matching pair* (an opening marker and the next closing
marker with the same id); a lone or mismatched marker is left as it is, so a forged marker inside
the page cannot make different content look the same.

NOTE: pairing is done from two linear scans (all openers, all closers) rather than one regex with
a back-reference: `open(.*?)close\\1` rescans the rest of the text for every unmatched opener,
which a hostile result could make quadratic.
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


def _id(match: re.Match[str]) -> tuple[str, int]:
    """A marker's id and its escaping (backslashes before each quote): what a pair shares."""
    if match.group(1) is not None:
        return match.group(1), 0
    return match.group(3), len(match.group(2))


def _id_span(match: re.Match[str]) -> tuple[int, int]:
    return match.span(1) if match.group(1) is not None else match.span(3)


def blank_wrapper_ids(text: str) -> str:
    """`text` with the id of every matching wrapper pair replaced by the empty string."""
    if MARKER not in text:
        return text
    closers: dict[tuple[str, int], list[re.Match[str]]] = {}
    for match in _CLOSE.finditer(text):
        closers.setdefault(_id(match), []).append(match)
    if not closers:
        return text
    next_closer = dict.fromkeys(closers, 0)
    spans: list[tuple[int, int]] = []  # id spans to blank, in any order
    for opener in _OPEN.finditer(text):
        wrapper_id = _id(opener)
        candidates = closers.get(wrapper_id)
        if not candidates:
            continue
        index = next_closer[wrapper_id]
        while index < len(candidates) and candidates[index].start() < opener.end():
            index += 1
        if index == len(candidates):
            next_closer[wrapper_id] = index
            continue
        closer = candidates[index]
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
