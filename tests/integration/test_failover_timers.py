"""Timer and delay messages across a failover: the new master delivers what
its old master had not delivered yet, and nothing the old master delivered
again (once the slave's copy of its progress covers it).

RocketMQ 5's slave copies its master's timer checkpoint
(SlaveSynchronize.syncTimerCheckPoint) and, once master, dequeues from its
lastReadTimeMs (TimerMessageStore.checkBrokerRole / syncLastReadTimeMs); it
copies the delay levels' offsets (syncDelayOffset) and its schedule service
starts from them."""

from __future__ import annotations

import json
import signal
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from failover_support import broker_set, replica, start_pair
from replication_support import TOPIC, Brokers, Node

from tidemq.broker.timer_progress import MASTER_PROGRESS_FILE
from tidemq.client.instance import ClientConfig
from tidemq.client.producer import AsyncProducer, make_message
from tidemq.testing.waiting import eventually

pytestmark = pytest.mark.slow

EARLY, LATE = 5, 5


async def bodies_on(brokers: Brokers, node: Node) -> Counter[bytes]:
    return Counter(b for queue in (await brokers.pull_all(node)).values() for b in queue)


async def role_of(brokers: Brokers, node: Node) -> str | None:
    try:
        return (await brokers.runtime_info(node)).get("tidemqBrokerRole")
    except Exception:
        return None


async def test_timer_messages_are_delivered_once_across_a_failover(tmp_path: Path) -> None:
    async with broker_set(tmp_path) as (brokers, controllers):
        one = replica(brokers, controllers, 1)
        two = await start_pair(brokers, controllers, one)
        early = [f"early {i}".encode() for i in range(EARLY)]
        late = [f"late {i}".encode() for i in range(LATE)]
        config = ClientConfig(namesrv=brokers.namesrv)
        async with AsyncProducer("timer-producers", client_config=config) as producer:
            for body in early:
                sent = await producer.send(
                    make_message(TOPIC, body, deliver_after=timedelta(milliseconds=200))
                )
                assert sent.status.value == "SEND_OK"
            for body in late:
                sent = await producer.send(
                    make_message(TOPIC, body, deliver_after=timedelta(seconds=8))
                )
                assert sent.status.value == "SEND_OK"

        # The master delivers the early ones; replica 2 has those deliveries,
        # and a copy of the master's timer progress past them.
        async def early_on_two() -> bool:
            on_two = await bodies_on(brokers, two)
            return all(on_two[b] == 1 for b in early)

        await eventually(early_on_two, "the early deliveries copied to replica 2")
        copy = two.data_dir / "config" / MASTER_PROGRESS_FILE

        def progress_copied() -> bool:
            if not copy.exists():
                return False
            progress = json.loads(copy.read_text())
            return progress["master_timer_queue_offset"] >= EARLY + LATE

        await eventually(progress_copied, "replica 2's copy of the master's timer progress")

        await brokers.stop(one, signal.SIGKILL)

        async def two_is_master() -> bool:
            return await role_of(brokers, two) == "SYNC_MASTER"

        await eventually(two_is_master, "replica 2 taking over", timeout=30)

        async def late_on_two() -> bool:
            on_two = await bodies_on(brokers, two)
            return all(on_two[b] >= 1 for b in late)

        await eventually(late_on_two, "the late deliveries by the new master", timeout=30)
        delivered = await bodies_on(brokers, two)
        assert {b: delivered[b] for b in early + late} == {b: 1 for b in early + late}


async def test_delay_messages_are_delivered_once_across_a_failover(tmp_path: Path) -> None:
    async with broker_set(tmp_path) as (brokers, controllers):
        one = replica(brokers, controllers, 1)
        two = await start_pair(brokers, controllers, one)
        early = [f"level 1, {i}".encode() for i in range(EARLY)]  # 1 s
        late = [f"level 3, {i}".encode() for i in range(LATE)]  # 10 s
        config = ClientConfig(namesrv=brokers.namesrv)
        async with AsyncProducer("delay-producers", client_config=config) as producer:
            for level, bodies in ((1, early), (3, late)):
                for body in bodies:
                    sent = await producer.send(make_message(TOPIC, body, delay_level=level))
                    assert sent.status.value == "SEND_OK"

        async def early_on_two() -> bool:
            on_two = await bodies_on(brokers, two)
            return all(on_two[b] == 1 for b in early)

        await eventually(early_on_two, "the level-1 deliveries copied to replica 2")
        copy = two.data_dir / "config" / "delayOffset.json"

        def progress_copied() -> bool:
            if not copy.exists():
                return False
            return int(json.loads(copy.read_text())["offsetTable"].get("1", 0)) >= EARLY

        await eventually(progress_copied, "replica 2's copy of the delay offsets")
        await brokers.stop(one, signal.SIGKILL)

        async def two_is_master() -> bool:
            return await role_of(brokers, two) == "SYNC_MASTER"

        await eventually(two_is_master, "replica 2 taking over", timeout=30)

        async def late_on_two() -> bool:
            on_two = await bodies_on(brokers, two)
            return all(on_two[b] >= 1 for b in late)

        await eventually(late_on_two, "the level-3 deliveries by the new master", timeout=40)
        delivered = await bodies_on(brokers, two)
        assert {b: delivered[b] for b in early + late} == {b: 1 for b in early + late}
