"""What a consumer subscribes to: a topic plus a TAG or SQL92 expression.

The broker filters TAG subscriptions by the tag's hash (the consumequeue
stores only the hash), so two tags with equal hashes both reach the client;
:meth:`SubscriptionSpec.matches` is the exact check Java's PullAPIWrapper
does on the client. SQL92 is evaluated by the broker alone. Tag expressions
are read by `tidemq.common.tags`, the parser the broker uses too; a blank
expression means "*" here, and the forms that parser would read as a
surprise are refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.common.message import MessageExt
from tidemq.common.tags import (
    SUB_ALL,
    java_trim,
    parse_tag_expression,
    tag_codes,
    tag_expression_problem,
    tag_matches,
)
from tidemq.protocol.heartbeat import EXPRESSION_SQL92, EXPRESSION_TAG, Subscription

__all__ = ["SubscriptionSpec"]

MAX_TOPIC_LENGTH = 127
"""RocketMQ's topic name limit (Validators.TOPIC_MAX_LENGTH)."""


@dataclass(frozen=True, slots=True)
class SubscriptionSpec:
    """One parsed subscription; build it with :meth:`parse`."""

    topic: str
    expression: str
    """"*", "TagA || TagB" (as given, trimmed) or SQL92 text."""
    expression_type: str
    """"TAG" or "SQL92"."""
    tags: frozenset[str] | None
    """None = every tag (TAG "*" or SQL92)."""
    sub_version: int
    """Milliseconds when built (Java subVersion: the broker keeps the newest)."""

    @classmethod
    def parse(
        cls,
        topic: str,
        expression: str | None = SUB_ALL,
        expression_type: str = EXPRESSION_TAG,
        *,
        sub_version: int,
    ) -> SubscriptionSpec:
        """Check and parse; ValueError with a readable message when malformed."""
        if not isinstance(topic, str) or not topic.strip():
            raise ValueError("a subscription needs a topic name")
        if topic != topic.strip():
            raise ValueError(f"topic name {topic!r} has surrounding blanks")
        if len(topic) > MAX_TOPIC_LENGTH:
            raise ValueError(f"topic name is longer than {MAX_TOPIC_LENGTH} characters")
        kind = (expression_type or EXPRESSION_TAG).strip().upper()
        if kind not in (EXPRESSION_TAG, EXPRESSION_SQL92):
            raise ValueError(
                f"expression type {expression_type!r} is not supported: use TAG or SQL92"
            )
        if kind == EXPRESSION_SQL92:
            sql = (expression or "").strip()
            if not sql:
                raise ValueError(f"the SQL92 expression for topic {topic} is empty")
            return cls(topic, sql, kind, None, sub_version)
        text = java_trim(expression or "")
        if not text or text == SUB_ALL:
            return cls(topic, SUB_ALL, kind, None, sub_version)
        problem = tag_expression_problem(text)
        if problem is not None:
            raise ValueError(problem)
        return cls(topic, text, kind, parse_tag_expression(text), sub_version)

    def matches(self, message: MessageExt) -> bool:
        """Exact client-side tag check; always True for "*" and for SQL92."""
        return tag_matches(self.tags, message.tags)

    def to_wire(self) -> Subscription:
        """The heartbeat's SubscriptionData: tags sorted, codeSet = Java hashCode of each."""
        tags = tuple(sorted(self.tags)) if self.tags else ()
        return Subscription(
            topic=self.topic,
            sub_string=self.expression,
            tags_set=tags,
            code_set=tag_codes(tags),
            sub_version=self.sub_version,
            expression_type=self.expression_type,
        )
