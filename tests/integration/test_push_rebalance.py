"""10,000 messages on 8 queues while consumers join and leave: a second one
joins, a third (a separate process) joins, the second shuts down gracefully,
the third is killed with SIGKILL mid-stream. Every message is consumed at
least once, and every duplicate comes from a queue that changed owner."""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeStatus
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.producer import AsyncProducer
from tidemq.common.message import Message, MessageExt, MessageQueue
from tidemq.testing.client_support import create_topic
from tidemq.testing.consumer_child import ConsumerChild
from tidemq.testing.processes import FAST_DELAY_LEVELS, ServerProcess, serve
from tidemq.testing.waiting import eventually

pytestmark = pytest.mark.slow

TOTAL = 10_000
QUEUES = 8
BATCH = 20

Delivery = tuple[str, str, int, int]
"""(body, broker name, queue id, queue offset)"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    settings = {"delay_levels": FAST_DELAY_LEVELS}
    with serve(tmp_path / "data", flush="async", settings=settings) as process:
        yield process


class Member:
    """An in-process consumer recording deliveries and queue ownership."""

    def __init__(self, server: ServerProcess, group: str, topic: str) -> None:
        self.topic = topic
        self.deliveries: list[Delivery] = []
        self.owned: set[MessageQueue] = set()
        self._lock = threading.Lock()
        self.push = AsyncPushConsumer(
            group,
            server.namesrv,
            listener=self.listener,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            queue_listener=self.on_assignment,
            rebalance_interval_s=2.0,
        )
        self.push.subscribe(topic)

    def listener(
        self, messages: list[MessageExt], context: ConsumeConcurrentlyContext
    ) -> ConsumeStatus:
        mq = context.mq
        rows = [(m.body.decode(), mq.broker_name, mq.queue_id, m.queue_offset) for m in messages]
        with self._lock:
            self.deliveries.extend(rows)
        return ConsumeStatus.CONSUME_SUCCESS

    def on_assignment(
        self, topic: str, all_queues: Sequence[MessageQueue], assigned: Sequence[MessageQueue]
    ) -> None:
        if topic == self.topic:
            self.owned.update(assigned)

    def held(self) -> list[MessageQueue]:
        return [mq for mq in self.push.assigned_queues() if mq.topic == self.topic]

    def rows(self) -> list[Delivery]:
        with self._lock:
            return list(self.deliveries)


def child_rows(child: ConsumerChild) -> list[Delivery]:
    return [(r.body, r.broker_name, r.queue_id, r.offset) for r in child.records()]


async def test_ten_thousand_messages_while_consumers_join_and_leave(
    server: ServerProcess, tmp_path: Path
) -> None:
    topic, group = "Rebalance10k", "rebalance_group"
    await create_topic(server.namesrv, topic, queues=QUEUES)
    child_out = tmp_path / "child.txt"
    first = Member(server, group, topic)
    second = Member(server, group, topic)
    child = ConsumerChild(
        server.namesrv, group, topic, child_out, options=["--rebalance-interval-s=2.0"]
    )
    producer = AsyncProducer("rebalance_producer", server.namesrv)
    await producer.start()
    await first.push.start()
    try:
        await eventually(lambda: len(first.held()) == QUEUES, "C1 holding every queue")
        for start in range(0, TOTAL, BATCH):
            if start == 2000:
                await second.push.start()
                await eventually(lambda: len(first.held()) < QUEUES, "C1 giving queues to C2")
            elif start == 4000:
                await child.start()
                await eventually(
                    lambda: len(first.held()) + len(second.held()) < QUEUES,
                    "C3 taking its share",
                )
            elif start == 6000:
                await second.push.shutdown()
                await eventually(lambda: len(first.held()) == QUEUES // 2, "C1 taking C2's share")
            elif start == 8000:
                child.kill()
            batch = [Message(topic, body=f"m{i}".encode()) for i in range(start, start + BATCH)]
            await producer.send_batch(batch)

        everything = {f"m{i}" for i in range(TOTAL)}

        def consumed() -> set[str]:
            rows = first.rows() + second.rows() + child_rows(child)
            return {row[0] for row in rows}

        await eventually(lambda: consumed() == everything, "every message consumed", timeout=90.0)
    finally:
        child.close()
        await producer.shutdown()
        await first.push.shutdown()
        await second.push.shutdown()

    # every message at least once (checked above); duplicates only from moved queues
    child_deliveries = child_rows(child)
    owners: dict[tuple[str, int], set[str]] = collections.defaultdict(set)
    for name, member in (("C1", first), ("C2", second)):
        for mq in member.owned:
            owners[(mq.broker_name, mq.queue_id)].add(name)
    for _, broker, queue_id, _ in child_deliveries:
        owners[(broker, queue_id)].add("C3")
    moved = {queue for queue, names in owners.items() if len(names) > 1}
    counts = collections.Counter(
        (broker, queue_id, offset)
        for _, broker, queue_id, offset in first.rows() + second.rows() + child_deliveries
    )
    duplicated_queues = {(b, q) for (b, q, _), n in counts.items() if n > 1}
    assert duplicated_queues <= moved, (duplicated_queues, moved)
    assert moved  # queues did move
    assert {"C1", "C2", "C3"} <= set().union(*owners.values())
