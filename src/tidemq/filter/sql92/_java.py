"""Java value semantics the RocketMQ filter relies on.

Property values arrive as strings; RocketMQ's ``ComparisonExpression``
converts them with ``Integer.valueOf``, ``Long.valueOf``, ``Double.valueOf``
or ``Boolean.valueOf`` depending on the literal on the other side, and orders
doubles with ``Double.compareTo`` (NaN above everything, -0.0 below 0.0).
These helpers reproduce exactly that, and raise :class:`EvalError` where Java
throws (which makes the whole expression evaluate to false).
"""

from __future__ import annotations

import math
import re
from enum import Enum

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class JType(Enum):
    """Static Java type of an operand (what RocketMQ's conversions switch on)."""

    NULL = "null"
    BOOL = "Boolean"
    INT = "Integer"
    LONG = "Long"
    DOUBLE = "Double"
    STRING = "String"


NUMERIC = frozenset({JType.INT, JType.LONG, JType.DOUBLE})


class EvalError(Exception):
    """A Java exception during evaluation: the message is filtered out."""


# String.trim() removes every char <= U+0020 (Double.valueOf trims first).
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))
_PLAIN_NUMBER_CHARS = "0123456789.eE+-"
# Unambiguous alternatives keep the match linear in the input length.
_JAVA_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?")
_JAVA_HEX = re.compile(
    r"[+-]?0[xX](?:[0-9a-fA-F]+(?:\.[0-9a-fA-F]*)?|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+[fFdD]?"
)


def parse_int32(text: str) -> int:
    """``Integer.valueOf(text)``."""
    if len(text) < 10 and text.isdecimal():  # the common case, always in range
        return int(text)
    value = _parse_integer(text)
    if INT32_MIN <= value <= INT32_MAX:
        return value
    raise EvalError(f"Integer.valueOf: out of range: {text[:40]!r}")


def parse_int64(text: str) -> int:
    """``Long.valueOf(text)``."""
    if len(text) < 19 and text.isdecimal():  # the common case, always in range
        return int(text)
    value = _parse_integer(text)
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise EvalError(f"Long.valueOf: out of range: {text[:40]!r}")


def _parse_integer(text: str) -> int:
    signed = text[:1] in ("+", "-")
    digits = text[1:] if signed else text
    # isdecimal() is Unicode category Nd, the digits Character.digit accepts.
    if not digits.isdecimal():
        raise EvalError(f"not a number: {text[:40]!r}")
    if len(digits) <= 19:
        return int(text)
    significant = digits.lstrip("0") or "0"
    if len(significant) > 19:  # out of any range; avoids int() of huge text
        raise EvalError(f"out of range: {text[:40]!r}")
    return -int(significant) if text[0] == "-" else int(significant)


def parse_double(text: str) -> float:
    """``Double.valueOf(text)``: trimmed; NaN, Infinity, f/d suffixes, hex."""
    if not text.strip(_PLAIN_NUMBER_CHARS):
        # Only [0-9.eE+-]: Python's float() accepts exactly Java's forms here.
        try:
            return float(text)
        except ValueError:
            raise EvalError(f"Double.valueOf: not a number: {text[:40]!r}") from None
    s = text.strip(_JAVA_TRIM)
    body = s[1:] if s[:1] in ("+", "-") else s
    if body == "NaN":
        return math.nan
    if body == "Infinity":
        return -math.inf if s[0] == "-" else math.inf
    if _JAVA_DECIMAL.fullmatch(s):
        return float(s.rstrip("fFdD"))
    if _JAVA_HEX.fullmatch(s):
        return float.fromhex(s.rstrip("fFdD"))
    raise EvalError(f"Double.valueOf: not a number: {text[:40]!r}")


def parse_boolean(text: str) -> bool:
    """``Boolean.valueOf(text)``: true only for "true" in any case."""
    return len(text) == 4 and text.isascii() and text.lower() == "true"


def compare_doubles(a: float, b: float) -> int:
    """``Double.compare``: a total order, NaN greatest, -0.0 < 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    if a == b:
        if a == 0.0:
            return int(math.copysign(1.0, a) > math.copysign(1.0, b)) - int(
                math.copysign(1.0, a) < math.copysign(1.0, b)
            )
        return 0
    a_nan, b_nan = a != a, b != b
    return int(a_nan) - int(b_nan)


def compare_plain(a: object, b: object) -> int:
    """``compareTo`` for Integer/Long/String/Boolean of the same class."""
    return int(a > b) - int(a < b)  # type: ignore[operator]
