"""A queue's offsets as its master broker reports them: max (GET_MAX_OFFSET),
min (GET_MIN_OFFSET) and the offset at a time (SEARCH_OFFSET_BY_TIMESTAMP).

Used where consumption starts (rebalance) and for seeks; each raises
ClientError with the broker's code when the answer is not SUCCESS.
"""

from __future__ import annotations

from typing import TypeVar

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
    header = GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
    return await _ask(instance, mq, RequestCode.GET_MAX_OFFSET, header, GetMaxOffsetResponseHeader)


async def min_offset(instance: ClientInstance, mq: MessageQueue) -> int:
    """The smallest offset of ``mq`` still stored."""
    header = GetMinOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
    return await _ask(instance, mq, RequestCode.GET_MIN_OFFSET, header, GetMinOffsetResponseHeader)


async def search_offset(instance: ClientInstance, mq: MessageQueue, timestamp_ms: int) -> int:
    """The first offset of ``mq`` stored at or after ``timestamp_ms``."""
    header = SearchOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp_ms)
    return await _ask(
        instance, mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header, SearchOffsetResponseHeader
    )


_Answer = TypeVar(
    "_Answer", GetMaxOffsetResponseHeader, GetMinOffsetResponseHeader, SearchOffsetResponseHeader
)


async def _ask(
    instance: ClientInstance,
    mq: MessageQueue,
    code: int,
    header: GetMaxOffsetRequestHeader | GetMinOffsetRequestHeader | SearchOffsetRequestHeader,
    answer: type[_Answer],
) -> int:
    """Send one offset request to ``mq``'s master; the offset of its answer."""
    address = await instance.require_master(mq.broker_name, mq.topic)
    response = check(await instance.invoke(address, code, encode_header(header)))
    return decode_header(answer, response.ext_fields or {}).offset
