"""Client test plumbing against a real server: create a topic, produce numbered
messages with the AsyncProducer, call the gRPC endpoint through a raw v2 stub.
Used by the client integration tests so each of them says only what it checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.admin import AdminClient
from tidemq.client.consumer.pull_api import PullStatus, pull_message
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.client.instance import ClientConfig, ClientInstance
from tidemq.client.model import SendStatus
from tidemq.client.producer import AsyncProducer
from tidemq.common.message import Message, MessageExt, MessageQueue
from tidemq.testing.waiting import unique_name

__all__ = [
    "create_topic",
    "grpc_call",
    "grpc_send_request",
    "numbered_messages",
    "produce",
    "read_queue",
    "read_topic",
    "traced_push_consumer",
]

GRPC_STREAMING = frozenset({"ReceiveMessage", "PullMessage"})


async def create_topic(namesrv: str, topic: str, *, queues: int = 4) -> list[MessageQueue]:
    """Create `topic` with `queues` queues (admin UPDATE_AND_CREATE_TOPIC on
    every master); its readable queues, sorted."""
    async with AdminClient(namesrv) as admin:
        await admin.create_topic(topic, queues=queues)
        route = await admin.topic_route(topic)
    return sorted(route.read_queues())


def numbered_messages(
    topic: str,
    count: int,
    *,
    start: int = 0,
    body: str = "m{}",
    tags: str | None = None,
    keys: str | None = None,
) -> list[Message]:
    """Messages `start` .. `start + count - 1` of `topic`; `body` and `keys` are
    format strings of the number ("m{}" gives m0, m1, ...)."""
    messages: list[Message] = []
    for number in range(start, start + count):
        message = Message(topic, body=body.format(number).encode())
        if tags is not None:
            message.tags = tags
        if keys is not None:
            message.keys = keys.format(number)
        messages.append(message)
    return messages


async def produce(
    namesrv: str,
    messages: Sequence[Message],
    *,
    queue: MessageQueue | None = None,
    batch_size: int = 1,
    group: str | None = None,
) -> list[str]:
    """Send `messages` in order with a fresh AsyncProducer (one by one, or in
    batches of `batch_size`), to `queue` when given; every send must be
    SEND_OK. The bodies sent, decoded."""
    async with AsyncProducer(group or unique_name("P"), namesrv) as producer:
        for first in range(0, len(messages), batch_size):
            chunk = messages[first : first + batch_size]
            if batch_size == 1:
                result = await producer.send(chunk[0], queue=queue)
            else:
                result = await producer.send_batch(chunk, queue=queue)
            assert result.status == SendStatus.SEND_OK, (result.status, first)
    return [message.body.decode() for message in messages]


async def read_queue(namesrv: str, queue: MessageQueue) -> list[MessageExt]:
    """Everything in `queue` now, in offset order (plain pulls, no consumer group state)."""
    return await read_topic(namesrv, queue.topic, [queue])


async def read_topic(
    namesrv: str, topic: str, queues: Sequence[MessageQueue] | None = None
) -> list[MessageExt]:
    """Everything in `queues` (default: every readable queue of `topic`) now."""
    instance = ClientInstance(ClientConfig(namesrv=namesrv))
    spec = SubscriptionSpec.parse(topic, "*", sub_version=1)
    found: list[MessageExt] = []
    try:
        route = await instance.route(topic)
        for mq in queues if queues is not None else sorted(route.read_queues()):
            offset = 0
            while True:
                result = await pull_message(
                    instance,
                    group="TestReader",
                    mq=mq,
                    subscription=spec,
                    offset=offset,
                    suspend_ms=0,
                )
                if result.status is not PullStatus.FOUND:
                    break
                found.extend(result.messages)
                offset = result.next_begin_offset
    finally:
        await instance.close()
    return found


async def grpc_call(endpoint: str, method: str, request: Any, timeout: float | None = None) -> Any:
    """One apache.rocketmq.v2 RPC through a raw stub (for what the official
    clients do not expose): the response, or the list of a stream's responses."""
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        metadata = (("x-mq-client-id", "raw-stub@1"),)
        rpc = getattr(stub, method)
        if method in GRPC_STREAMING:
            return [r async for r in rpc(request, metadata=metadata, timeout=timeout or 30)]
        return await rpc(request, metadata=metadata, timeout=timeout or 10)


def grpc_send_request(topic: str, body: bytes, **system: Any) -> Any:
    """A SendMessageRequest of one message; `system` are SystemProperties
    fields (message_type NORMAL unless given)."""
    system.setdefault("message_type", pb.MessageType.NORMAL)
    system.setdefault("message_id", "01AB")
    return spb.SendMessageRequest(
        messages=[
            pb.Message(
                topic=pb.Resource(name=topic),
                body=body,
                system_properties=pb.SystemProperties(**system),
            )
        ]
    )


def traced_push_consumer(
    namesrv: str, group: str, topic: str, listener: Any, **options: Any
) -> AsyncPushConsumer:
    """A push consumer of `topic` from its first offset, writing message traces
    (`enable_trace`), not started; `options` go to AsyncPushConsumer."""
    consumer = AsyncPushConsumer(
        group,
        namesrv,
        listener=listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        enable_trace=True,
        **options,
    )
    consumer.subscribe(topic)
    return consumer
