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

_MASK32 = 0xFFFFFFFF
_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


@lru_cache(maxsize=8192)
def java_string_hash(s: str) -> int:
    """Java's `String.hashCode()` of `s` as a signed 32-bit int.

    Characters outside the BMP count as two surrogate code units, as in Java;
    lone surrogates (possible in a Python str) count as themselves.
    """
    h = 0
    if s.isascii():
        for unit in s.encode("ascii"):
            h = (31 * h + unit) & _MASK32
    else:
        units = memoryview(s.encode(_UTF16_NATIVE, "surrogatepass")).cast("H")
        for unit in units:
            h = (31 * h + unit) & _MASK32
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def tag_code(tags: str | None) -> int:
    """RocketMQ's `tagsString2tagsCode`: the hash of the whole TAGS value, 0 if empty."""
    if not tags:
        return 0
    return java_string_hash(tags)
