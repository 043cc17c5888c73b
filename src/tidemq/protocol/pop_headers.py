"""Headers of RocketMQ 5's POP request codes (JSON headers only: the codes
are above the binary header's int16 range). Field names are Java's, in
snake case here (`encode_header` writes camelCase)."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.protocol.headers import Int32, Int64


@dataclass(frozen=True, kw_only=True, slots=True)
class PopMessageRequestHeader:
    """POP_MESSAGE (200050). queue_id -1 pops every queue of the topic."""

    consumer_group: str
    topic: str
    queue_id: Int32 = -1
    max_msg_nums: Int32 = 32
    invisible_time: Int64
    poll_time: Int64 = 0
    born_time: Int64 = 0
    init_mode: Int32 = 0
    exp_type: str | None = None
    exp: str | None = None
    order: bool | None = None
    attempt_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class PopMessageResponseHeader:
    """How a client rebuilds each message's receipt handle (extra info):
    ``startOffset popTime invisibleTime reviveQid topicType brokerName queueId queueOffset``
    where startOffset comes from `start_offset_info` for the message's
    (topicType, queueId) and topicType is 1 for a record whose topic is a
    `%RETRY%` topic. Entries are ``topicType queueId value`` joined by ";"
    (Java's ExtraInfoUtil); `msg_offset_info` lists the offsets per queue
    comma separated, `order_count_info` the delivery count of FIFO batches."""

    pop_time: Int64
    invisible_time: Int64
    revive_qid: Int32 = 0
    rest_num: Int64 = 0
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AckMessageRequestHeader:
    """ACK_MESSAGE (200051): `extra_info` is the message's receipt handle."""

    consumer_group: str
    topic: str
    queue_id: Int32
    extra_info: str
    offset: Int64


@dataclass(frozen=True, kw_only=True, slots=True)
class ChangeInvisibleTimeRequestHeader:
    """CHANGE_MESSAGE_INVISIBLETIME (200053)."""

    consumer_group: str
    topic: str
    queue_id: Int32
    extra_info: str
    offset: Int64
    invisible_time: Int64


@dataclass(frozen=True, kw_only=True, slots=True)
class ChangeInvisibleTimeResponseHeader:
    """The new handle is the request's extra info with `pop_time` and
    `invisible_time` replaced (and startOffset = the message's offset for
    non-FIFO groups); tidemq also returns it whole in `extra_info`."""

    pop_time: Int64
    invisible_time: Int64
    revive_qid: Int32 = 0
    extra_info: str | None = None
