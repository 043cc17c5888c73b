"""Rebalancer rounds with a fake client instance and offset store (no I/O):
allocation across consumers, drops persist and forget, additions start at the
stored offset, orderly additions need the lock, a queue that cannot be
released is kept and retried, unsubscribed topics are dropped; a round that
leaves an allocated queue unheld (lock refused, no start offset) or a queue
held that is no longer allocated reports itself unbalanced."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.client._core.allocation import Averagely, AveragelyByCircle
from tidemq.client._core.process_queue import ProcessQueue
from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer import queue_offsets
from tidemq.client.consumer.offset_store import ReadOffsetType
from tidemq.client.consumer.rebalancer import DO_NOT_START, Rebalancer
from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.client.errors import ClientError
from tidemq.client.model import PERM_READ, PERM_WRITE, BrokerData, QueueData, TopicRoute
from tidemq.common.clock import ManualClock
from tidemq.common.message import MessageQueue
from tidemq.protocol import ResponseCode

TOPIC = "Orders"


def route(topic: str = TOPIC, queues: int = 4, brokers: Sequence[str] = ("a",)) -> TopicRoute:
    return TopicRoute(
        topic=topic,
        queue_datas=tuple(QueueData(b, queues, queues, PERM_READ | PERM_WRITE) for b in brokers),
        broker_datas=tuple(BrokerData("c", b, {0: f"{b}:1"}) for b in brokers),
    )


class FakeInstance:
    def __init__(self, client_id: str, consumers: list[str], routes: dict[str, TopicRoute]) -> None:
        self.client_id = client_id
        self.consumers = consumers
        self.routes = routes
        self.clock = ManualClock()

    async def route(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        if topic not in self.routes:
            raise ClientError(f"no route for {topic}", ResponseCode.TOPIC_NOT_EXIST)
        return self.routes[topic]

    async def consumer_ids(self, group: str, topic: str) -> list[str]:
        return list(self.consumers)


class FakeStore:
    def __init__(self, stored: dict[MessageQueue, int] | None = None) -> None:
        self.stored = dict(stored or {})
        self.memory: dict[MessageQueue, int] = {}
        self.removed: list[MessageQueue] = []
        self.fail_reads = False

    async def read(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        if self.fail_reads:
            raise ClientError("broker unreachable", ResponseCode.RPC_TIME_OUT)
        return self.stored.get(mq, -1)

    def remove(self, mq: MessageQueue) -> None:
        self.removed.append(mq)
        self.memory.pop(mq, None)


class Listener:
    def __init__(self) -> None:
        self.added: dict[MessageQueue, int] = {}
        self.removed: list[MessageQueue] = []
        self.release = True
        self.changes: list[tuple[str, list[MessageQueue]]] = []

    async def on_queue_removed(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        assert pq.dropped  # marked before the listener is asked
        if self.release:
            self.removed.append(mq)
        return self.release

    async def on_queue_added(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        self.added[mq] = next_offset

    def on_assignment_changed(
        self, topic: str, all_queues: Sequence[MessageQueue], assigned: Sequence[MessageQueue]
    ) -> None:
        self.changes.append((topic, list(assigned)))


def make(
    instance: FakeInstance,
    store: FakeStore | None = None,
    *,
    broadcasting: bool = False,
    strategy: object = None,
    orderly: bool = False,
    lock: object = None,
    topics: Sequence[str] = (TOPIC,),
) -> tuple[Rebalancer, Listener, FakeStore]:
    listener = Listener()
    store = store or FakeStore()
    rebalancer = Rebalancer(
        instance=instance,  # type: ignore[arg-type]
        group="G",
        broadcasting=broadcasting,
        strategy=strategy or Averagely(),  # type: ignore[arg-type]
        offset_store=store,  # type: ignore[arg-type]
        consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        consume_timestamp="20260101000000",
        listener=listener,
        orderly=orderly,
        lock=lock,  # type: ignore[arg-type]
    )
    for topic in topics:
        rebalancer.subscriptions[topic] = SubscriptionSpec.parse(topic, "*", sub_version=1)
    return rebalancer, listener, store


def mq(queue_id: int, broker: str = "a", topic: str = TOPIC) -> MessageQueue:
    return MessageQueue(topic, broker, queue_id)


async def test_clustering_takes_this_clients_share_and_starts_at_stored_offsets() -> None:
    instance = FakeInstance("c1", ["c2", "c1"], {TOPIC: route(queues=4)})
    store = FakeStore({mq(0): 17})
    rebalancer, listener, _ = make(instance, store)
    await rebalancer.rebalance()
    # sorted ids: c1 first -> queues 0 and 1
    assert sorted(rebalancer.process_queues) == [mq(0), mq(1)]
    assert listener.added == {mq(0): 17, mq(1): 0}  # stored, else FIRST -> 0
    assert listener.changes == [(TOPIC, [mq(0), mq(1)])]


async def test_a_consumer_leaving_hands_its_queues_over_and_dropped_ones_are_released() -> None:
    instance = FakeInstance("c2", ["c1", "c2"], {TOPIC: route(queues=4)})
    rebalancer, listener, store = make(instance)
    await rebalancer.rebalance()
    held_before = dict(rebalancer.process_queues)
    assert sorted(held_before) == [mq(2), mq(3)]
    instance.consumers = ["c2"]
    await rebalancer.rebalance()
    assert sorted(rebalancer.process_queues) == [mq(0), mq(1), mq(2), mq(3)]
    assert rebalancer.process_queues[mq(2)] is held_before[mq(2)]  # unchanged queues kept
    instance.consumers = ["c0", "c2"]
    await rebalancer.rebalance()
    assert sorted(rebalancer.process_queues) == [mq(2), mq(3)]
    assert sorted(listener.removed) == [mq(0), mq(1)]
    assert store.removed.count(mq(0)) == 1  # the stale offset, forgotten before the add


async def test_broadcasting_takes_every_queue() -> None:
    instance = FakeInstance("c1", ["c1", "c2", "c3"], {TOPIC: route(queues=3, brokers=("a", "b"))})
    rebalancer, _, _ = make(instance, broadcasting=True)
    await rebalancer.rebalance()
    assert len(rebalancer.process_queues) == 6


async def test_a_queue_that_cannot_be_released_is_kept_and_retried() -> None:
    instance = FakeInstance("c1", ["c1"], {TOPIC: route(queues=2)})
    rebalancer, listener, _ = make(instance)
    assert await rebalancer.rebalance()
    instance.consumers = ["c0", "c1"]
    listener.release = False
    assert not await rebalancer.rebalance()  # unbalanced: the owner retries soon
    assert mq(0) in rebalancer.process_queues  # busy: kept, still consumed
    assert not rebalancer.process_queues[mq(0)].dropped
    listener.release = True
    assert await rebalancer.rebalance()
    assert sorted(rebalancer.process_queues) == [mq(1)]
    assert listener.removed == [mq(0)]


async def test_orderly_additions_need_the_broker_lock() -> None:
    instance = FakeInstance("c1", ["c1"], {TOPIC: route(queues=2)})
    granted = {mq(1)}

    async def lock(queue: MessageQueue) -> bool:
        return queue in granted

    rebalancer, _, _ = make(instance, orderly=True, lock=lock)
    # a refused lock leaves the round unbalanced (Java: retried within ~1 s,
    # not at the next 20 s round)
    assert not await rebalancer.rebalance()
    assert list(rebalancer.process_queues) == [mq(1)]
    assert rebalancer.process_queues[mq(1)].locked
    granted.add(mq(0))
    assert await rebalancer.rebalance()
    assert sorted(rebalancer.process_queues) == [mq(0), mq(1)]


async def test_a_failed_offset_read_does_not_start_the_queue() -> None:
    instance = FakeInstance("c1", ["c1"], {TOPIC: route(queues=1)})
    store = FakeStore()
    store.fail_reads = True
    rebalancer, listener, _ = make(instance, store)
    assert await rebalancer.compute_pull_from_where(mq(0)) == DO_NOT_START
    assert not await rebalancer.rebalance()  # allocated but not started
    assert not rebalancer.process_queues and not listener.added
    store.fail_reads = False
    await rebalancer.rebalance()
    assert list(rebalancer.process_queues) == [mq(0)]


async def test_unknown_topics_are_skipped_and_unsubscribed_ones_dropped() -> None:
    instance = FakeInstance("c1", ["c1"], {TOPIC: route(queues=1)})
    rebalancer, listener, _ = make(instance, topics=(TOPIC, "Missing"))
    # a topic the name server does not know is no reason to retry every second
    assert await rebalancer.rebalance()
    assert list(rebalancer.process_queues) == [mq(0)]
    del rebalancer.subscriptions[TOPIC]
    await rebalancer.rebalance()
    assert not rebalancer.process_queues
    assert listener.removed == [mq(0)]


async def test_route_changes_update_the_queue_list() -> None:
    instance = FakeInstance("c1", ["c1"], {TOPIC: route(queues=1)})
    rebalancer, _, _ = make(instance)
    await rebalancer.rebalance()
    rebalancer.on_route_changed(TOPIC, route(queues=3))
    rebalancer.on_route_changed("Other", route("Other", queues=3))  # not subscribed: ignored
    await rebalancer.rebalance()
    assert len(rebalancer.process_queues) == 3
    assert "Other" not in rebalancer.topic_queues


async def test_drop_all_releases_everything() -> None:
    instance = FakeInstance("c1", ["c1"], {TOPIC: route(queues=2)})
    rebalancer, listener, _ = make(instance)
    await rebalancer.rebalance()
    pqs = list(rebalancer.process_queues.values())
    await rebalancer.drop_all()
    assert not rebalancer.process_queues
    assert all(pq.dropped for pq in pqs)
    assert sorted(listener.removed) == [mq(0), mq(1)]


@given(
    consumers=st.lists(
        st.text("abcdef", min_size=1, max_size=4), min_size=1, max_size=6, unique=True
    ),
    queues=st.integers(1, 12),
    circle=st.booleans(),
)
async def test_every_queue_is_held_by_exactly_one_consumer(
    consumers: list[str], queues: int, circle: bool
) -> None:
    routes = {TOPIC: route(queues=queues, brokers=("a", "b"))}
    owners: dict[MessageQueue, int] = {}
    for client in consumers:
        instance = FakeInstance(client, list(reversed(consumers)), routes)
        strategy = AveragelyByCircle() if circle else Averagely()
        rebalancer, _, _ = make(instance, strategy=strategy)
        await rebalancer.rebalance()
        for queue in rebalancer.process_queues:
            owners[queue] = owners.get(queue, 0) + 1
    assert sorted(owners) == routes[TOPIC].read_queues()
    assert set(owners.values()) == {1}


@given(queues=st.integers(1, 8), refused=st.sets(st.integers(0, 7)))
async def test_an_orderly_round_is_balanced_exactly_when_every_lock_was_granted(
    queues: int, refused: set[int]
) -> None:
    instance = FakeInstance("c1", ["c1"], {TOPIC: route(queues=queues)})

    async def lock(queue: MessageQueue) -> bool:
        return queue.queue_id not in refused

    rebalancer, _, _ = make(instance, orderly=True, lock=lock)
    balanced = await rebalancer.rebalance()
    taken = set(range(queues)) - refused
    assert {queue.queue_id for queue in rebalancer.process_queues} == taken
    assert balanced == (taken == set(range(queues)))


def test_bad_consume_timestamp_is_refused() -> None:
    with pytest.raises(ValueError, match="yyyyMMddHHmmss"):
        Rebalancer(
            instance=FakeInstance("c1", [], {}),  # type: ignore[arg-type]
            group="G",
            broadcasting=False,
            strategy=Averagely(),
            offset_store=FakeStore(),  # type: ignore[arg-type]
            consume_from=ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
            consume_timestamp="yesterday",
            listener=Listener(),
        )


@pytest.mark.parametrize(
    ("where", "topic", "expected"),
    [
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, TOPIC, 900),  # the max offset
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, "%RETRY%G", 0),
        (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, TOPIC, 0),
        (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, TOPIC, 450),  # searched by time
        (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, "%RETRY%G", 900),
    ],
)
async def test_start_offsets_follow_consume_from_where(
    monkeypatch: pytest.MonkeyPatch, where: ConsumeFromWhere, topic: str, expected: int
) -> None:
    searched: list[int] = []

    async def max_offset(instance: object, queue: MessageQueue) -> int:
        return 900

    async def search_offset(instance: object, queue: MessageQueue, timestamp_ms: int) -> int:
        searched.append(timestamp_ms)
        return 450

    monkeypatch.setattr(queue_offsets, "max_offset", max_offset)
    monkeypatch.setattr(queue_offsets, "search_offset", search_offset)
    instance = FakeInstance("c1", ["c1"], {})
    rebalancer, _, _ = make(instance)
    rebalancer.consume_from = where
    assert await rebalancer.compute_pull_from_where(mq(0, topic=topic)) == expected
    if searched:
        assert searched == [rebalancer.consume_timestamp_ms]


async def test_a_broker_failure_while_asking_the_max_offset_does_not_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def max_offset(instance: object, queue: MessageQueue) -> int:
        raise ClientError("no answer", ResponseCode.RPC_TIME_OUT)

    monkeypatch.setattr(queue_offsets, "max_offset", max_offset)
    rebalancer, _, _ = make(FakeInstance("c1", ["c1"], {}))
    rebalancer.consume_from = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    assert await rebalancer.compute_pull_from_where(mq(0)) == DO_NOT_START
