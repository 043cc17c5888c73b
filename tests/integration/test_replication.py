"""Master/slave replication with real processes: a name server, a master and a
slave (`tidemq broker --config`), files compared byte for byte, messages pulled
from the slave itself."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from replication_support import (
    QUEUES,
    TOPIC,
    Brokers,
    Node,
    commitlog_bytes,
    running_brokers,
    swap_store,
)

from tidemq.client.errors import ClientError
from tidemq.client.model import SendStatus
from tidemq.client.producer import AsyncProducer
from tidemq.common.message import Message, MessageQueue
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    EndTransactionRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    encode_header,
)
from tidemq.testing.waiting import HANG_GUARD_S, eventually


@pytest.fixture
async def brokers(tmp_path: Path) -> AsyncIterator[Brokers]:
    async with running_brokers(tmp_path) as env:
        yield env


def body(i: int) -> bytes:
    """Messages of 600..2400 bytes: a few hundred fill several 256 KiB files."""
    return f"message {i:05d} ".encode() * (40 + (i * 7) % 120)


async def send_many(
    brokers: Brokers, master: Node, first: int, count: int
) -> dict[int, list[bytes]]:
    """Send bodies first..first+count round robin over the queues; what each queue got."""
    sent: dict[int, list[bytes]] = {q: [] for q in range(QUEUES)}
    for i in range(first, first + count):
        queue_id = i % QUEUES
        response = await brokers.send(master, body(i), queue_id=queue_id)
        assert response.code == ResponseCode.SUCCESS, response.remark
        sent[queue_id].append(body(i))
    return sent


def merged(*parts: dict[int, list[bytes]]) -> dict[int, list[bytes]]:
    return {q: [b for part in parts for b in part.get(q, [])] for q in range(QUEUES)}


async def test_a_late_slave_copies_everything_byte_for_byte_and_serves_pulls(
    brokers: Brokers,
) -> None:
    master = brokers.node("master", "ASYNC_MASTER", 0)
    ready = master.start()
    assert (ready["role"], ready["id"]) == ("ASYNC_MASTER", "0")
    await brokers.create_topic(master)
    before = await send_many(brokers, master, 0, 300)
    assert len(list(master.commitlog_dir.iterdir())) >= 2  # the copy crosses a file end

    slave = brokers.node("slave", "SLAVE", 1)
    ready = slave.start()  # from zero: its store is empty
    assert (ready["role"], ready["id"]) == ("SLAVE", "1")
    await brokers.caught_up(master, slave)
    assert commitlog_bytes(slave) == commitlog_bytes(master)

    # Written while the slave is connected: streamed as it is written.
    after = await send_many(brokers, master, 300, 60)
    await brokers.caught_up(master, slave)
    assert commitlog_bytes(slave) == commitlog_bytes(master)

    await brokers.topic_on(slave)  # copied from the master (SlaveSynchronize)
    assert await brokers.pull_all(slave) == merged(before, after)

    route = await brokers.client.invoke(
        brokers.namesrv,
        RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}),
    )
    (broker_data,) = json.loads(route.body)["brokerDatas"]
    assert broker_data["brokerAddrs"] == {"0": master.address, "1": slave.address}


async def test_a_restarted_slave_resumes_from_its_own_offset(brokers: Brokers) -> None:
    master = brokers.node("master", "ASYNC_MASTER", 0)
    master.start()
    await brokers.create_topic(master)
    slave = brokers.node("slave", "SLAVE", 1)
    slave.start()
    first = await send_many(brokers, master, 0, 100)
    had = await brokers.caught_up(master, slave)

    await brokers.stop(slave, signal.SIGKILL)
    second = await send_many(brokers, master, 100, 100)
    slave.start()
    end = await brokers.caught_up(master, slave)

    assert end > had
    resumed = re.findall(r"replicating from \S+, from offset (\d+)", slave.log_text())
    assert [int(offset) for offset in resumed] == [0, had]  # not from zero the second time
    assert commitlog_bytes(slave) == commitlog_bytes(master)
    await brokers.topic_on(slave)
    assert await brokers.pull_all(slave) == merged(first, second)


async def test_sync_master_answers_by_what_the_slave_has(brokers: Brokers) -> None:
    master = brokers.node("master", "SYNC_MASTER", 0, slave_timeout_ms=1500)
    master.start()
    await brokers.create_topic(master)
    slave = brokers.node("slave", "SLAVE", 1)
    slave.start()
    await brokers.topic_on(slave)
    producer = AsyncProducer("PG", brokers.namesrv, send_timeout_s=10)
    await producer.start()
    try:
        queue = MessageQueue(TOPIC, "broker-a", 0)

        async def send(text: str) -> SendStatus:
            async with asyncio.timeout(HANG_GUARD_S):
                result = await producer.send(Message(TOPIC, text.encode()), queue=queue)
            return result.status

        async def slave_reporting() -> bool:
            return (await brokers.runtime_info(master))["tidemqHaSlaves"] == "1"

        await eventually(slave_reporting, "the slave connected to the HA port")

        # A live slave: SEND_OK, and the slave has the message when the answer comes.
        assert await send("one") == SendStatus.SEND_OK
        assert (await brokers.pull_all(slave))[0] == [b"one"]

        # A slave that stops answering (SIGSTOP): its connection stays open, no
        # report comes, the master waits slave_timeout_ms: FLUSH_SLAVE_TIMEOUT.
        slave.signal(signal.SIGSTOP)
        try:
            assert await send("two") == SendStatus.FLUSH_SLAVE_TIMEOUT
        finally:
            slave.signal(signal.SIGCONT)

        # No slave at all: SLAVE_NOT_AVAILABLE at once. Both are stored on the master.
        await brokers.stop(slave)

        async def no_slave() -> bool:
            return (await brokers.runtime_info(master))["tidemqHaSlaves"] == "0"

        await eventually(no_slave, "the master noticing the slave left")
        assert await send("three") == SendStatus.SLAVE_NOT_AVAILABLE
        assert (await brokers.pull_all(master))[0] == [b"one", b"two", b"three"]
        info = await brokers.runtime_info(master)
        assert info["tidemqHaFlushSlaveTimeouts"] == "1"
        assert info["tidemqHaSlaveNotAvailable"] == "1"

        # Back again: it copies what it missed, and sends are SEND_OK again.
        slave.start()
        await eventually(slave_reporting, "the slave back on the HA port")
        assert await send("four") == SendStatus.SEND_OK
        assert (await brokers.pull_all(slave))[0] == [b"one", b"two", b"three", b"four"]
    finally:
        await producer.shutdown()


async def test_a_slave_ahead_of_its_master_truncates_and_says_what_it_dropped(
    brokers: Brokers, tmp_path: Path
) -> None:
    master = brokers.node("master", "ASYNC_MASTER", 0)
    master.start()
    await brokers.create_topic(master)
    slave = brokers.node("slave", "SLAVE", 1)
    slave.start()
    kept = await send_many(brokers, master, 0, 40)
    common_end = await brokers.caught_up(master, slave)

    # The master's store as it is now, put back later: an unclean restart that
    # lost the last writes, seen from the slave that has them.
    await brokers.stop(master)
    snapshot = tmp_path / "master-store-copy"
    shutil.copytree(master.data_dir / "store", snapshot)
    master.start()
    await send_many(brokers, master, 40, 20)
    ahead_end = await brokers.caught_up(master, slave)
    await brokers.stop(master)
    await brokers.stop(slave)
    swap_store(master, snapshot)

    master.start()
    slave.start()
    await brokers.caught_up(master, slave)
    dropped = re.search(
        r"this slave was ahead of its master and dropped commitlog \[(\d+), (\d+)\): "
        r"(\d+) bytes, (\d+) messages",
        slave.log_text(),
    )
    assert dropped is not None, slave.log_text()
    assert [int(group) for group in dropped.groups()] == [
        common_end,
        ahead_end,
        ahead_end - common_end,
        20,
    ]
    assert commitlog_bytes(slave) == commitlog_bytes(master)

    # What follows is the master's: the dropped messages are gone from the slave too.
    later = await send_many(brokers, master, 1000, 8)
    await brokers.caught_up(master, slave)
    assert commitlog_bytes(slave) == commitlog_bytes(master)
    await brokers.topic_on(slave)
    assert await brokers.pull_all(slave) == merged(kept, later)


async def test_a_slave_copies_its_masters_tables_and_refuses_writes(brokers: Brokers) -> None:
    master = brokers.node("master", "ASYNC_MASTER", 0)
    master.start()
    await brokers.create_topic(master)
    slave = brokers.node("slave", "SLAVE", 1)
    slave.start()
    await brokers.topic_on(slave)

    # Groups, consumer offsets and delay progress follow the master (SlaveSynchronize).
    group = {"groupName": "Billing", "retryMaxTimes": 5}
    created = await brokers.call(
        master, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, json.dumps(group).encode()
    )
    assert created.code == ResponseCode.SUCCESS, created.remark
    committed = await brokers.call(
        master,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        encode_header(
            UpdateConsumerOffsetRequestHeader(
                consumer_group="Billing", topic=TOPIC, queue_id=2, commit_offset=7
            )
        ),
    )
    assert committed.code == ResponseCode.SUCCESS

    async def copied() -> bool:
        groups = await brokers.call(slave, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        table = json.loads(groups.body)["subscriptionGroupTable"]
        offsets = await brokers.call(slave, RequestCode.GET_ALL_CONSUMER_OFFSET)
        offset_table = json.loads(offsets.body)["offsetTable"]
        return table.get("Billing", {}).get("retryMaxTimes") == 5 and offset_table.get(
            f"{TOPIC}@Billing"
        ) == {"2": 7}

    await eventually(copied, "the slave copying the master's groups and offsets")
    # A slave's own delay scheduler never runs: this file is the master's copy.
    delay = json.loads((slave.data_dir / "config" / "delayOffset.json").read_text())
    assert set(delay) == {"offsetTable"}

    sent = await brokers.send(slave, b"to the slave", queue_id=0)
    assert sent.code == ResponseCode.SERVICE_NOT_AVAILABLE
    assert "is a SLAVE, messages are put to its master" in (sent.remark or "")

    topic = await brokers.call(
        slave,
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        {"topic": "Other", "defaultTopic": "TBW102", "readQueueNums": "1",
         "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"},
    )  # fmt: skip
    assert topic.code == ResponseCode.SYSTEM_ERROR
    assert topic.remark == (
        "Can't modify topic or subscription group from slave broker, "
        "please execute it from master broker."
    )

    header = EndTransactionRequestHeader(
        producer_group="PG",
        tran_state_table_offset=0,
        commit_log_offset=0,
        commit_or_rollback=8,
        from_transaction_check=False,
        msg_id="00",
        transaction_id="t",
    )
    ended = await brokers.call(slave, RequestCode.END_TRANSACTION, encode_header(header))
    assert ended.code == ResponseCode.SLAVE_NOT_AVAILABLE

    assert await brokers.pull_all(slave) == {q: [] for q in range(QUEUES)}  # nothing stored


async def test_kill_9_of_a_sync_master_loses_no_acknowledged_message(brokers: Brokers) -> None:
    master = brokers.node("master", "SYNC_MASTER", 0)
    master.start()
    await brokers.create_topic(master)
    slave = brokers.node("slave", "SLAVE", 1)
    slave.start()
    await brokers.topic_on(slave)
    producer = AsyncProducer(
        "PG", brokers.namesrv, send_timeout_s=3, retry_times_when_send_failed=0
    )
    await producer.start()
    acknowledged: list[bytes] = []
    other: list[tuple[bytes, SendStatus]] = []
    killed = asyncio.Event()

    async def sender(worker: int) -> None:
        for i in range(2000):  # bounded: the kill comes long before
            text = f"w{worker}-{i}".encode()
            try:
                result = await producer.send(
                    Message(TOPIC, text), queue=MessageQueue(TOPIC, "broker-a", worker % QUEUES)
                )
            except ClientError:
                if killed.is_set():
                    return
                raise
            if result.status is SendStatus.SEND_OK:
                acknowledged.append(text)
            else:
                other.append((text, result.status))

    try:
        workers = [asyncio.create_task(sender(w)) for w in range(8)]
        await eventually(lambda: len(acknowledged) >= 300, "300 acknowledged sends")
        await brokers.stop(master, signal.SIGKILL)
        killed.set()
        async with asyncio.timeout(HANG_GUARD_S):
            await asyncio.gather(*workers)
    finally:
        await producer.shutdown()

    on_slave = {b for bodies in (await brokers.pull_all(slave)).values() for b in bodies}
    lost = [text for text in acknowledged if text not in on_slave]
    assert lost == [], (
        f"{len(lost)} of {len(acknowledged)} acknowledged messages are not on the slave"
    )
    # Answers other than SEND_OK may only say the slave was not waited for
    # (those messages were on the master alone, and may be lost with it).
    assert {status for _, status in other} <= {
        SendStatus.FLUSH_SLAVE_TIMEOUT,
        SendStatus.SLAVE_NOT_AVAILABLE,
    }
