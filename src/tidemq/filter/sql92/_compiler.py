"""Compile a syntax tree into nested closures (no tree walking per message).

Values at run time are ``None`` (SQL NULL), ``bool``, ``int``, ``float`` or
``str``. The Java class of every operand is known statically (properties are
Strings, conditions are Booleans, literals are Integer/Long/Double/String),
so the conversion RocketMQ's ``ComparisonExpression.__compare`` would pick is
chosen here once, and the hot case "property op literal" gets a closure that
does one dict lookup, at most one conversion and one comparison.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from tidemq.filter.sql92._java import (
    NUMERIC,
    EvalError,
    JType,
    compare_doubles,
    compare_plain,
    parse_boolean,
    parse_double,
    parse_int32,
    parse_int64,
)
from tidemq.filter.sql92._nodes import (
    BoolCast,
    Compare,
    Const,
    In,
    IsNull,
    Logic,
    Match,
    Negate,
    Node,
    Not,
    Prop,
)

Value = bool | int | float | str | None
Properties = Mapping[str, str]
Evaluator = Callable[[Properties], Value]
Comparator = Callable[[Value, Value], int]

_OUTCOME: dict[str, Callable[[int], bool]] = {
    "=": (0).__eq__,
    ">": (0).__lt__,
    ">=": (0).__le__,
    "<": (0).__gt__,
    "<=": (0).__ge__,
}
_DIRECT: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
_FROM_STRING: dict[JType, Callable[[str], Value]] = {
    JType.INT: parse_int32,
    JType.LONG: parse_int64,
    JType.DOUBLE: parse_double,
    JType.BOOL: parse_boolean,
}
_UNFOLDED = object()


def compile_node(node: Node) -> Evaluator:
    """A function of the properties returning the node's value."""
    if isinstance(node, Const):
        return _constant(node.value)
    if isinstance(node, Prop):
        name = node.name
        return lambda properties: properties.get(name)
    if isinstance(node, Negate):
        return _compile_negate(node)
    if isinstance(node, Compare):
        return _compile_compare(node)
    if isinstance(node, Logic):
        return _compile_logic(node)
    if isinstance(node, Not):
        operand = node.operand
        if isinstance(operand, IsNull) and isinstance(operand.operand, Prop):
            present = operand.operand.name
            return lambda properties: properties.get(present) is not None
        return _compile_not(compile_node(operand))
    if isinstance(node, IsNull):
        if isinstance(node.operand, Prop):
            absent = node.operand.name
            return lambda properties: properties.get(absent) is None
        inner = compile_node(node.operand)
        return lambda properties: inner(properties) is None
    if isinstance(node, In):
        return _compile_in(node)
    if isinstance(node, Match):
        return _compile_match(node)
    return _compile_bool_cast(node)


def static_type(node: Node) -> JType:
    """The Java class the node's non-NULL values have."""
    if isinstance(node, Const):
        return node.jtype
    if isinstance(node, Prop):
        return JType.STRING
    if isinstance(node, Negate):
        if fold(node) is _UNFOLDED:
            return JType.NULL  # negating a condition yields NULL
        return _literal_type(node.operand)
    return JType.BOOL


def fold(node: Node) -> object:
    """The constant value of literals and negated literals, else _UNFOLDED."""
    if isinstance(node, Const):
        return node.value
    if isinstance(node, Negate):
        inner = node.operand
        if isinstance(inner, Prop):
            return None  # negating a String yields NULL, without side effects
        value = fold(inner)
        if value is _UNFOLDED:
            return _UNFOLDED
        if isinstance(value, int | float) and not isinstance(value, bool):
            return -value
        return None
    return _UNFOLDED


def _literal_type(node: Node) -> JType:
    """Integer vs Long survives negation (RocketMQ negates within the class)."""
    while isinstance(node, Negate):
        node = node.operand
    return node.jtype if isinstance(node, Const) else JType.NULL


def _constant(value: Value) -> Evaluator:
    return lambda properties: value


def _compile_negate(node: Negate) -> Evaluator:
    folded = fold(node)
    if folded is not _UNFOLDED:
        assert folded is None or isinstance(folded, bool | int | float | str)
        return _constant(folded)
    inner = compile_node(node.operand)  # a condition: evaluate it for its errors

    def negate(properties: Properties) -> Value:
        inner(properties)
        return None

    return negate


def _operand(node: Node) -> tuple[Evaluator, JType, object]:
    folded = fold(node)
    if folded is _UNFOLDED:
        return compile_node(node), static_type(node), _UNFOLDED
    jtype = JType.NULL if folded is None else _literal_type(node)
    assert folded is None or isinstance(folded, bool | int | float | str)
    return _constant(folded), jtype, folded


def _compile_compare(node: Compare) -> Evaluator:
    op = node.op
    left, left_type, _ = _operand(node.left)
    right, right_type, right_value = _operand(node.right)
    equality = op == "="
    if isinstance(node.left, Prop) and right_value is not _UNFOLDED and right_value is not None:
        fast = _property_versus_literal(node.left.name, op, right_type, right_value)
        if fast is not None:
            return fast
    compare = _comparator(left_type, right_type, relational=not equality)
    outcome = _OUTCOME[op]
    if equality:

        def equal(properties: Properties) -> Value:
            lv = left(properties)
            rv = right(properties)
            if lv is None:
                return True if rv is None else None
            if rv is None:
                return False
            return compare(lv, rv) == 0

        return equal

    def relate(properties: Properties) -> Value:
        lv = left(properties)
        if lv is None:
            return None
        rv = right(properties)
        if rv is None:
            return None
        return outcome(compare(lv, rv))

    return relate


def _property_versus_literal(name: str, op: str, jtype: JType, literal: object) -> Evaluator | None:
    if jtype is JType.STRING and op == "=":

        def string_equal(properties: Properties) -> Value:
            value = properties.get(name)
            return None if value is None else value == literal

        return string_equal
    if jtype in (JType.INT, JType.LONG, JType.BOOL):
        convert = _FROM_STRING[jtype]
        direct = _DIRECT[op]

        def integral(properties: Properties) -> Value:
            value = properties.get(name)
            return None if value is None else direct(convert(value), literal)

        return integral
    if jtype is JType.DOUBLE:
        assert isinstance(literal, float)
        bound = literal
        outcome = _OUTCOME[op]

        def floating(properties: Properties) -> Value:
            value = properties.get(name)
            if value is None:
                return None
            return outcome(compare_doubles(parse_double(value), bound))

        return floating
    return None


def _comparator(left: JType, right: JType, relational: bool) -> Comparator:
    """RocketMQ's __compare for non-NULL values of the two static types."""
    if left is JType.STRING and right is JType.STRING:
        if relational:
            return lambda a, b: compare_doubles(parse_double(a), parse_double(b))  # type: ignore[arg-type]
        return compare_plain
    if left is right:
        return compare_doubles if left is JType.DOUBLE else compare_plain  # type: ignore[return-value]
    if left is JType.BOOL:
        if right is JType.STRING:
            return _class_cast_error  # Boolean.valueOf((String) aBoolean)
        return _less
    if right is JType.BOOL:
        if left is JType.STRING:
            return lambda a, b: compare_plain(parse_boolean(a), b)  # type: ignore[arg-type]
        return _less
    if left in NUMERIC and right in NUMERIC:
        if JType.DOUBLE in (left, right):
            return lambda a, b: compare_doubles(float(a), float(b))  # type: ignore[arg-type]
        return compare_plain
    if left is JType.STRING and right in NUMERIC:
        to_left = _FROM_STRING[right]
        target = right
        return lambda a, b: _typed_compare(target, to_left(a), b)  # type: ignore[arg-type]
    if right is JType.STRING and left in NUMERIC:
        to_right = _FROM_STRING[left]
        source = left
        return lambda a, b: _typed_compare(source, a, to_right(b))  # type: ignore[arg-type]
    return _less  # NULL never reaches a comparator


def _typed_compare(jtype: JType, a: Value, b: Value) -> int:
    if jtype is JType.DOUBLE:
        return compare_doubles(a, b)  # type: ignore[arg-type]
    return compare_plain(a, b)


def _less(a: Value, b: Value) -> int:
    return -1  # RocketMQ's answer for classes it cannot convert


def _class_cast_error(a: Value, b: Value) -> int:
    raise EvalError("java.lang.ClassCastException: Boolean cannot be cast to String")


def _compile_logic(node: Logic) -> Evaluator:
    """Left to right with short-circuit; n-ary so long chains do not nest."""
    operands = tuple(compile_node(child) for child in node.operands)
    # AND stops at FALSE, OR at TRUE; otherwise NULL if any operand was NULL.
    decisive = node.op == "OR"
    if len(operands) == 2:
        first, second = operands

        def binary(properties: Properties) -> Value:
            a = first(properties)
            if a is decisive:
                return decisive
            b = second(properties)
            if b is decisive:
                return decisive
            return None if a is None or b is None else not decisive

        return binary

    def chain(properties: Properties) -> Value:
        unknown = False
        for operand in operands:
            value = operand(properties)
            if value is decisive:
                return decisive
            if value is None:
                unknown = True
        return None if unknown else not decisive

    return chain


def _compile_not(inner: Evaluator) -> Evaluator:
    def negation(properties: Properties) -> Value:
        value = inner(properties)
        return None if value is None else not value

    return negation


def _compile_in(node: In) -> Evaluator:
    name, values, negated = node.prop.name, node.values, node.negated

    def membership(properties: Properties) -> Value:
        value = properties.get(name)
        return None if value is None else (value in values) != negated

    return membership


def _compile_match(node: Match) -> Evaluator:
    search, negated = node.search, node.negated
    if not search:
        return _constant(False)  # RocketMQ: empty search is FALSE, even when negated
    inner = compile_node(node.operand)
    test: Callable[[str], bool]
    if node.kind == "CONTAINS":
        test = lambda value: search in value  # noqa: E731
    elif node.kind == "STARTSWITH":
        test = lambda value: value.startswith(search)  # noqa: E731
    else:
        test = lambda value: value.endswith(search)  # noqa: E731

    def match(properties: Properties) -> Value:
        value = inner(properties)
        if not isinstance(value, str):
            return False  # NULL and non-strings are FALSE, not NULL
        return test(value) != negated

    return match


def _compile_bool_cast(node: BoolCast) -> Evaluator:
    name = node.prop.name

    def bool_cast(properties: Properties) -> Value:
        return None if properties.get(name) is None else False

    return bool_cast
