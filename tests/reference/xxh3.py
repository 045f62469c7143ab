"""XXH3-64 (seed 0, the default secret) in plain Python: the retry window's content digest.

The core takes it with the `xxhash-rust` crate (core/src/service/retries.rs); this is the same
function written out from the xxHash specification (XXH3_64bits), so the oracle writes and reads
the same stored retry windows without a dependency. Slow (tens of µs per KiB), which the tests'
small payloads never notice. tests/reference/test_xxh3.py holds it to the specification's known
answers and, where the `xxhash` package happens to be installed, to that.
"""
from __future__ import annotations

import struct

M64 = (1 << 64) - 1
P32_1, P32_2, P32_3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
P64_1, P64_2, P64_3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
P64_4, P64_5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5

SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
    "eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e"
    "2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e")
_STRIPE, _STRIPES_PER_BLOCK = 64, (len(SECRET) - 64) // 8
_BLOCK = _STRIPE * _STRIPES_PER_BLOCK


def _u64(data: bytes, at: int) -> int:
    return struct.unpack_from("<Q", data, at)[0]


def _u32(data: bytes, at: int) -> int:
    return struct.unpack_from("<I", data, at)[0]


def _fold(a: int, b: int) -> int:
    product = a * b
    return (product ^ (product >> 64)) & M64


def _avalanche(h: int) -> int:
    h ^= h >> 37
    h = (h * 0x165667919E3779F9) & M64
    return h ^ (h >> 32)


def _xxh64_avalanche(h: int) -> int:
    h ^= h >> 33
    h = (h * P64_2) & M64
    h ^= h >> 29
    h = (h * P64_3) & M64
    return h ^ (h >> 32)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & M64


def _mix16(data: bytes, at: int, secret_at: int) -> int:
    return _fold(_u64(data, at) ^ _u64(SECRET, secret_at), _u64(data, at + 8) ^ _u64(SECRET, secret_at + 8))


def _long(data: bytes) -> int:
    n = len(data)
    acc = [P32_3, P64_1, P64_2, P64_3, P64_4, P32_2, P64_5, P32_1]

    def stripe(at: int, secret_at: int) -> None:
        for i in range(8):
            value = _u64(data, at + 8 * i)
            key = value ^ _u64(SECRET, secret_at + 8 * i)
            acc[i ^ 1] = (acc[i ^ 1] + value) & M64
            acc[i] = (acc[i] + (key & 0xFFFFFFFF) * (key >> 32)) & M64

    blocks = (n - 1) // _BLOCK
    for block in range(blocks):
        for s in range(_STRIPES_PER_BLOCK):
            stripe(block * _BLOCK + s * _STRIPE, s * 8)
        for i in range(8):  # scramble
            a = acc[i]
            a ^= a >> 47
            a ^= _u64(SECRET, len(SECRET) - 64 + 8 * i)
            acc[i] = (a * P32_1) & M64
    for s in range(((n - 1) - blocks * _BLOCK) // _STRIPE):
        stripe(blocks * _BLOCK + s * _STRIPE, s * 8)
    stripe(n - _STRIPE, len(SECRET) - 64 - 7)
    result = (n * P64_1) & M64
    for i in range(4):
        result += _fold(acc[2 * i] ^ _u64(SECRET, 11 + 16 * i), acc[2 * i + 1] ^ _u64(SECRET, 11 + 16 * i + 8))
    return _avalanche(result & M64)


def xxh3_64(data: bytes) -> int:
    """XXH3_64bits(data) with seed 0."""
    n = len(data)
    if n == 0:
        return _xxh64_avalanche(_u64(SECRET, 56) ^ _u64(SECRET, 64))
    if n <= 3:
        combined = (data[0] << 16) | (data[n >> 1] << 24) | data[n - 1] | (n << 8)
        return _xxh64_avalanche(combined ^ (_u32(SECRET, 0) ^ _u32(SECRET, 4)))
    if n <= 8:
        keyed = (_u32(data, n - 4) + (_u32(data, 0) << 32)) ^ (_u64(SECRET, 8) ^ _u64(SECRET, 16))
        keyed ^= _rotl(keyed, 49) ^ _rotl(keyed, 24)
        keyed = (keyed * 0x9FB21C651E98DF25) & M64
        keyed ^= (keyed >> 35) + n
        keyed = (keyed * 0x9FB21C651E98DF25) & M64
        return keyed ^ (keyed >> 28)
    if n <= 16:
        low = _u64(data, 0) ^ (_u64(SECRET, 24) ^ _u64(SECRET, 32))
        high = _u64(data, n - 8) ^ (_u64(SECRET, 40) ^ _u64(SECRET, 48))
        swapped = int.from_bytes(low.to_bytes(8, "little"), "big")
        return _avalanche((n + swapped + high + _fold(low, high)) & M64)
    if n <= 128:
        acc = n * P64_1
        if n > 32:
            if n > 64:
                if n > 96:
                    acc += _mix16(data, 48, 96) + _mix16(data, n - 64, 112)
                acc += _mix16(data, 32, 64) + _mix16(data, n - 48, 80)
            acc += _mix16(data, 16, 32) + _mix16(data, n - 32, 48)
        acc += _mix16(data, 0, 0) + _mix16(data, n - 16, 16)
        return _avalanche(acc & M64)
    if n <= 240:
        acc = n * P64_1
        for i in range(8):
            acc += _mix16(data, 16 * i, 16 * i)
        acc = _avalanche(acc & M64)
        for i in range(8, n // 16):
            acc += _mix16(data, 16 * i, 16 * (i - 8) + 3)
        acc += _mix16(data, n - 16, 136 - 17)
        return _avalanche(acc & M64)
    return _long(data)
