"""Messages of a topic stored within a time range: what a person browsing a
topic asks for ("what arrived between 10:00 and 10:05?").

As rocketmq-dashboard's queryMessageByTopic does with MQAdminExt: per
readable queue, SEARCH_OFFSET_BY_TIMESTAMP (29) finds the first offset at or
after `begin` and the first at or after `end`; PULL_MESSAGE (11, no long
polling, no offset committed) reads that span as TOOLS_CONSUMER. Records
stored outside [begin, end] are dropped; at most `max_num` are read in all,
and the answer says when it stopped early (`cut`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tidemq.client._tail import TOOLS_CONSUMER_GROUP, Caller
from tidemq.client._wire import AdminError, ClientError, check
from tidemq.client.consumer.pull_api import pull_request_fields, pull_result
from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.common.message import MessageExt, MessageQueue
from tidemq.common.tags import SUB_ALL
from tidemq.protocol import RequestCode
from tidemq.protocol.headers import (
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    decode_header,
    encode_header,
)

__all__ = ["TimeRangeResult", "messages_between"]

PAGE = 32


@dataclass(frozen=True, slots=True)
class TimeRangeResult:
    messages: list[MessageExt]
    """Oldest first (by store time, then queue)."""
    cut: bool
    """More messages lie in the range than `max_num`."""


async def _search(call: Caller, address: str, queue: MessageQueue, timestamp: int) -> int:
    header = SearchOffsetRequestHeader(
        topic=queue.topic, queue_id=queue.queue_id, timestamp=timestamp
    )
    response = check(
        await call(address, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, encode_header(header))
    )
    return decode_header(SearchOffsetResponseHeader, response.ext_fields).offset


async def _read_span(
    call: Caller, address: str, queue: MessageQueue, start: int, stop: int, budget: int
) -> tuple[list[MessageExt], bool]:
    """Records of offsets [start, stop) of one queue, at most `budget`; and
    whether some were left unread."""
    subscription = SubscriptionSpec(queue.topic, SUB_ALL, "TAG", None, 0)
    found: list[MessageExt] = []
    offset = start
    while offset < stop and len(found) < budget:
        fields = pull_request_fields(
            group=TOOLS_CONSUMER_GROUP,
            mq=queue,
            subscription=subscription,
            offset=offset,
            max_nums=min(PAGE, stop - offset),
            suspend_ms=0,
        )
        response = await call(address, RequestCode.PULL_MESSAGE, fields)
        try:
            result = pull_result(
                response, mq=queue, offset=offset, subscription=subscription, address=address
            )
        except ClientError as exc:
            raise AdminError(exc.message, exc.code) from None
        found += [m for m in result.messages if m.queue_offset < stop]
        if result.next_begin_offset <= offset:
            break
        offset = result.next_begin_offset
    return found[:budget], offset < stop or len(found) > budget


async def messages_between(
    call: Caller,
    masters: Mapping[str, str],
    queues: Sequence[MessageQueue],
    begin_ms: int,
    end_ms: int,
    max_num: int,
) -> TimeRangeResult:
    """Messages of `queues` stored in [begin_ms, end_ms] (see the module docstring)."""
    if begin_ms > end_ms:
        raise ValueError("the range begins after it ends")
    if max_num <= 0:
        raise ValueError("max_num must be positive")
    found: list[MessageExt] = []
    cut = False
    for queue in queues:
        address = masters.get(queue.broker_name)
        if address is None:
            continue
        start = await _search(call, address, queue, begin_ms)
        stop = await _search(call, address, queue, end_ms + 1)
        if stop <= start:
            continue
        budget = max_num - len(found)
        if budget <= 0:
            cut = True
            break
        records, left = await _read_span(call, address, queue, start, stop, budget)
        found += [m for m in records if begin_ms <= m.store_timestamp <= end_ms]
        cut = cut or left
    found.sort(key=lambda m: (m.store_timestamp, m.queue_id, m.queue_offset))
    return TimeRangeResult(found, cut)
