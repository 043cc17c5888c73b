"""Java-compatible string hashes.

RocketMQ stores a tag's `String.hashCode()` in every consumequeue entry and
clients send the same hashes in their subscriptions (`codeSet`), so the
broker's tag filter must reproduce Java's value bit for bit: the polynomial
`s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code units, wrapped to a signed
32-bit int. Tags repeat endlessly, so results are cached.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from operator import mul

_MASK32 = 0xFFFFFFFF
_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


_CHUNK = 64


def _descending_powers(n: int) -> tuple[int, ...]:
    return tuple(pow(31, n - 1 - i, 1 << 32) for i in range(n))


_POWERS = [_descending_powers(n) for n in range(_CHUNK + 1)]
_CHUNK_SHIFT = pow(31, _CHUNK, 1 << 32)


def _polynomial(units: bytes | memoryview) -> int:
    """sum(unit * 31^(n-1-i)) mod 2^32, in chunks so the multiplies run in C."""
    n = len(units)
    h = 0
    for start in range(0, n - n % _CHUNK, _CHUNK):
        chunk = units[start : start + _CHUNK]
        h = (h * _CHUNK_SHIFT + sum(map(mul, chunk, _POWERS[_CHUNK]))) & _MASK32
    rest = n % _CHUNK
    if rest:
        tail = units[n - rest :]
        h = (h * pow(31, rest, 1 << 32) + sum(map(mul, tail, _POWERS[rest]))) & _MASK32
    return h


def java_string_hash_uncached(s: str) -> int:
    """Java's `String.hashCode()` of `s` as a signed 32-bit int.

    Characters outside the BMP count as two surrogate code units, as in Java;
    lone surrogates (possible in a Python str) count as themselves. For keys
    that never repeat (unique ids), call this rather than the cached form.
    """
    if s.isascii():
        h = _polynomial(s.encode("ascii"))
    else:
        h = _polynomial(memoryview(s.encode(_UTF16_NATIVE, "surrogatepass")).cast("H"))
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


java_string_hash = lru_cache(maxsize=8192)(java_string_hash_uncached)

_SHARED_TAIL = 12
_SHARED_TAIL_SHIFT = pow(31, _SHARED_TAIL, 1 << 32)


@lru_cache(maxsize=1024)
def _ascii_polynomial(text: str) -> int:
    return _polynomial(text.encode("ascii"))


def java_string_hash_shared_prefix(s: str) -> int:
    """`java_string_hash_uncached(s)` for strings that share long prefixes.

    The hash is linear: hash(head + tail) = hash(head) * 31^len(tail) +
    hash(tail) (mod 2^32), so the head's part is cached and only the last 12
    characters are hashed per call. Unique message ids (`topic#` + a fixed
    20-character producer prefix + time and counter) are the case it exists
    for. Non-ASCII strings take the plain path.
    """
    if len(s) <= _SHARED_TAIL or not s.isascii():
        return java_string_hash_uncached(s)
    split = len(s) - _SHARED_TAIL
    tail: int = sum(map(mul, s[split:].encode("ascii"), _POWERS[_SHARED_TAIL]))
    h = (_ascii_polynomial(s[:split]) * _SHARED_TAIL_SHIFT + tail) & _MASK32
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def tag_code(tags: str | None) -> int:
    """RocketMQ's `tagsString2tagsCode`: the hash of the whole TAGS value, 0 if empty."""
    if not tags:
        return 0
    return java_string_hash(tags)
