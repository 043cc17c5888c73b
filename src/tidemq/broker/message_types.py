"""Topic message types (RocketMQ 5's `message.type` topic attribute).

A topic created with a type (`tidemq topic create T --type fifo`) accepts
only messages of that type, over both protocols; MIXED and untyped topics
(legacy, auto-created) accept every type. A message's type follows from its
properties as in Java's TopicMessageType.parseFromMessageProperty.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from tidemq.broker.requests import BrokerError
from tidemq.common import properties as props
from tidemq.protocol.codes import ResponseCode

MESSAGE_TYPE_ATTRIBUTE = "message.type"

_TIMER_KEYS = (
    props.TIMER_DELIVER_MS,
    props.TIMER_DELAY_MS,
    props.TIMER_DELAY_SEC,
    props.START_DELIVER_TIME,
)


class TopicMessageType(enum.Enum):
    UNSPECIFIED = "UNSPECIFIED"
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


SETTABLE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")


class MessageTypeMismatch(BrokerError):
    """A message whose type the topic does not accept."""

    def __init__(self, topic: str, topic_type: TopicMessageType, kind: TopicMessageType) -> None:
        super().__init__(
            ResponseCode.MESSAGE_ILLEGAL,
            f"the message type {kind.value} does not match the type {topic_type.value} "
            f"of topic {topic}",
        )


def message_type_of(properties: Mapping[str, str]) -> TopicMessageType:
    if properties.get(props.TRAN_MSG, "").lower() == "true":
        return TopicMessageType.TRANSACTION
    delay = properties.get(props.DELAY, "")
    if (delay and delay != "0") or any(properties.get(k) for k in _TIMER_KEYS):
        return TopicMessageType.DELAY
    if properties.get(props.SHARDING_KEY):
        return TopicMessageType.FIFO
    return TopicMessageType.NORMAL


def topic_message_type(attributes: Mapping[str, str] | None) -> TopicMessageType | None:
    """The declared type, None when the topic has none."""
    declared = (attributes or {}).get(MESSAGE_TYPE_ATTRIBUTE)
    if not declared:
        return None
    try:
        return TopicMessageType(declared.upper())
    except ValueError:
        return None


def check_message_type(
    topic: str, attributes: Mapping[str, str] | None, properties: Mapping[str, str]
) -> None:
    """MessageTypeMismatch when a typed topic does not accept the message."""
    declared = topic_message_type(attributes)
    if declared is None or declared in (TopicMessageType.MIXED, TopicMessageType.UNSPECIFIED):
        return
    kind = message_type_of(properties)
    if kind is not declared:
        raise MessageTypeMismatch(topic, declared, kind)


def parse_attributes(text: str | None, current: Mapping[str, str]) -> dict[str, str]:
    """Java AttributeParser: "+k=v,-k2" applied to `current`; ValueError if malformed."""
    result = dict(current)
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        if item.startswith("+"):
            key, sep, value = item[1:].partition("=")
            if not key or not sep:
                raise ValueError(f"attribute {item!r} is not +KEY=VALUE")
            if key == MESSAGE_TYPE_ATTRIBUTE and value.upper() not in SETTABLE_TYPES:
                raise ValueError(
                    f"{MESSAGE_TYPE_ATTRIBUTE}={value} is not one of {', '.join(SETTABLE_TYPES)}"
                )
            result[key] = value.upper() if key == MESSAGE_TYPE_ATTRIBUTE else value
        elif item.startswith("-"):
            result.pop(item[1:], None)
        else:
            raise ValueError(f"attribute {item!r} must start with + or -")
    return result
