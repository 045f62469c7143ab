"""JSON decoding and the canonical form that every hash is taken over (spec section 3).

Canonical JSON: object keys sorted, no insignificant whitespace, arrays in order, strings as
JSON, numbers in shortest round-trip form with integral values written as integers, so `1` and
`1.0` hash alike. The integral-float folding happens once, at decode time (`parse_float`), which
lets `canonical_json` hand the whole value to the C encoder in one call.
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any

_encode = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
).encode


class JsonDecodeError(ValueError):
    """The text is not a JSON document loopwarden can hash."""


class JsonTooDeep(JsonDecodeError):
    """The document nests arrays/objects deeper than the configured limit."""


def _parse_float(literal: str) -> float | int:
    value = float(literal)
    if not math.isfinite(value):
        raise JsonDecodeError(f"number {literal} is out of range")
    if value.is_integer() and abs(value) < 1e21:
        # 1.0 and 1 are the same number to every JSON producer that is not Python.
        return int(value)
    return value


def _reject_constant(name: str) -> Any:
    raise JsonDecodeError(f"{name} is not valid JSON")


_decoder = json.JSONDecoder(parse_float=_parse_float, parse_constant=_reject_constant)


def decode_json(text: str, max_depth: int | None = None) -> Any:
    """Parse one JSON document (any JSON value) into plain Python values.

    Raises JsonDecodeError with a short human-readable reason (JsonTooDeep past max_depth).
    """
    try:
        value = _decoder.decode(text)
    except JsonDecodeError:
        raise
    except json.JSONDecodeError as exc:
        raise JsonDecodeError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise JsonTooDeep(f"nesting is deeper than {max_depth or 'the parser allows'}") from None
    # Depth can only exceed the limit if there are more brackets than the limit: the count is
    # C-speed, so the walk runs only for bracket-heavy documents.
    if max_depth is not None and text.count("[") + text.count("{") > max_depth:
        if _depth_exceeds(value, max_depth):
            raise JsonTooDeep(f"nesting is deeper than {max_depth} levels")
    return value


def _depth_exceeds(value: Any, max_depth: int) -> bool:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def canonical_json(value: Any) -> str:
    """The canonical text of a decoded value (see module docstring)."""
    return _encode(value)


def digest(value: Any) -> str:
    """sha256 hex of the canonical JSON of a value.

    surrogatepass: JSON may carry lone surrogates ("\\ud800"); they must hash, not crash.
    """
    return hashlib.sha256(canonical_json(value).encode("utf-8", "surrogatepass")).hexdigest()
