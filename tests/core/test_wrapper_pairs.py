"""External-content wrapper pairs inside JSON-escaped text: only a real pair loses its ids.

Two outcomes that differ only in a wrapper id hash alike when the id belongs to a pair (a fresh
nonce per fetch of one unchanged page), and differently otherwise: text in a fetched page must not
make changing outcomes look unchanged. An escaped opener and closer are a pair only as upstream
(OpenClaw) pairs them: at a JSON escape depth (2^d - 1 backslashes per quote), inside one encoded
string, with no shallower quote between them. Every case runs on the reference oracle and, when it
is importable, on the compiled core, and the two must give the same digest.
"""
from __future__ import annotations

import json
import time

import pytest

from tests.reference.engine import ToolCatalog
from tests.reference.engine.external_content import blank_wrapper_ids
from tests.reference.engine.fingerprints import outcome_fingerprint
from tests.reference.engine.jsonvalues import decode_json

try:
    import loopwarden_core
except ImportError:  # the oracle alone still holds the rule
    loopwarden_core = None

OPEN = "<<<EXTERNAL_UNTRUSTED_CONTENT id="
CLOSE = "<<<END_EXTERNAL_UNTRUSTED_CONTENT id="


@pytest.fixture(params=["reference", "core"])
def engine(request):
    if request.param == "core" and loopwarden_core is None:
        pytest.skip("the compiled core (loopwarden_core) is not installed")
    return request.param


def result_json(text: str) -> str:
    return json.dumps({"content": [{"type": "text", "text": text}], "details": {"status": 200}})


def reference_digest(text: str) -> bytes:
    raw = result_json(text)
    return outcome_fingerprint("web_fetch", {"url": "u"}, decode_json(raw, 64), None, ToolCatalog(),
                               has_result=True, wrapped="EXTERNAL_UNTRUSTED_CONTENT" in raw).digest


def digest(engine: str, text: str) -> bytes:
    if engine == "reference":
        return reference_digest(text)
    status, core_digest, _ = loopwarden_core.outcome_fingerprint("web_fetch", '{"url": "u"}', result_json(text), None)
    assert (status, core_digest) == (1, reference_digest(text)), "the core and the oracle disagree"
    return core_digest


def wrapped(wrapper_id: str, body: str = "the page") -> str:
    return f'{OPEN}"{wrapper_id}">>>\nSource: Web Fetch\n---\n{body}\n{CLOSE}"{wrapper_id}">>>'


def encoded(text: str, levels: int) -> str:
    for _ in range(levels):
        text = json.dumps({"title": text, "status": 200})
    return text


def quoted(backslashes: int) -> str:
    return "\\" * backslashes + '"'


class TestValidPairsStillHashAlike:
    @pytest.mark.parametrize("levels", [1, 2, 3, 4])
    @pytest.mark.parametrize("body", ["the page", "C:" + "\\" * 300 + 'share\\"quoted" ' + "\\" * 63 + '"'],
                             ids=["page", "long_backslash_runs"])
    def test_encoded_pairs(self, engine, levels, body):
        """Encoded one to four times, the page's own backslashes and quotes escaped with it."""
        assert digest(engine, encoded(wrapped("9f86d081884c7d65", body), levels)) == \
            digest(engine, encoded(wrapped("x-1 any form", body), levels))

    @pytest.mark.parametrize("backslashes", [1, 3, 7, 15, 31, 63])
    def test_every_escape_depth(self, engine, backslashes):
        def text(wrapper_id):
            q = quoted(backslashes)
            return f"{OPEN}{q}{wrapper_id}{q}>>> page {CLOSE}{q}{wrapper_id}{q}>>>"
        assert digest(engine, text("n1")) == digest(engine, text("n2"))

    def test_raw_markers_ignore_quotes_between_them(self, engine):
        """Unescaped markers are raw text, not encoded strings: quotes between them end nothing."""
        def text(wrapper_id):
            return f'{{"a": "{OPEN}"{wrapper_id}">>> x", "b": "y {CLOSE}"{wrapper_id}">>>"}}'
        assert digest(engine, text("n1")) == digest(engine, text("n2"))


class TestWhatIsNoPairHashesDifferently:
    @pytest.mark.parametrize("levels", [1, 2, 3])
    def test_a_markers_in_different_string_fields(self, engine, levels):
        """(a) The opener ends one JSON string field, the closer is in the next field."""
        def text(wrapper_id):
            document = {"title": f'page {OPEN}"{wrapper_id}">>>', "body": f'{CLOSE}"{wrapper_id}">>> page'}
            return encoded(json.dumps(document), levels - 1)
        assert blank_wrapper_ids(text("n1")) == text("n1")
        assert digest(engine, text("n1")) != digest(engine, text("n2"))

    @pytest.mark.parametrize("backslashes", [2, 4, 5, 6, 62])
    def test_b_a_backslash_count_that_is_no_escape_depth(self, engine, backslashes):
        """(b) Not 2^d - 1 backslashes (2: an escaped backslash, then a bare quote), even the
        same count on both markers."""
        def text(wrapper_id):
            q = quoted(backslashes)
            return f"{OPEN}{q}{wrapper_id}{q}>>> page {CLOSE}{q}{wrapper_id}{q}>>>"
        assert blank_wrapper_ids(text("n1")) == text("n1")
        assert digest(engine, text("n1")) != digest(engine, text("n2"))

    @pytest.mark.parametrize("between", [0, 1, 2, 5])
    def test_c_a_shallower_quote_between_the_markers(self, engine, between):
        """(c) Markers at depth 2 (3 backslashes); a bare quote, one escaped once, or one after an
        escaped backslash (2, 5) between them ends the encoded string they were in."""
        def text(wrapper_id):
            q = quoted(3)
            return f"{OPEN}{q}{wrapper_id}{q}>>> page {quoted(between)} more {CLOSE}{q}{wrapper_id}{q}>>>"
        assert blank_wrapper_ids(text("n1")) == text("n1")
        assert digest(engine, text("n1")) != digest(engine, text("n2"))

    @pytest.mark.parametrize("between", [3, 7, 11])
    def test_c_a_quote_at_the_markers_depth_or_deeper_ends_nothing(self, engine, between):
        """The page's own quotes (3), escaped deeper (7) or after a literal backslash (11 = a
        backslash and a quote, encoded twice) stay inside the string."""
        def text(wrapper_id):
            q = quoted(3)
            return f"{OPEN}{q}{wrapper_id}{q}>>> page {quoted(between)} more {CLOSE}{q}{wrapper_id}{q}>>>"
        assert digest(engine, text("n1")) == digest(engine, text("n2"))

    def test_a_closer_past_a_string_end_pairs_with_the_opener_in_its_string(self):
        text = json.dumps({"a": f'{OPEN}"n">>>', "b": f'{OPEN}"n">>> x {CLOSE}"n">>>'})
        assert blank_wrapper_ids(text) == json.dumps({"a": f'{OPEN}"n">>>', "b": f'{OPEN}"">>> x {CLOSE}"">>>'})


class TestStaysLinear:
    @pytest.mark.parametrize("shape", ["openers_split_by_quotes", "long_backslash_run", "many_runs"])
    def test_hostile_texts(self, engine, shape):
        """Each escaped opener asks whether a quote ends its string before the closer; the answer
        must not rescan the text (about 1 MB here, the daemon's default result limit)."""
        q = quoted(1)
        closer = f"{CLOSE}{q}x{q}>>>"
        text = {
            "openers_split_by_quotes": f'{OPEN}{q}x{q}>>>"' * 25_000 + closer,
            "long_backslash_run": f"{OPEN}{q}x{q}>>>" + "\\" * 1_000_000 + closer,
            "many_runs": (f"{OPEN}{q}x{q}>>>" + "\\" * 40 + '"') * 15_000 + closer,
        }[shape]
        started = time.perf_counter()
        digest(engine, text)
        assert time.perf_counter() - started < 5
