"""`auto_batch=True` (RocketMQ 5's autoBatch) against a real `tidemq serve`:
concurrent single sends travel as batches (consecutive offsets on one queue),
each caller gets its own result, messages keep their own properties, what Java
never batches goes alone, a bad message fails alone, and shutdown sends what
is still held."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator

import pytest

from tidemq.client.admin import AdminClient
from tidemq.client.errors import ClientError
from tidemq.client.model import SendResult
from tidemq.client.producer import AsyncProducer, Producer, make_message
from tidemq.common.message import MessageExt
from tidemq.protocol import ResponseCode
from tidemq.testing.client_support import read_topic
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.waiting import unique_name

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("autobatch") / "data") as process:
        yield process


@pytest.fixture
async def topic(server: ServerProcess) -> str:
    name = unique_name("AB")
    async with AdminClient(server.namesrv) as admin:
        await admin.create_topic(name, queues=4)
    return name


@pytest.fixture
async def producer(server: ServerProcess) -> AsyncIterator[AsyncProducer]:
    async with AsyncProducer(
        unique_name("PG"), server.namesrv, auto_batch=True, batch_max_bytes=1024
    ) as p:
        yield p


async def test_concurrent_single_sends_are_stored_as_batches(
    server: ServerProcess, producer: AsyncProducer, topic: str
) -> None:
    messages = [
        make_message(topic, b"%04d" % i + b"." * 96, tags="T", keys=[f"k{i}"]) for i in range(200)
    ]
    results = await asyncio.gather(*(producer.send_async(m) for m in messages))
    assert {r.status for r in results} == {"SEND_OK"}
    assert [r.msg_id for r in results] == [m.unique_key for m in messages]
    assert len({r.offset_msg_id for r in results}) == 200
    # 100-byte bodies, 1 KiB per batch: runs of 11 sends on one queue with
    # consecutive offsets (round robin would spread single sends over 4 queues).
    assert longest_run(results) >= 11
    stored = by_position(await read_topic(server.namesrv, topic))
    assert len(stored) == 200
    for message, result in zip(messages, results, strict=True):
        found = stored[(result.queue_id, result.queue_offset)]
        assert found.unique_key == message.unique_key
        assert found.body == message.body
        assert found.tags == "T"
        assert found.keys == message.keys


def by_position(messages: list[MessageExt]) -> dict[tuple[int, int], MessageExt]:
    return {(m.queue_id, m.queue_offset): m for m in messages}


def longest_run(results: list[SendResult]) -> int:
    """The most sends answered with consecutive offsets of one queue."""
    taken = {(r.queue_id, r.queue_offset) for r in results}
    longest = 0
    for queue_id, offset in taken:
        if (queue_id, offset - 1) in taken:
            continue
        length = 1
        while (queue_id, offset + length) in taken:
            length += 1
        longest = max(longest, length)
    return longest


async def test_a_blocking_send_waits_for_its_batch_and_gets_its_result(
    producer: AsyncProducer, topic: str
) -> None:
    result = await producer.send(make_message(topic, b"alone", tags="T"))
    assert result.status == "SEND_OK"
    assert result.queue_offset >= 0


async def test_delay_messages_and_bad_messages_are_not_held(
    producer: AsyncProducer, topic: str
) -> None:
    delayed = make_message(topic, b"later", delay_level=1)
    good = [make_message(topic, b"good%d" % i) for i in range(5)]
    empty = make_message(topic, b"x")
    empty.body = b""
    futures = [producer.send_async(m) for m in good]
    bad = producer.send_async(empty)
    delay_result = await producer.send(delayed)
    assert delay_result.status == "SEND_OK"
    with pytest.raises(ClientError) as refused:
        await bad
    assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
    results: list[SendResult] = await asyncio.gather(*futures)
    assert {r.status for r in results} == {"SEND_OK"}
    assert longest_run(results) == 5  # one batch


async def test_shutdown_sends_what_is_still_held(server: ServerProcess, topic: str) -> None:
    producer = AsyncProducer(
        unique_name("PG"), server.namesrv, auto_batch=True, batch_max_delay_ms=30_000
    )
    await producer.start()
    held = [producer.send_async(make_message(topic, b"held%d" % i)) for i in range(3)]
    await asyncio.sleep(0)
    assert not any(f.done() for f in held)  # a 30 s hold: nothing sent yet
    await producer.shutdown()
    results = [f.result() for f in held]
    assert {r.status for r in results} == {"SEND_OK"}
    stored = by_position(await read_topic(server.namesrv, topic))
    assert [stored[(r.queue_id, r.queue_offset)].body for r in results] == [
        b"held0",
        b"held1",
        b"held2",
    ]
    assert longest_run(results) == 3


def test_blocking_producer_batches_sends_of_many_threads(server: ServerProcess, topic: str) -> None:
    with Producer(unique_name("PG"), server.namesrv, auto_batch=True) as producer:
        assert producer._channels is None  # held sends meet on the loop thread
        results: list[SendResult] = []
        lock = threading.Lock()

        def sender(worker: int) -> None:
            for i in range(10):
                r = producer.send(make_message(topic, b"w%d-%d" % (worker, i)))
                with lock:
                    results.append(r)

        threads = [threading.Thread(target=sender, args=(w,)) for w in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert len(results) == 80
    assert {r.status for r in results} == {"SEND_OK"}
    assert len({r.msg_id for r in results}) == 80
    assert len({(r.queue_id, r.queue_offset) for r in results}) == 80
    assert longest_run(results) > 1  # 8 threads sending at once share batches
