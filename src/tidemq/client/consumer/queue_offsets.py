"""A queue's offsets as its master broker reports them: max (GET_MAX_OFFSET),
min (GET_MIN_OFFSET) and the offset at a time (SEARCH_OFFSET_BY_TIMESTAMP).

Used where consumption starts (rebalance) and for seeks; each raises
ClientError with the broker's code when the answer is not SUCCESS.
"""

from __future__ import annotations

from tidemq.client._wire import check
from tidemq.client.instance import ClientInstance
from tidemq.common.message import MessageQueue
from tidemq.protocol import RequestCode
from tidemq.protocol.headers import (
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    decode_header,
    encode_header,
)

__all__ = ["max_offset", "min_offset", "search_offset"]


async def max_offset(instance: ClientInstance, mq: MessageQueue) -> int:
    """The offset the next message of ``mq`` will get (committed max)."""
    address = await instance.require_master(mq.broker_name, mq.topic)
    header = GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
    response = check(
        await instance.invoke(address, RequestCode.GET_MAX_OFFSET, encode_header(header))
    )
    return decode_header(GetMaxOffsetResponseHeader, response.ext_fields or {}).offset


async def min_offset(instance: ClientInstance, mq: MessageQueue) -> int:
    """The smallest offset of ``mq`` still stored."""
    address = await instance.require_master(mq.broker_name, mq.topic)
    header = GetMinOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
    response = check(
        await instance.invoke(address, RequestCode.GET_MIN_OFFSET, encode_header(header))
    )
    return decode_header(GetMinOffsetResponseHeader, response.ext_fields or {}).offset


async def search_offset(instance: ClientInstance, mq: MessageQueue, timestamp_ms: int) -> int:
    """The first offset of ``mq`` stored at or after ``timestamp_ms``."""
    address = await instance.require_master(mq.broker_name, mq.topic)
    header = SearchOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp_ms)
    response = check(
        await instance.invoke(
            address, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, encode_header(header)
        )
    )
    return decode_header(SearchOffsetResponseHeader, response.ext_fields or {}).offset
