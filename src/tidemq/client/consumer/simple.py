"""SimpleConsumer: RocketMQ 5's POP consumer over the remoting POP codes.

The broker chooses the messages (POP_MESSAGE with queue id -1: any queue of
the topic); each received message is invisible to the group for the
requested time and must be acked (ACK_MESSAGE) before then, or it is
delivered again with its delivery attempt raised. The application may
extend the time (CHANGE_MESSAGE_INVISIBLETIME), which replaces the
message's receipt handle. For a FIFO group (`tidemq group create G --fifo`)
the broker hands out a message group's next message only after the previous
one was acked.

``async with AsyncSimpleConsumer("G", {"Orders": "TagA || TagB"}, namesrv=...)``
or the blocking ``SimpleConsumer`` with the same arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from tidemq.acl.credentials import Credentials
from tidemq.client._base import AsyncClient, check_group, make_client_config
from tidemq.client._loop import BlockingClient
from tidemq.client._wire import decode_messages, remark
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig, ClientInstance
from tidemq.common import properties as props
from tidemq.common.message import MessageExt
from tidemq.common.names import is_retry_topic
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import decode_header, encode_header
from tidemq.protocol.pop_headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from tidemq.transport.tls import TlsConfig

__all__ = ["AsyncSimpleConsumer", "ReceivedMessage", "SimpleConsumer", "rebuild_receipts"]

DEFAULT_AWAIT_S = 20.0
DEFAULT_INVISIBLE_S = 30.0
MAX_BATCH = 32

Duration = timedelta | float | int


def _seconds(value: Duration, what: str) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        raise ValueError(f"{what} must not be negative, got {seconds} s")
    return seconds


@dataclass(slots=True)
class ReceivedMessage:
    """A popped message: the stored message, its topic as subscribed, the
    handle that acks it and how often it was delivered (1 the first time)."""

    message: MessageExt
    topic: str
    receipt_handle: str
    delivery_attempt: int
    broker_name: str

    @property
    def body(self) -> bytes:
        return self.message.body

    @property
    def tags(self) -> str | None:
        return self.message.tags

    @property
    def keys(self) -> list[str]:
        return list(self.message.keys)

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.message.properties)

    @property
    def msg_id(self) -> str:
        return self.message.properties.get(props.UNIQ_KEY) or self.message.msg_id

    @property
    def queue_id(self) -> int:
        return self.message.queue_id

    @property
    def queue_offset(self) -> int:
        return self.message.queue_offset


def _info_entries(text: str | None) -> list[tuple[str, str, str]]:
    entries = []
    for part in (text or "").split(";"):
        fields = part.split(" ")
        if len(fields) == 3:
            entries.append((fields[0], fields[1], fields[2]))
    return entries


def rebuild_receipts(
    header: PopMessageResponseHeader,
    messages: Sequence[MessageExt],
    broker_name: str,
    subscribed_topic: str,
) -> list[ReceivedMessage]:
    """Each record's receipt handle and attempt, from the pop response header
    (the rule is documented on PopMessageResponseHeader)."""
    starts = {(t, int(q)): int(s) for t, q, s in _info_entries(header.start_offset_info)}
    counts = {(t, qo): int(c) for t, qo, c in _info_entries(header.order_count_info)}
    received = []
    for message in messages:
        topic_type = "1" if is_retry_topic(message.topic) else "0"
        start = starts.get((topic_type, message.queue_id))
        if start is None:
            raise ClientError(
                f"the pop response names no start offset for queue {message.queue_id}",
                ResponseCode.SYSTEM_ERROR,
            )
        count = counts.get(
            (topic_type, f"qo{message.queue_id}%{message.queue_offset}"),
            message.reconsume_times,
        )
        handle = (
            f"{start} {header.pop_time} {header.invisible_time} {header.revive_qid} "
            f"{topic_type} {broker_name} {message.queue_id} {message.queue_offset}"
        )
        received.append(ReceivedMessage(message, subscribed_topic, handle, count + 1, broker_name))
    return received


def _subscriptions(
    subscriptions: Mapping[str, str | tuple[str, str]],
) -> dict[str, tuple[str, str]]:
    if not subscriptions:
        raise ValueError("a simple consumer needs at least one subscription")
    result = {}
    for topic, spec in subscriptions.items():
        if isinstance(spec, tuple):
            kind, expression = spec
        else:
            kind, expression = "TAG", spec or "*"
        if kind.upper() not in ("TAG", "SQL92"):
            raise ValueError(f"subscription type {kind!r} of {topic} is not TAG or SQL92")
        result[topic] = (kind.upper(), expression)
    return result


class AsyncSimpleConsumer(AsyncClient):
    """The POP consumer's asyncio core."""

    def __init__(
        self,
        group: str,
        subscriptions: Mapping[str, str | tuple[str, str]],
        namesrv: str | Sequence[str] = "127.0.0.1:9876",
        *,
        await_duration: Duration = DEFAULT_AWAIT_S,
        instance_name: str | None = None,
        client_config: ClientConfig | None = None,
        credentials: Credentials | None = None,
        tls: bool | TlsConfig | None = None,
    ) -> None:
        self._group = check_group(group, "consumer")
        self._subscriptions = _subscriptions(subscriptions)
        self.await_s = _seconds(await_duration, "await_duration")
        self._instance = ClientInstance(
            make_client_config(namesrv, instance_name, client_config, credentials, tls)
        )
        self._turn = 0
        self._started = False

    @property
    def group(self) -> str:
        return self._group

    @property
    def client_id(self) -> str:
        return self._instance.client_id

    async def start(self) -> None:
        if self._started:
            return
        await self._instance.start()
        self._started = True
        for topic in self._subscriptions:
            await self._instance.route(topic)

    async def shutdown(self) -> None:
        if self._started:
            self._started = False
            await self._instance.close()

    def _check_started(self) -> None:
        if not self._started:
            raise ClientError("the simple consumer is not started", ResponseCode.SYSTEM_ERROR)

    async def _targets(self) -> list[tuple[str, str, str]]:
        """(topic, broker name, address) of every readable broker of every topic."""
        targets = []
        for topic in sorted(self._subscriptions):
            route = await self._instance.route(topic)
            for queue in sorted({q.broker_name for q in route.read_queues()}):
                address = self._instance.master_address(queue)
                if address is not None:
                    targets.append((topic, queue, address))
        if not targets:
            raise ClientError(
                f"no readable broker for {sorted(self._subscriptions)}",
                ResponseCode.TOPIC_NOT_EXIST,
            )
        return targets

    async def receive(
        self, max_messages: int = 16, invisible_duration: Duration = DEFAULT_INVISIBLE_S
    ) -> list[ReceivedMessage]:
        """Up to `max_messages` (1..32) messages, waiting up to `await_duration`
        for the first; an empty list when none came."""
        self._check_started()
        if not 1 <= max_messages <= MAX_BATCH:
            raise ValueError(f"max_messages must be 1..{MAX_BATCH}, got {max_messages}")
        invisible_ms = int(_seconds(invisible_duration, "invisible_duration") * 1000)
        if invisible_ms <= 0:
            raise ValueError("invisible_duration must be positive")
        targets = await self._targets()
        self._turn += 1
        topic, broker_name, address = targets[self._turn % len(targets)]
        kind, expression = self._subscriptions[topic]
        header = PopMessageRequestHeader(
            consumer_group=self._group,
            topic=topic,
            queue_id=-1,
            max_msg_nums=max_messages,
            invisible_time=invisible_ms,
            poll_time=int(self.await_s * 1000),
            born_time=self._instance.clock.now_ms(),
            exp_type=kind,
            exp=expression,
        )
        response = await self._instance.invoke(
            address,
            RequestCode.POP_MESSAGE,
            encode_header(header),
            timeout=self.await_s + self._instance.config.request_timeout_s,
        )
        if response.code in (
            ResponseCode.PULL_NOT_FOUND,
            ResponseCode.POLLING_TIMEOUT,
            ResponseCode.POLLING_FULL,
        ):
            return []
        if response.code != ResponseCode.SUCCESS:
            raise ClientError(remark(response), response.code)
        answer = decode_header(PopMessageResponseHeader, response.ext_fields)
        records = decode_messages(response.body, address)
        return rebuild_receipts(answer, records, broker_name, topic)

    async def ack(self, message: ReceivedMessage) -> None:
        """Consume `message` for good (before its invisible time ends)."""
        self._check_started()
        header = AckMessageRequestHeader(
            consumer_group=self._group,
            topic=message.topic,
            queue_id=message.queue_id,
            extra_info=message.receipt_handle,
            offset=message.queue_offset,
        )
        await self._call(message, RequestCode.ACK_MESSAGE, encode_header(header))

    async def change_invisible_duration(self, message: ReceivedMessage, duration: Duration) -> str:
        """Make `message` visible again `duration` from now; its new handle
        (also stored on `message`)."""
        self._check_started()
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=self._group,
            topic=message.topic,
            queue_id=message.queue_id,
            extra_info=message.receipt_handle,
            offset=message.queue_offset,
            invisible_time=int(_seconds(duration, "duration") * 1000),
        )
        response = await self._call(
            message, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, encode_header(header)
        )
        answer = decode_header(ChangeInvisibleTimeResponseHeader, response.ext_fields)
        if answer.extra_info:
            message.receipt_handle = answer.extra_info
        return message.receipt_handle

    async def _call(
        self, message: ReceivedMessage, code: int, ext: dict[str, str]
    ) -> RemotingCommand:
        address = self._instance.master_address(message.broker_name)
        if address is None:
            raise ClientError(
                f"broker {message.broker_name} is not in the route", ResponseCode.SYSTEM_ERROR
            )
        response = await self._instance.invoke(address, code, ext)
        if response.code != ResponseCode.SUCCESS:
            raise ClientError(remark(response), response.code)
        return response


class SimpleConsumer(BlockingClient[AsyncSimpleConsumer]):
    """The blocking SimpleConsumer: the AsyncSimpleConsumer on a loop thread."""

    def __init__(
        self,
        group: str,
        subscriptions: Mapping[str, str | tuple[str, str]],
        namesrv: str | Sequence[str] = "127.0.0.1:9876",
        *,
        await_duration: Duration = DEFAULT_AWAIT_S,
        instance_name: str | None = None,
        client_config: ClientConfig | None = None,
        credentials: Credentials | None = None,
        tls: bool | TlsConfig | None = None,
    ) -> None:
        build = functools.partial(
            AsyncSimpleConsumer,
            group,
            subscriptions,
            namesrv,
            await_duration=await_duration,
            instance_name=instance_name,
            client_config=client_config,
            credentials=credentials,
            tls=tls,
        )
        super().__init__(build, thread_name=f"tidemq-simple-{group}")

    def receive(
        self, max_messages: int = 16, invisible_duration: Duration = DEFAULT_INVISIBLE_S
    ) -> list[ReceivedMessage]:
        return self._run(self._core.receive(max_messages, invisible_duration))

    def ack(self, message: ReceivedMessage) -> None:
        self._run(self._core.ack(message))

    def change_invisible_duration(self, message: ReceivedMessage, duration: Duration) -> str:
        return self._run(self._core.change_invisible_duration(message, duration))
