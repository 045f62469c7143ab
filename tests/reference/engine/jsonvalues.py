"""JSON decoding and the canonical form that every hash is taken over (spec section 3).

Canonical JSON: object keys sorted, no insignificant whitespace, arrays in order, strings as
JSON, numbers in shortest round-trip form with integral values written as integers, so `1` and
`1.0` hash alike. The integral-float folding happens once, at decode time (`parse_float`), which
lets the encoder take the whole value in one call.

NOTE: the encoder is orjson (OPT_SORT_KEYS) because it is ~10x faster than the stdlib encoder on
the per-event hot path. For the two inputs orjson refuses (lone surrogates, integers beyond 64
bits) the stdlib encoder with the same rules takes over; the two differ only in how they spell
some non-integral floats (1e-7 vs 1e-07, 0.000061 vs 6.1e-05), and which one runs is decided by
the value itself, so equal values always hash alike. Hashes are loopwarden-internal: nothing outside compares them.
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import orjson

_stdlib_encode = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
).encode
_orjson_dumps = orjson.dumps
_SORT_KEYS = orjson.OPT_SORT_KEYS
_sha256 = hashlib.sha256


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


# The most digits an integer may have: Python's own int conversion limit (a guard against
# quadratic conversion, sys.get_int_max_str_digits()). Past it the canonical form cannot be
# built, so such a document is refused as invalid JSON (naming the field) instead of failing
# inside the engine. The decoder's own int() raises it; a parse_int hook would cost a Python
# call per integer.
MAX_INTEGER_DIGITS = 4300


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
    except ValueError:
        # int() refusing a literal of more digits than its conversion limit (nothing else in
        # the C decoder raises a plain ValueError).
        raise JsonDecodeError(f"an integer has more than {MAX_INTEGER_DIGITS} digits") from None
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


def canonical_bytes(value: Any) -> bytes:
    """The canonical UTF-8 text of a decoded value (see module docstring)."""
    try:
        return _orjson_dumps(value, option=_SORT_KEYS)
    except TypeError:
        # surrogatepass: JSON may carry lone surrogates ("\\ud800"); they must hash, not crash.
        return _stdlib_encode(value).encode("utf-8", "surrogatepass")


def canonical_json(value: Any) -> str:
    return canonical_bytes(value).decode("utf-8", "surrogatepass")


def digest_bytes(value: Any) -> bytes:
    """The 32-byte sha256 of the canonical JSON of a value."""
    return _sha256(canonical_bytes(value)).digest()
