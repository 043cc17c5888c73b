"""Orderly push consumption against a real `tidemq serve` process.

* per-queue order holds while consumers join and leave (rebalance), and no
  two consumers ever consume one queue at the same time;
* a consumer process killed with SIGKILL: a surviving consumer takes its
  queues and restarts each exactly from the last committed offset, in order;
* SUSPEND_CURRENT_QUEUE_A_MOMENT retries the same message locally, in order,
  and after max reconsume times the message goes to the DLQ;
* the queue lock service against the broker: one holder per queue.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tidemq.client._core.process_queue import ProcessQueue
from tidemq.client._core.queue_selection import select_by_sharding_key
from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.admin import AdminClient
from tidemq.client.consumer.listener import (
    AsyncOrderlyListener,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageModel,
)
from tidemq.client.consumer.pull_api import PullStatus, pull_message
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.consumer.queue_locks import QueueLockService
from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.client.instance import ClientConfig, ClientInstance
from tidemq.client.producer import AsyncProducer
from tidemq.common.message import Message, MessageExt, MessageQueue
from tidemq.common.names import dlq_topic_of
from tidemq.testing.client_support import create_topic
from tidemq.testing.consumer_child import ConsumerChild
from tidemq.testing.processes import FAST_DELAY_LEVELS, ServerProcess, serve
from tidemq.testing.waiting import eventually, unique_name

pytestmark = pytest.mark.slow

SUCCESS = ConsumeOrderlyStatus.SUCCESS
SUSPEND = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("orderly") / "data"
    settings = {
        "delay_levels": FAST_DELAY_LEVELS,
        "max_reconsume_times": 3,
        "queue_lock_expiry_s": 5,
    }
    with serve(data, flush="async", settings=settings) as process:
        yield process


class KeyedProducer:
    """Sends "key:seq" messages, each key to the queue its sharding key selects."""

    def __init__(self, producer: AsyncProducer, topic: str, keys: list[str]) -> None:
        self.producer = producer
        self.topic = topic
        self.keys = keys
        self.next_seq = 0
        self.per_queue: dict[int, int] = defaultdict(int)
        self.queues: list[MessageQueue] = []

    async def round(self) -> None:
        """One message per key, one batch per queue (keys stay in seq order)."""
        if not self.queues:
            self.queues = sorted(await self.producer.publish_queues(self.topic))
        by_queue: dict[MessageQueue, list[Message]] = defaultdict(list)
        for key in self.keys:
            mq = select_by_sharding_key(self.queues, key)
            by_queue[mq].append(Message(topic=self.topic, body=f"{key}:{self.next_seq}".encode()))
        for mq, batch in sorted(by_queue.items()):
            result = await self.producer.send_batch(batch, queue=mq)
            assert result.queue_offset == self.per_queue[mq.queue_id]
            self.per_queue[mq.queue_id] += len(batch)
        self.next_seq += 1

    @property
    def sent(self) -> set[tuple[int, int]]:
        return {(q, o) for q, count in self.per_queue.items() for o in range(count)}


@dataclass(frozen=True, slots=True)
class Seen:
    consumer: str
    queue_id: int
    offset: int
    key: str
    seq: int


IN_FLIGHT_S = 0.002
"""How long each batch stays in its listener: a window in which a second consumer of
the same queue would be caught overlapping (`Journal.overlaps`). The pause is the probe
for "nothing else consumes this queue meanwhile"; there is no event to wait on."""
ROUND_PACING_S = 0.1
"""Pacing of the producer: rounds spread over the consumers' joins and leaves (load)."""


class Journal:
    """What every consumer saw, in the order it was seen (one event loop)."""

    def __init__(self) -> None:
        self.records: list[Seen] = []
        self.in_flight: dict[int, str] = {}
        self.overlaps: list[tuple[int, str, str]] = []

    def listener(self, name: str, pause_s: float = IN_FLIGHT_S) -> AsyncOrderlyListener:
        async def consume(
            messages: list[MessageExt], context: ConsumeOrderlyContext
        ) -> ConsumeOrderlyStatus:
            queue_id = context.mq.queue_id
            holder = self.in_flight.get(queue_id)
            if holder is not None:
                self.overlaps.append((queue_id, holder, name))
            self.in_flight[queue_id] = name
            await asyncio.sleep(pause_s)  # see IN_FLIGHT_S: other consumers run meanwhile
            for m in messages:
                key, seq = m.body.decode().split(":")
                self.records.append(Seen(name, queue_id, m.queue_offset, key, int(seq)))
            self.in_flight.pop(queue_id, None)
            return SUCCESS

        return consume

    def consumed(self) -> set[tuple[int, int]]:
        return {(r.queue_id, r.offset) for r in self.records}

    def by(self, name: str) -> int:
        return sum(1 for r in self.records if r.consumer == name)


def check_queue_order(records: list[Seen]) -> int:
    """Per queue, each step is the next offset, or a restart at an earlier
    offset when another consumer took the queue over. Returns the duplicates."""
    last: dict[int, Seen] = {}
    duplicates = 0
    for record in records:
        before = last.get(record.queue_id)
        if before is not None and record.offset != before.offset + 1:
            assert record.offset <= before.offset, (
                f"gap in queue {record.queue_id}: {before} -> {record}"
            )
            assert record.consumer != before.consumer, (
                f"same consumer went back: {before} -> {record}"
            )
            duplicates += before.offset - record.offset + 1
        elif before is None:
            assert record.offset == 0, f"queue {record.queue_id} started at {record}"
        last[record.queue_id] = record
    return duplicates


def check_key_order(records: list[Seen]) -> None:
    """Per key, seq never goes backwards except where its queue restarted."""
    by_key: dict[str, list[Seen]] = defaultdict(list)
    for record in records:
        by_key[record.key].append(record)
    for key, seen in by_key.items():
        assert len({r.queue_id for r in seen}) == 1, f"key {key} on several queues"
        for before, after in itertools.pairwise(seen):
            if after.seq != before.seq + 1:
                assert after.seq <= before.seq and after.consumer != before.consumer, (
                    f"key {key}: {before} -> {after}"
                )


def orderly_consumer(
    server: ServerProcess, group: str, topic: str, name: str, listener: AsyncOrderlyListener
) -> AsyncPushConsumer:
    consumer = AsyncPushConsumer(
        group,
        server.namesrv,
        listener=listener,
        orderly=True,
        consume_message_batch_max_size=4,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        rebalance_interval_s=1.0,
        persist_interval_s=1.0,
        instance_name=name,
    )
    consumer.subscribe(topic, "*")
    return consumer


async def test_order_is_kept_while_consumers_join_and_leave(server: ServerProcess) -> None:
    topic, group = unique_name("OrderRebalance"), unique_name("cg_order_")
    await create_topic(server.namesrv, topic, queues=8)
    journal = Journal()
    keys = [f"k{i:02d}" for i in range(30)]
    async with AsyncProducer(unique_name("pg"), server.namesrv) as producer:
        keyed = KeyedProducer(producer, topic, keys)
        rounds, extra_rounds = 90, 10  # 3,000 messages over about 10 s

        async def produce() -> None:
            for _ in range(rounds):
                await keyed.round()
                await asyncio.sleep(ROUND_PACING_S)  # see ROUND_PACING_S: load pacing

        producing = asyncio.create_task(produce())
        c1 = orderly_consumer(server, group, topic, "c1", journal.listener("c1"))
        c2 = orderly_consumer(server, group, topic, "c2", journal.listener("c2"))
        c3 = orderly_consumer(server, group, topic, "c3", journal.listener("c3"))
        await c1.start()
        try:
            await eventually(lambda: journal.by("c1") >= 200, "c1 consuming")
            await c2.start()
            await eventually(lambda: journal.by("c2") >= 50, "c2 taking queues over")
            await c3.start()
            await eventually(lambda: journal.by("c3") >= 50, "c3 taking queues over")
            c2_queues = {mq.queue_id for mq in c2.assigned_queues() if mq.topic == topic}
            await c2.shutdown()
            mark = len(journal.records)
            await producing
            for _ in range(extra_rounds):  # input for the queues c2 left behind
                await keyed.round()
            await eventually(lambda: journal.consumed() >= keyed.sent, "every message consumed")
        finally:
            producing.cancel()
            for consumer in (c1, c2, c3):
                await consumer.shutdown()
    assert len(keyed.sent) == (rounds + extra_rounds) * len(keys)
    assert journal.consumed() == keyed.sent
    after_c2 = journal.records[mark:]
    assert after_c2 and {r.consumer for r in after_c2} <= {"c1", "c3"}
    assert c2_queues and c2_queues <= {r.queue_id for r in after_c2}  # taken over
    assert journal.overlaps == []
    duplicates = check_queue_order(journal.records)
    check_key_order(journal.records)
    assert {r.consumer for r in journal.records} == {"c1", "c2", "c3"}
    print(f"rebalance test: {len(journal.records)} consumed, {duplicates} re-deliveries")


async def test_crashed_consumer_queues_restart_from_the_committed_offset(
    server: ServerProcess, tmp_path: Path
) -> None:
    topic, group = unique_name("OrderCrash"), unique_name("cg_crash_")
    await create_topic(server.namesrv, topic, queues=4)
    keys = [f"k{i:02d}" for i in range(20)]
    async with AsyncProducer(unique_name("pg"), server.namesrv) as producer:
        keyed = KeyedProducer(producer, topic, keys)
        for _ in range(75):  # 1,500 messages
            await keyed.round()
    crasher = ConsumerChild(
        server.namesrv,
        group,
        topic,
        tmp_path / "crashing.txt",
        options=[
            "--orderly",
            "--delay-s=0.02",
            "--rebalance-interval-s=1.0",
            "--persist-interval-s=1.0",
            "--instance-name=crashing",
        ],
        log_file=tmp_path / "crashing.log",
    )
    journal = Journal()
    frozen = asyncio.Event()  # set at the kill: the survivor holds back new queues...
    thawed = asyncio.Event()  # ... until the committed offsets were read
    owned_before_kill: set[int] = set()
    record = journal.listener("survivor")

    async def survivor_listener(
        messages: list[MessageExt], context: ConsumeOrderlyContext
    ) -> ConsumeOrderlyStatus | None:
        if frozen.is_set() and context.mq.queue_id not in owned_before_kill:
            await thawed.wait()
        return await record(messages, context)

    survivor = orderly_consumer(server, group, topic, "survivor", survivor_listener)
    probe = ClientInstance(ClientConfig(namesrv=server.namesrv))
    await probe.start()
    try:
        await crasher.start()
        await eventually(lambda: len(crasher.records()) >= 50, "crasher consuming")
        await survivor.start()
        await eventually(lambda: journal.by("survivor") >= 20, "survivor consuming")
        await eventually(lambda: len(crasher.records()) >= 300, "crasher progress")
        owned_before_kill.update(
            mq.queue_id for mq in survivor.assigned_queues() if mq.topic == topic
        )
        frozen.set()
        crasher.kill()
        # once the broker saw the connection close, everything the dead
        # process sent (offset commits included) has been read

        async def crasher_gone() -> bool:
            return len(await probe.consumer_ids(group, topic)) == 1

        await eventually(crasher_gone, "the broker to see the crashed consumer's close")
        async with AdminClient(server.namesrv) as admin:
            committed = {
                row.queue_id: row.consumer_offset
                for row in await admin.consumer_progress(group, topic)
            }
        thawed.set()
        await eventually(
            lambda: dead_consumed(crasher) | journal.consumed() >= keyed.sent,
            "every message consumed",
        )
        # the survivor reaches the end of every queue
        await eventually(
            lambda: all(
                max((r.offset for r in journal.records if r.queue_id == q), default=-1)
                == keyed.per_queue[q] - 1
                for q in range(4)
            ),
            "the survivor at the end of every queue",
        )
    finally:
        crasher.close()
        await survivor.shutdown()
        await probe.close()

    dead = [(r.queue_id, r.offset, r.body) for r in crasher.records()]
    taken_over = sorted({q for q, _, _ in dead} - owned_before_kill)
    assert taken_over, "the crashed consumer held no queue at the kill"
    assert owned_before_kill, "the survivor held no queue before the kill"
    for queue_id in range(4):
        dead_offsets = [o for q, o, _ in dead if q == queue_id]
        survivor_offsets = [r.offset for r in journal.records if r.queue_id == queue_id]
        # each consumer consumed the queue in order, without gaps or repeats
        for offsets in (dead_offsets, survivor_offsets):
            if offsets:
                assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
        assert survivor_offsets, f"queue {queue_id} not consumed by the survivor"
        if dead_offsets:
            assert dead_offsets[0] == 0
            # the survivor starts at a committed offset: no gap, never before the start
            assert 0 <= survivor_offsets[0] <= dead_offsets[-1] + 1
        if queue_id in taken_over:
            # exactly where the dead consumer's last commit left off
            assert survivor_offsets[0] == committed[queue_id], (queue_id, committed)
    assert dead_consumed(crasher) | journal.consumed() == keyed.sent
    redelivered = len(dead_consumed(crasher) & journal.consumed())
    print(f"crash test: taken over {taken_over}, committed {committed}, {redelivered} redelivered")


def dead_consumed(child: ConsumerChild) -> set[tuple[int, int]]:
    return {(r.queue_id, r.offset) for r in child.records()}


async def test_suspend_retries_locally_in_order_then_dead_letters(
    server: ServerProcess,
) -> None:
    topic, group = unique_name("OrderSuspend"), unique_name("cg_suspend_")
    await create_topic(server.namesrv, topic, queues=1)
    async with AsyncProducer(unique_name("pg"), server.namesrv) as producer:
        mq = MessageQueue(topic, (await producer.publish_queues(topic))[0].broker_name, 0)
        batch = [Message(topic=topic, body=f"m{i}".encode()) for i in range(6)]
        await producer.send_batch(batch, queue=mq)
    calls: list[tuple[str, int]] = []

    async def listener(
        messages: list[MessageExt], context: ConsumeOrderlyContext
    ) -> ConsumeOrderlyStatus:
        message = messages[0]
        calls.append((message.body.decode(), message.reconsume_times))
        if message.body == b"m1":
            return SUSPEND  # always: local retries, then the DLQ
        if message.body == b"m3" and message.reconsume_times == 0:
            raise RuntimeError("fails once")
        return SUCCESS

    consumer = AsyncPushConsumer(
        group,
        server.namesrv,
        listener=listener,
        orderly=True,
        max_reconsume_times=2,
        suspend_current_queue_time_ms=50,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        persist_interval_s=1.0,
    )
    consumer.subscribe(topic, "*")
    await consumer.start()
    try:
        await eventually(lambda: [c for c in calls if c[0] == "m5"], "the last message")
    finally:
        await consumer.shutdown()
    assert calls == [
        ("m0", 0),
        ("m1", 0),
        ("m1", 1),
        ("m1", 2),
        ("m2", 0),
        ("m3", 0),
        ("m3", 1),
        ("m4", 0),
        ("m5", 0),
    ]
    async with AdminClient(server.namesrv) as admin:
        progress = await admin.consumer_progress(group, topic)
        assert [row.consumer_offset for row in progress] == [6]
    instance = ClientInstance(ClientConfig(namesrv=server.namesrv))
    await instance.start()
    try:
        dlq = dlq_topic_of(group)
        route = await instance.route(dlq)
        dlq_mq = MessageQueue(dlq, route.queue_datas[0].broker_name, 0)
        result = await pull_message(
            instance,
            group=unique_name("cg_dlq_reader_"),
            mq=dlq_mq,
            subscription=SubscriptionSpec.parse(dlq, "*", sub_version=0),
            offset=0,
            suspend_ms=0,
        )
    finally:
        await instance.close()
    assert result.status is PullStatus.FOUND
    assert [m.body for m in result.messages] == [b"m1"]


async def test_lock_service_gives_each_queue_to_one_client(server: ServerProcess) -> None:
    topic, group = unique_name("OrderLocks"), unique_name("cg_locks_")
    await create_topic(server.namesrv, topic, queues=2)
    instances = [ClientInstance(ClientConfig(namesrv=server.namesrv)) for _ in range(2)]
    for instance in instances:
        await instance.start()
    try:
        route = await instances[0].route(topic)
        await instances[1].route(topic)
        broker = route.queue_datas[0].broker_name
        mqs = [MessageQueue(topic, broker, q) for q in range(2)]
        tables = [{mq: ProcessQueue(instance.clock) for mq in mqs} for instance in instances]
        first, second = (
            QueueLockService(instance, group, table)
            for instance, table in zip(instances, tables, strict=True)
        )
        assert await first.lock(mqs[0])
        assert not await second.lock(mqs[0])
        await second.lock_all()  # gets the free queue only
        assert [pq.locked for pq in tables[1].values()] == [False, True]
        await first.lock_all()
        assert [pq.locked for pq in tables[0].values()] == [True, False]
        await first.unlock(mqs[0])
        assert await second.lock(mqs[0])
        await second.unlock_all()
        assert await first.lock(mqs[1])
        # the first client goes silent (connection open, no renewal): its lock
        # expires after queue_lock_expiry_s (5 s) and the second one gets it
        locked_at = time.monotonic()

        async def second_locked() -> bool:
            return await second.lock(mqs[1])

        await eventually(second_locked, "the silent client's lock to expire", interval=0.2)
        assert time.monotonic() - locked_at >= 4.5
        assert tables[1][mqs[1]].locked
    finally:
        for instance in instances:
            await instance.close()


async def test_broadcasting_orderly_gives_every_consumer_every_queue_in_order(
    server: ServerProcess, tmp_path: Path
) -> None:
    topic, group = unique_name("OrderBroadcast"), unique_name("cg_bc_")
    await create_topic(server.namesrv, topic, queues=3)
    keys = [f"k{i}" for i in range(9)]
    async with AsyncProducer(unique_name("pg"), server.namesrv) as producer:
        keyed = KeyedProducer(producer, topic, keys)
        for _ in range(20):
            await keyed.round()
    journals = [Journal() for _ in range(2)]
    consumers = [
        AsyncPushConsumer(
            group,
            server.namesrv,
            listener=journal.listener(f"b{index}"),
            orderly=True,
            message_model=MessageModel.BROADCASTING,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            offset_store_dir=tmp_path,
            instance_name=f"b{index}",
        )
        for index, journal in enumerate(journals)
    ]
    for consumer in consumers:
        consumer.subscribe(topic, "*")
        await consumer.start()
    try:
        for journal in journals:

            def has_all(j: Journal = journal) -> bool:
                return j.consumed() >= keyed.sent

            await eventually(has_all, "every message, for each consumer")
    finally:
        for consumer in consumers:
            await consumer.shutdown()
    for journal in journals:
        assert journal.consumed() == keyed.sent
        assert check_queue_order(journal.records) == 0  # one consumer: strictly in order
        check_key_order(journal.records)
    assert len(sorted(tmp_path.rglob("offsets.json"))) == 2
