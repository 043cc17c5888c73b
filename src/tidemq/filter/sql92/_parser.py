"""Recursive-descent parser for RocketMQ's selector grammar.

Precedence, loosest first, exactly as ``SelectorParser.jj``::

    OR  <  AND  <  = <> IS [NOT] NULL  <  > >= < <= [NOT] BETWEEN/IN/
    CONTAINS/STARTSWITH/ENDSWITH  <  unary + - NOT

NOT is a unary operator binding tighter than any comparison, so
``NOT a = 1`` means ``(NOT a) = 1`` (never TRUE: a Boolean compared with a
number or string) and ``NOT a > 1`` does not parse; write ``NOT (a = 1)``.
Kept for compatibility: a selector must mean the same on a RocketMQ broker.

The parse-time checks of RocketMQ's ComparisonExpression are reproduced:
NULL literal with ``=``/``<>``; string/boolean literals and boolean
expressions with ``> >= < <=``; literal BETWEEN bounds that are NULL or
reversed; IN on something other than a property; a non-boolean expression
where a condition is required.
"""

from __future__ import annotations

from collections.abc import Callable

from tidemq.filter.sql92._errors import SqlFilterError
from tidemq.filter.sql92._java import INT32_MAX, INT64_MAX, NUMERIC, JType, compare_doubles
from tidemq.filter.sql92._lexer import Token, decode_string, tokenize
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
    is_boolean,
)

MAX_EXPRESSION_LENGTH = 64 * 1024
MAX_NESTING = 64
MAX_TREE_DEPTH = 2 * MAX_NESTING

_RELATIONAL = (">", ">=", "<", "<=")
_MATCH_KINDS = ("CONTAINS", "STARTSWITH", "ENDSWITH")
_NOT_FOLLOWERS = ("BETWEEN", "IN", *_MATCH_KINDS)


def parse(text: str) -> Node:
    """The boolean syntax tree of ``text``; SqlFilterError if malformed."""
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise SqlFilterError(
            f"expression longer than {MAX_EXPRESSION_LENGTH} characters", MAX_EXPRESSION_LENGTH
        )
    return _Parser(tokenize(text)).parse_selector()


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self._tokens = tokens
        self._index = 0
        self._nesting = 0

    # -- token helpers -------------------------------------------------------
    @property
    def _current(self) -> Token:
        return self._tokens[self._index]

    def _peek_kind(self, ahead: int = 1) -> str:
        index = min(self._index + ahead, len(self._tokens) - 1)
        return self._tokens[index].kind

    def _advance(self) -> Token:
        token = self._tokens[self._index]
        self._index += 1
        return token

    def _expect(self, kind: str, what: str) -> Token:
        if self._current.kind != kind:
            raise self._unexpected(what)
        return self._advance()

    def _unexpected(self, expected: str) -> SqlFilterError:
        token = self._current
        found = "end of expression" if token.kind == "EOF" else repr(token.text)
        return SqlFilterError(f"expected {expected}, found {found}", token.position)

    def _enter(self, token: Token) -> None:
        self._nesting += 1
        if self._nesting > MAX_NESTING:
            raise SqlFilterError(
                f"parentheses and prefix operators nested deeper than {MAX_NESTING}",
                token.position,
            )

    @staticmethod
    def _height(*children: Node) -> int:
        depth = 1 + max(child.depth for child in children)
        if depth > MAX_TREE_DEPTH:
            raise SqlFilterError(
                f"expression nested deeper than {MAX_TREE_DEPTH} levels", children[0].position
            )
        return depth

    # -- grammar ---------------------------------------------------------------
    def parse_selector(self) -> Node:
        node = self._or()
        if self._current.kind != "EOF":
            raise self._unexpected("an operator or end of expression")
        return self._condition(node)

    def _or(self) -> Node:
        return self._logic("OR", self._and)

    def _and(self) -> Node:
        return self._logic("AND", self._equality)

    def _logic(self, op: str, parse_operand: Callable[[], Node]) -> Node:
        first = parse_operand()
        if self._current.kind != op:
            return first
        operands = list(_flatten(op, self._condition(first)))
        while self._current.kind == op:
            self._advance()
            operands.extend(_flatten(op, self._condition(parse_operand())))
        depth = self._height(*operands)
        return Logic(op, tuple(operands), first.position, depth)

    def _equality(self) -> Node:
        left = self._comparison()
        while True:
            kind = self._current.kind
            if kind in ("=", "<>"):
                operator = self._advance()
                right = self._comparison()
                _check_equal_operands(left, right, operator)
                equal = Compare("=", left, right, left.position, self._height(left, right))
                left = equal if kind == "=" else Not(equal, left.position, self._height(equal))
            elif kind == "IS":
                self._advance()
                negated = self._current.kind == "NOT"
                if negated:
                    self._advance()
                self._expect("NULL", "NULL")
                test = IsNull(left, left.position, self._height(left))
                left = Not(test, left.position, self._height(test)) if negated else test
            else:
                return left

    def _comparison(self) -> Node:
        left = self._unary()
        while True:
            kind = self._current.kind
            if kind in _RELATIONAL:
                operator = self._advance()
                right = self._unary()
                left = self._relational(kind, left, right, operator)
            elif kind in _NOT_FOLLOWERS or (kind == "NOT" and self._peek_kind() in _NOT_FOLLOWERS):
                negated = kind == "NOT"
                if negated:
                    self._advance()
                left = self._predicate(left, negated)
            else:
                return left

    def _predicate(self, left: Node, negated: bool) -> Node:
        keyword = self._advance()
        if keyword.kind == "BETWEEN":
            low = self._unary()
            self._expect("AND", "AND of BETWEEN")
            high = self._unary()
            if negated:
                return Logic(
                    "OR",
                    (
                        self._relational("<", left, low, keyword),
                        self._relational(">", left, high, keyword),
                    ),
                    left.position,
                    self._height(left, low, high) + 1,
                )
            _check_between_bounds(low, high)
            return Logic(
                "AND",
                (
                    self._relational(">=", left, low, keyword),
                    self._relational("<=", left, high, keyword),
                ),
                left.position,
                self._height(left, low, high) + 1,
            )
        if keyword.kind == "IN":
            if not isinstance(left, Prop):
                raise SqlFilterError("IN needs a property on its left", keyword.position)
            self._expect("(", "'(' after IN")
            values = {decode_string(self._expect("STRING", "a string literal").text)}
            while self._current.kind == ",":
                self._advance()
                values.add(decode_string(self._expect("STRING", "a string literal").text))
            self._expect(")", "',' or ')'")
            return In(left, frozenset(values), negated, left.position, self._height(left))
        search = decode_string(
            self._expect("STRING", f"a string literal after {keyword.kind}").text
        )
        return Match(keyword.kind, left, search, negated, left.position, self._height(left))

    def _relational(self, op: str, left: Node, right: Node, operator: Token) -> Node:
        for operand in (left, right):
            if is_boolean(operand) or (isinstance(operand, Const) and operand.jtype not in NUMERIC):
                raise SqlFilterError(
                    f"{_describe(operand)} cannot be compared with '{operator.text}'",
                    operand.position,
                )
        return Compare(op, left, right, left.position, self._height(left, right))

    def _unary(self) -> Node:
        token = self._current
        if token.kind in ("+", "-", "NOT"):
            self._advance()
            self._enter(token)
            operand = self._unary()
            self._nesting -= 1
            if token.kind == "+":
                return operand
            if token.kind == "-":
                return Negate(operand, token.position, self._height(operand))
            operand = self._condition(operand)
            return Not(operand, token.position, self._height(operand))
        return self._primary()

    def _primary(self) -> Node:
        token = self._current
        kind = token.kind
        if kind == "(":
            self._advance()
            self._enter(token)
            node = self._or()
            self._nesting -= 1
            self._expect(")", "')'")
            return node
        if kind == "ID":
            self._advance()
            return Prop(token.text, token.position)
        if kind in ("INT", "FLOAT", "STRING", "TRUE", "FALSE", "NULL"):
            self._advance()
            return _literal(token)
        raise self._unexpected("a property, a literal or '('")

    @staticmethod
    def _condition(node: Node) -> Node:
        """RocketMQ's asBooleanExpression: properties become boolean casts."""
        if isinstance(node, Prop):
            return BoolCast(node, node.position)
        if not is_boolean(node):
            raise SqlFilterError(f"{_describe(node)} is not a condition", node.position)
        return node


def _flatten(op: str, node: Node) -> tuple[Node, ...]:
    if isinstance(node, Logic) and node.op == op:
        return node.operands
    return (node,)


def _literal(token: Token) -> Const:
    """RocketMQ's ConstantExpression.createFromDecimal / createFloat."""
    kind, text, position = token.kind, token.text, token.position
    if kind == "STRING":
        return Const(decode_string(text), JType.STRING, position)
    if kind == "TRUE":
        return Const(True, JType.BOOL, position)
    if kind == "FALSE":
        return Const(False, JType.BOOL, position)
    if kind == "NULL":
        return Const(None, JType.NULL, position)
    if kind == "INT":
        digits = text.rstrip("lL")
        value = int(digits) if len(digits) <= 19 else INT64_MAX + 1  # no 64 KiB int()
        if value > INT64_MAX:
            raise SqlFilterError(f"integer {text[:40]} does not fit in a Java long", position)
        return Const(value, JType.INT if value <= INT32_MAX else JType.LONG, position)
    number = float(text)
    if number == float("inf") or number == 0.0:
        # createFloat refuses values above Double.MAX_VALUE and, literally,
        # below Double.MIN_VALUE (4.9e-324) - which includes 0.0.
        raise SqlFilterError(
            f"number {text[:40]} is outside RocketMQ's float literal range"
            " (Double.MIN_VALUE..Double.MAX_VALUE; write 0 for zero)",
            position,
        )
    return Const(number, JType.DOUBLE, position)


def _describe(node: Node) -> str:
    if isinstance(node, Const):
        if node.jtype is JType.STRING:
            return f"string literal {node.value!r}"
        if node.jtype is JType.NULL:
            return "NULL"
        if node.jtype is JType.BOOL:
            return "TRUE" if node.value else "FALSE"
        return f"number {node.value!r}"
    if isinstance(node, Negate):
        return "a negation"
    if isinstance(node, Prop):
        return f"property {node.name!r}"
    return "a condition"


def _check_equal_operands(left: Node, right: Node, operator: Token) -> None:
    for operand in (left, right):
        if isinstance(operand, Const) and operand.jtype is JType.NULL:
            raise SqlFilterError(
                f"NULL cannot be compared with '{operator.text}' (use IS [NOT] NULL)",
                operand.position,
            )
    if (
        isinstance(left, Const)
        and isinstance(right, Const)
        and left.jtype is JType.BOOL
        and right.jtype is not JType.BOOL
    ):
        raise SqlFilterError(
            f"{_describe(left)} cannot be compared with {_describe(right)}", right.position
        )


def _check_between_bounds(low: Node, high: Node) -> None:
    if not (isinstance(low, Const) and isinstance(high, Const)):
        return
    for bound in (low, high):
        if bound.jtype is JType.NULL:
            raise SqlFilterError("BETWEEN bounds cannot be NULL", bound.position)
    if low.jtype in NUMERIC and high.jtype in NUMERIC:
        assert isinstance(low.value, int | float) and isinstance(high.value, int | float)
        reversed_bounds = (
            compare_doubles(float(high.value), float(low.value)) < 0
            if JType.DOUBLE in (low.jtype, high.jtype)
            else high.value < low.value
        )
        if reversed_bounds:
            raise SqlFilterError(
                f"BETWEEN lower bound {low.value!r} is greater than upper bound {high.value!r}",
                low.position,
            )
