"""What a consumer subscribes to: a topic plus a TAG or SQL92 expression.

The broker filters TAG subscriptions by the tag's hash (the consumequeue
stores only the hash), so two tags with equal hashes both reach the client;
:meth:`SubscriptionSpec.matches` is the exact check Java's PullAPIWrapper
does on the client. SQL92 is evaluated by the broker alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.client._core.rebalance import RETRY_GROUP_TOPIC_PREFIX
from tidemq.common.hashing import java_string_hash
from tidemq.common.message import MessageExt
from tidemq.protocol.heartbeat import EXPRESSION_SQL92, EXPRESSION_TAG, SUB_ALL, Subscription

__all__ = [
    "DLQ_GROUP_TOPIC_PREFIX",
    "RETRY_GROUP_TOPIC_PREFIX",
    "SubscriptionSpec",
    "dlq_topic",
    "retry_topic",
]

DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
TAG_SEPARATOR = "||"
MAX_TOPIC_LENGTH = 127
"""RocketMQ's topic name limit (Validators.TOPIC_MAX_LENGTH)."""


def retry_topic(group: str) -> str:
    """The group's retry topic (MixAll.getRetryTopic)."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """The group's dead letter topic (MixAll.getDLQTopic)."""
    return DLQ_GROUP_TOPIC_PREFIX + group


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
        text = (expression or "").strip()
        if kind == EXPRESSION_SQL92:
            if not text:
                raise ValueError(f"the SQL92 expression for topic {topic} is empty")
            return cls(topic, text, kind, None, sub_version)
        if not text or text == SUB_ALL:
            return cls(topic, SUB_ALL, kind, None, sub_version)
        parts = [part.strip() for part in text.split(TAG_SEPARATOR)]
        if any(not part for part in parts):
            raise ValueError(
                f"tag expression {text!r} has an empty tag: write tags as 'TagA || TagB'"
            )
        if SUB_ALL in parts:
            raise ValueError(f"tag expression {text!r} mixes '*' with tags: use '*' alone")
        return cls(topic, text, kind, frozenset(parts), sub_version)

    def matches(self, message: MessageExt) -> bool:
        """Exact client-side tag check; always True for "*" and for SQL92."""
        return self.tags is None or (message.tags is not None and message.tags in self.tags)

    def to_wire(self) -> Subscription:
        """The heartbeat's SubscriptionData: tags sorted, codeSet = Java hashCode of each."""
        tags = tuple(sorted(self.tags)) if self.tags else ()
        return Subscription(
            topic=self.topic,
            sub_string=self.expression,
            tags_set=tags,
            code_set=tuple(java_string_hash(tag) for tag in tags),
            sub_version=self.sub_version,
            expression_type=self.expression_type,
        )
