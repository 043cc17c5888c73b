"""Tokens of RocketMQ's selector grammar (``SelectorParser.jj``).

Longest match as in JavaCC: ``5.5E10`` is one float, ``07`` is two integers
(and so a syntax error), ``0L`` is ``0`` followed by an identifier.
A ``--`` comment needs its line break, as in JavaCC (without one, ``--``
is two minus signs). Keywords are
case-insensitive; identifiers are ASCII letters, digits, ``_``
and ``$`` (no dots) and keep their case. Every pattern is unambiguous, so
lexing is linear in the input length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tidemq.filter.sql92._errors import SqlFilterError

KEYWORDS = frozenset(
    {
        "NOT",
        "AND",
        "OR",
        "BETWEEN",
        "IN",
        "TRUE",
        "FALSE",
        "NULL",
        "IS",
        "CONTAINS",
        "STARTSWITH",
        "ENDSWITH",
    }
)

_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\n\r\f]+)
  | (?P<comment>--[^\n\r]*[\n\r]|/\*.*?\*/)
  | (?P<float>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?
             |\.[0-9]+(?:[eE][+-]?[0-9]+)?
             |[0-9]+[eE][+-]?[0-9]+)
  | (?P<int>0|[1-9][0-9]*[lL]?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<word>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|<=|>=|[=<>(),+-])
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Token:
    """``kind`` is a keyword, an operator, INT, FLOAT, STRING, ID or EOF."""

    kind: str
    text: str
    position: int


def tokenize(text: str) -> list[Token]:
    """All tokens of ``text`` followed by an EOF token."""
    tokens: list[Token] = []
    position = 0
    end = len(text)
    match = _TOKEN.match
    while position < end:
        found = match(text, position)
        if found is None:
            raise _lexical_error(text, position)
        group = found.lastgroup
        token_text = found.group()
        if group == "word":
            upper = token_text.upper()
            kind = upper if upper in KEYWORDS else "ID"
            tokens.append(Token(kind, token_text, position))
        elif group == "op":
            tokens.append(Token(token_text, token_text, position))
        elif group in ("int", "float", "string"):
            tokens.append(Token(str(group).upper(), token_text, position))
        position = found.end()
    tokens.append(Token("EOF", "", end))
    return tokens


def _lexical_error(text: str, position: int) -> SqlFilterError:
    char = text[position]
    if char == "'":
        return SqlFilterError("unterminated string literal", position)
    if text.startswith("/*", position):
        return SqlFilterError("unterminated comment", position)
    return SqlFilterError(f"unexpected character {char!r}", position)


def decode_string(token_text: str) -> str:
    """The value of a quoted literal: quotes removed, ``''`` -> ``'``."""
    return token_text[1:-1].replace("''", "'")
