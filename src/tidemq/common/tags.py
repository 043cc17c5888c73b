"""Tag expressions ("TagA || TagB", "*"): one parser for the client, the
broker and the store, with RocketMQ's rules.

Java builds a subscription in `FilterAPI.buildSubscriptionData`: null, "" or
exactly "*" means every tag; anything else is split on "||", each part
trimmed (`String.trim`: characters up to U+0020) and empty parts dropped.
The tags travel in the heartbeat's tagsSet and their `String.hashCode`s in
its codeSet; the broker compares the codes with the consumequeue's tag slot
(`ExpressionMessageFilter.isMatchedByConsumeQueue`), and since codes can
collide the client re-checks the tag string (`PullAPIWrapper`). So " * " is
the one tag "*", and a blank expression leaves no tag: nothing matches.

The Python client is stricter than Java before it parses: it refuses
expressions whose Java meaning is rarely what was meant
(:func:`tag_expression_problem`).
"""

from __future__ import annotations

from collections.abc import Iterable

from tidemq.common.hashing import java_string_hash

__all__ = [
    "SUB_ALL",
    "TAG_SEPARATOR",
    "java_trim",
    "parse_tag_expression",
    "tag_codes",
    "tag_expression_problem",
    "tag_matches",
]

SUB_ALL = "*"
"""SubscriptionData.SUB_ALL: every tag."""
TAG_SEPARATOR = "||"

_JAVA_BLANKS = "".join(chr(code) for code in range(0x21))


def java_trim(text: str) -> str:
    """`String.trim`: drop the characters up to U+0020 at both ends (and no others)."""
    return text.strip(_JAVA_BLANKS)


def parse_tag_expression(expression: str | None) -> frozenset[str] | None:
    """The tags an expression names; None for every tag (None, "" or "*").

    An empty set (e.g. for "  " or "||") matches no message, as in Java.
    """
    if not expression or expression == SUB_ALL:
        return None
    parts = (java_trim(part) for part in expression.split(TAG_SEPARATOR))
    return frozenset(part for part in parts if part)


def tag_codes(tags: Iterable[str]) -> tuple[int, ...]:
    """The codeSet of `tags`, in their order: Java's hashCode of each tag."""
    return tuple(java_string_hash(tag) for tag in tags)


def tag_matches(tags: frozenset[str] | None, tag: str | None) -> bool:
    """The exact check: every message when `tags` is None, else a message
    whose tag is one of them (a message without a tag never)."""
    return tags is None or (tag is not None and tag in tags)


def tag_expression_problem(expression: str) -> str | None:
    """Why the Python client refuses a (trimmed, non-blank) TAG expression, or None.

    Java accepts both, with a meaning rarely intended: an empty tag
    ("TagA ||") is silently dropped, and "*" among tags is the literal tag
    "*", not every tag.
    """
    parts = [java_trim(part) for part in expression.split(TAG_SEPARATOR)]
    if any(not part for part in parts):
        return f"tag expression {expression!r} has an empty tag: write tags as 'TagA || TagB'"
    if len(parts) > 1 and SUB_ALL in parts:
        return f"tag expression {expression!r} mixes '*' with tags: use '*' alone"
    return None
