"""Syntax tree of a parsed selector (immutable; compiled once to closures).

``depth`` is the height of the subtree, kept so the parser can refuse trees
that would make compilation or evaluation recurse too deeply.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.filter.sql92._java import JType


@dataclass(frozen=True, slots=True)
class Const:
    """A literal (RocketMQ's ConstantExpression); TRUE/FALSE/NULL are boolean."""

    value: bool | int | float | str | None
    jtype: JType
    position: int
    depth: int = 1

    @property
    def is_boolean(self) -> bool:
        return self.jtype in (JType.BOOL, JType.NULL)


@dataclass(frozen=True, slots=True)
class Prop:
    """A message property (a string, or NULL when absent)."""

    name: str
    position: int
    depth: int = 1


@dataclass(frozen=True, slots=True)
class Negate:
    """Unary minus: numbers negate, anything else evaluates to NULL."""

    operand: Node
    position: int
    depth: int


@dataclass(frozen=True, slots=True)
class Compare:
    """``=``, ``>``, ``>=``, ``<``, ``<=`` (``<>`` is NOT of ``=``)."""

    op: str
    left: Node
    right: Node
    position: int
    depth: int


@dataclass(frozen=True, slots=True)
class IsNull:
    operand: Node
    position: int
    depth: int


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node
    position: int
    depth: int


@dataclass(frozen=True, slots=True)
class Logic:
    """AND / OR over two or more operands, evaluated left to right."""

    op: str
    operands: tuple[Node, ...]
    position: int
    depth: int


@dataclass(frozen=True, slots=True)
class In:
    prop: Prop
    values: frozenset[str]
    negated: bool
    position: int
    depth: int = 2


@dataclass(frozen=True, slots=True)
class Match:
    """CONTAINS / STARTSWITH / ENDSWITH a string literal, possibly negated."""

    kind: str
    operand: Node
    search: str
    negated: bool
    position: int
    depth: int


@dataclass(frozen=True, slots=True)
class BoolCast:
    """A bare property used as a condition: NULL if absent, else FALSE."""

    prop: Prop
    position: int
    depth: int = 2


Node = Const | Prop | Negate | Compare | IsNull | Not | Logic | In | Match | BoolCast
BOOLEAN_NODES = (Compare, IsNull, Not, Logic, In, Match, BoolCast)


def is_boolean(node: Node) -> bool:
    """True for RocketMQ's BooleanExpression kinds."""
    if isinstance(node, Const):
        return node.is_boolean
    return isinstance(node, BOOLEAN_NODES)
