"""WAIT=false: a SYNC_MASTER answers without waiting for a slave.

Java reads the sender's WAIT property with `Message.isWaitStoreMsgOK`, and
`CommitLog.needHandleHA` skips the slave wait when it is false (the batch's
own properties, from the request header, for a batch). A SYNC_MASTER with no
slave shows it at once: a send that waits is answered SLAVE_NOT_AVAILABLE,
one that does not is SEND_OK; both are stored."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from replication_support import TOPIC, Brokers, running_brokers

from tidemq.client.model import SendStatus
from tidemq.client.producer import AsyncProducer
from tidemq.common.message import Message, MessageQueue
from tidemq.testing.waiting import HANG_GUARD_S


@pytest.fixture
async def brokers(tmp_path: Path) -> AsyncIterator[Brokers]:
    async with running_brokers(tmp_path) as env:
        yield env


def no_wait(text: str) -> Message:
    message = Message(TOPIC, text.encode())
    message.wait_store_msg_ok = False
    return message


async def test_a_sync_master_without_slave_answers_wait_false_sends_ok(
    brokers: Brokers,
) -> None:
    master = brokers.node("master", "SYNC_MASTER", 0)
    master.start()
    await brokers.create_topic(master)
    producer = AsyncProducer("PG", brokers.namesrv, send_timeout_s=10)
    await producer.start()
    queue = MessageQueue(TOPIC, "broker-a", 0)
    try:
        async with asyncio.timeout(HANG_GUARD_S):
            waiting = await producer.send(Message(TOPIC, b"waits"), queue=queue)
            hasty = await producer.send(no_wait("does not wait"), queue=queue)
            batch = await producer.send_batch(
                [no_wait("batch one"), no_wait("batch two")], queue=queue
            )
            waiting_batch = await producer.send_batch(
                [Message(TOPIC, b"batch three"), Message(TOPIC, b"batch four")], queue=queue
            )
    finally:
        await producer.shutdown()

    assert waiting.status is SendStatus.SLAVE_NOT_AVAILABLE
    assert hasty.status is SendStatus.SEND_OK
    assert batch.status is SendStatus.SEND_OK
    assert waiting_batch.status is SendStatus.SLAVE_NOT_AVAILABLE
    assert (await brokers.pull_all(master))[0] == [
        b"waits",
        b"does not wait",
        b"batch one",
        b"batch two",
        b"batch three",
        b"batch four",
    ]
