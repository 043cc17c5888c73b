"""Java String.hashCode golden values.

Expected values were printed by a JDK (`String.hashCode()`), not computed by
the code under test.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.common.hashing import java_string_hash, tag_code

JAVA_HASHES = [
    ("TagA", 2598919),
    ("TagC", 2598921),
    ("", 0),
    ("*", 42),
    ("null", 3392903),
    ("\U0001f600", 1772899),  # one non-BMP char = two UTF-16 units D83D DE00
    ("a\U0001f600b", 57849694),
    ("héllo wörld", 1628148953),
    ("hello world, this is a long string that overflows", -1204019506),
    ("polygenelubricants", -2147483648),  # hashes to Integer.MIN_VALUE
    ("\ud800x", 1714296),  # a lone surrogate counts as itself
]


@pytest.mark.parametrize(("text", "expected"), JAVA_HASHES)
def test_matches_java_string_hashcode(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_tag_code_is_the_hash_of_the_whole_tag_string() -> None:
    assert tag_code("TagA") == 2598919
    assert tag_code("TagA || TagB") == java_string_hash("TagA || TagB")


@pytest.mark.parametrize("tags", [None, ""])
def test_tag_code_of_no_tag_is_zero(tags: str | None) -> None:
    assert tag_code(tags) == 0


def _reference_hash(text: str) -> int:
    """The definition, spelled out slowly: sum of unit * 31^(n-1-i) mod 2^32."""
    raw = text.encode("utf-16-be", "surrogatepass")
    units = [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]
    n = len(units)
    value = sum(unit * pow(31, n - 1 - i, 2**32) for i, unit in enumerate(units)) % 2**32
    return value - 2**32 if value >= 2**31 else value


@settings(max_examples=200)
@given(st.text())
def test_agrees_with_the_definition(text: str) -> None:
    assert java_string_hash(text) == _reference_hash(text)
    assert -(2**31) <= java_string_hash(text) < 2**31
