"""Independent reference for RocketMQ's SQL92 message filter (issue #5).

Written from the Java sources of ``apache/rocketmq`` (commit 8fc57f14, module
``filter`` plus ``broker/filter``) without looking at tidemq's own
implementation, so the property tests compare two independent readings of the
same rules.  Three parts:

* an AST (frozen dataclasses) covering the whole grammar of
  ``SelectorParser.jj``;
* :func:`render`: AST -> SQL text, every composite sub-expression in
  parentheses (precedence is never in question), keywords in random case,
  random legal whitespace;
* :func:`static_error` (would Java reject the text at parse time?) and
  :func:`matches` / :func:`evaluate` (a direct evaluator with Java's exact
  order of evaluation, NULLs and run-time errors).

Rules and where they come from
------------------------------
Values.  ``MessageEvaluationContext.get`` returns the raw ``String`` of the
property map, or ``null`` when absent: properties are always strings.
Literals (``ConstantExpression``): a decimal literal (``0`` or ``[1-9][0-9]*``
with an optional ``l``/``L`` suffix — not after ``0``) is a ``Long``
narrowed to ``Integer`` when it fits; beyond the long range it is a parse
error.  A float literal is a ``Double`` and is rejected at
parse time when it is > ``Double.MAX_VALUE`` or < ``Double.MIN_VALUE`` — so
``0.0`` itself is a parse error.  ``TRUE``/``FALSE``/``NULL`` are
``BooleanConstantExpression`` (boolean expressions).  Strings double ``''``.
Identifiers: the token is case-insensitive but the property lookup uses the
text as written (``PropertyExpression``), so ``A`` and ``a`` differ.

Lexing and the end of input.  Whitespace is `` \t\n\r\f``; ``-- ...`` needs
its terminating newline to be a comment (otherwise it is two minus signs) and
``/* */`` is a comment.  ``JmsSelector()`` does not require ``<EOF>``: Java
stops after the longest expression and silently ignores trailing tokens
(``a = '1' b``, ``a = 0L`` read as ``a = 0`` then ``L``).  The AST never
produces trailing tokens, so the reference does not model this; the tests list
it as a known difference.

Parse-time checks.  ``SelectorParser.asBooleanExpression``: operands of
AND/OR/NOT and the whole expression must be boolean expressions; a bare
property is wrapped in a boolean cast, anything else (number, string,
negation) is a parse error.  ``ComparisonExpression.checkEqualOperand``: a
``NULL`` literal cannot be an operand of ``=``/``<>``;
``checkEqualOperandCompatability``: constant = constant where the left is a
boolean constant and the right is not is an error.  ``checkLessThanOperand``:
operands of ``> >= < <=`` (and of BETWEEN) must not be boolean expressions and
constants must be numbers.  ``createBetween``: with two constant bounds,
``NULL`` bounds or high < low are errors (a negated bound is not a constant,
so ``BETWEEN 3 AND -5`` parses).  ``createInFilter``: the left of IN must be a
property.  Unary ``+`` returns its operand unchanged (parenthesised
sub-expressions too), so ``(a) IN ('x')`` and ``+5 > a`` are fine.

Evaluation (``Expression.evaluate``; a Java exception is :class:`JavaError`).
* Boolean cast of a property (``UnaryExpression.createBooleanCast``): NULL
  when absent, otherwise FALSE unless the value is a ``Boolean`` — property
  values are strings, so a present property is always FALSE, even "true".
* NOT (``createNOT``): NULL stays NULL.  AND/OR (``LogicExpression``):
  left first; AND returns FALSE at a FALSE left without evaluating the right,
  OR returns TRUE at a TRUE left; otherwise the right is evaluated; a NULL
  side yields NULL unless the other side decides.  An exception anywhere it
  is evaluated aborts the whole expression.
* ``=`` (``doCreateEqual``): both sides evaluated; exactly one NULL -> NULL
  when the left is NULL but FALSE when only the right is (asymmetric!); both
  NULL -> TRUE; ``equals`` -> TRUE; else ``__compare == 0``.  ``<>`` is NOT of
  ``=``.  ``IS NULL`` is ``=`` against the NULL constant (TRUE when NULL,
  FALSE otherwise); ``IS NOT NULL`` is its NOT.
* ``> >= < <=`` (``ComparisonExpression.evaluate``): NULL left -> NULL
  without evaluating the right; NULL right -> NULL; two strings are both
  converted with ``Double.valueOf`` (failure -> error); otherwise
  ``__compare``.
* ``__compare`` with ``convertStringExpressions`` on (``SelectorParser.parse``
  sets the thread-local while parsing): same class -> ``compareTo``; numeric
  classes widen Integer -> Long -> Double; a string against an Integer /
  Long / Double operand is parsed with ``Integer.valueOf`` /
  ``Long.valueOf`` / ``Double.valueOf`` (``NumberFormatException`` -> error);
  string vs Boolean -> ``Boolean.valueOf`` (true iff "true" ignoring case);
  Boolean vs String -> ``ClassCastException`` (error); any other mix -> -1.
* ``BETWEEN`` is ``(v >= low) AND (v <= high)``; ``NOT BETWEEN`` is
  ``(v < low) OR (v > high)`` (``createBetween`` / ``createNotBetween``).
* ``IN`` (``UnaryExpression.createInExpression``): NULL -> NULL, otherwise
  string membership, NOT IN negated.
* ``CONTAINS`` / ``STARTSWITH`` / ``ENDSWITH`` and their NOT forms: an empty
  search string -> FALSE without evaluating the left; a NULL or non-string
  left -> FALSE (never NULL, also for the NOT forms).
* Unary minus (``createNegate``): NULL -> NULL, numbers negated keeping their
  class, anything else (e.g. every property, which is a string) -> NULL.
* Result (``ExpressionMessageFilter.isMatchedByCommitLog``): the message
  passes only when the result is Boolean TRUE; NULL or an exception -> no.

Java number parsing: ``Integer/Long.valueOf`` take ``[+-]?`` and Unicode
decimal digits (``Character.digit``) within range, no whitespace;
``Double.valueOf`` trims characters <= U+0020, then takes an optional sign and
``NaN``, ``Infinity``, an ASCII decimal with optional exponent and ``[fFdD]``
suffix, or a hex float with a mandatory ``p`` exponent.  ``Double.compareTo`` orders
-0.0 below 0.0 and NaN above everything (equal to itself);
``String.compareTo`` compares UTF-16 code units.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Literal, TypeAlias

# ---------------------------------------------------------------------------
# Java value model
# ---------------------------------------------------------------------------

JavaKind = Literal["Integer", "Long", "Double", "Boolean", "String"]


@dataclass(frozen=True)
class JValue:
    """A non-null Java value with its runtime class (classes drive __compare)."""

    kind: JavaKind
    value: int | float | bool | str


JResult: TypeAlias = JValue | None

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
DOUBLE_MIN_VALUE = 5e-324

JTRUE = JValue("Boolean", True)
JFALSE = JValue("Boolean", False)


class JavaError(Exception):
    """Stands for any Java exception thrown while evaluating."""


# Integer.parseInt / Long.parseLong read digits with Character.digit, which
# accepts every Unicode decimal digit (Nd) - as does Python's \d on str.
_INTEGER_RE = re.compile(r"[+-]?\d+")
# FloatingDecimal.readJavaFormatString: ASCII digits only.
_DECIMAL_DOUBLE_RE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)", re.ASCII
)
# FloatingDecimal.parseHexString: the binary exponent is mandatory.
_HEX_DOUBLE_RE = re.compile(
    r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?", re.ASCII
)
_JAVA_TRIMMED = "".join(chr(c) for c in range(0x21))  # String.trim: every char <= U+0020


def java_parse_int(text: str, lo: int = INT_MIN, hi: int = INT_MAX) -> int:
    if not _INTEGER_RE.fullmatch(text):
        raise JavaError(f"NumberFormatException: {text!r}")
    value = int(text)
    if not lo <= value <= hi:
        raise JavaError(f"NumberFormatException (range): {text!r}")
    return value


def java_parse_double(text: str) -> float:
    trimmed = text.strip(_JAVA_TRIMMED)
    if hexa := _HEX_DOUBLE_RE.fullmatch(trimmed):
        sign, body = hexa.groups()
        try:
            magnitude = float.fromhex("0x" + body)
        except OverflowError:
            magnitude = math.inf
        return -magnitude if sign == "-" else magnitude
    if not _DECIMAL_DOUBLE_RE.fullmatch(trimmed):
        raise JavaError(f"NumberFormatException: {text!r}")
    unsigned = trimmed.lstrip("+-")
    negative = trimmed.startswith("-")
    if unsigned == "NaN":
        return math.nan
    if unsigned == "Infinity":
        return -math.inf if negative else math.inf
    if unsigned[-1] in "fFdD":  # the suffix does not change Double.valueOf's result
        trimmed = trimmed[:-1]
    return float(trimmed)


def _sign(n: float) -> int:
    return (n > 0) - (n < 0)


def _double_compare(a: float, b: float) -> int:
    """``Double.compare``: NaN greatest and equal to itself, -0.0 < 0.0."""
    a_nan, b_nan = math.isnan(a), math.isnan(b)
    if a_nan or b_nan:
        return int(a_nan) - int(b_nan)
    if a != b:
        return -1 if a < b else 1
    return _sign(math.copysign(1.0, a) - math.copysign(1.0, b))


def _compare_to(lv: JValue, rv: JValue) -> int:
    assert lv.kind == rv.kind
    if lv.kind == "Double":
        return _double_compare(float(lv.value), float(rv.value))
    if lv.kind == "String":
        a = str(lv.value).encode("utf-16-be", "surrogatepass")
        b = str(rv.value).encode("utf-16-be", "surrogatepass")
        return (a > b) - (a < b)
    return _sign(int(lv.value) - int(rv.value))  # Integer, Long, Boolean


def _java_equals(lv: JValue, rv: JValue) -> bool:
    if lv.kind != rv.kind:
        return False
    if lv.kind == "Double":  # Double.equals compares bits
        a, b = float(lv.value), float(rv.value)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return lv.value == rv.value


def _from_string(text: str, kind: JavaKind) -> JValue:
    if kind == "Integer":
        return JValue("Integer", java_parse_int(text))
    if kind == "Long":
        return JValue("Long", java_parse_int(text, LONG_MIN, LONG_MAX))
    if kind == "Double":
        return JValue("Double", java_parse_double(text))
    assert kind == "Boolean"
    return JValue("Boolean", text.lower() == "true")


_WIDEN_RANK = {"Integer": 0, "Long": 1, "Double": 2}


def _widen(v: JValue, kind: JavaKind) -> JValue:
    if kind == "Double":
        return JValue("Double", float(v.value))
    return JValue(kind, int(v.value))


def java_compare(lv: JValue, rv: JValue) -> int:
    """``ComparisonExpression.__compare`` with convertStringExpressions=true."""
    lc, rc = lv.kind, rv.kind
    if lc != rc:
        if lc == "Boolean":
            if rc == "String":
                raise JavaError("ClassCastException: Boolean cannot be cast to String")
            return -1
        if lc in _WIDEN_RANK:
            if rc in _WIDEN_RANK:
                if _WIDEN_RANK[lc] < _WIDEN_RANK[rc]:
                    lv = _widen(lv, rc)
                else:
                    rv = _widen(rv, lc)
            elif rc == "String":
                rv = _from_string(str(rv.value), lc)
            else:
                return -1
        elif lc == "String":
            lv = _from_string(str(lv.value), rc)
        else:  # pragma: no cover - no other classes exist here
            return -1
    return _compare_to(lv, rv)


# ---------------------------------------------------------------------------
# AST
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Prop:
    name: str


@dataclass(frozen=True)
class IntLit:
    value: int  # >= 0; the grammar has no negative literals
    suffix: str = ""  # "", "l" or "L"


@dataclass(frozen=True)
class FloatLit:
    text: str  # as written, e.g. "2.5", ".5", "5.", "1E3"


@dataclass(frozen=True)
class StrLit:
    value: str


@dataclass(frozen=True)
class BoolLit:
    value: bool


@dataclass(frozen=True)
class NullLit:
    pass


@dataclass(frozen=True)
class Neg:
    operand: Node


@dataclass(frozen=True)
class Plus:
    operand: Node


CmpOp = Literal["=", "<>", ">", ">=", "<", "<="]


@dataclass(frozen=True)
class Cmp:
    op: CmpOp
    left: Node
    right: Node


@dataclass(frozen=True)
class Between:
    value: Node
    low: Node
    high: Node
    negated: bool = False


@dataclass(frozen=True)
class In:
    value: Node
    items: tuple[str, ...]
    negated: bool = False


StrOpKind = Literal["CONTAINS", "STARTSWITH", "ENDSWITH"]


@dataclass(frozen=True)
class StrOp:
    kind: StrOpKind
    value: Node
    search: str
    negated: bool = False


@dataclass(frozen=True)
class IsNull:
    value: Node
    negated: bool = False


@dataclass(frozen=True)
class Not:
    operand: Node


@dataclass(frozen=True)
class And:
    left: Node
    right: Node


@dataclass(frozen=True)
class Or:
    left: Node
    right: Node


Node: TypeAlias = (
    Prop
    | IntLit
    | FloatLit
    | StrLit
    | BoolLit
    | NullLit
    | Neg
    | Plus
    | Cmp
    | Between
    | In
    | StrOp
    | IsNull
    | Not
    | And
    | Or
)
Constant = IntLit | FloatLit | StrLit | BoolLit | NullLit
BooleanNode = (Cmp, Between, In, StrOp, IsNull, Not, And, Or, BoolLit, NullLit)


def unwrap(node: Node) -> Node:
    """Unary plus returns its operand object itself (``unaryExpr``)."""
    while isinstance(node, Plus):
        node = node.operand
    return node


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------

_SPACES = (" ", " ", " ", "  ", "\t", "\n", "\r\n", "\f")

# Binding strength in SelectorParser.jj, loosest first: orExpression,
# andExpression, equalityExpression (= <> IS [NOT] NULL), comparisonExpression
# (> >= < <= [NOT] BETWEEN/IN/CONTAINS/STARTSWITH/ENDSWITH), unaryExpr
# (+ - NOT), primaryExpr.  Every loop in the grammar is left-associative.
OR_LEVEL, AND_LEVEL, EQUALITY_LEVEL, COMPARISON_LEVEL, UNARY_LEVEL, PRIMARY_LEVEL = range(1, 7)


def precedence(node: Node) -> int:
    match node:
        case Or():
            return OR_LEVEL
        case And():
            return AND_LEVEL
        case Cmp("=" | "<>") | IsNull():
            return EQUALITY_LEVEL
        case Cmp() | Between() | In() | StrOp():
            return COMPARISON_LEVEL
        case Neg() | Plus() | Not():
            return UNARY_LEVEL
    return PRIMARY_LEVEL


class Renderer:
    """AST -> SQL text with random keyword case and whitespace.

    By default every composite sub-expression is parenthesised.  With
    ``minimal=True`` parentheses appear only where Java's precedence needs
    them (plus a few redundant ones), so the text also tests precedence.
    """

    def __init__(self, rng: random.Random, minimal: bool = False) -> None:
        self._rng = rng
        self._minimal = minimal

    def ws(self) -> str:
        return self._rng.choice(_SPACES)

    def opt_ws(self) -> str:
        """Whitespace next to punctuation is optional."""
        return self._rng.choice(("", "", self.ws()))

    def kw(self, word: str) -> str:
        return "".join(c.upper() if self._rng.random() < 0.5 else c.lower() for c in word)

    def paren(self, text: str) -> str:
        return f"({self.opt_ws()}{text}{self.opt_ws()})"

    def sub(self, node: Node, level: int) -> str:
        """A sub-expression in a slot that binds at least as tight as ``level``."""
        text = self.node(node)
        needed = precedence(node) < (level if self._minimal else PRIMARY_LEVEL)
        if needed or self._rng.random() < 0.1:
            return self.paren(text)
        return text

    def prefix(self, sign: str, operand: Node) -> str:
        if not self._minimal:  # "-(...)": "--" would start a comment
            return sign + self.opt_ws() + self.paren(self.node(operand))
        return sign + self.ws() + self.sub(operand, UNARY_LEVEL)

    def node(self, node: Node) -> str:
        w, sub = self.ws, self.sub
        cmp_, unary = COMPARISON_LEVEL, UNARY_LEVEL
        match node:
            case Prop(name):
                return name
            case IntLit(value, suffix):
                return f"{value}{suffix}"
            case FloatLit(text):
                return text
            case StrLit(value):
                return quote(value)
            case BoolLit(value):
                return self.kw("TRUE" if value else "FALSE")
            case NullLit():
                return self.kw("NULL")
            case Neg(operand):
                return self.prefix("-", operand)
            case Plus(operand):
                return self.prefix("+", operand)
            case Cmp(op, left, right):
                left_level = EQUALITY_LEVEL if op in ("=", "<>") else cmp_
                right_level = left_level + 1
                spaced_op = f"{self.opt_ws()}{op}{self.opt_ws()}"
                return f"{sub(left, left_level)}{spaced_op}{sub(right, right_level)}"
            case Between(value, low, high, negated):
                neg = self.kw("NOT") + w() if negated else ""
                return (
                    f"{sub(value, cmp_)}{w()}{neg}{self.kw('BETWEEN')}{w()}"
                    f"{sub(low, unary)}{w()}{self.kw('AND')}{w()}{sub(high, unary)}"
                )
            case In(value, items, negated):
                neg = self.kw("NOT") + w() if negated else ""
                sep = f"{self.opt_ws()},{self.opt_ws()}"
                listed = sep.join(quote(i) for i in items)
                in_kw = self.kw("IN")
                return f"{sub(value, cmp_)}{w()}{neg}{in_kw}{self.opt_ws()}{self.paren(listed)}"
            case StrOp(kind, value, search, negated):
                neg = self.kw("NOT") + w() if negated else ""
                return f"{sub(value, cmp_)}{w()}{neg}{self.kw(kind)}{w()}{quote(search)}"
            case IsNull(value, negated):
                neg = self.kw("NOT") + w() if negated else ""
                return (
                    f"{sub(value, EQUALITY_LEVEL)}{w()}{self.kw('IS')}{w()}{neg}{self.kw('NULL')}"
                )
            case Not(operand):
                return f"{self.kw('NOT')}{w()}{sub(operand, unary)}"
            case And(left, right):
                return (
                    f"{sub(left, AND_LEVEL)}{w()}{self.kw('AND')}{w()}{sub(right, EQUALITY_LEVEL)}"
                )
            case Or(left, right):
                return f"{sub(left, OR_LEVEL)}{w()}{self.kw('OR')}{w()}{sub(right, AND_LEVEL)}"
        raise AssertionError(node)  # pragma: no cover


def quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def render(node: Node, rng: random.Random | None = None, minimal: bool = False) -> str:
    """SQL text for ``node``; see :class:`Renderer` for ``minimal``."""
    r = Renderer(rng or random.Random(0), minimal)
    return r.opt_ws() + r.node(node) + r.opt_ws()


# ---------------------------------------------------------------------------
# Parse-time checks (what SelectorParser rejects)
# ---------------------------------------------------------------------------


def constant_value(node: Node) -> JResult:
    """The value a literal evaluates to (``ConstantExpression``)."""
    match node:
        case IntLit(value):
            kind: JavaKind = "Integer" if value <= INT_MAX else "Long"
            return JValue(kind, value)
        case FloatLit(text):
            return JValue("Double", float(text))
        case StrLit(value):
            return JValue("String", value)
        case BoolLit(value):
            return JTRUE if value else JFALSE
        case NullLit():
            return None
    raise AssertionError(node)  # pragma: no cover


def _is_constant(node: Node) -> bool:
    return isinstance(node, (IntLit, FloatLit, StrLit, BoolLit, NullLit))


def _is_boolean(node: Node) -> bool:
    return isinstance(node, BooleanNode)


def _as_boolean_error(node: Node) -> str | None:
    node = unwrap(node)
    if _is_boolean(node) or isinstance(node, Prop):
        return None
    return f"not a boolean expression: {type(node).__name__}"


def _less_than_operand_error(node: Node) -> str | None:
    node = unwrap(node)
    if _is_constant(node):
        value = constant_value(node)
        if value is None or value.kind not in _WIDEN_RANK:
            return "only numbers can be compared with < <= > >="
        return None
    if _is_boolean(node):
        return "a boolean expression cannot be compared with < <= > >="
    return None


def _equal_operand_errors(left: Node, right: Node) -> str | None:
    left, right = unwrap(left), unwrap(right)
    for side in (left, right):
        if isinstance(side, NullLit):
            return "NULL cannot be compared with = or <>"
    both_constant = _is_constant(left) and _is_constant(right)
    if both_constant and isinstance(left, BoolLit) and not isinstance(right, BoolLit):
        return "boolean constant compared with a non-boolean constant"
    return None


def static_error(node: Node, top: bool = True) -> str | None:
    """Why Java's parser rejects this AST, or None when it accepts it."""
    if top and (err := _as_boolean_error(node)):
        return err
    children: list[Node] = []
    match node:
        case IntLit(value, suffix):
            assert not (value == 0 and suffix), "0L lexes as 0 then the identifier L"
            if value > LONG_MAX:
                return "integer literal out of long range"
        case FloatLit(text):
            value_f = float(text)
            if value_f > 1.7976931348623157e308 or value_f < DOUBLE_MIN_VALUE:
                return "float literal out of range (0.0 included)"
        case Neg(operand) | Plus(operand):
            children = [operand]
        case Cmp(op, left, right):
            if op in ("=", "<>"):
                err = _equal_operand_errors(left, right)
            else:
                err = _less_than_operand_error(left) or _less_than_operand_error(right)
            if err:
                return err
            children = [left, right]
        case Between(value, low, high, negated):
            lo, hi = unwrap(low), unwrap(high)
            if not negated and _is_constant(lo) and _is_constant(hi):
                lv, hv = constant_value(lo), constant_value(hi)
                if lv is None or hv is None:
                    return "BETWEEN bounds cannot be NULL"
                try:
                    if java_compare(hv, lv) < 0:
                        return "BETWEEN low bound above high bound"
                except JavaError as exc:
                    return f"BETWEEN bounds not comparable: {exc}"
            for part in (value, low, high):
                if err := _less_than_operand_error(part):
                    return err
            children = [value, low, high]
        case In(value=value):
            if not isinstance(unwrap(value), Prop):
                return "IN needs a property on the left"
        case StrOp(value=value) | IsNull(value=value):
            children = [value]
        case Not(operand):
            if err := _as_boolean_error(operand):
                return err
            children = [operand]
        case And(left, right) | Or(left, right):
            if err := _as_boolean_error(left) or _as_boolean_error(right):
                return err
            children = [left, right]
    for child in children:
        if err := static_error(child, top=False):
            return err
    return None


# ---------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------

Props = dict[str, str]


def _truth(result: JResult) -> bool | None:
    """A boolean expression's value: True / False / None (NULL)."""
    if result is None:
        return None
    assert result.kind == "Boolean", result
    return bool(result.value)


def _jbool(flag: bool) -> JValue:
    return JTRUE if flag else JFALSE


def _eval_boolean(node: Node, props: Props) -> bool | None:
    """Evaluate an operand of AND/OR/NOT (boolean cast for a bare property)."""
    node = unwrap(node)
    if isinstance(node, Prop):
        return None if props.get(node.name) is None else False
    return _truth(evaluate(node, props))


def _equal(left: Node, right: Node, props: Props) -> JResult:
    lv = evaluate(left, props)
    rv = evaluate(right, props)
    return _equal_values(lv, rv)


def _equal_values(lv: JResult, rv: JResult) -> JResult:
    if (lv is None) != (rv is None):
        return None if lv is None else JFALSE
    if lv is None or rv is None:
        return JTRUE
    if _java_equals(lv, rv):
        return JTRUE
    return _jbool(java_compare(lv, rv) == 0)


def _order(op: str, left: Node, right: Node, props: Props) -> JResult:
    lv = evaluate(left, props)
    if lv is None:
        return None
    rv = evaluate(right, props)
    if rv is None:
        return None
    if lv.kind == rv.kind == "String":
        lv = JValue("Double", java_parse_double(str(lv.value)))
        rv = JValue("Double", java_parse_double(str(rv.value)))
    c = java_compare(lv, rv)
    return _jbool({">": c > 0, ">=": c >= 0, "<": c < 0, "<=": c <= 0}[op])


def _not(value: bool | None) -> JResult:
    return None if value is None else _jbool(not value)


def evaluate(node: Node, props: Props) -> JResult:
    """Java's ``Expression.evaluate``; raises :class:`JavaError` where Java throws."""
    match node:
        case Prop(name):
            raw = props.get(name)
            return None if raw is None else JValue("String", raw)
        case IntLit() | FloatLit() | StrLit() | BoolLit() | NullLit():
            return constant_value(node)
        case Plus(operand):
            return evaluate(operand, props)
        case Neg(operand):
            v = evaluate(operand, props)
            if v is None or v.kind not in _WIDEN_RANK:
                return None
            if v.kind == "Double":
                return JValue("Double", -float(v.value))
            return JValue(v.kind, -int(v.value))
        case Cmp("=", left, right):
            return _equal(left, right, props)
        case Cmp("<>", left, right):
            return _not(_truth(_equal(left, right, props)))
        case Cmp(op, left, right):
            return _order(op, left, right, props)
        case Between(value, low, high, False):
            return evaluate(And(Cmp(">=", value, low), Cmp("<=", value, high)), props)
        case Between(value, low, high, True):
            return evaluate(Or(Cmp("<", value, low), Cmp(">", value, high)), props)
        case In(value, items, negated):
            v = evaluate(value, props)
            if v is None or v.kind != "String":
                return None
            return _jbool((v.value in items) != negated)
        case StrOp(kind, value, search, negated):
            if not search:
                return JFALSE
            v = evaluate(value, props)
            if v is None or v.kind != "String":
                return JFALSE
            text = str(v.value)
            hit = {
                "CONTAINS": search in text,
                "STARTSWITH": text.startswith(search),
                "ENDSWITH": text.endswith(search),
            }
            return _jbool(hit[kind] != negated)
        case IsNull(value, negated):
            is_null = _equal_values(evaluate(value, props), None)
            return _not(_truth(is_null)) if negated else is_null
        case Not(operand):
            return _not(_eval_boolean(operand, props))
        case And(left, right):
            lb = _eval_boolean(left, props)
            if lb is False:
                return JFALSE
            rb = _eval_boolean(right, props)
            if rb is False:
                return JFALSE
            return None if lb is None or rb is None else JTRUE
        case Or(left, right):
            lb = _eval_boolean(left, props)
            if lb is True:
                return JTRUE
            rb = _eval_boolean(right, props)
            if rb is True:
                return JTRUE
            return None if lb is None or rb is None else JFALSE
    raise AssertionError(node)  # pragma: no cover


def matches(node: Node, props: Props) -> bool:
    """Does the broker deliver a message with ``props`` (Java: ``ret == TRUE``)?"""
    assert static_error(node) is None, "only meaningful for expressions Java accepts"
    try:
        return _eval_boolean(node, props) is True
    except JavaError:
        return False
