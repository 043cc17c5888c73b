"""Tailing a topic: one long-polling pull loop per readable queue, all feeding
one bounded inbox that an async generator drains.

Each loop sends PULL_MESSAGE (11) built and read by
`tidemq.client.consumer.pull_api` (sysFlag SUSPEND|SUBSCRIPTION, plus
COMMIT_OFFSET when a group's offset is carried, and a 15 s suspend, as Java's
push consumer does); the broker answers as soon as a message arrives.
Records are filtered again client-side by tag (the broker filters by tag
hash only). After each pull the loop also queues an
"advance" marker with the next offset, so the consumed position of a queue
moves past filtered-out records as well.

With a group, the offsets delivered so far are committed with
UPDATE_CONSUMER_OFFSET (15) when the iteration ends: a message counts as
consumed once the consumer has asked for the next one, or stopped at it.
Transport failures make a loop pause and try again; any other error ends
the iteration with that AdminError.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Protocol

from tidemq.client._wire import TRANSPORT_CODES, AdminError, ClientError, check
from tidemq.client.consumer.pull_api import pull_request_fields, pull_result
from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.common.message import MessageExt, MessageQueue
from tidemq.protocol import RemotingCommand, RequestCode, ResponseCode
from tidemq.protocol.headers import (
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
    decode_header,
    encode_header,
)

log = logging.getLogger(__name__)

TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
"""Java MixAll.TOOLS_CONSUMER_GROUP: the group a tail without a group pulls as."""
PULL_BATCH_SIZE = 32
SUSPEND_TIMEOUT_MS = 15_000
"""Long-polling hold asked of the broker (the Java push consumer's default)."""
TAIL_BUFFER = 1024
"""Deliveries buffered between the pull loops and the consumer."""
RETRY_PAUSE_S = 1.0
"""Pause of a pull loop after a transport failure before it tries again."""


class Caller(Protocol):
    """AdminClient._call: one request, transport failures as AdminError."""

    async def __call__(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        role: str = "broker",
        timeout: float | None = None,
    ) -> RemotingCommand: ...


@dataclass(frozen=True, slots=True)
class TailSpec:
    group: str
    """The consumer group pulls are made as."""
    subscription: str
    expression_type: str
    """"TAG" or "SQL92"."""
    sub_version: int
    tags: frozenset[str] | None
    """Client-side tag filter; None passes everything."""
    commit: bool
    """Carry and commit offsets (only when the caller named a group)."""


@dataclass(slots=True)
class _Delivery:
    queue: MessageQueue
    message: MessageExt | None
    """None: only the queue's next offset moved (nothing new, or filtered out)."""
    next_offset: int
    error: AdminError | None = None


class Tail:
    """The pull loops of one tail over the masters serving a topic."""

    def __init__(
        self, call: Caller, masters: Mapping[str, str], spec: TailSpec, request_timeout: float
    ) -> None:
        self._call = call
        self._masters = dict(masters)
        self._spec = spec
        self._pull_timeout = SUSPEND_TIMEOUT_MS / 1000 + request_timeout

    async def start_offset(self, queue: MessageQueue, first: bool) -> int:
        """The group's committed offset if any, else 0 (`first`) or the queue's end."""
        address = self._masters[queue.broker_name]
        if self._spec.commit:
            header = QueryConsumerOffsetRequestHeader(
                consumer_group=self._spec.group, topic=queue.topic, queue_id=queue.queue_id
            )
            response = await self._call(
                address, RequestCode.QUERY_CONSUMER_OFFSET, encode_header(header)
            )
            if response.code == ResponseCode.SUCCESS:
                offset = decode_header(QueryConsumerOffsetResponseHeader, response.ext_fields)
                if offset.offset >= 0:
                    return offset.offset
        if first:
            return 0
        header_max = GetMaxOffsetRequestHeader(topic=queue.topic, queue_id=queue.queue_id)
        response = check(
            await self._call(address, RequestCode.GET_MAX_OFFSET, encode_header(header_max))
        )
        return decode_header(GetMaxOffsetResponseHeader, response.ext_fields).offset

    async def messages(
        self, starts: Mapping[MessageQueue, int], idle_timeout: float | None
    ) -> AsyncGenerator[MessageExt, None]:
        """Messages from every queue of `starts`, until `idle_timeout` s pass without one."""
        consumed = dict(starts)
        inbox: asyncio.Queue[_Delivery] = asyncio.Queue(TAIL_BUFFER)
        tasks = [
            asyncio.create_task(self._pull_loop(queue, offset, inbox, consumed))
            for queue, offset in starts.items()
        ]
        current: _Delivery | None = None
        loop = asyncio.get_running_loop()
        deadline = None if idle_timeout is None else loop.time() + idle_timeout
        try:
            while True:
                wait = None if deadline is None else max(0.0, deadline - loop.time())
                try:
                    async with asyncio.timeout(wait):
                        item = await inbox.get()
                except TimeoutError:
                    return
                if item.error is not None:
                    raise item.error
                if item.message is None:
                    consumed[item.queue] = item.next_offset
                    continue
                current = item
                yield item.message
                consumed[item.queue] = item.next_offset
                current = None
                if idle_timeout is not None:
                    deadline = loop.time() + idle_timeout
        finally:
            if current is not None:  # the consumer stopped at this message: it had it
                consumed[current.queue] = current.next_offset
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self._spec.commit:
                await self._commit(starts, consumed)

    async def _pull_loop(
        self,
        queue: MessageQueue,
        offset: int,
        inbox: asyncio.Queue[_Delivery],
        consumed: Mapping[MessageQueue, int],
    ) -> None:
        while True:
            try:
                offset = await self._pull_once(queue, offset, inbox, consumed)
            except AdminError as exc:
                if exc.code not in TRANSPORT_CODES:
                    await inbox.put(_Delivery(queue, None, offset, exc))
                    return
                log.warning("pulling %s/%d: %s", queue.broker_name, queue.queue_id, exc)
                await asyncio.sleep(RETRY_PAUSE_S)

    async def _pull_once(
        self,
        queue: MessageQueue,
        offset: int,
        inbox: asyncio.Queue[_Delivery],
        consumed: Mapping[MessageQueue, int],
    ) -> int:
        spec = self._spec
        subscription = self._subscription(queue.topic)
        fields = pull_request_fields(
            group=spec.group,
            mq=queue,
            subscription=subscription,
            offset=offset,
            max_nums=PULL_BATCH_SIZE,
            commit_offset=consumed.get(queue, 0) if spec.commit else None,
            suspend_ms=SUSPEND_TIMEOUT_MS,
        )
        address = self._masters[queue.broker_name]
        response = await self._call(
            address, RequestCode.PULL_MESSAGE, fields, timeout=self._pull_timeout
        )
        try:
            result = pull_result(
                response, mq=queue, offset=offset, subscription=subscription, address=address
            )
        except AdminError:
            raise
        except ClientError as exc:
            raise AdminError(exc.message, exc.code) from None
        for message in result.messages:
            await inbox.put(_Delivery(queue, message, message.queue_offset + 1))
        if result.next_begin_offset != offset:
            await inbox.put(_Delivery(queue, None, result.next_begin_offset))
        return result.next_begin_offset

    def _subscription(self, topic: str) -> SubscriptionSpec:
        spec = self._spec
        return SubscriptionSpec(
            topic, spec.subscription, spec.expression_type, spec.tags, spec.sub_version
        )

    async def _commit(
        self, starts: Mapping[MessageQueue, int], consumed: Mapping[MessageQueue, int]
    ) -> None:
        for queue, offset in consumed.items():
            if offset == starts.get(queue):
                continue
            header = UpdateConsumerOffsetRequestHeader(
                consumer_group=self._spec.group,
                topic=queue.topic,
                queue_id=queue.queue_id,
                commit_offset=offset,
            )
            try:
                check(
                    await self._call(
                        self._masters[queue.broker_name],
                        RequestCode.UPDATE_CONSUMER_OFFSET,
                        encode_header(header),
                    )
                )
            except AdminError as exc:
                log.warning("committing %s/%d: %s", queue.broker_name, queue.queue_id, exc)
