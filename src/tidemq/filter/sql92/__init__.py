"""SQL92 message filters with RocketMQ's semantics (``org.apache.rocketmq.filter``).

``compile_sql92(text)`` parses once and returns an :class:`SqlExpression`
whose ``evaluate(properties)`` is true only when the selector is boolean TRUE
for a message's properties (``TAGS`` is just another property).

Grammar (``SelectorParser.jj``): ``= <> > >= < <=``, ``[NOT] BETWEEN a AND b``
(``a >= lo AND a <= hi``; NOT: ``a < lo OR a > hi``), ``prop [NOT] IN ('x',
...)`` (string literals, property on the left), ``IS [NOT] NULL``, ``[NOT]
CONTAINS|STARTSWITH|ENDSWITH 'x'``, ``AND OR NOT``, parentheses, unary ``+ -``,
``--`` and ``/* */`` comments. Keywords are case-insensitive; property names
are ASCII ``[A-Za-z_$][A-Za-z0-9_$]*`` and case-sensitive (no dots, as in
RocketMQ). Literals: decimal integers with optional ``L`` (Integer when they
fit 32 bits, else Long; beyond a Java long is an error; RocketMQ has no hex or
octal literals), floats (``1.5``, ``1.``, ``.5``, ``1e3``), ``'strings'`` with
``''`` for a quote, TRUE, FALSE, NULL.

Evaluation, as RocketMQ's expression classes do it:

* Property values are strings. Compared with an integer literal they are
  parsed with ``Integer.valueOf`` (``Long.valueOf`` for a Long literal),
  with a float literal by ``Double.valueOf`` (trimmed; NaN/Infinity; NaN
  sorts above everything, -0.0 below 0.0), with TRUE/FALSE by
  ``Boolean.valueOf`` ("true" in any case). Two strings under ``> >= < <=``
  are both parsed as doubles; under ``=`` they compare as text. A value that
  does not parse is an evaluation error, and any evaluation error makes the
  whole selector false (the broker catches it), so ``a = 1 OR b = 'x'`` is
  false when ``a`` is ``"abc"`` - unless OR already short-circuited on TRUE.
* Three-valued logic: AND is FALSE if an operand is FALSE, else NULL if one
  is NULL; OR dually; NOT NULL is NULL. ``=`` is RocketMQ's: both sides NULL
  is TRUE, only the left NULL is NULL, only the right NULL is FALSE;
  ``<>`` is NOT of that. ``> >= < <=``, IN and NOT IN with a NULL are NULL.
  CONTAINS/STARTSWITH/ENDSWITH (and their NOT forms) are FALSE for NULL or
  an empty search string. A bare property as a condition is NULL when
  absent and FALSE otherwise. Unary minus on anything but a number is NULL.
* Only TRUE selects: NULL, FALSE and errors filter the message out.

Precedence follows the JavaCC grammar: OR < AND < ``=``/``<>``/IS <
relational and the BETWEEN/IN/CONTAINS family < unary ``+ - NOT``. So
``NOT a = 1`` is ``(NOT a) = 1`` (never TRUE) and ``NOT a > 1`` is a syntax
error; write ``NOT (a = 1)``. Float literals must lie within
``Double.MIN_VALUE..Double.MAX_VALUE`` (RocketMQ rejects ``0.0``; write
``0``). A ``--`` comment needs a line break (else it is two minus signs).
Not supported, as in RocketMQ: hex/octal literals, LIKE, arithmetic, dotted
property names.

Limits against hostile input: at most 64 KiB of text (checked before
anything else), parentheses and prefix operators nested at most 64 deep and a
tree at most 128 deep (no Python recursion errors); every token pattern is
linear.
"""

from __future__ import annotations

from collections.abc import Mapping

from tidemq.filter.sql92._compiler import Evaluator, compile_node
from tidemq.filter.sql92._errors import SqlFilterError
from tidemq.filter.sql92._nodes import (
    BoolCast,
    Compare,
    In,
    IsNull,
    Logic,
    Match,
    Negate,
    Node,
    Not,
    Prop,
)
from tidemq.filter.sql92._parser import (
    MAX_EXPRESSION_LENGTH,
    MAX_NESTING,
    MAX_TREE_DEPTH,
    parse,
)

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "MAX_NESTING",
    "MAX_TREE_DEPTH",
    "SqlExpression",
    "SqlFilterError",
    "compile_sql92",
]


class SqlExpression:
    """A compiled selector; cheap to evaluate, safe to share between threads."""

    __slots__ = ("_evaluator", "_property_names", "text")

    def __init__(self, text: str, tree: Node) -> None:
        self.text = text
        self._evaluator: Evaluator = compile_node(tree)
        self._property_names = _property_names(tree)

    def evaluate(self, properties: Mapping[str, str]) -> bool:
        """True only when the expression evaluates to boolean TRUE; NULL,
        evaluation errors and non-boolean results -> False (never raises)."""
        try:
            return self._evaluator(properties) is True
        except Exception:
            return False  # RocketMQ's broker treats any evaluation error as no match

    def property_names(self) -> frozenset[str]:
        """Every property the expression reads (to fetch only those)."""
        return self._property_names

    def __repr__(self) -> str:
        return f"SqlExpression({self.text!r})"


def compile_sql92(text: str) -> SqlExpression:
    """Parse and compile ``text``; SqlFilterError names the problem and position."""
    if not isinstance(text, str):
        raise SqlFilterError(f"expression must be a string, not {type(text).__name__}", 0)
    return SqlExpression(text, parse(text))


def _property_names(tree: Node) -> frozenset[str]:
    names: set[str] = set()
    pending: list[Node] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, Prop):
            names.add(node.name)
        elif isinstance(node, BoolCast | In):
            names.add(node.prop.name)
        elif isinstance(node, Compare):
            pending.extend((node.left, node.right))
        elif isinstance(node, Logic):
            pending.extend(node.operands)
        elif isinstance(node, Negate | Not | IsNull | Match):
            pending.append(node.operand)
    return frozenset(names)
