"""Transactional messages across a failover: a half message still unknown when
its master dies is checked by the new master and committed once; what was
committed before is delivered once, what was rolled back never.

RocketMQ's transactional check runs on the master only
(TransactionalMessageCheckService); a slave copies the half and op topics
with the commitlog and, once master, checks from where its progress says.
The producer must have sent the new master a heartbeat for the check to
reach it: tidemq's client greets a broker at once when its route names it
master for the first time (Java's waits for the next 30 s heartbeat)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from failover_support import bodies_on, broker_set, in_sync, replica, role_of
from replication_support import TOPIC

from tidemq import AsyncTransactionProducer, LocalTransactionState, Message, MessageExt
from tidemq.client.instance import ClientConfig
from tidemq.testing.waiting import eventually

pytestmark = pytest.mark.slow

CHECKS = {
    "transaction_timeout_ms": 1000,
    "transaction_check_interval_ms": 500,
    "transaction_check_max": 1000,  # unknown for as long as the test needs
}


class Answers:
    """Executes each message as its body says; answers checks with `check`."""

    def __init__(self) -> None:
        self.check = LocalTransactionState.UNKNOW
        self.checked: list[bytes] = []

    async def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        return {
            b"committed": LocalTransactionState.COMMIT_MESSAGE,
            b"rolled back": LocalTransactionState.ROLLBACK_MESSAGE,
        }.get(message.body, LocalTransactionState.UNKNOW)

    async def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        self.checked.append(message.body)
        return self.check


async def test_an_unknown_transaction_is_checked_and_committed_by_the_new_master(
    tmp_path: Path,
) -> None:
    async with broker_set(tmp_path) as (brokers, controllers):
        one = replica(brokers, controllers, 1, **CHECKS)
        assert one.start()["role"] == "SYNC_MASTER"
        two = replica(brokers, controllers, 2, **CHECKS)
        assert two.start()["role"] == "SLAVE"
        await brokers.create_topic(one)
        await brokers.topic_on(two)
        await eventually(lambda: in_sync(brokers, one), "replica 2 joining the SyncStateSet")
        answers = Answers()
        # Routes polled every second; heartbeats only every two minutes: the
        # new master hears of the producer because its route names a new master.
        config = ClientConfig(
            namesrv=brokers.namesrv, poll_namesrv_interval_s=1.0, heartbeat_interval_s=120.0
        )
        producer = AsyncTransactionProducer("tx-producers", listener=answers, client_config=config)
        async with producer:
            for body in (b"committed", b"rolled back", b"unknown"):
                await producer.send_message_in_transaction(Message(TOPIC, body))

            async def committed_on_two() -> bool:
                return (await bodies_on(brokers, two))[b"committed"] == 1

            await eventually(committed_on_two, "the committed message copied to replica 2")
            await eventually(lambda: b"unknown" in answers.checked, "the old master's check")
            await brokers.stop(one, signal.SIGKILL)

            async def two_is_master() -> bool:
                return await role_of(brokers, two) == "SYNC_MASTER"

            await eventually(two_is_master, "replica 2 taking over", timeout=30)
            answers.check = LocalTransactionState.COMMIT_MESSAGE

            async def unknown_committed() -> bool:
                return (await bodies_on(brokers, two))[b"unknown"] >= 1

            await eventually(unknown_committed, "the new master's check committing it", timeout=40)
        delivered = await bodies_on(brokers, two)
        assert delivered[b"committed"] == 1
        assert delivered[b"unknown"] == 1
        assert delivered[b"rolled back"] == 0
