"""Transactional messages end to end: the real TransactionProducer and
AsyncTransactionProducer against a real `tidemq serve` (check-back after 1 s,
every 0.5 s), a lite pull consumer on a one-queue topic. A sentinel sent
after a transaction is ended proves what never became visible: on one queue,
whatever was committed before it is read before it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from tidemq import (
    AsyncProducer,
    AsyncTransactionProducer,
    ClientError,
    LocalTransactionState,
    Message,
    MessageExt,
    TransactionProducer,
    make_message,
)
from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer.lite_pull import AsyncLitePullConsumer
from tidemq.common import properties as props
from tidemq.common.message import MessageQueue
from tidemq.testing.client_support import create_topic
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.transaction_child import TransactionChild
from tidemq.testing.waiting import eventually, unique_name

pytestmark = pytest.mark.slow

SETTINGS = {"transaction_timeout_ms": 1000, "transaction_check_interval_ms": 500}
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
CHECK_DEADLINE_S = 60.0


class Scripted:
    """Executes with a fixed outcome (an exception is raised) and answers
    checks with `check`; records what it was asked."""

    def __init__(self, execute: object, check: LocalTransactionState = UNKNOW) -> None:
        self.execute = execute
        self.check = check
        self.executed: list[str] = []
        self.checked: list[MessageExt] = []

    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        self.executed.append(message.unique_key or "")
        if isinstance(self.execute, BaseException):
            raise self.execute
        assert isinstance(self.execute, LocalTransactionState)
        return self.execute

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        self.checked.append(message)
        return self.check


class AsyncScripted(Scripted):
    """The same, with ``async def`` methods (run on the producer's loop)."""

    async def execute_local_transaction(  # type: ignore[override]
        self, message: Message, arg: Any
    ) -> LocalTransactionState:
        return Scripted.execute_local_transaction(self, message, arg)

    async def check_local_transaction(  # type: ignore[override]
        self, message: MessageExt
    ) -> LocalTransactionState:
        return Scripted.check_local_transaction(self, message)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("tx") / "data", flush="sync", settings=SETTINGS) as process:
        yield process


async def new_topic(server: ServerProcess) -> MessageQueue:
    (queue,) = await create_topic(server.namesrv, unique_name("TxClient"), queues=1)
    return queue


@contextlib.asynccontextmanager
async def reader(server: ServerProcess, queue: MessageQueue) -> Any:
    consumer = AsyncLitePullConsumer(
        unique_name("cg_txc"),
        server.namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        poll_timeout_s=1.0,
    )
    consumer.assign([queue])
    async with consumer:
        await consumer.seek_to_begin(queue)
        yield consumer


async def polled_until(consumer: AsyncLitePullConsumer, body: bytes, what: str) -> list[bytes]:
    """Every body `consumer` polls until `body` came."""
    bodies: list[bytes] = []

    async def came() -> bool:
        bodies.extend(m.body for m in await consumer.poll(0.5))
        return body in bodies

    await eventually(came, what, timeout=CHECK_DEADLINE_S)
    return bodies


async def bodies_until_sentinel(server: ServerProcess, queue: MessageQueue) -> list[bytes]:
    """Send a sentinel to `queue`, then every body stored there up to it."""
    sentinel = unique_name("sentinel").encode()
    async with AsyncProducer(unique_name("pg_sentinel"), server.namesrv) as producer:
        await producer.send(Message(queue.topic, sentinel), queue=queue)
    async with reader(server, queue) as consumer:
        bodies = await polled_until(consumer, sentinel, "the sentinel")
    return bodies[: bodies.index(sentinel)]


async def bodies_once_visible(
    server: ServerProcess, queue: MessageQueue, body: bytes
) -> list[bytes]:
    """Poll `queue` until `body` is there; then every body up to a sentinel sent after it."""
    async with reader(server, queue) as consumer:
        await polled_until(consumer, body, f"{body!r} to become visible")
    return await bodies_until_sentinel(server, queue)


def tx_producer(
    server: ServerProcess, listener: Scripted, group: str | None = None
) -> AsyncTransactionProducer:
    return AsyncTransactionProducer(
        group or unique_name("pg_tx"), server.namesrv, listener=listener
    )


# -- outcomes of the local transaction ------------------------------------------------------


async def test_commit_is_delivered_once(server: ServerProcess) -> None:
    queue = await new_topic(server)
    listener = Scripted(COMMIT)
    async with tx_producer(server, listener) as producer:
        result = await producer.send_message_in_transaction(Message(queue.topic, b"committed"))
    assert result.status == "SEND_OK" and result.local_transaction_state is COMMIT
    assert result.transaction_id == result.msg_id and listener.executed == [result.msg_id]
    assert await bodies_once_visible(server, queue, b"committed") == [b"committed"]


async def test_rollback_is_never_visible_blocking_api(server: ServerProcess) -> None:
    queue = await new_topic(server)
    listener = Scripted(ROLLBACK)

    def run() -> list[LocalTransactionState]:
        with TransactionProducer(unique_name("pg_tx"), server.namesrv, listener=listener) as p:
            rolled_back = p.send_message_in_transaction(Message(queue.topic, b"rolled back"))
            listener.execute = COMMIT
            committed = p.send_message_in_transaction(Message(queue.topic, b"kept"))
        return [rolled_back.local_transaction_state, committed.local_transaction_state]

    assert await asyncio.to_thread(run) == [ROLLBACK, COMMIT]
    assert await bodies_once_visible(server, queue, b"kept") == [b"kept"]
    assert listener.checked == []


async def test_unknown_then_the_check_commits(server: ServerProcess) -> None:
    queue = await new_topic(server)
    listener = AsyncScripted(UNKNOW, check=COMMIT)
    async with tx_producer(server, listener) as producer:
        result = await producer.send_message_in_transaction(Message(queue.topic, b"later"))
        assert result.local_transaction_state is UNKNOW
        assert await bodies_once_visible(server, queue, b"later") == [b"later"]
    checked = listener.checked[0]
    assert checked.unique_key == result.msg_id and checked.topic == queue.topic
    assert checked.body == b"later" and checked.properties[props.PGROUP] == producer.group


async def test_unknown_then_the_check_rolls_back(server: ServerProcess) -> None:
    queue = await new_topic(server)
    listener = Scripted(UNKNOW, check=ROLLBACK)
    async with tx_producer(server, listener) as producer:
        result = await producer.send_message_in_transaction(Message(queue.topic, b"dropped"))
        assert result.local_transaction_state is UNKNOW
        await eventually(lambda: listener.checked, "a check", timeout=CHECK_DEADLINE_S)
        assert await bodies_until_sentinel(server, queue) == []
    assert listener.checked[0].unique_key == result.msg_id


async def test_a_raising_listener_means_unknown_and_a_check(server: ServerProcess) -> None:
    queue = await new_topic(server)
    listener = Scripted(RuntimeError("database unreachable"), check=COMMIT)
    async with tx_producer(server, listener) as producer:
        result = await producer.send_message_in_transaction(Message(queue.topic, b"recovered"))
        assert result.local_transaction_state is UNKNOW
        assert await bodies_once_visible(server, queue, b"recovered") == [b"recovered"]
    assert listener.checked and listener.checked[0].unique_key == result.msg_id


# -- a producer that crashed mid-transaction ------------------------------------------------


async def test_a_crashed_producers_transaction_is_checked_on_another_of_its_group(
    server: ServerProcess,
) -> None:
    queue = await new_topic(server)
    group = unique_name("pg_txcrash")
    child = TransactionChild(server.namesrv, group, queue.topic, "orphan")
    try:
        key = await child.started()
        assert child.kill() != 0
    finally:
        child.close()
    survivor = Scripted(COMMIT, check=COMMIT)
    async with tx_producer(server, survivor, group) as producer:
        assert producer.group == group
        await eventually(
            lambda: [m for m in survivor.checked if m.unique_key == key],
            "the check of the orphan on the surviving producer",
            timeout=CHECK_DEADLINE_S,
        )
        assert await bodies_once_visible(server, queue, b"orphan") == [b"orphan"]
    assert survivor.executed == []


# -- what cannot be sent in a transaction ---------------------------------------------------


async def test_delay_timer_and_batch_are_refused_before_sending(server: ServerProcess) -> None:
    queue = await new_topic(server)
    listener = Scripted(COMMIT)
    async with tx_producer(server, listener) as producer:
        with pytest.raises(ValueError, match="delay level"):
            await producer.send_message_in_transaction(
                make_message(queue.topic, b"x", delay_level=2)
            )
        with pytest.raises(ValueError, match="delivery time"):
            await producer.send_message_in_transaction(
                Message(queue.topic, b"x", properties={props.TIMER_DELAY_SEC: "5"})
            )
        with pytest.raises(ValueError, match="batch"):
            await producer.send_message_in_transaction(
                [Message(queue.topic, b"x")]  # type: ignore[arg-type]
            )
    assert listener.executed == []

    def blocking() -> None:
        group = unique_name("pg_tx")
        with (
            TransactionProducer(group, server.namesrv, listener=listener) as p,
            pytest.raises(ValueError, match="delivery time"),
        ):
            p.send_message_in_transaction(
                Message(queue.topic, b"x", properties={props.START_DELIVER_TIME: "1"})
            )

    await asyncio.to_thread(blocking)
    assert listener.executed == []
    assert await bodies_until_sentinel(server, queue) == []


async def test_the_broker_refuses_a_half_message_with_a_delay(server: ServerProcess) -> None:
    queue = await new_topic(server)
    group = unique_name("pg_raw")
    half = Message(
        queue.topic,
        b"delayed half",
        properties={props.TRAN_MSG: "true", props.PGROUP: group, props.DELAY: "3"},
    )
    async with AsyncProducer(group, server.namesrv) as producer:
        with pytest.raises(ClientError) as excinfo:
            await producer.send(half)
    assert excinfo.value.code == 13  # MESSAGE_ILLEGAL
    assert "delay level" in excinfo.value.message
