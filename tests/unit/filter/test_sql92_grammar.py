"""Grammar and semantics edge cases of the SQL92 selector language.

Expected values follow RocketMQ's filter module (see the docstring of
``tidemq.filter.sql92``); the comments name the Java behaviour being pinned.
"""

from __future__ import annotations

import pytest

from tidemq.filter import SqlFilterError, compile_sql92
from tidemq.filter.sql92 import MAX_EXPRESSION_LENGTH, MAX_NESTING

PROPS = {
    "a": "5",
    "b": "x",
    "big": "3000000000",
    "f": "1.5",
    "word": "abc",
    "empty": "",
    "flag": "TRUE",
    "TAGS": "TagA",
    "$odd_Name9": "y",
}


def check(text: str, properties: dict[str, str] | None = None) -> bool:
    return compile_sql92(text).evaluate(PROPS if properties is None else properties)


# -- operators and literals ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a = 5", True),
        ("a <> 5", False),
        ("a <> 6", True),
        ("a > 4", True),
        ("a > 5", False),
        ("a >= 5", True),
        ("a < 6", True),
        ("a <= 4", False),
        ("5 = a", True),
        ("4 < a", True),
        ("a = 5L", True),
        ("a = 5.0", True),  # Double.valueOf("5") == 5.0
        ("a > 4.5", True),
        ("a > .5E1", False),
        ("a >= 5.", True),
        ("a = 50e-1", True),
        ("a = -5", False),
        ("a = +5", True),
        ("a > - -4", True),
        ("big = 3000000000", True),  # Long literal: Long.valueOf
        ("big > 2147483647", False),  # Integer literal: Integer.valueOf overflows
        ("big > 2147483647L", False),  # 'L' does not make it a Long: it fits an int
        ("big > 2147483648", True),
        ("f > 1.4", True),
        ("f < 2", False),  # Integer.valueOf("1.5") throws: no match
        ("b = 'x'", True),
        ("b <> 'x'", False),
        ("b = 'X'", False),
        ("TAGS = 'TagA'", True),
        ("$odd_Name9 = 'y'", True),
        ("empty = ''", True),
        ("'it''s' = 'it''s'", True),
        ("TRUE", True),
        ("FALSE", False),
        ("NULL", False),
        ("TRUE = TRUE", True),
        ("TRUE <> FALSE", True),
        ("flag = TRUE", True),  # Boolean.valueOf("TRUE")
        ("b = FALSE", True),  # Boolean.valueOf("x") is false
        ("1 = 1.0", True),
        ("2147483648 > 2147483647", True),
        ("a > -1.5", True),
        ("1 = TRUE", False),  # RocketMQ: incomparable classes give -1
    ],
)
def test_comparisons(text: str, expected: bool) -> None:
    assert check(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a BETWEEN 1 AND 5", True),
        ("a BETWEEN 5 AND 5", True),
        ("a BETWEEN 6 AND 9", False),
        ("a NOT BETWEEN 6 AND 9", True),
        ("a NOT BETWEEN 1 AND 9", False),
        ("a NOT BETWEEN 9 AND 1", True),  # RocketMQ checks bounds only without NOT
        ("a BETWEEN 4.5 AND 5.5", True),
        ("a BETWEEN -1 AND 10", True),
        ("a BETWEEN 1 AND 9 AND b = 'x'", True),  # the first AND belongs to BETWEEN
        ("b IN ('x')", True),
        ("b IN ('y', 'x', 'z')", True),
        ("b IN ('y')", False),
        ("b NOT IN ('y', 'z')", True),
        ("b NOT IN ('x')", False),
        ("a IN ('5')", True),
        ("missing IN ('x')", False),
        ("missing NOT IN ('x')", False),  # NULL
        ("NOT (missing NOT IN ('x'))", False),  # still NULL
        ("word CONTAINS 'b'", True),
        ("word CONTAINS 'z'", False),
        ("word NOT CONTAINS 'z'", True),
        ("word STARTSWITH 'ab'", True),
        ("word NOT STARTSWITH 'ab'", False),
        ("word ENDSWITH 'bc'", True),
        ("word NOT ENDSWITH 'x'", True),
        ("word CONTAINS ''", False),  # empty search is FALSE
        ("word NOT CONTAINS ''", False),  # ... also when negated
        ("missing NOT CONTAINS 'x'", False),  # NULL operand gives FALSE, not NULL
        ("NOT (missing CONTAINS 'x')", True),  # ... so NOT of it is TRUE
        ("'hello' STARTSWITH 'he'", True),
        ("missing IS NULL", True),
        ("a IS NULL", False),
        ("a IS NOT NULL", True),
        ("missing IS NOT NULL", False),
        ("(a > 9) IS NOT NULL", True),
        ("(missing > 9) IS NULL", True),
        ("NULL IS NULL", True),
    ],
)
def test_predicates(text: str, expected: bool) -> None:
    assert check(text) is expected


def test_keywords_are_case_insensitive_and_property_names_are_not() -> None:
    assert check("a between 1 and 9 and b in ('x') and word not contains 'z' and c is null")
    assert check("a BeTwEeN 1 AnD 9 Or FaLsE")
    assert check("tags = 'TagA'") is False  # the property is TAGS
    assert check("TaGs = 'TagA'", {"TaGs": "TagA"})


def test_comments_and_whitespace() -> None:
    assert check("a = 5 -- trailing comment\n")
    assert check("a /* inline */ =\t5\r\n-- line\nAND b = 'x'")
    assert check("\f a = 5 \n")


def test_string_literals_keep_their_content() -> None:
    assert check("b = 'it''s'", {"b": "it's"})
    assert check("b = ''''", {"b": "'"})
    assert check("b = 'AND OR -- /*'", {"b": "AND OR -- /*"})
    assert check("b = 'line\nbreak'", {"b": "line\nbreak"})
    assert check("b = 'ünï€ode'", {"b": "ünï€ode"})


# -- precedence --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("TRUE OR TRUE AND FALSE", True),  # AND binds tighter than OR
        ("(TRUE OR TRUE) AND FALSE", False),
        ("FALSE AND FALSE OR TRUE", True),
        ("NOT FALSE AND FALSE", False),  # NOT binds tighter than AND
        ("NOT (FALSE AND FALSE)", True),
        ("NOT FALSE OR TRUE", True),
        ("NOT (a = 6)", True),
        ("NOT (a = 5)", False),
        ("NOT NOT (a = 5)", True),
        # RocketMQ's NOT is unary and binds tighter than comparisons:
        ("NOT a = 6", False),  # (NOT a) = 6: Boolean vs Integer is never equal
        ("NOT a = 'x'", False),  # (NOT a) = 'x': ClassCastException
        ("NOT FALSE = TRUE", True),  # (NOT FALSE) = TRUE
        ("NOT missing IS NULL", True),  # (NOT missing) IS NULL: NOT NULL is NULL
        ("NOT a IS NULL", False),
        ("NOT (missing IS NULL)", False),
        ("NOT word CONTAINS 'b'", False),  # (NOT word) is no string: FALSE
        ("NOT (a BETWEEN 1 AND 3)", True),
        ("NOT (b IN ('x'))", False),
        ("a > 4 = TRUE", True),  # relational binds tighter than '='
        ("a = 5 = TRUE", True),  # '=' is left-associative
        ("TRUE = a > 4", True),
        ("b = NOT FALSE", False),  # NOT after an operator binds to its operand
        ("a = 5 AND NOT (b = 'y') OR FALSE", True),
    ],
)
def test_precedence(text: str, expected: bool) -> None:
    assert check(text) is expected


# -- NULL and three-valued logic ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("missing = 'x'", False),  # NULL
        ("NOT (missing = 'x')", False),  # NOT NULL is NULL
        ("missing <> 'x'", False),
        ("'x' = missing", False),  # RocketMQ: only the right side NULL -> FALSE
        ("'x' <> missing", True),  # ... so its negation is TRUE
        ("missing = other", True),  # both NULL -> TRUE
        ("missing > 1", False),
        ("NOT (missing > 1)", False),
        ("missing > 1 OR TRUE", True),
        ("missing > 1 AND FALSE", False),
        ("NOT (missing > 1 AND TRUE)", False),
        ("NOT (missing > 1 OR FALSE)", False),
        ("NOT (missing > 1 AND FALSE)", True),
        ("NOT NULL", False),
        ("NULL OR TRUE", True),
        ("NOT (NULL AND FALSE)", True),
        ("a", False),  # a bare present property is FALSE
        ("NOT a", True),
        ("missing", False),  # a bare absent property is NULL
        ("NOT missing", False),
        ("-word > 1 IS NULL", True),  # unary minus of a string is NULL
        ("-TRUE IS NULL", True),
    ],
)
def test_null_semantics(text: str, expected: bool) -> None:
    assert check(text) is expected


# -- evaluation errors -------------------------------------------------------------


def test_conversion_errors_reject_the_whole_message() -> None:
    # Integer.valueOf("abc") throws; RocketMQ's broker then reports no match.
    assert check("word = 1") is False
    assert check("NOT (word = 1)") is False
    assert check("word = 1 OR b = 'x'") is False
    assert check("b = 'x' OR word = 1") is True  # OR short-circuits first
    assert check("b = 'y' AND word = 1") is False
    assert check("word > b") is False  # two strings compare as doubles
    assert check("big = 1") is False  # out of Integer range
    assert check("a = 1", {"a": " 1"}) is False  # Integer.valueOf does not trim
    assert check("a = 1.0", {"a": " 1 "}) is True  # Double.valueOf does
    assert check("a = 1", {"a": "1_0"}) is False
    assert check("a = 10", {"a": "+10"}) is True
    assert check("a = 123", {"a": "\u0661\u0662\u0663"}) is True  # Character.digit: Nd digits
    assert check("a = 123.0", {"a": "\u0661\u0662\u0663"}) is False  # Double: ASCII only
    assert check("a = 2147483647", {"a": "2147483647"}) is True
    assert check("a = 2147483647", {"a": "-2147483649"}) is False  # out of Integer range
    assert check("a > 2147483648", {"a": "-2147483649"}) is False  # fine as a Long
    assert check("a = 1", {"a": "0" * 30 + "1"}) is True
    assert check("a > 1", {"a": "9" * 5000}) is False
    assert check("TRUE = b") is False  # Boolean cast of a String: ClassCastException
    assert check("(a > 1) = b") is False


def test_double_values_follow_java() -> None:
    assert check("a > 1.0", {"a": "NaN"}) is True  # NaN sorts above everything
    assert check("a = 1.0", {"a": "NaN"}) is False
    assert check("a > 1.0", {"a": "Infinity"}) is True
    assert check("a < 1.0", {"a": "-Infinity"}) is True
    assert check("a > 1.0", {"a": "inf"}) is False  # not a Java double
    assert check("a = 2.0", {"a": "2d"}) is True
    assert check("a = 2.0", {"a": "2.0f"}) is True
    assert check("a = 3.0", {"a": "0x1.8p1"}) is True
    assert check("a = 1.0", {"a": "1e0"}) is True
    assert check("a < b", {"a": "2", "b": "10"}) is True  # numeric, not text order
    assert check("a = b", {"a": "2", "b": "2.0"}) is False  # '=' on strings is text


def test_evaluate_never_raises_on_odd_property_maps() -> None:
    expression = compile_sql92("a > 1 AND b = 'x'")
    assert expression.evaluate({}) is False
    assert expression.evaluate({"a": "2", "b": "x"}) is True


def test_property_names_and_text() -> None:
    expression = compile_sql92(
        "a > 1 AND (b IN ('x') OR NOT c CONTAINS 'y') AND d IS NULL AND e AND -f < 1"
        " AND g BETWEEN 1 AND 2 AND 'k' = h"
    )
    assert expression.property_names() == frozenset("abcdefgh")
    assert compile_sql92("TRUE").property_names() == frozenset()
    assert expression.text.startswith("a > 1")


# -- malformed input and error positions ---------------------------------------------


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("", 0, "end of expression"),
        ("a >", 3, "end of expression"),
        ("a = 1 AND", 9, "end of expression"),
        ("(a = 1", 6, "')'"),
        ("a = 1)", 5, "')'"),
        ("a = 'abc", 4, "unterminated string"),
        ("a = 1 /* open", 6, "unterminated comment"),
        ("a # 1", 2, "'#'"),
        ("x.y = 1", 1, "'.'"),
        ("a == 1", 3, "'='"),
        ("a != 1", 2, "'!'"),
        ("a = NULL", 4, "NULL cannot be compared"),
        ("NULL <> a", 0, "NULL cannot be compared"),
        ("a > 'x'", 4, "cannot be compared with '>'"),
        ("TRUE < 1", 0, "cannot be compared"),
        ("(a = 1) >= 2", 1, "cannot be compared"),
        ("TRUE = 1", 7, "cannot be compared"),
        ("a IN (1)", 6, "string literal"),
        ("a IN ()", 6, "string literal"),
        ("a IN ('x',)", 10, "string literal"),
        ("a IN 'x'", 5, "'('"),
        ("(a) = 1 AND 'x' IN ('x')", 16, "IN needs a property"),
        ("a CONTAINS b", 11, "string literal"),
        ("a BETWEEN 5 AND 1", 10, "lower bound"),
        ("a BETWEEN NULL AND 1", 10, "cannot be NULL"),
        ("a BETWEEN 1 OR 2", 12, "AND of BETWEEN"),
        ("a NOT LIKE 'x'", 2, "'NOT'"),
        ("5", 0, "not a condition"),
        ("'x'", 0, "not a condition"),
        ("a = 1 AND 7", 10, "not a condition"),
        ("NOT -a", 4, "not a condition"),
        ("NOT a > 1", 0, "cannot be compared"),  # (NOT a) > 1, as in RocketMQ
        ("NOT a IN ('x')", 6, "IN needs a property"),
        ("a > 0.0", 4, "float literal range"),  # RocketMQ: below Double.MIN_VALUE
        ("a = 1e-400", 4, "float literal range"),
        ("a = 1 --no line break", 6, "'-'"),
        ("a = 1 b = 2", 6, "'b'"),
        ("007 = a", 1, "'0'"),
        ("0L = a", 1, "'L'"),
        ("1.5L = a", 3, "'L'"),
        ("99999999999999999999 = a", 0, "Java long"),
        ("a = 1e400", 4, "float literal range"),
        ("IN = 1", 0, "'IN'"),
    ],
)
def test_error_positions(text: str, position: int, fragment: str) -> None:
    with pytest.raises(SqlFilterError) as raised:
        compile_sql92(text)
    assert raised.value.position == position, str(raised.value)
    assert fragment in str(raised.value)
    assert f"position {position}" in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_largest_java_long_literal_is_accepted() -> None:
    assert check("a = 9223372036854775807", {"a": "9223372036854775807"})
    assert check("a = -9223372036854775807L", {"a": "-9223372036854775807"})


# -- limits against hostile input ---------------------------------------------------


def _refused(text: str) -> SqlFilterError:
    with pytest.raises(SqlFilterError) as raised:
        compile_sql92(text)
    return raised.value


def test_one_mebibyte_expression_is_refused_at_the_length_limit() -> None:
    text = "a = 1 AND " * 104_858 + "a = 1"
    assert len(text) >= 1 << 20
    with pytest.raises(SqlFilterError) as raised:
        compile_sql92(text)
    assert raised.value.position == MAX_EXPRESSION_LENGTH
    assert "longer than" in str(raised.value)


def test_expression_at_the_length_limit_compiles_and_evaluates_flat() -> None:
    clauses = [f"p{i} = '{i}'" for i in range(6000)]
    text = " AND ".join(clauses)
    while len(text) > MAX_EXPRESSION_LENGTH:
        clauses.pop()
        text = " AND ".join(clauses)
    expression = compile_sql92(text)  # thousands of ANDs: no recursion error
    matching = {f"p{i}": str(i) for i in range(len(clauses))}
    assert expression.evaluate(matching) is True
    assert expression.evaluate({**matching, "p0": "no"}) is False
    assert len(expression.property_names()) == len(clauses)


def test_nesting_limit() -> None:
    ok = "(" * MAX_NESTING + "a = 5" + ")" * MAX_NESTING
    assert check(ok)
    too_deep = "(" * (MAX_NESTING + 1) + "a = 5" + ")" * (MAX_NESTING + 1)
    assert _refused(too_deep).position == MAX_NESTING
    assert "nested" in str(_refused("(" * 30_000 + "a = 5" + ")" * 30_000))
    assert _refused("NOT " * 10_000 + "a = 5").position == 4 * MAX_NESTING
    assert "nested" in str(_refused("a = " + "- " * 10_000 + "1"))
    assert "nested" in str(_refused("a" + " = a" * 1_000))
    assert check("NOT " * (MAX_NESTING - 1) + "(a = 5)") is False  # 63 NOTs + 1 paren
    assert check("NOT " * (MAX_NESTING - 2) + "(a = 5)") is True


def test_hostile_literals_are_refused_or_handled() -> None:
    assert "unterminated" in str(_refused("a = '" + "''" * 30_000))
    assert "Java long" in str(_refused("a = " + "9" * 60_000))
    assert "float literal range" in str(_refused("a = " + "9" * 30_000 + "." + "9" * 30_000))
    assert "unterminated comment" in str(_refused("a = 1 /*" + "*" * 60_000))
    long_name = "p" * 60_000
    assert check(f"{long_name} = 'v'", {long_name: "v"})
    # Property values are arbitrary: a huge number-like value is just unequal.
    assert check("a = 1.0", {"a": "1" * 100_000 + "x"}) is False
    assert check("a = 1", {"a": "1" * 100_000}) is False


def test_non_string_expression_is_a_clear_error() -> None:
    with pytest.raises(SqlFilterError, match="must be a string"):
        compile_sql92(b"a = 1")  # type: ignore[arg-type]
