"""QueueLockService: lock bodies, answers, and how outcomes reach the ProcessQueues.

The broker side is a scripted stand-in for the client instance (its answer
is computed by the real broker lock manager), so only the client logic is
under test here; tests/integration/test_push_orderly.py runs it against a
real broker process.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Mapping
from typing import Any, cast

import pytest

from tidemq.broker.locks import QueueLockManager
from tidemq.client._core.process_queue import ProcessQueue
from tidemq.client.consumer.queue_locks import (
    QueueLockService,
    decode_locked_queues,
    encode_lock_body,
)
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientInstance
from tidemq.common.clock import ManualClock
from tidemq.common.message import MessageQueue
from tidemq.common.tasks import TaskSet
from tidemq.protocol import RemotingCommand, RequestCode, ResponseCode
from tidemq.testing.waiting import eventually

A0 = MessageQueue("T", "broker-a", 0)
A1 = MessageQueue("T", "broker-a", 1)
B0 = MessageQueue("T", "broker-b", 0)


def test_lock_body_has_java_field_names_and_sorted_queues() -> None:
    body = json.loads(encode_lock_body("cg", "10.0.0.1@1", [A1, B0, A0, A1]))
    assert body == {
        "consumerGroup": "cg",
        "clientId": "10.0.0.1@1",
        "onlyThisBroker": False,
        "mqSet": [
            {"topic": "T", "brokerName": "broker-a", "queueId": 0},
            {"topic": "T", "brokerName": "broker-a", "queueId": 1},
            {"topic": "T", "brokerName": "broker-b", "queueId": 0},
        ],
    }


def test_locked_set_is_decoded_from_java_and_tidemq_answers() -> None:
    tidemq = b'{"lockOKMQSet":[{"topic":"T","brokerName":"broker-a","queueId":1}]}'
    java = b'{"lockOKMQSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"}]}'
    assert decode_locked_queues(tidemq) == {A1}
    assert decode_locked_queues(java) == {A0}
    assert decode_locked_queues(b"") == set()
    assert decode_locked_queues(b'{"lockOKMQSet":null}') == set()


@pytest.mark.parametrize(
    "body",
    [b"[]", b'{"lockOKMQSet":{}}', b'{"lockOKMQSet":[{"topic":"T"}]}', b"{not json"],
)
def test_malformed_lock_answers_raise_value_error(body: bytes) -> None:
    with pytest.raises(ValueError):
        decode_locked_queues(body)


class ScriptedBrokers:
    """Answers LOCK/UNLOCK_BATCH_MQ with a real QueueLockManager per broker."""

    def __init__(self, clock: ManualClock, client_id: str = "me") -> None:
        self.client_id = client_id
        self.clock = clock
        self.managers = {"broker-a": QueueLockManager(clock), "broker-b": QueueLockManager(clock)}
        self.unreachable: set[str] = set()
        self.requests: list[tuple[str, int, dict[str, Any]]] = []
        self.tasks = TaskSet("scripted")

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        return self.tasks.spawn(coro)

    async def require_master(self, broker_name: str, topic: str | None = None) -> str:
        if broker_name not in self.managers:
            raise ClientError(f"broker {broker_name} unknown", ResponseCode.BROKER_NOT_EXIST)
        return broker_name

    async def invoke(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        timeout: float | None = None,
    ) -> RemotingCommand:
        if address in self.unreachable:
            raise ClientError(f"cannot reach {address}", ResponseCode.RPC_SEND_TO_CHANNEL_FAILED)
        document = json.loads(body)
        self.requests.append((address, code, document))
        queues = {(q["topic"], q["brokerName"], q["queueId"]) for q in document["mqSet"]}
        manager = self.managers[address]
        if code == RequestCode.UNLOCK_BATCH_MQ:
            manager.unlock_batch(document["consumerGroup"], queues, document["clientId"])
            return RemotingCommand(code=ResponseCode.SUCCESS)
        locked = manager.lock_batch(document["consumerGroup"], queues, document["clientId"])
        answer = {
            "lockOKMQSet": [{"topic": t, "brokerName": b, "queueId": q} for t, b, q in locked]
        }
        return RemotingCommand(code=ResponseCode.SUCCESS, body=json.dumps(answer).encode())

    async def invoke_oneway(
        self, address: str, code: int, ext_fields: Mapping[str, str] | None, body: bytes
    ) -> None:
        await self.invoke(address, code, ext_fields, body)


def service(
    brokers: ScriptedBrokers, table: Mapping[MessageQueue, ProcessQueue]
) -> QueueLockService:
    return QueueLockService(cast(ClientInstance, brokers), "cg", table, brokers.clock)


async def test_lock_marks_the_queue_and_reports_a_refusal() -> None:
    clock = ManualClock()
    brokers = ScriptedBrokers(clock)
    pq = ProcessQueue(clock)
    locks = service(brokers, {A0: pq})
    assert await locks.lock(A0)
    assert pq.locked
    assert brokers.requests[0][1] == RequestCode.LOCK_BATCH_MQ
    # another client holds A1: refused, and its (absent) pq is not touched
    brokers.managers["broker-a"].lock_batch("cg", {("T", "broker-a", 1)}, "other")
    assert not await locks.lock(A1)


async def test_lock_of_an_unreachable_broker_is_false_not_an_error() -> None:
    clock = ManualClock()
    brokers = ScriptedBrokers(clock)
    brokers.unreachable.add("broker-a")
    pq = ProcessQueue(clock)
    assert not await service(brokers, {A0: pq}).lock(A0)
    assert not pq.locked


async def test_lock_all_renews_per_broker_and_unmarks_refused_queues() -> None:
    clock = ManualClock()
    brokers = ScriptedBrokers(clock)
    table = {mq: ProcessQueue(clock) for mq in (A0, A1, B0)}
    locks = service(brokers, table)
    brokers.managers["broker-a"].lock_batch("cg", {("T", "broker-a", 1)}, "other")
    table[A1].mark_locked()  # believed locked, but another client holds it
    await locks.lock_all()
    assert sorted((address, len(doc["mqSet"])) for address, _, doc in brokers.requests) == [
        ("broker-a", 2),
        ("broker-b", 1),
    ]
    assert table[A0].locked and table[B0].locked
    assert not table[A1].locked
    # a renewal refreshes the client-side lock life
    clock.advance(25)
    assert not table[A0].is_lock_expired()
    clock.advance(10)
    assert table[A0].is_lock_expired()
    await locks.lock_all()
    assert not table[A0].is_lock_expired()


async def test_unreachable_broker_leaves_its_queues_as_they_were() -> None:
    clock = ManualClock()
    brokers = ScriptedBrokers(clock)
    table = {A0: ProcessQueue(clock), B0: ProcessQueue(clock)}
    table[A0].mark_locked()
    brokers.unreachable.add("broker-a")
    await service(brokers, table).lock_all()
    assert table[A0].locked  # unchanged until its client-side life runs out
    assert table[B0].locked


async def test_unlock_and_unlock_all_release_at_the_broker() -> None:
    clock = ManualClock()
    brokers = ScriptedBrokers(clock)
    table = {mq: ProcessQueue(clock) for mq in (A0, A1, B0)}
    locks = service(brokers, table)
    await locks.lock_all()
    await locks.unlock(A0)
    assert not table[A0].locked
    assert brokers.managers["broker-a"].holder("cg", ("T", "broker-a", 0)) is None
    assert brokers.managers["broker-a"].holder("cg", ("T", "broker-a", 1)) == "me"
    await locks.unlock_all(oneway=True)
    assert not any(pq.locked for pq in table.values())
    assert brokers.managers["broker-a"].locked_queues("cg", "me") == set()
    assert brokers.managers["broker-b"].locked_queues("cg", "me") == set()


async def test_refused_lock_answer_code_is_logged_not_raised() -> None:
    clock = ManualClock()
    brokers = ScriptedBrokers(clock)

    async def refuse(*args: Any, **kwargs: Any) -> RemotingCommand:
        return RemotingCommand(code=ResponseCode.SYSTEM_ERROR, remark="no")

    brokers.invoke = refuse  # type: ignore[method-assign]
    pq = ProcessQueue(clock)
    assert not await service(brokers, {A0: pq}).lock(A0)


def test_renew_interval_must_be_positive() -> None:
    brokers = ScriptedBrokers(ManualClock())
    with pytest.raises(ValueError, match="positive"):
        QueueLockService(cast(ClientInstance, brokers), "cg", {}, renew_interval_s=0)


RENEW_S = 0.01


async def test_renewal_loop_runs_until_stopped() -> None:
    clock = ManualClock()
    brokers = ScriptedBrokers(clock)
    table = {A0: ProcessQueue(clock)}
    locks = QueueLockService(
        cast(ClientInstance, brokers), "cg", table, clock, renew_interval_s=RENEW_S
    )
    locks.start()
    locks.start()  # idempotent: one loop
    await eventually(lambda: len(brokers.requests) >= 3, "three renewals")
    assert table[A0].locked
    assert locks.last_renewal_at == clock.monotonic()
    await locks.stop()
    assert len(brokers.tasks) == 0
    count = len(brokers.requests)
    # "Nothing happens" has no event to wait on: give a loop that survived stop()
    # five renewal intervals (the service's setting) to show itself.
    await asyncio.sleep(5 * RENEW_S)
    assert len(brokers.requests) == count
    await locks.stop()  # idempotent
