"""Topic message types: Java's rule for a message's type, the attribute syntax."""

from __future__ import annotations

import pytest

from tidemq.broker.message_types import (
    MessageTypeMismatch,
    TopicMessageType,
    check_message_type,
    message_type_of,
    parse_attributes,
    topic_message_type,
)
from tidemq.common import properties as props


@pytest.mark.parametrize(
    ("properties", "kind"),
    [
        ({}, TopicMessageType.NORMAL),
        ({props.DELAY: "0"}, TopicMessageType.NORMAL),
        ({props.SHARDING_KEY: "g"}, TopicMessageType.FIFO),
        ({props.DELAY: "3"}, TopicMessageType.DELAY),
        ({props.TIMER_DELIVER_MS: "1"}, TopicMessageType.DELAY),
        ({props.START_DELIVER_TIME: "1"}, TopicMessageType.DELAY),
        ({props.TRAN_MSG: "true", props.SHARDING_KEY: "g"}, TopicMessageType.TRANSACTION),
    ],
)
def test_message_type_of(properties: dict[str, str], kind: TopicMessageType) -> None:
    assert message_type_of(properties) is kind


def test_attribute_syntax() -> None:
    assert parse_attributes("+message.type=fifo", {}) == {"message.type": "FIFO"}
    assert parse_attributes("-message.type,+a=b", {"message.type": "FIFO"}) == {"a": "b"}
    assert parse_attributes(None, {"x": "y"}) == {"x": "y"}
    for bad in ("message.type=FIFO", "+message.type", "+message.type=WEIRD"):
        with pytest.raises(ValueError):
            parse_attributes(bad, {})


def test_check() -> None:
    fifo = {"message.type": "FIFO"}
    assert topic_message_type(fifo) is TopicMessageType.FIFO
    assert topic_message_type({}) is None
    check_message_type("T", fifo, {props.SHARDING_KEY: "g"})
    check_message_type("T", {"message.type": "MIXED"}, {})
    check_message_type("T", {}, {props.TRAN_MSG: "true"})
    with pytest.raises(MessageTypeMismatch) as refused:
        check_message_type("T", fifo, {})
    assert "NORMAL does not match the type FIFO of topic T" in refused.value.remark
