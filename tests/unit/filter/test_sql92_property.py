"""tidemq's SQL92 filter against an independent reference of RocketMQ's rules.

The reference (``sql92_reference.py``) was written from the Java sources; the
module docstring there lists every rule with its source.  Random ASTs are
rendered to SQL text with random keyword case, whitespace and parentheses
around every composite sub-expression, then compiled by tidemq and evaluated
on random property maps; both must agree on "delivered or not", and tidemq
must reject exactly the expressions Java's parser rejects.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tidemq.filter.sql92 import SqlFilterError, compile_sql92

sys.path.insert(0, str(Path(__file__).parent))

from sql92_reference import (
    And,
    Between,
    BoolLit,
    Cmp,
    FloatLit,
    In,
    IntLit,
    IsNull,
    Neg,
    Node,
    Not,
    NullLit,
    Or,
    Plus,
    Prop,
    StrLit,
    StrOp,
    matches,
    render,
    static_error,
)

# --- strategies -------------------------------------------------------------

# identifiers that start with keywords must still lex as identifiers (longest match)
NAMES = ("a", "b", "Ab", "x_1", "$d", "notx", "In_", "ANDy", "nullable", "true1")
# "\u0665", "\uff15": Arabic-Indic and fullwidth 5, which Integer.valueOf accepts
INTERESTING_VALUES = (
    "0", "1", "-1", "5", "10", "+3", "007", "2.5", "-0.5", "1e3", "1E-2", ".5", "5.",
    " 7", "7 ", "2147483648", "-2147483649", "9223372036854775808", "NaN", "Infinity",
    "-Infinity", "-0", "-0.0", "abc", "", "true", "false", "TRUE", "x'y", "a b", "3abc",
    "\u0665", "\uff15", "5d", "2.5F", "0x1p3", "0x1.4p2", "1_0", "inf", "nan", "\u00a05",
    "\x005", "5\t", "1e400",
)  # fmt: skip
value_text = st.one_of(
    st.sampled_from(INTERESTING_VALUES),
    st.sampled_from(INTERESTING_VALUES),
    st.sampled_from(["true", "TRUE", "false"]),
    st.sampled_from(["5", " 5", "5\t", "5.0", "-3", "\x007"]),
    st.integers(-15, 15).map(str),
    st.integers(-(2**40), 2**40).map(str),
    st.floats(-20.0, 20.0).map(repr),
    st.text(alphabet="0123456789.-+eE atrufl'x", max_size=6),
)
props_strategy = st.fixed_dictionaries({}, optional={name: value_text for name in NAMES})

# "a" and "b" most of the time, so expressions and property maps meet often
prop = st.one_of(st.sampled_from(["a", "b"]), st.sampled_from(NAMES)).map(Prop)
int_lit = st.one_of(
    st.builds(IntLit, st.integers(0, 12)),
    st.builds(
        IntLit,
        st.one_of(st.integers(1, 12), st.sampled_from([2147483647, 2147483648, 2**63 - 1, 2**63])),
        st.sampled_from(["", "L", "l"]),
    ),
)
float_lit = st.one_of(
    st.sampled_from(["2.5", "0.5", ".5", "5.", "1e3", "1E-2", "10.0", "3.0e0", "1.5E+1", "1.e1"]),
    st.sampled_from([".5E1", "0.0", "1e400", "1e-400"]),  # Java rejects the last three
    st.floats(min_value=0.001, max_value=1000.0).map(repr),
).map(FloatLit)
search_text = st.one_of(st.sampled_from(INTERESTING_VALUES), st.text(max_size=4))
str_lit = search_text.map(StrLit)
bool_lit = st.booleans().map(BoolLit)
null_lit = st.just(NullLit())

number_operand = st.one_of(
    prop,
    prop,
    prop,
    int_lit,
    float_lit,
    st.builds(Neg, st.one_of(prop, int_lit, float_lit)),
    st.builds(Plus, int_lit),
)
any_operand = st.one_of(
    prop, prop, prop, int_lit, float_lit, str_lit, bool_lit, null_lit, st.builds(Neg, int_lit)
)
cmp_ops = st.sampled_from(["=", "<>", ">", ">=", "<", "<="])

atoms = st.one_of(
    st.builds(Cmp, cmp_ops, prop, st.one_of(int_lit, float_lit, str_lit, bool_lit, prop)),
    st.builds(Cmp, cmp_ops, any_operand, any_operand),
    st.builds(Cmp, st.sampled_from([">", ">=", "<", "<="]), number_operand, number_operand),
    st.builds(Between, number_operand, number_operand, number_operand, st.booleans()),
    st.builds(Between, prop, int_lit, int_lit, st.booleans()),
    st.builds(
        In,
        st.one_of(prop, prop, prop, st.builds(Plus, prop), str_lit),
        st.lists(search_text, min_size=1, max_size=4).map(tuple),
        st.booleans(),
    ),
    st.builds(
        StrOp,
        st.sampled_from(["CONTAINS", "STARTSWITH", "ENDSWITH"]),
        any_operand,
        search_text,
        st.booleans(),
    ),
    st.builds(IsNull, any_operand, st.booleans()),
    bool_lit,
    null_lit,
    prop,
    prop,
)


def _extend(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    return st.one_of(
        st.builds(Not, children),
        st.builds(And, children, children),
        st.builds(Or, children, children),
        st.builds(And, children, st.one_of(children, int_lit, st.builds(Neg, prop))),
        st.builds(Cmp, cmp_ops, children, st.one_of(children, bool_lit, any_operand)),
        st.builds(IsNull, children, st.booleans()),
        st.builds(StrOp, st.just("CONTAINS"), children, search_text, st.booleans()),
        st.builds(Neg, children).flatmap(
            lambda n: st.builds(Cmp, cmp_ops, st.just(n), number_operand)
        ),
    )


expressions = st.recursive(atoms, _extend, max_leaves=8)

PROPERTY_SETTINGS = settings(
    max_examples=800,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def check_against_reference(
    ast: Node, maps: list[dict[str, str]], rng: random.Random, minimal: bool = False
) -> None:
    text = render(ast, rng, minimal)
    reason = static_error(ast)
    if reason is not None:
        try:
            compile_sql92(text)
        except SqlFilterError:
            return
        pytest.fail(f"{text!r} compiled, but Java rejects it: {reason}")
    expression = compile_sql92(text)
    for props in maps:
        expected = matches(ast, props)
        got = expression.evaluate(props)
        assert got is expected, f"{text!r} on {props!r}: tidemq {got}, Java {expected}"


property_inputs = {
    "ast": expressions,
    "maps": st.lists(props_strategy, min_size=1, max_size=4),
    "rng": st.randoms(use_true_random=False),
}


@PROPERTY_SETTINGS
@given(**property_inputs)
@example(
    ast=Cmp(">", Prop("a"), IntLit(5)), maps=[{"a": "10"}, {"a": "2.5"}, {}], rng=random.Random(1)
)
def test_compiled_filter_agrees_with_reference(
    ast: Node, maps: list[dict[str, str]], rng: random.Random
) -> None:
    """Fully parenthesised text: semantics only."""
    check_against_reference(ast, maps, rng)


@PROPERTY_SETTINGS
@given(**property_inputs)
@example(ast=Cmp("=", Not(Prop("a")), StrLit("x")), maps=[{"a": "y"}, {}], rng=random.Random(1))
def test_precedence_follows_java(ast: Node, maps: list[dict[str, str]], rng: random.Random) -> None:
    """Parentheses only where Java's grammar needs them: precedence and associativity."""
    check_against_reference(ast, maps, rng, minimal=True)


# --- hand-picked cases, each one rule of the Java code ----------------------

P = Prop
EDGE_CASES: list[tuple[str, Node, dict[str, str]]] = [
    ("string prop vs int literal is parsed as Integer", Cmp("=", P("a"), IntLit(5)), {"a": "5"}),
    (
        "Integer.valueOf rejects '5.0' -> error",
        Or(Cmp("=", P("a"), IntLit(5)), BoolLit(True)),
        {"a": "5.0"},
    ),
    (
        "Double.valueOf trims, Integer.valueOf does not",
        Cmp("=", P("a"), FloatLit("7.0")),
        {"a": " 7"},
    ),
    ("Integer.valueOf does not trim", Cmp("=", P("a"), IntLit(7)), {"a": " 7"}),
    ("null left of '=' is NULL", Not(Cmp("=", P("a"), StrLit("x"))), {}),
    ("null right of '=' is FALSE", Not(Cmp("=", StrLit("x"), P("a"))), {}),
    ("two missing properties are equal", Cmp("=", P("a"), P("b")), {}),
    (
        "two string properties compare as strings with =",
        Cmp("=", P("a"), P("b")),
        {"a": "1", "b": "1.0"},
    ),
    (
        "two string properties compare as doubles with >",
        Cmp(">=", P("a"), P("b")),
        {"a": "1", "b": "1.0"},
    ),
    ("bare property is FALSE when present", Not(P("a")), {"a": "true"}),
    ("bare property is NULL when missing", Not(P("a")), {}),
    (
        "CONTAINS on missing property is FALSE, so NOT is TRUE",
        Not(StrOp("CONTAINS", P("a"), "x")),
        {},
    ),
    ("NOT CONTAINS on missing property is FALSE", StrOp("CONTAINS", P("a"), "x", negated=True), {}),
    ("CONTAINS '' is always FALSE", StrOp("CONTAINS", P("a"), "", negated=True), {"a": "abc"}),
    ("STARTSWITH", StrOp("STARTSWITH", P("a"), "ab"), {"a": "abc"}),
    ("ENDSWITH", StrOp("ENDSWITH", P("a"), "bc"), {"a": "abc"}),
    ("IN on missing property is NULL", Not(In(P("a"), ("x",))), {}),
    ("NOT IN", In(P("a"), ("x", "y"), negated=True), {"a": "z"}),
    ("IN compares strings, not numbers", In(P("a"), ("1",)), {"a": "1.0"}),
    ("BETWEEN on numeric string", Between(P("a"), IntLit(1), IntLit(3)), {"a": "2"}),
    ("NOT BETWEEN", Between(P("a"), IntLit(1), IntLit(3), negated=True), {"a": "4"}),
    ("BETWEEN on missing property is NULL", Not(Between(P("a"), IntLit(1), IntLit(3))), {}),
    ("negated bounds skip the order check", Between(P("a"), IntLit(3), Neg(IntLit(5))), {"a": "0"}),
    ("negating a property gives NULL", Not(Cmp("<", Neg(P("a")), IntLit(0))), {"a": "5"}),
    ("negative literal", Cmp(">", P("a"), Neg(IntLit(3))), {"a": "-2"}),
    (
        "OR: TRUE left hides an error on the right",
        Or(BoolLit(True), Cmp("=", P("a"), IntLit(1))),
        {"a": "x"},
    ),
    ("OR: error on the left aborts", Or(Cmp("=", P("a"), IntLit(1)), BoolLit(True)), {"a": "x"}),
    (
        "AND: FALSE left hides an error",
        Not(And(BoolLit(False), Cmp(">", P("a"), IntLit(1)))),
        {"a": "x"},
    ),
    ("AND: NULL and TRUE is NULL", Not(And(P("a"), BoolLit(True))), {}),
    ("OR: NULL or TRUE is TRUE", Or(NullLit(), BoolLit(True)), {}),
    ("OR: NULL or FALSE is NULL", Not(Or(NullLit(), BoolLit(False))), {}),
    ("property = TRUE uses Boolean.valueOf", Cmp("=", P("a"), BoolLit(True)), {"a": "TRUE"}),
    (
        "property = FALSE is TRUE for any non-'true' text",
        Cmp("=", P("a"), BoolLit(False)),
        {"a": "abc"},
    ),
    (
        "TRUE = property: ClassCastException",
        Or(Cmp("=", BoolLit(True), P("a")), BoolLit(True)),
        {"a": "true"},
    ),
    ("'x' = TRUE parses (right boolean only)", Cmp("=", StrLit("x"), BoolLit(False)), {}),
    ("NaN is greater than everything", Cmp(">", P("a"), FloatLit("1e3")), {"a": "NaN"}),
    (
        "Integer out of range -> error",
        Or(Cmp(">", P("a"), IntLit(1)), BoolLit(True)),
        {"a": "2147483648"},
    ),
    (
        "Long literal parses the property as Long",
        Cmp(">", P("a"), IntLit(2147483648)),
        {"a": "2147483649"},
    ),
    ("L suffix", Cmp("=", P("a"), IntLit(5, "L")), {"a": "5"}),
    ("IS NULL", IsNull(P("a")), {}),
    ("IS NOT NULL", IsNull(P("a"), negated=True), {"a": ""}),
    ("NULL IS NULL", IsNull(NullLit()), {}),
    ("identifiers are case-sensitive lookups", Cmp("=", P("Ab"), StrLit("1")), {"ab": "1"}),
    ("unary plus is transparent for IN", In(Plus(P("a")), ("x",)), {"a": "x"}),
    ("boolean equality", Cmp("=", Cmp(">", P("a"), IntLit(1)), BoolLit(True)), {"a": "2"}),
    # parse errors
    ("= NULL is rejected", Cmp("=", P("a"), NullLit()), {}),
    ("> 'x' is rejected", Cmp(">", P("a"), StrLit("x")), {}),
    ("> TRUE is rejected", Cmp(">", P("a"), BoolLit(True)), {}),
    ("BETWEEN 5 AND 1 is rejected", Between(P("a"), IntLit(5), IntLit(1)), {}),
    (
        "NOT BETWEEN 5 AND 1 is accepted",
        Between(P("a"), IntLit(5), IntLit(1), negated=True),
        {"a": "9"},
    ),
    ("BETWEEN NULL AND 1 is rejected", Between(P("a"), NullLit(), IntLit(1)), {}),
    ("IN needs a property", In(StrLit("x"), ("x",)), {}),
    ("NOT of a number is rejected", Not(IntLit(5)), {}),
    ("AND with a string is rejected", And(P("a"), StrLit("x")), {}),
    ("a number alone is rejected", IntLit(1), {}),
    ("TRUE = 'x' is rejected", Cmp("=", BoolLit(True), StrLit("x")), {}),
    ("comparison > comparison is rejected", Cmp(">", Cmp("=", P("a"), IntLit(1)), IntLit(0)), {}),
    ("float literal 0.0 is rejected (< Double.MIN_VALUE)", Cmp(">", P("a"), FloatLit("0.0")), {}),
    ("float literal 1e400 is rejected", Cmp(">", P("a"), FloatLit("1e400")), {}),
    ("integer literal beyond long is rejected", Cmp(">", P("a"), IntLit(2**63)), {}),
]


@pytest.mark.parametrize(("rule", "ast", "props"), EDGE_CASES, ids=[case[0] for case in EDGE_CASES])
def test_java_rule(rule: str, ast: Node, props: dict[str, str]) -> None:
    check_against_reference(ast, [props], random.Random(7))


@pytest.mark.parametrize(
    ("text", "props", "expected"),
    [
        ("a = '1' -- comment\n", {"a": "1"}, True),
        ("a /* block */ = '1'", {"a": "1"}, True),
        ("a = 'it''s'", {"a": "it's"}, True),
        ("a = 'x' AND b > 1 OR c = 'z'", {"c": "z"}, True),  # AND before OR
        ("a = '1' OR b = '2' AND c = '3'", {"a": "1", "b": "9"}, True),
        ("$d IS NOT NULL", {"$d": "v"}, True),
        ("_x = 'v'", {"_x": "v"}, True),
        ("a IS NULL IS NULL", {}, False),  # (TRUE) IS NULL
        ("a = 1 = TRUE", {"a": "1"}, True),  # equality is left-associative
        # NOT is a unary operator in SelectorParser.jj: it binds tighter than comparisons
        ("NOT a = 'x'", {"a": "y"}, False),  # (NOT a) = 'x' -> ClassCastException
        ("NOT a > 5", {"a": "1"}, None),  # (NOT a) > 5: a boolean cannot be compared
        ("NOT a IN ('x')", {"a": "y"}, None),  # IN needs a property on the left
        ("NOT a BETWEEN 1 AND 2", {"a": "5"}, None),
        ("NOT a IS NULL", {}, True),  # (NOT NULL) IS NULL
        ("NOT a IS NULL", {"a": "1"}, False),  # (NOT FALSE) IS NULL
        ("NOT NOT a IS NOT NULL", {"a": "1"}, True),
        ("NOT (a > 5)", {"a": "1"}, True),
        ("a = 10L", {"a": "10"}, True),
        ("a > - -5", {"a": "6"}, True),
        ("a > --5", {"a": "6"}, True),  # no newline: not a comment but two minus signs
        ("a > --5\n", {"a": "6"}, None),  # a comment: "a >" is incomplete
        ("a > -5 AND a < +5", {"a": "0"}, True),
        ("A = '1'", {"a": "1"}, False),  # identifiers are looked up as written
        ("a BETWEEN 1 AND 2 AND b = 'x'", {"a": "1", "b": "x"}, True),
        ("TRUE = a IS NULL", {}, False),  # (TRUE = a) IS NULL; TRUE = NULL is FALSE
        ("a IS NULL = TRUE", {}, True),
        ("a", {"a": "true"}, False),  # a present property casts to FALSE
        ("NULL", {}, False),
        ("a NOT /* c */ IN ('x')", {"a": "y"}, True),  # comments are skipped in lookahead
        ("a=1AND b=2", {"a": "1", "b": "2"}, True),  # no separator needed after a number
        ("a = 5l", {"a": "5"}, True),
        ("$ = 'v' AND _ = 'w'", {"$": "v", "_": "w"}, True),
        ("a\x0b= '1'", {"a": "1"}, None),  # only space, \t, \n, \r, \f are whitespace
        ("a\u00a0= '1'", {"a": "1"}, None),
        ("\u00e9 = '1'", {"\u00e9": "1"}, None),  # identifiers are [a-z_$][a-z0-9_$]*
        ("", {}, None),
        ("a = 'x' AND", {}, None),
        ("a IS TRUE", {"a": "1"}, None),
        ("a = '1' /* unterminated", {"a": "1"}, None),
        ("a IN ()", {"a": "1"}, None),
        ("a IN (1)", {"a": "1"}, None),
        ("a CONTAINS b", {"a": "1"}, None),
    ],
)
def test_grammar_text(text: str, props: dict[str, str], expected: bool | None) -> None:
    """``expected`` None: Java's parser rejects the text."""
    if expected is None:
        with pytest.raises(SqlFilterError):
            compile_sql92(text)
    else:
        assert compile_sql92(text).evaluate(props) is expected


@pytest.mark.xfail(
    strict=True,
    reason="known difference: RocketMQ's JmsSelector() has no <EOF>, so Java ignores trailing "
    "tokens; tidemq rejects them with the position of the first one (stricter)",
)
@pytest.mark.parametrize(
    ("text", "props"),
    [
        ("a = '1' -- comment without newline", {"a": "1"}),  # "-" "-" "comment" ... ignored
        ("a = 0L", {"a": "0"}),  # DECIMAL_LITERAL allows l/L only after [1-9]: "0" then "L"
        ("a = '1' b = '2'", {"a": "1"}),
        ("a = '1' )", {"a": "1"}),
    ],
)
def test_java_ignores_trailing_tokens(text: str, props: dict[str, str]) -> None:
    assert compile_sql92(text).evaluate(props) is True


# --- robustness -------------------------------------------------------------

SQL_PIECES = (
    "a", "b", "x_1", "1", "2.5", ".5", "1e3", "'s'", "''", "'", "(", ")", ",", "=", "<>", "<",
    ">", "<=", ">=", "+", "-", "--", "/*", "*/", " ", "\n", "AND", "OR", "NOT", "IN", "IS",
    "NULL", "TRUE", "FALSE", "BETWEEN", "CONTAINS", "STARTSWITH", "ENDSWITH", "!", "\\", "\x00",
    "é", "9223372036854775808",
)  # fmt: skip
garbage = st.one_of(
    st.lists(st.sampled_from(SQL_PIECES), max_size=12).map(" ".join),
    st.lists(st.sampled_from(SQL_PIECES), max_size=12).map("".join),
    st.text(max_size=40),
)


def compile_or_reject(text: str) -> None:
    try:
        expression = compile_sql92(text)
    except SqlFilterError as exc:
        assert isinstance(exc, ValueError)
        assert isinstance(exc.position, int) and 0 <= exc.position <= len(text), exc.position
        return
    assert expression.evaluate({"a": "1", "b": "x"}) in (True, False)
    assert expression.evaluate({}) in (True, False)


@settings(max_examples=500, deadline=1000)
@given(text=garbage)
def test_garbage_compiles_or_raises_sql_filter_error(text: str) -> None:
    compile_or_reject(text)


@settings(max_examples=30, deadline=None)
@given(
    depth=st.integers(1, 20_000), shape=st.sampled_from(["paren", "not", "minus", "open", "wide"])
)
def test_deep_nesting_never_crashes(depth: int, shape: str) -> None:
    text = {
        "paren": "(" * depth + "a = 1" + ")" * depth,
        "not": "NOT " * depth + "TRUE",
        "minus": "a > " + "-(" * depth + "1" + ")" * depth,
        "open": "(" * depth,
        "wide": "a = '1' OR " * depth + "b IS NULL",
    }[shape]
    compile_or_reject(text)
