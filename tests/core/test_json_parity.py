"""The core reads JSON and hashes it exactly as the Python engine does: the same canonical bytes
(so the same digests), the same refusals with the same messages, at every edge where JSON
libraries differ (big integers, float spellings, -0.0, lone surrogates, depth, duplicate keys)."""
from __future__ import annotations

import loopwarden_core
from hypothesis import example, given
from hypothesis import strategies as st

from tests.reference.engine.fingerprints import args_digest, outcome_fingerprint
from tests.reference.engine.jsonvalues import JsonDecodeError, JsonTooDeep, canonical_bytes, decode_json
from loopwarden_server.config.detection import ToolCatalog
from tests.reference.engine.toolnames import normalize_tool_name
from tests.core.strategies import ERRORS, PARAMS, RESULTS, TOOLS, edge_texts


def python_canonical(text: str):
    try:
        return ("ok", canonical_bytes(decode_json(text, 64)))
    except JsonTooDeep as exc:
        return ("too_deep", str(exc))
    except JsonDecodeError as exc:
        return ("invalid", str(exc))


def core_canonical(text: str):
    try:
        return ("ok", loopwarden_core.canonical_json(text, 64))
    except ValueError as exc:
        return tuple(exc.args)


class TestCanonicalJson:
    @given(edge_texts)
    @example('{"b": 1.0, "a": -0.0, "a": [1e-7, 6.1e-5, 1e22]}')
    @example('[1e-7, 18446744073709551616]')
    @example('{"\\ud800": 1e-5}')
    def test_same_bytes_or_same_refusal(self, text):
        """Every text decodes to the same canonical bytes in both engines, or is refused alike."""
        assert python_canonical(text) == core_canonical(text)

    @given(st.floats(allow_nan=False, allow_infinity=False), st.booleans())
    def test_every_float_spelled_alike(self, value, big):
        """Floats in both spellings: orjson's, and the stdlib's when a big integer is beside them."""
        text = f"[{value!r}, 18446744073709551616]" if big else f"[{value!r}]"
        assert python_canonical(text) == core_canonical(text)


class TestFingerprints:
    @given(st.sampled_from(TOOLS), st.sampled_from(PARAMS))
    def test_args_digest(self, tool, params_json):
        """The args digest of every call of the alphabet."""
        tool = normalize_tool_name(tool)
        try:
            params = decode_json(params_json, 64) if params_json.strip() else {}
        except JsonDecodeError:
            return
        assert args_digest(tool, params) == loopwarden_core.args_digest(tool, params_json)

    @given(st.sampled_from(TOOLS), st.sampled_from(PARAMS), st.sampled_from(RESULTS + [None]),
           st.sampled_from(ERRORS + [None]), st.booleans())
    def test_outcome_fingerprint(self, tool, params_json, result_json, error, provider):
        """Status, digest and unknown tool name of every outcome of the alphabet."""
        tool = normalize_tool_name(tool)
        if error is not None:
            result_json = None
        try:
            params = decode_json(params_json, 64) if params_json.strip() else {}
            has_result = error is None and bool(result_json)
            result = decode_json(result_json, 64) if has_result else None
        except JsonDecodeError:
            return
        catalog = ToolCatalog(provider_send_tools=frozenset({"telegram"}) if provider else frozenset())
        raw = error if error is not None else result_json
        expected = outcome_fingerprint(tool, params, result, error, catalog, has_result=has_result,
                                       wrapped=raw is not None and "EXTERNAL_UNTRUSTED_CONTENT" in raw)
        status, digest, unknown = loopwarden_core.outcome_fingerprint(
            tool, params_json, result_json, error, ["telegram"] if provider else [], [])
        assert (expected.status, expected.digest if expected.status else b"", expected.unknown_tool_name) == \
            (status, digest if status else b"", unknown)

    @given(st.text(max_size=12) | st.sampled_from(["Unknown tool: X.Y", "unknown  tool 'a-b'", "tool ghost is not available"]))
    def test_unknown_tool_names(self, error):
        """The missing tool's name is read from any error text alike."""
        from tests.reference.engine.fingerprints import unknown_tool_name
        _, _, unknown = loopwarden_core.outcome_fingerprint("read", "", None, error)
        assert unknown_tool_name(error) == unknown

    @given(st.text(max_size=10) | st.sampled_from(["  Bash ", "ｒｅａｄ", "re\u200bad", "APPLY-PATCH", "\u3000x"]))
    def test_tool_names(self, raw):
        """Tool names are normalised alike (NFKC, format characters, whitespace, aliases)."""
        assert normalize_tool_name(raw) == loopwarden_core.normalize_tool_name(raw)
