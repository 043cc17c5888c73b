"""Parking a timer message: which time it asks for, and how it is stored.

Pure helpers used by the broker at send time (and by the recall path). A
parked message lies in `TIMER_TOPIC` queue 0 with its real topic and queue in
REAL_TOPIC / REAL_QID, its delivery time in TIMER_OUT_MS and in the
consumequeue tag slot (as the delay levels keep theirs), so the timer service
can bucket it without reading the commitlog record twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from tidemq.common import properties as props
from tidemq.common.properties import edit_properties
from tidemq.store.api import MessageToStore
from tidemq.store.config import TIMER_TOPIC as TIMER_TOPIC

TIMER_QUEUE_ID = 0
"""Everything parks in queue 0 of TIMER_TOPIC (RocketMQ 5's TimerMessageStore.TIMER_TOPIC)."""

TIMER_SOURCE_OFFSET = "TIMER_SOURCE_OFFSET"
"""tidemq's marker on a delivered message: the commitlog offset of the parked
record it came from. Recovery scans for it so a delivery is never repeated."""

_RELATIVE_PROPERTIES = (
    (props.TIMER_DELAY_SEC, 1000),
    (props.TIMER_DELAY_MS, 1),
)
_ABSOLUTE_PROPERTIES = (props.TIMER_DELIVER_MS, props.START_DELIVER_TIME)
TIMER_PROPERTIES = (
    props.TIMER_DELAY_SEC,
    props.TIMER_DELAY_MS,
    props.TIMER_DELIVER_MS,
    props.START_DELIVER_TIME,
)
"""The properties by which a message asks for a delivery time, in precedence order."""

_MAX_MS = 2**62
"""Anything past this is nonsense, not a time (keeps arithmetic in int64)."""


class TimerPropertyError(ValueError):
    """A timer property whose value is not a usable integer."""


def _integer(name: str, value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise TimerPropertyError(
            f"timer property {name} must be an integer, got {value!r}"
        ) from None
    if abs(number) > _MAX_MS:
        raise TimerPropertyError(f"timer property {name} is out of range: {value!r}")
    return number


def requested_deliver_ms(properties: Mapping[str, str], now_ms: int) -> int | None:
    """The delivery time (epoch ms) a message asks for, or None.

    TIMER_DELAY_SEC (now + s * 1000) wins over TIMER_DELAY_MS (now + ms), then
    TIMER_DELIVER_MS (absolute), then Aliyun's __STARTDELIVERTIME (absolute
    ms, set by ali-ons). Only the first one present counts. A time in the past
    is returned as is (the caller delivers it at once); TimerPropertyError
    when the value is not an integer.
    """
    for name, scale in _RELATIVE_PROPERTIES:
        value = properties.get(name)
        if value is not None:
            return now_ms + _integer(name, value) * scale
    for name in _ABSOLUTE_PROPERTIES:
        value = properties.get(name)
        if value is not None:
            return _integer(name, value)
    return None


def park(message: MessageToStore, deliver_ms: int) -> MessageToStore:
    """`message` as stored in TIMER_TOPIC queue 0 (a new object).

    REAL_TOPIC / REAL_QID come from message.topic / queue_id, TIMER_OUT_MS is
    `deliver_ms`, and so is the consumequeue tag slot. Body, flag, sysflag,
    born fields and every other property (byte for byte) are kept.
    """
    if message.topic == TIMER_TOPIC:
        raise ValueError("the message is already parked in the timer topic")
    properties = edit_properties(
        message.properties,
        {
            props.REAL_TOPIC: message.topic,
            props.REAL_QID: str(message.queue_id),
            props.TIMER_OUT_MS: str(deliver_ms),
        },
    )
    return dataclasses.replace(
        message,
        topic=TIMER_TOPIC,
        queue_id=TIMER_QUEUE_ID,
        properties=properties,
        tags_code=deliver_ms,
    )


def delete_key(topic: str, unique_key: str) -> str:
    """The key a recall marker names its target by (Java's buildDeleteKey)."""
    return f"{topic}+{unique_key}"


def recall_marker(
    topic: str, unique_key: str, deliver_ms: int, *, born_host: bytes = b"\x7f\x00\x00\x01"
) -> MessageToStore:
    """The marker stored in TIMER_TOPIC that cancels (topic, unique_key) due at
    `deliver_ms`: it lands in the same time bucket as its target. Markers are
    never delivered."""
    properties = props.encode_properties(
        {
            props.TIMER_DEL_UNIQKEY: delete_key(topic, unique_key),
            props.TIMER_OUT_MS: str(deliver_ms),
            props.REAL_TOPIC: topic,
            props.REAL_QID: "0",
            props.UNIQ_KEY: unique_key,
        }
    )
    return MessageToStore(
        topic=TIMER_TOPIC,
        queue_id=TIMER_QUEUE_ID,
        body=b"",
        properties=properties,
        born_host=born_host,
        tags_code=deliver_ms,
    )
