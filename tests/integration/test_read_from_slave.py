"""Reading from a slave with real processes (a name server, a master, its
slave) and the Python consumers: a master with `slave_read_enable` sends a
far-behind consumer to its slave; with the master SIGKILLed, a push consumer
and a lite pull consumer consume the backlog from the slave and commit their
offsets there; the restarted master takes the offsets over."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import TypeVar

import pytest
from replication_support import QUEUES, TOPIC, Brokers, Node, running_brokers

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeStatus
from tidemq.client.consumer.lite_pull import AsyncLitePullConsumer
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.instance import ClientConfig
from tidemq.common.message import MessageExt
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import QueryConsumerOffsetRequestHeader, encode_header
from tidemq.testing.waiting import HANG_GUARD_S, eventually

pytestmark = pytest.mark.slow
T = TypeVar("T")


def fast_client(brokers: Brokers) -> ClientConfig:
    """Routes refreshed twice a second: a client sees its master gone (or back) quickly."""
    return ClientConfig(
        namesrv=brokers.namesrv, poll_namesrv_interval_s=0.5, heartbeat_interval_s=1.0
    )


@pytest.fixture
async def brokers(tmp_path: Path) -> AsyncIterator[Brokers]:
    async with running_brokers(tmp_path) as env:
        yield env


def body(i: int) -> bytes:
    return f"read-from-slave {i:05d} ".encode() * 40  # about 1 KiB


async def send_bodies(brokers: Brokers, master: Node, count: int, first: int = 0) -> set[bytes]:
    for i in range(first, first + count):
        response = await brokers.send(master, body(i), queue_id=i % QUEUES)
        assert response.code == ResponseCode.SUCCESS, response.remark
    return {body(i) for i in range(first, first + count)}


async def messages_served(brokers: Brokers, node: Node) -> int:
    """Messages the broker has answered pulls with since it started."""
    return int((await brokers.runtime_info(node))["msgGetTotalTodayNow"])


async def committed(brokers: Brokers, node: Node, group: str) -> list[int]:
    """The group's committed offset of every queue on `node` (-1: none)."""
    offsets = []
    for queue_id in range(QUEUES):
        header = QueryConsumerOffsetRequestHeader(
            consumer_group=group, topic=TOPIC, queue_id=queue_id, set_zero_if_not_found=False
        )
        response = await brokers.call(
            node, RequestCode.QUERY_CONSUMER_OFFSET, encode_header(header)
        )
        found = response.code == ResponseCode.SUCCESS
        offsets.append(int(response.ext_fields["offset"]) if found else -1)
    return offsets


async def route_ids(brokers: Brokers) -> list[str]:
    """The broker ids the name server's route of TOPIC lists."""
    response = await brokers.client.invoke(
        brokers.namesrv,
        RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}),
        10.0,
    )
    assert response.code == ResponseCode.SUCCESS, response.remark
    (broker,) = json.loads(response.body)["brokerDatas"]
    return sorted(broker["brokerAddrs"])


class Bodies:
    """A push listener that records bodies (it runs in the consume threads);
    with `hold_after`, every call from that many bodies on waits for `release`."""

    def __init__(self, hold_after: int | None = None) -> None:
        self.seen: list[bytes] = []
        self._lock = threading.Lock()
        self._hold_after = hold_after
        self.released = threading.Event()

    def __call__(
        self, messages: list[MessageExt], context: ConsumeConcurrentlyContext
    ) -> ConsumeStatus:
        with self._lock:
            hold = self._hold_after is not None and len(self.seen) >= self._hold_after
        if hold and not self.released.wait(HANG_GUARD_S):
            return ConsumeStatus.RECONSUME_LATER
        with self._lock:
            self.seen.extend(m.body for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    def distinct(self) -> set[bytes]:
        with self._lock:
            return set(self.seen)


def push_consumer(brokers: Brokers, group: str, listener: Bodies) -> AsyncPushConsumer:
    push = AsyncPushConsumer(
        group,
        brokers.namesrv,
        listener=listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        pull_batch_size=4,
        pull_threshold_for_queue=4,
        persist_interval_s=0.5,
        rebalance_interval_s=1.0,
        client_config=fast_client(brokers),
    )
    push.subscribe(TOPIC)
    return push


async def test_a_master_with_slave_read_sends_a_far_behind_consumer_to_its_slave(
    brokers: Brokers,
) -> None:
    # 64 KiB behind the commitlog's end is "far" here (RocketMQ: 40 % of memory).
    reading = {"slave_read_enable": True, "access_message_in_memory_max_bytes": 64 * 1024}
    master = brokers.node("master", "ASYNC_MASTER", 0, **reading)
    slave = brokers.node("slave", "SLAVE", 1, **reading)
    master.start()
    slave.start()
    await brokers.create_topic(master)
    await brokers.topic_on(slave)
    sent = await send_bodies(brokers, master, 400)  # about 400 KiB
    await brokers.caught_up(master, slave)

    listener = Bodies()
    push = push_consumer(brokers, "far-behind", listener)
    await push.start()
    try:
        await eventually(lambda: listener.distinct() >= sent, "all 400 messages consumed")
    finally:
        await push.shutdown()
    from_slave = await messages_served(brokers, slave)
    from_master = await messages_served(brokers, master)
    # The backlog came from the slave; the master served the first pull of each
    # queue and, once the consumer was close to the end, the rest.
    assert from_slave >= 200, (from_slave, from_master)
    assert 0 < from_master < 400, (from_slave, from_master)


async def test_consumers_read_the_backlog_from_the_slave_while_the_master_is_down(
    brokers: Brokers,
) -> None:
    master = brokers.node("master", "ASYNC_MASTER", 0)
    slave = brokers.node("slave", "SLAVE", 1)
    master.start()
    slave.start()
    await brokers.create_topic(master)
    await brokers.topic_on(slave)
    sent = await send_bodies(brokers, master, 200)
    await brokers.caught_up(master, slave)

    listener = Bodies(hold_after=40)
    push = push_consumer(brokers, "push-group", listener)
    lite = AsyncLitePullConsumer(
        "lite-group",
        brokers.namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        pull_batch_size=4,
        pull_threshold_for_queue=4,
        auto_commit_interval_s=0.5,
        persist_interval_s=0.5,
        rebalance_interval_s=1.0,
        client_config=fast_client(brokers),
    )
    lite.subscribe(TOPIC)
    polled: list[bytes] = []
    await push.start()
    await lite.start()
    try:
        # Both read a part from the master, then it dies.
        # The push listener stops at 40 (its few queued messages wait with it).
        await eventually(lambda: len(listener.distinct()) >= 40, "40 messages pushed")
        while len(polled) < 40:
            polled += [m.body for m in await lite.poll(1.0)]
        await brokers.stop(master, signal.SIGKILL)
        # Its connection to the name server closed: the route lists the slave alone.
        await eventually(
            lambda: _equal(route_ids(brokers), ["1"]), "the name server dropping the master"
        )
        served_before = await messages_served(brokers, slave)

        listener.released.set()

        async def lite_has_all() -> bool:
            polled.extend(m.body for m in await lite.poll(0.5))
            return set(polled) >= sent

        await eventually(lambda: listener.distinct() >= sent, "the push consumer's backlog")
        await eventually(lite_has_all, "the lite pull consumer's backlog")
        await lite.commit_sync()  # what it polled (auto-commit runs inside poll)
        assert await messages_served(brokers, slave) - served_before >= 200

        # Their offsets are committed to the slave meanwhile.
        everything = [200 // QUEUES] * QUEUES
        groups = ("push-group", "lite-group")
        await eventually(
            lambda: _all_equal(brokers, slave, groups, everything), "the offsets on the slave"
        )

        # The master comes back and takes the offsets over from the consumers.
        master.start()
        await eventually(
            lambda: _all_equal(brokers, master, groups, everything),
            "the offsets on the restarted master",
        )
        fresh = await send_bodies(brokers, master, 8, first=200)
        await eventually(lambda: listener.distinct() >= sent | fresh, "the new messages pushed")

        async def lite_has_fresh() -> bool:
            polled.extend(m.body for m in await lite.poll(0.5))
            return set(polled) >= fresh

        await eventually(lite_has_fresh, "the new messages polled")
        await lite.commit_sync()
    finally:
        await push.shutdown()
        await lite.shutdown()
    assert len(listener.seen) == len(set(listener.seen))  # nothing delivered twice
    assert len(polled) == len(set(polled))

    # A consumer of the group started anew reads from the master's offsets:
    # none of the 208 messages again.
    again = Bodies()
    push = push_consumer(brokers, "push-group", again)
    await push.start()
    try:
        last = await send_bodies(brokers, master, 4, first=300)
        await eventually(lambda: again.distinct() >= last, "the last messages pushed")
    finally:
        await push.shutdown()
    assert again.distinct() == last


async def _all_equal(
    brokers: Brokers, node: Node, groups: tuple[str, ...], wanted: list[int]
) -> bool:
    """Every group has committed `wanted` on `node`."""
    return all([await committed(brokers, node, group) == wanted for group in groups])


async def _equal(answer: Awaitable[list[T]], wanted: list[T]) -> bool:
    return await answer == wanted
