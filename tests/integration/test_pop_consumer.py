"""POP consumption end to end: a real `tidemq serve` and the SimpleConsumer
over the remoting POP codes. Invisible time, ack, redelivery with the attempt
raised, change of invisible time, the DLQ after max attempts, long polling,
FIFO blocking, bad handles, and restarts (SIGTERM, kill -9 in sync flush)
that neither lose a pending redelivery nor redeliver an acked message."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidemq.client.admin import AdminClient
from tidemq.client.consumer.simple import AsyncSimpleConsumer, ReceivedMessage
from tidemq.client.errors import ClientError
from tidemq.common import properties as props
from tidemq.common.message import Message
from tidemq.protocol import ResponseCode
from tidemq.testing.client_support import create_topic, numbered_messages, produce, read_topic
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.waiting import unique_name

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("pop") / "data") as process:
        yield process


async def receive_until(
    consumer: AsyncSimpleConsumer, count: int, invisible_s: float, deadline_s: float = 30.0
) -> list[ReceivedMessage]:
    """Receive until `count` messages came (or fail at the deadline)."""
    got: list[ReceivedMessage] = []
    deadline = time.monotonic() + deadline_s
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} messages came"
        got += await consumer.receive(32, invisible_s)
    return got


def bodies(messages: list[ReceivedMessage]) -> list[bytes]:
    return sorted(m.body for m in messages)


async def test_receive_ack_and_redelivery_with_attempts(server: ServerProcess) -> None:
    topic, group = unique_name("PopT"), unique_name("PopG")
    await create_topic(server.namesrv, topic, queues=2)
    await produce(server.namesrv, numbered_messages(topic, 4, tags="A", keys="k{}"))
    async with AsyncSimpleConsumer(group, {topic: "A"}, server.namesrv, await_duration=1) as c:
        first = await receive_until(c, 4, invisible_s=1.5)
        assert bodies(first) == [b"m0", b"m1", b"m2", b"m3"]
        assert all(m.delivery_attempt == 1 and m.topic == topic for m in first)
        assert {m.keys[0] for m in first} == {"k0", "k1", "k2", "k3"}
        acked = [m for m in first if m.body in (b"m0", b"m1")]
        for message in acked:
            await c.ack(message)
        again = await receive_until(c, 2, invisible_s=30)
        assert bodies(again) == [b"m2", b"m3"]
        assert all(m.delivery_attempt == 2 and m.topic == topic for m in again)
        assert all(m.message.properties[props.RETRY_TOPIC] == topic for m in again)
        for message in again:
            await c.ack(message)
        # an acked handle and a stale one are refused; the broker keeps serving
        for stale in (acked[0], first[2]):
            with pytest.raises(ClientError) as refused:
                await c.ack(stale)
            assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
        assert await c.receive(16, 10) == []


async def test_change_invisible_duration(server: ServerProcess) -> None:
    topic, group = unique_name("PopT"), unique_name("PopG")
    await create_topic(server.namesrv, topic, queues=1)
    await produce(server.namesrv, numbered_messages(topic, 2))
    async with AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=1) as c:
        first = await receive_until(c, 2, invisible_s=60)
        old_handle = first[0].receipt_handle
        new_handle = await c.change_invisible_duration(first[0], 0.5)
        assert new_handle != old_handle and first[0].receipt_handle == new_handle
        back = await receive_until(c, 1, invisible_s=60)
        assert [m.body for m in back] == [first[0].body]
        assert back[0].delivery_attempt == 2
        with pytest.raises(ClientError):  # the old handle died with the change
            await c.ack(ReceivedMessage(first[0].message, topic, old_handle, 1, "broker-a"))
        await c.ack(back[0])
        await c.ack(first[1])


async def test_forged_and_malformed_handles(server: ServerProcess) -> None:
    topic, group = unique_name("PopT"), unique_name("PopG")
    await create_topic(server.namesrv, topic, queues=1)
    await produce(server.namesrv, numbered_messages(topic, 1))
    async with AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=1) as c:
        [message] = await receive_until(c, 1, invisible_s=60)
        parts = message.receipt_handle.split(" ")
        forged = ReceivedMessage(
            message.message, topic, " ".join([*parts[:1], "1", *parts[2:]]), 1, "broker-a"
        )
        garbled = ReceivedMessage(message.message, topic, "not a handle", 1, "broker-a")
        for bad in (forged, garbled):
            with pytest.raises(ClientError) as refused:
                await c.ack(bad)
            assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
            assert "receipt handle" in str(refused.value) or "extraInfo" in str(refused.value)
        await c.ack(message)  # the real handle still works


async def test_long_polling_answers_when_a_message_arrives(server: ServerProcess) -> None:
    topic, group = unique_name("PopT"), unique_name("PopG")
    await create_topic(server.namesrv, topic, queues=2)
    async with AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=15) as c:
        started = time.monotonic()
        receiving = asyncio.ensure_future(c.receive(4, 30))
        await asyncio.sleep(0.5)  # let the pop be held before the send
        assert not receiving.done()
        await produce(server.namesrv, numbered_messages(topic, 1, body="late"))
        got = await asyncio.wait_for(receiving, 10)
        assert [m.body for m in got] == [b"late"]
        assert time.monotonic() - started < 10
        await c.ack(got[0])
        started = time.monotonic()
        quick = AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=1)
        async with quick:
            assert await quick.receive(4, 30) == []
        assert 0.9 <= time.monotonic() - started < 8


async def test_max_attempts_go_to_the_dlq(server: ServerProcess) -> None:
    topic, group = unique_name("PopT"), unique_name("PopG")
    await create_topic(server.namesrv, topic, queues=1)
    async with AdminClient(server.namesrv) as admin:
        await admin.create_group(group, retry_max_times=1)
    await produce(server.namesrv, numbered_messages(topic, 1, body="poison"))
    async with AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=1) as c:
        first = await receive_until(c, 1, invisible_s=0.5)
        second = await receive_until(c, 1, invisible_s=0.5)
        assert [m.delivery_attempt for m in first + second] == [1, 2]
        deadline = time.monotonic() + 20
        dead = []
        while not dead:
            assert time.monotonic() < deadline, "the message never reached the DLQ"
            assert await c.receive(4, 0.5) == []
            try:
                dead = await read_topic(server.namesrv, f"%DLQ%{group}")
            except ClientError:
                dead = []
    assert [m.body for m in dead] == [b"poison"]


async def test_fifo_group_blocks_the_queue_until_the_batch_is_acked(
    server: ServerProcess,
) -> None:
    topic, group = unique_name("PopT"), unique_name("FifoG")
    await create_topic(server.namesrv, topic, queues=1)
    async with AdminClient(server.namesrv) as admin:
        await admin.create_group(group, orderly=True)
    messages = numbered_messages(topic, 4)
    for message in messages:
        message.properties[props.SHARDING_KEY] = "order-1"
    await produce(server.namesrv, messages)
    one = AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=1)
    two = AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=10)
    async with one, two:
        batch = await one.receive(2, 30)
        assert [m.body for m in batch] == [b"m0", b"m1"]
        held = asyncio.ensure_future(two.receive(2, 30))
        await asyncio.sleep(0.5)
        assert not held.done(), "a FIFO queue was handed out while its batch is in flight"
        await one.ack(batch[0])
        await asyncio.sleep(0.3)
        assert not held.done()
        await one.ack(batch[1])  # the last ack commits the batch and wakes the held pop
        rest = await asyncio.wait_for(held, 8)
        assert [m.body for m in rest] == [b"m2", b"m3"]
        # not acked: the same messages come again, in order, attempt 2
        await two.change_invisible_duration(rest[0], 0.2)
        again = []
        deadline = time.monotonic() + 15
        while not again:
            assert time.monotonic() < deadline
            again = await one.receive(2, 30)
        assert [m.body for m in again] == [b"m2", b"m3"]
        assert [m.delivery_attempt for m in again] == [2, 2]
        for message in again:
            await one.ack(message)
        assert await one.receive(2, 30) == []


def _send(server: ServerProcess, topic: str, count: int) -> None:
    asyncio.run(produce(server.namesrv, numbered_messages(topic, count)))


@pytest.mark.parametrize("crash", [False, True], ids=["sigterm", "kill9"])
def test_restart_keeps_pending_redeliveries_and_acks(tmp_path: Path, crash: bool) -> None:
    topic, group = unique_name("PopT"), unique_name("PopG")
    data = tmp_path / "data"

    async def first_life(server: ServerProcess) -> list[bytes]:
        await create_topic(server.namesrv, topic, queues=2)
        await produce(server.namesrv, numbered_messages(topic, 10))
        async with AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=1) as c:
            got = await receive_until(c, 10, invisible_s=3)
            acked = [m for m in got if int(m.body[1:]) % 2 == 0]
            for message in acked:
                await c.ack(message)
        return [m.body for m in acked]

    async def second_life(server: ServerProcess) -> list[ReceivedMessage]:
        async with AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=1) as c:
            got = await receive_until(c, 5, invisible_s=60)
            extra = await c.receive(32, 60)
            for message in got + extra:
                await c.ack(message)
            return got + extra

    with serve(data, flush="sync") as server:
        acked = asyncio.run(first_life(server))
        if crash:
            server.kill()
        else:
            server.stop()
    with serve(data, flush="sync") as server:
        redelivered = asyncio.run(second_life(server))
    assert sorted(m.body for m in redelivered) == [b"m1", b"m3", b"m5", b"m7", b"m9"]
    assert not set(acked) & {m.body for m in redelivered}
    assert all(m.delivery_attempt == 2 for m in redelivered)


def test_unknown_topic_and_group(tmp_path: Path) -> None:
    async def check(server: ServerProcess) -> None:
        topic = unique_name("PopT")
        await create_topic(server.namesrv, topic, queues=1)
        consumer = AsyncSimpleConsumer("NoSuchGroup", {topic: "*"}, server.namesrv)
        async with consumer:
            with pytest.raises(ClientError) as refused:
                await consumer.receive(1, 30)
            assert refused.value.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        async with AdminClient(server.namesrv) as admin:
            await admin.create_group("KnownGroup")
        consumer = AsyncSimpleConsumer("KnownGroup", {topic: "*"}, server.namesrv, await_duration=1)
        async with consumer:
            assert await consumer.receive(1, 30) == []
        ghost = AsyncSimpleConsumer("KnownGroup", {"NoSuchTopic": "*"}, server.namesrv)
        with pytest.raises(ClientError) as missing:
            await ghost.start()
        assert missing.value.code == ResponseCode.TOPIC_NOT_EXIST
        await ghost.shutdown()

    with serve(tmp_path / "data", settings={"auto_create_subscription_group": False}) as server:
        asyncio.run(check(server))


def test_messages_are_kept_as_sent(server: ServerProcess) -> None:
    topic, group = unique_name("PopT"), unique_name("PopG")

    async def run() -> None:
        await create_topic(server.namesrv, topic, queues=1)
        message = Message(topic, body=b"payload")
        message.tags, message.keys = "TagA", "key-1"
        message.properties["region"] = "eu"
        await produce(server.namesrv, [message])
        consumer = AsyncSimpleConsumer(group, {topic: "TagA"}, server.namesrv, await_duration=1)
        async with consumer as c:
            [got] = await receive_until(c, 1, invisible_s=30)
            assert (got.body, got.tags, got.keys) == (b"payload", "TagA", ["key-1"])
            assert got.properties["region"] == "eu"
            await c.ack(got)

    asyncio.run(run())
