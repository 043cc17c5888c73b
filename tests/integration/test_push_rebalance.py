"""10,000 messages on 8 queues while consumers join and leave: a second one
joins, a third (a separate process) joins, the second shuts down gracefully,
the third is killed with SIGKILL mid-stream. Every message is consumed at
least once, and every duplicate comes from a queue that changed owner."""

from __future__ import annotations

import asyncio
import collections
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.admin import AdminClient
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeStatus
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.producer import AsyncProducer
from tidemq.common.message import Message, MessageExt, MessageQueue
from tidemq.testing.processes import FAST_DELAY_LEVELS, ServerProcess, serve

pytestmark = pytest.mark.slow

TOTAL = 10_000
QUEUES = 8
BATCH = 20

Delivery = tuple[str, str, int, int]
"""(body, broker name, queue id, queue offset)"""

CHILD = textwrap.dedent(
    """
    import asyncio, sys, threading
    from tidemq.client._core.rebalance import ConsumeFromWhere
    from tidemq.client.consumer.listener import ConsumeStatus
    from tidemq.client.consumer.push import AsyncPushConsumer

    namesrv, group, topic, out = sys.argv[1:5]
    lock = threading.Lock()
    sink = open(out, "a", encoding="utf-8")

    def listener(messages, context):
        lines = "".join(
            f"{m.body.decode()} {context.mq.broker_name} {context.mq.queue_id} {m.queue_offset}\\n"
            for m in messages
        )
        with lock:
            sink.write(lines)
            sink.flush()
        return ConsumeStatus.CONSUME_SUCCESS

    async def main():
        push = AsyncPushConsumer(
            group, namesrv, listener=listener,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            rebalance_interval_s=2.0,
        )
        push.subscribe(topic)
        await push.start()
        print("ready", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


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


def child_rows(path: Path) -> list[Delivery]:
    rows: list[Delivery] = []
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split(" ")
        if len(parts) == 4:  # a line cut by SIGKILL is incomplete
            rows.append((parts[0], parts[1], int(parts[2]), int(parts[3])))
    return rows


async def wait_for(check: object, what: str, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def test_ten_thousand_messages_while_consumers_join_and_leave(
    server: ServerProcess, tmp_path: Path
) -> None:
    topic, group = "Rebalance10k", "rebalance_group"
    async with AdminClient(server.namesrv) as admin:
        await admin.create_topic(topic, queues=QUEUES)
    child_out = tmp_path / "child.txt"
    first = Member(server, group, topic)
    second = Member(server, group, topic)
    child: subprocess.Popen[str] | None = None
    producer = AsyncProducer("rebalance_producer", server.namesrv)
    await producer.start()
    await first.push.start()
    try:
        await wait_for(lambda: len(first.held()) == QUEUES, "C1 holding every queue")
        for start in range(0, TOTAL, BATCH):
            if start == 2000:
                await second.push.start()
                await wait_for(lambda: len(first.held()) < QUEUES, "C1 giving queues to C2")
            elif start == 4000:
                child = subprocess.Popen(
                    [sys.executable, "-c", CHILD, server.namesrv, group, topic, str(child_out)],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                assert child.stdout is not None
                line = await asyncio.to_thread(child.stdout.readline)
                assert line.strip() == "ready"
                await wait_for(
                    lambda: len(first.held()) + len(second.held()) < QUEUES,
                    "C3 taking its share",
                )
            elif start == 6000:
                await second.push.shutdown()
                await wait_for(lambda: len(first.held()) == QUEUES // 2, "C1 taking C2's share")
            elif start == 8000:
                assert child is not None
                child.send_signal(signal.SIGKILL)
                child.wait(10)
            batch = [Message(topic, body=f"m{i}".encode()) for i in range(start, start + BATCH)]
            await producer.send_batch(batch)

        everything = {f"m{i}" for i in range(TOTAL)}

        def consumed() -> set[str]:
            rows = first.rows() + second.rows() + child_rows(child_out)
            return {row[0] for row in rows}

        await wait_for(lambda: consumed() == everything, "every message consumed", 90.0)
    finally:
        if child is not None:
            if child.poll() is None:
                child.kill()
                child.wait(10)
            if child.stdout is not None:
                child.stdout.close()
        await producer.shutdown()
        await first.push.shutdown()
        await second.push.shutdown()

    # every message at least once (checked above); duplicates only from moved queues
    child_deliveries = child_rows(child_out)
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
