"""A slave copies its master's timer progress with its other tables (RocketMQ 5's
SlaveSynchronize.syncTimerCheckPoint), real processes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from replication_support import TOPIC, Brokers, running_brokers

from tidemq.broker.timer_progress import MASTER_PROGRESS_FILE
from tidemq.client.instance import ClientConfig
from tidemq.client.producer import AsyncProducer, make_message
from tidemq.testing.waiting import eventually

pytestmark = pytest.mark.slow


@pytest.fixture
async def brokers(tmp_path: Path) -> AsyncIterator[Brokers]:
    async with running_brokers(tmp_path) as env:
        yield env


async def test_a_slave_keeps_its_masters_timer_progress(brokers: Brokers) -> None:
    master = brokers.node("master", "ASYNC_MASTER", 0)
    slave = brokers.node("slave", "SLAVE", 1)
    master.start()
    slave.start()
    await brokers.create_topic(master)
    copy = slave.data_dir / "config" / MASTER_PROGRESS_FILE

    def copied() -> dict[str, int] | None:
        return json.loads(copy.read_text()) if copy.exists() else None

    before = await eventually(copied, "the slave's first copy of the timer progress")
    assert before["master_timer_queue_offset"] == 0  # no timer message yet

    producer = AsyncProducer("timer-producers", client_config=ClientConfig(namesrv=brokers.namesrv))
    async with producer:
        result = await producer.send(
            make_message(TOPIC, b"later", deliver_after=timedelta(milliseconds=300))
        )
    assert result.status.value == "SEND_OK"

    def delivered_and_copied() -> dict[str, int] | None:
        progress = copied()
        if progress is None or progress["master_timer_queue_offset"] < 1:
            return None
        return progress if progress["last_read_time_ms"] > 0 else None

    after = await eventually(delivered_and_copied, "the master's progress past the message")
    assert after["last_timer_queue_offset"] == after["master_timer_queue_offset"] == 1
