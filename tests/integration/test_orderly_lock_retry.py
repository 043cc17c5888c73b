"""A refused orderly queue lock is retried within about a second, against a
real `tidemq serve` and a real consumer process.

RocketMQ (``RebalanceImpl.updateProcessQueueTableInRebalance``) asks for a
new rebalance 500 ms after a lock the broker refused, and its
``RebalanceService`` runs the next round after ``minInterval`` (1 s) when the
last one left the client unbalanced; the 20 s interval is only for balanced
clients. So a consumer that is allocated a queue still locked by a consumer
that died takes it over as soon as the dead one's lock expires on the broker,
not at its next periodic rebalance.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer.listener import ConsumeOrderlyContext, ConsumeOrderlyStatus
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.common.message import Message, MessageExt
from tidemq.testing.client_support import create_topic, produce
from tidemq.testing.consumer_child import ConsumerChild
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.waiting import eventually, unique_name

pytestmark = pytest.mark.slow

LOCK_EXPIRY_S = 10
"""The broker forgets a lock this long after its last renewal (default 60 s)."""
REBALANCE_INTERVAL_S = 60.0
"""Far longer than the test may take: a take-over must come from the retry."""
RETRY_SLACK_S = 15.0
"""Java's ~1 s retry, plus a noisy shared machine."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("lock-retry") / "data"
    with serve(data, settings={"queue_lock_expiry_s": LOCK_EXPIRY_S}) as process:
        yield process


async def test_a_refused_lock_is_retried_soon_not_at_the_next_rebalance(
    server: ServerProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tidemq.client.consumer.rebalancer")
    topic, group = unique_name("LockRetry"), unique_name("cg_lock_retry_")
    await create_topic(server.namesrv, topic, queues=1)
    # "a-..." sorts before "b-...": while both live, the holder is allocated the queue
    holder = ConsumerChild(
        server.namesrv,
        group,
        topic,
        tmp_path / "holder.txt",
        options=[
            "--orderly",
            "--instance-name=a-holder",
            f"--rebalance-interval-s={REBALANCE_INTERVAL_S}",
        ],
        log_file=tmp_path / "holder.log",
    )
    bodies: list[str] = []

    async def record(
        messages: list[MessageExt], context: ConsumeOrderlyContext
    ) -> ConsumeOrderlyStatus:
        bodies.extend(m.body.decode() for m in messages if m.topic == topic)
        return ConsumeOrderlyStatus.SUCCESS

    taker = AsyncPushConsumer(
        group,
        server.namesrv,
        listener=record,
        orderly=True,
        instance_name="b-taker",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        rebalance_interval_s=REBALANCE_INTERVAL_S,
    )
    taker.subscribe(topic)
    with contextlib.closing(holder):
        await holder.start()
        await produce(server.namesrv, [Message(topic, b"before")])
        await eventually(
            lambda: [r.body for r in holder.records()] == ["before"], "the holder consuming"
        )
        await taker.start()
        try:
            assert not [mq for mq in taker.assigned_queues() if mq.topic == topic]
            # SIGKILL: no unlock; the broker keeps the holder's lock until it
            # expires, and tells the taker at once that the group changed
            holder.kill()
            await produce(server.namesrv, [Message(topic, b"after")])
            await eventually(
                lambda: "after" in bodies,
                "the taker consuming the queue once the dead holder's lock expired",
                timeout=LOCK_EXPIRY_S + RETRY_SLACK_S,
            )
        finally:
            await taker.shutdown()
    refusals = [r for r in caplog.records if "not locked at the broker" in r.getMessage()]
    assert refusals, "the taker was never refused the lock: the test proved nothing"
