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
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from failover_support import bodies_on, broker_set, replica, role_of, start_pair
from replication_support import TOPIC, Brokers, Node

from tidemq.broker.timer_progress import MASTER_PROGRESS_FILE
from tidemq.client.instance import ClientConfig
from tidemq.client.producer import AsyncProducer, make_message
from tidemq.testing.waiting import eventually

pytestmark = pytest.mark.slow

EARLY, LATE = 5, 5


async def kill_and_count(
    brokers: Brokers,
    master: Node,
    slave: Node,
    early: list[bytes],
    late: list[bytes],
    progress_copied: Callable[[], bool],
) -> None:
    """Once the slave has the master's deliveries of `early` and a copy of its
    progress past them, kill the master; the slave, promoted, delivers `late`;
    then every one of them is on it exactly once."""

    async def early_on_slave() -> bool:
        on_slave = await bodies_on(brokers, slave)
        return all(on_slave[b] == 1 for b in early)

    await eventually(early_on_slave, "the early deliveries copied to the slave")
    await eventually(progress_copied, "the slave's copy of the master's progress")
    await brokers.stop(master, signal.SIGKILL)

    async def slave_is_master() -> bool:
        return await role_of(brokers, slave) == "SYNC_MASTER"

    await eventually(slave_is_master, "the slave taking over", timeout=30)

    async def late_on_slave() -> bool:
        on_slave = await bodies_on(brokers, slave)
        return all(on_slave[b] >= 1 for b in late)

    await eventually(late_on_slave, "the late deliveries by the new master", timeout=40)
    delivered = await bodies_on(brokers, slave)
    assert {b: delivered[b] for b in early + late} == {b: 1 for b in early + late}


async def test_timer_messages_are_delivered_once_across_a_failover(tmp_path: Path) -> None:
    async with broker_set(tmp_path) as (brokers, controllers):
        one = replica(brokers, controllers, 1)
        two = await start_pair(brokers, controllers, one)
        early = [f"early {i}".encode() for i in range(EARLY)]
        late = [f"late {i}".encode() for i in range(LATE)]
        config = ClientConfig(namesrv=brokers.namesrv)
        async with AsyncProducer("timer-producers", client_config=config) as producer:
            for body, after in [(b, 0.2) for b in early] + [(b, 8.0) for b in late]:
                sent = await producer.send(
                    make_message(TOPIC, body, deliver_after=timedelta(seconds=after))
                )
                assert sent.status.value == "SEND_OK"
        copy = two.data_dir / "config" / MASTER_PROGRESS_FILE

        def progress_copied() -> bool:
            if not copy.exists():
                return False
            return json.loads(copy.read_text())["master_timer_queue_offset"] >= EARLY + LATE

        await kill_and_count(brokers, one, two, early, late, progress_copied)


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
        copy = two.data_dir / "config" / "delayOffset.json"

        def progress_copied() -> bool:
            if not copy.exists():
                return False
            return int(json.loads(copy.read_text())["offsetTable"].get("1", 0)) >= EARLY

        await kill_and_count(brokers, one, two, early, late, progress_copied)
