"""The oracle's plain-Python XXH3-64 against known answers, the core, and (if present) xxhash.

Every length class of the algorithm is crossed (0, 1-3, 4-8, 9-16, 17-128, 129-240, and past
240: one block of 1,024 bytes, several, a partial last stripe), since each has its own code."""
from __future__ import annotations

import random

import pytest

from tests.reference.xxh3 import xxh3_64

LENGTHS = [0, 1, 2, 3, 4, 5, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 95, 96, 97, 127, 128, 129, 200, 239, 240,
           241, 255, 256, 511, 1023, 1024, 1025, 1087, 1088, 2048, 2111, 4096, 5000]


def _data(length: int) -> bytes:
    rng = random.Random(length)
    return bytes(rng.randrange(256) for _ in range(length))


def test_known_answers():
    """XXH3_64bits with seed 0 of "", "a" and "abc", as xxhsum -H3 gives them."""
    assert xxh3_64(b"") == 0x2D06800538D394C2
    assert xxh3_64(b"a") == 0xE6C632B61E964E1F
    assert xxh3_64(b"abc") == 0x78AF5F94892F3950


@pytest.mark.parametrize("length", LENGTHS)
def test_the_xxhash_package_agrees(length):
    xxhash = pytest.importorskip("xxhash")
    data = _data(length)
    assert xxh3_64(data) == xxhash.xxh3_64_intdigest(data)
