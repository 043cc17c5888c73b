"""POP consumption end to end: a real `tidemq serve` and the SimpleConsumer
over the remoting POP codes. Invisible time, ack, redelivery with the attempt
raised, change of invisible time, the DLQ after max attempts, long polling,
FIFO blocking, bad handles, and restarts (SIGTERM, kill -9 in sync flush)
that neither lose a pending redelivery nor redeliver an acked message; batch
acks (BATCH_ACK_MESSAGE), out-of-range invisible times, the broker's own FIFO
dead-lettering and a FIFO batch that outlives a restart; a late FIFO ack
(RocketMQ's rules); the blocking SimpleConsumer."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidemq.broker.pop.receipts import parse_receipt_handle
from tidemq.client.admin import AdminClient
from tidemq.client.consumer.simple import AsyncSimpleConsumer, ReceivedMessage, SimpleConsumer
from tidemq.client.errors import ClientError
from tidemq.common import properties as props
from tidemq.common.message import Message, MessageExt
from tidemq.protocol import ResponseCode
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import encode_header
from tidemq.protocol.pop_headers import ChangeInvisibleTimeRequestHeader, PopMessageRequestHeader
from tidemq.testing.client_support import create_topic, numbered_messages, produce, read_topic
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.waiting import HANG_GUARD_S, eventually, unique_name, wait_until
from tidemq.transport import RemotingClient

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("pop") / "data") as process:
        yield process


POP_PARKED_S = 0.5
"""A pause before the send, so that the pop is parked by the broker when the message
arrives. The broker is another process and shows no count of parked pops, so there is
no condition to wait on; a pause too short on a slow machine only lets the pop find the
message at once (the test then passes without exercising the hold), it cannot fail it."""


async def receive_until(
    consumer: AsyncSimpleConsumer, count: int, invisible_s: float, *, batch: int = 32
) -> list[ReceivedMessage]:
    """Receive (up to `batch` a time) until `count` messages came (or fail at the deadline)."""
    got: list[ReceivedMessage] = []

    async def enough() -> bool:
        got.extend(await consumer.receive(batch, invisible_s))
        return len(got) >= count

    await eventually(enough, f"{count} messages received")
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
    # The pop may wait longer than the hang guard: only the arrival can answer it in time.
    await_s = 2 * HANG_GUARD_S
    async with AsyncSimpleConsumer(
        group, {topic: "*"}, server.namesrv, await_duration=await_s
    ) as c:
        receiving = asyncio.ensure_future(c.receive(4, 30))
        await asyncio.sleep(POP_PARKED_S)  # see POP_PARKED_S: no condition to wait on
        assert not receiving.done()
        await produce(server.namesrv, numbered_messages(topic, 1, body="late"))
        got = await asyncio.wait_for(receiving, HANG_GUARD_S)
        assert [m.body for m in got] == [b"late"]
        await c.ack(got[0])
        started = time.monotonic()
        quick = AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=1)
        async with quick, asyncio.timeout(HANG_GUARD_S):
            assert await quick.receive(4, 30) == []
        assert time.monotonic() - started >= 0.9  # held for its await duration


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

        async def dead_lettered() -> list[MessageExt]:
            assert await c.receive(4, 0.5) == []
            try:
                return await read_topic(server.namesrv, f"%DLQ%{group}")
            except ClientError:
                return []

        dead = await eventually(dead_lettered, "the message in the DLQ")
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
    # `one` waits its 1 s await duration and is answered: the queue handed nothing out
    # in that time (the consumer's setting); `two` is held past the hang guard.
    one = AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=1)
    two = AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=2 * HANG_GUARD_S)
    async with one, two:
        batch = await one.receive(2, 30)
        assert [m.body for m in batch] == [b"m0", b"m1"]
        held = asyncio.ensure_future(two.receive(2, 30))
        assert await one.receive(2, 30) == [], "a FIFO queue handed out with a batch in flight"
        assert not held.done()
        await one.ack(batch[0])
        assert await one.receive(2, 30) == [], "handed out after a partial ack"
        assert not held.done()
        await one.ack(batch[1])  # the last ack commits the batch and wakes the held pop
        rest = await asyncio.wait_for(held, HANG_GUARD_S)
        assert [m.body for m in rest] == [b"m2", b"m3"]
        # not acked: the same messages come again, in order, attempt 2
        await two.change_invisible_duration(rest[0], 0.2)
        again = await eventually(lambda: one.receive(2, 30), "m2 and m3 again")
        assert [m.body for m in again] == [b"m2", b"m3"]
        assert [m.delivery_attempt for m in again] == [2, 2]
        for message in again:
            await one.ack(message)
        assert await one.receive(2, 30) == []


async def past_invisible_time(messages: list[ReceivedMessage]) -> None:
    """Until this machine's clock (the server's) is past the messages' invisible time."""
    due_ms = max(parse_receipt_handle(m.receipt_handle).due_ms for m in messages)

    async def passed() -> bool:
        return time.time() * 1000 > due_ms + 50

    await eventually(passed, "the invisible time to pass", timeout=30)


async def test_a_late_fifo_ack_commits_unless_the_batch_came_again(server: ServerProcess) -> None:
    """RocketMQ's broker checks no invisible time on a FIFO ack
    (AckMessageProcessor.ackOrderly): a late ack commits while nobody received
    the batch again; once it was delivered again, an ack of the earlier
    delivery is answered but changes nothing (commitAndNext's -2)."""
    topic, group = unique_name("PopT"), unique_name("FifoG")
    await create_topic(server.namesrv, topic, queues=1)
    async with AdminClient(server.namesrv) as admin:
        await admin.create_group(group, orderly=True)
    messages = numbered_messages(topic, 4)
    for message in messages:
        message.properties[props.SHARDING_KEY] = "order-1"
    await produce(server.namesrv, messages)
    consumer = AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=1)
    async with consumer:
        batch = await receive_until(consumer, 2, 1, batch=2)
        assert [m.body for m in batch] == [b"m0", b"m1"]
        await past_invisible_time(batch)
        for message in batch:
            await consumer.ack(message)  # late, but the batch was not delivered again
        rest = await receive_until(consumer, 2, 1, batch=2)
        assert [(m.body, m.delivery_attempt) for m in rest] == [(b"m2", 1), (b"m3", 1)]
        await past_invisible_time(rest)
        again = await receive_until(consumer, 2, 30, batch=2)
        assert [(m.body, m.delivery_attempt) for m in again] == [(b"m2", 2), (b"m3", 2)]
        for message in rest:
            await consumer.ack(message)  # the earlier delivery: nothing changes
        assert await consumer.receive(2, 30) == [], "the second delivery still holds the queue"
        for message in again:
            await consumer.ack(message)
        assert await consumer.receive(2, 30) == []


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


# -- raw remoting requests the SimpleConsumer does not send --------------------------------


async def request(
    server: ServerProcess, code: int, header: object = None, body: bytes = b""
) -> RemotingCommand:
    """One remoting request straight to the broker; the answer, whatever its code."""
    ext = encode_header(header) if header is not None else None
    async with RemotingClient() as client:
        return await client.invoke(server.broker, RemotingCommand.request(code, ext, body), 10)


async def batch_ack(
    server: ServerProcess, group: str, topic: str, handles: list[str]
) -> RemotingCommand:
    """BATCH_ACK_MESSAGE with tidemq's JSON body (see broker/processors/pop.py)."""
    document = {"acks": [{"consumerGroup": group, "topic": topic, "extraInfo": handles}]}
    return await request(server, RequestCode.BATCH_ACK_MESSAGE, body=json.dumps(document).encode())


async def test_batch_ack_acks_many_and_reports_refused_handles(server: ServerProcess) -> None:
    topic, group = unique_name("PopT"), unique_name("PopG")
    await create_topic(server.namesrv, topic, queues=1)
    await produce(server.namesrv, numbered_messages(topic, 5))
    async with AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=1) as c:
        got = {m.body: m for m in await receive_until(c, 5, invisible_s=2)}
        assert sorted(got) == [b"m0", b"m1", b"m2", b"m3", b"m4"]
        answer = await batch_ack(
            server, group, topic, [got[b].receipt_handle for b in (b"m0", b"m1")]
        )
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        forged = got[b"m4"].receipt_handle.split(" ")
        forged[1] = "1"  # another pop time: no such checkpoint
        mixed = [
            got[b"m2"].receipt_handle,
            " ".join(forged),
            got[b"m0"].receipt_handle,  # acked by the first batch
            "not a handle",
            got[b"m3"].receipt_handle,
        ]
        answer = await batch_ack(server, group, topic, mixed)
        assert answer.code == ResponseCode.MESSAGE_ILLEGAL
        assert answer.remark == "3 receipt handles were refused"
        answer = await request(server, RequestCode.BATCH_ACK_MESSAGE, body=b"{not json")
        assert answer.code == ResponseCode.MESSAGE_ILLEGAL
        assert "malformed" in (answer.remark or "")
        # after the invisible time only m4 (never acked) comes back
        again = await receive_until(c, 1, invisible_s=30)
        assert [(m.body, m.delivery_attempt) for m in again] == [(b"m4", 2)]
        await c.ack(again[0])
        assert await c.receive(16, 30) == []


async def test_out_of_range_invisible_times_are_refused(server: ServerProcess) -> None:
    topic, group = unique_name("PopT"), unique_name("PopG")
    await create_topic(server.namesrv, topic, queues=1)
    await produce(server.namesrv, numbered_messages(topic, 1, body="kept"))
    over_12_h = 12 * 3600 + 1
    async with AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=1) as c:
        with pytest.raises(ClientError) as refused:
            await c.receive(1, over_12_h)
        assert refused.value.code == ResponseCode.INVALID_PARAMETER
        assert "out of range" in str(refused.value)
        negative = PopMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=-1, max_msg_nums=1, invisible_time=-1
        )
        answer = await request(server, RequestCode.POP_MESSAGE, negative)
        assert answer.code == ResponseCode.INVALID_PARAMETER, answer.remark
        # the refused pops handed nothing out: the message comes on its first attempt
        [got] = await receive_until(c, 1, invisible_s=30)
        assert (got.body, got.delivery_attempt) == (b"kept", 1)
        handle = got.receipt_handle
        with pytest.raises(ClientError) as refused:
            await c.change_invisible_duration(got, over_12_h)
        assert refused.value.code == ResponseCode.INVALID_PARAMETER
        change = ChangeInvisibleTimeRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=got.queue_id,
            extra_info=handle,
            offset=got.queue_offset,
            invisible_time=-1000,
        )
        answer = await request(server, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, change)
        assert answer.code == ResponseCode.INVALID_PARAMETER, answer.remark
        assert got.receipt_handle == handle
        await c.ack(got)  # the refusals left the handle valid
        assert await c.receive(4, 30) == []


async def test_fifo_group_dead_letters_on_the_broker_after_max_attempts(
    server: ServerProcess,
) -> None:
    """The broker's own FIFO path (`_pop_once`): the client never forwards to
    the DLQ (the remoting SimpleConsumer has no such request)."""
    topic, group = unique_name("PopT"), unique_name("FifoG")
    await create_topic(server.namesrv, topic, queues=1)
    async with AdminClient(server.namesrv) as admin:
        await admin.create_group(group, orderly=True, retry_max_times=1)  # 2 attempts
    messages = numbered_messages(topic, 2, body="f{}")
    for message in messages:
        message.properties[props.SHARDING_KEY] = "order-1"
    await produce(server.namesrv, messages)
    async with AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=2) as c:
        delivered = []
        for _ in range(2):  # never acked: the same batch again when its time is up
            [message] = await receive_until(c, 1, invisible_s=0.3, batch=1)
            delivered.append((message.body, message.delivery_attempt))
        assert delivered == [(b"f0", 1), (b"f0", 2)]
        # a third attempt exceeds the max: f0 goes to the DLQ, the queue moves on
        [after] = await receive_until(c, 1, invisible_s=30, batch=1)
        assert (after.body, after.delivery_attempt) == (b"f1", 1)
        await c.ack(after)
        assert await c.receive(4, 30) == []

    async def dead_lettered() -> list[object] | None:
        try:
            return list(await read_topic(server.namesrv, f"%DLQ%{group}")) or None
        except ClientError:
            return None

    dead = await eventually(dead_lettered, "f0 in the DLQ", timeout=20)
    assert [m.body for m in dead] == [b"f0"]  # type: ignore[attr-defined]
    assert dead[0].properties[props.RETRY_TOPIC] == topic  # type: ignore[attr-defined]


@pytest.mark.parametrize("crash", [False, True], ids=["sigterm", "kill9"])
def test_fifo_batch_survives_a_restart(tmp_path: Path, crash: bool) -> None:
    """A FIFO batch in flight at a restart (sync flush) still blocks its queue
    afterwards, its handles still ack it, and the last ack unblocks the queue.
    kill -9 comes after one ack, which sync flush persists before answering."""
    topic, group = unique_name("PopT"), unique_name("FifoG")
    data = tmp_path / "data"

    async def first_life(server: ServerProcess) -> list[ReceivedMessage]:
        await create_topic(server.namesrv, topic, queues=1)
        async with AdminClient(server.namesrv) as admin:
            await admin.create_group(group, orderly=True)
        messages = numbered_messages(topic, 3)
        for message in messages:
            message.properties[props.SHARDING_KEY] = "order-1"
        await produce(server.namesrv, messages)
        async with AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=1) as c:
            batch = await c.receive(2, 60)
            assert [m.body for m in batch] == [b"m0", b"m1"]
            if crash:
                await c.ack(batch[0])
                return batch[1:]
        return batch

    async def second_life(server: ServerProcess, unacked: list[ReceivedMessage]) -> None:
        consumer = AsyncSimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=0.5)
        async with consumer as c:
            assert await c.receive(4, 60) == [], "the queue was handed out past a live batch"
            for message in unacked:
                await c.ack(message)  # the handles from before the restart
            rest = await receive_until(c, 1, invisible_s=60)
            assert [(m.body, m.delivery_attempt) for m in rest] == [(b"m2", 1)]
            await c.ack(rest[0])
            assert await c.receive(4, 60) == []

    with serve(data, flush="sync") as server:
        unacked = asyncio.run(first_life(server))
        if crash:
            server.kill()
        else:
            server.stop()
    order_info = data / "config" / "consumerOrderInfo.json"
    assert order_info.exists()
    assert f"{topic}@{group}" in json.loads(order_info.read_text())["table"]
    with serve(data, flush="sync") as server:
        asyncio.run(second_life(server, unacked))


def test_blocking_simple_consumer(server: ServerProcess) -> None:
    topic, group = unique_name("PopT"), unique_name("PopG")
    asyncio.run(create_topic(server.namesrv, topic, queues=1))
    asyncio.run(produce(server.namesrv, numbered_messages(topic, 2)))

    def receive(consumer: SimpleConsumer, count: int) -> list[ReceivedMessage]:
        got: list[ReceivedMessage] = []

        def enough() -> bool:
            got.extend(consumer.receive(8, 30))
            return len(got) >= count

        wait_until(enough, f"{count} messages received")
        return got

    with SimpleConsumer(group, {topic: "*"}, server.namesrv, await_duration=1) as consumer:
        first = receive(consumer, 2)
        assert bodies(first) == [b"m0", b"m1"]
        old_handle = first[0].receipt_handle
        assert consumer.change_invisible_duration(first[0], 0.2) != old_handle
        [again] = receive(consumer, 1)
        assert (again.body, again.delivery_attempt) == (first[0].body, 2)
        consumer.ack(again)
        consumer.ack(first[1])
        assert consumer.receive(8, 30) == []
    with pytest.raises(ClientError):  # shut down by the with block
        consumer.receive(1, 30)
