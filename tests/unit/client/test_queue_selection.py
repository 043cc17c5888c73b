"""Producer queue selection: round robin, fault avoidance, sharding keys."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.client._core.queue_selection import (
    LatencyFaultTolerance,
    QueueSelector,
    not_available_duration_ms,
    select_by_sharding_key,
    select_like_ali_ons,
)
from tidemq.common.clock import ManualClock
from tidemq.common.message import MessageQueue

BROKERS = ["broker-a", "broker-b", "broker-c"]
Selector = Callable[[Sequence[MessageQueue], str], MessageQueue]


def topic_queues(brokers: list[str], per_broker: int) -> list[MessageQueue]:
    return [MessageQueue("T", b, i) for b in brokers for i in range(per_broker)]


# -- latency fault tolerance ---------------------------------------------------


@pytest.mark.parametrize(
    ("latency", "duration"),
    [
        (0, 0),
        (49, 0),
        (100, 0),
        (549, 0),
        (550, 30_000),
        (1_000, 60_000),
        (2_000, 120_000),
        (3_000, 180_000),
        (14_999, 180_000),
        (15_000, 600_000),
        (30_000, 600_000),
    ],
)
def test_not_available_duration_table(latency: int, duration: int) -> None:
    assert not_available_duration_ms(latency) == duration


def test_failed_broker_is_isolated_for_ten_minutes_then_returns() -> None:
    clock = ManualClock()
    fault = LatencyFaultTolerance(clock)
    fault.update("broker-a", 12, isolation=True)  # a failure counts as 30 s latency
    assert not fault.is_available("broker-a")
    assert fault.is_available("broker-b")  # never reported: available
    clock.advance(599.999)
    assert not fault.is_available("broker-a")
    clock.advance(0.001)
    assert fault.is_available("broker-a")


def test_slow_send_pauses_broker_and_fast_send_clears_it() -> None:
    clock = ManualClock()
    fault = LatencyFaultTolerance(clock)
    fault.update("broker-a", 600, isolation=False)
    assert not fault.is_available("broker-a")
    clock.advance(29.9)
    assert not fault.is_available("broker-a")
    fault.update("broker-a", 20, isolation=False)  # the latest record wins, as Java
    assert fault.is_available("broker-a")
    fault.update("broker-a", 600, isolation=False)
    fault.remove("broker-a")
    assert fault.is_available("broker-a")


def test_pick_one_at_least_prefers_the_better_half() -> None:
    clock = ManualClock()
    fault = LatencyFaultTolerance(clock, rng=random.Random(1))
    assert fault.pick_one_at_least() is None
    fault.update("only", 5_000, isolation=True)
    assert fault.pick_one_at_least() == "only"
    fault.update("fast", 600, isolation=False)
    fault.update("slow", 2_000, isolation=False)
    fault.update("dead", 40, isolation=True)
    # all four paused; ranked by latency: dead(40), fast(600), slow(2000), only(5000)
    picks = {fault.pick_one_at_least() for _ in range(10)}
    assert picks == {"dead", "fast"}


# -- round robin -----------------------------------------------------------------


@settings(max_examples=100)
@given(
    brokers=st.integers(1, 4),
    per_broker=st.integers(1, 8),
    rounds=st.integers(1, 20),
    seed=st.integers(0, 2**32),
)
def test_round_robin_visits_every_queue_evenly(
    brokers: int, per_broker: int, rounds: int, seed: int
) -> None:
    queues = topic_queues([*BROKERS, "broker-d"][:brokers], per_broker)
    selector = QueueSelector(queues, rng=random.Random(seed))
    counts = Counter(selector.select() for _ in range(rounds * len(queues)))
    assert set(counts) == set(queues)
    assert set(counts.values()) == {rounds}


def test_round_robin_starts_at_a_seeded_random_index() -> None:
    queues = topic_queues(BROKERS, 4)
    first = {QueueSelector(queues, rng=random.Random(seed)).select() for seed in range(50)}
    assert len(first) > 1
    again = QueueSelector(queues, rng=random.Random(7)).select()
    assert again == QueueSelector(queues, rng=random.Random(7)).select()


@pytest.mark.parametrize("fault_enabled", [False, True])
def test_retry_skips_the_last_broker(fault_enabled: bool) -> None:
    queues = topic_queues(BROKERS, 4)
    fault = LatencyFaultTolerance(ManualClock()) if fault_enabled else None
    selector = QueueSelector(queues, rng=random.Random(3), fault_tolerance=fault)
    for _ in range(50):
        assert selector.select(last_broker="broker-b").broker_name != "broker-b"


def test_retry_on_a_single_broker_topic_still_selects() -> None:
    queues = topic_queues(["broker-a"], 2)
    selector = QueueSelector(queues, rng=random.Random(0))
    assert selector.select(last_broker="broker-a") in queues


def test_unavailable_broker_is_avoided_then_comes_back() -> None:
    clock = ManualClock()
    fault = LatencyFaultTolerance(clock)
    queues = topic_queues(BROKERS, 2)
    selector = QueueSelector(queues, rng=random.Random(11), fault_tolerance=fault)
    fault.update("broker-a", 3_000, isolation=True)
    chosen = Counter(selector.select().broker_name for _ in range(60))
    assert "broker-a" not in chosen
    assert chosen["broker-b"] == chosen["broker-c"] == 30
    clock.advance(600)
    chosen = Counter(selector.select().broker_name for _ in range(60))
    assert chosen == {"broker-a": 20, "broker-b": 20, "broker-c": 20}


def test_everything_unavailable_falls_back_to_the_least_bad_broker() -> None:
    clock = ManualClock()
    fault = LatencyFaultTolerance(clock)
    queues = topic_queues(["broker-a", "broker-b"], 2)
    selector = QueueSelector(queues, rng=random.Random(5), fault_tolerance=fault)
    fault.update("broker-a", 20_000, isolation=False)
    fault.update("broker-b", 700, isolation=False)
    # half of 2 records is 1: always the better one
    assert {selector.select().broker_name for _ in range(10)} == {"broker-b"}
    # on retry after broker-b failed, anything but broker-b
    fault.update("broker-b", 700, isolation=True)
    assert selector.select(last_broker="broker-b").broker_name == "broker-a"


def test_empty_queue_list_is_rejected() -> None:
    with pytest.raises(ValueError):
        QueueSelector([])


@settings(max_examples=150, deadline=None)
@given(
    queues=st.lists(
        st.builds(
            MessageQueue,
            topic=st.just("T"),
            broker_name=st.sampled_from(BROKERS),
            queue_id=st.integers(0, 7),
        ),
        min_size=1,
        max_size=12,
        unique=True,
    ),
    fault_enabled=st.booleans(),
    ops=st.lists(
        st.tuples(
            st.sampled_from([*BROKERS, None]),
            st.integers(0, 40_000),
            st.booleans(),
            st.floats(0, 700),
        ),
        max_size=30,
    ),
    seed=st.integers(0, 1000),
)
def test_select_never_raises_while_a_queue_exists(
    queues: list[MessageQueue],
    fault_enabled: bool,
    ops: list[tuple[str | None, int, bool, float]],
    seed: int,
) -> None:
    clock = ManualClock()
    fault = LatencyFaultTolerance(clock, rng=random.Random(seed)) if fault_enabled else None
    selector = QueueSelector(queues, rng=random.Random(seed), fault_tolerance=fault)
    for last_broker, latency, failed, pause in ops:
        mq = selector.select(last_broker)
        assert mq in queues
        if fault is not None:
            fault.update(mq.broker_name, latency, isolation=failed)
        clock.advance(pause)
        available_elsewhere = [
            q
            for q in queues
            if q.broker_name != last_broker and (fault is None or fault.is_available(q.broker_name))
        ]
        mq = selector.select(last_broker)
        if available_elsewhere:
            assert mq.broker_name != last_broker
            assert fault is None or fault.is_available(mq.broker_name)


# -- sharding keys ---------------------------------------------------------------


def test_sharding_key_golden_matches_java_select_message_queue_by_hash() -> None:
    # Java: Math.abs("key".hashCode() % 8), printed with JDK 17.
    queues = topic_queues(["broker-a"], 8)
    golden = {"order-1": 6, "order-42": 5, "polygenelubricants": 0, "订单-7": 5}
    for key, queue_id in golden.items():
        assert select_by_sharding_key(queues, key).queue_id == queue_id


def test_ali_ons_golden_matches_node_md5() -> None:
    # node: crypto md5(key).readUInt32BE() % 4
    queues = topic_queues(["broker-a", "broker-b"], 4)
    golden = {"order-1": 1, "order-42": 0, "abc": 0}
    for key, queue_id in golden.items():
        mq = select_like_ali_ons(queues, key)
        assert (mq.broker_name, mq.queue_id) == ("broker-a", queue_id)


@pytest.mark.parametrize("select", [select_by_sharding_key, select_like_ali_ons])
@settings(max_examples=100)
@given(key=st.text(max_size=30), per_broker=st.integers(1, 16))
def test_same_key_same_queue(select: Selector, key: str, per_broker: int) -> None:
    queues = topic_queues(["broker-a", "broker-b"], per_broker)
    first = select(queues, key)
    assert first in queues
    assert select(list(queues), key) == first


@pytest.mark.parametrize("select", [select_by_sharding_key, select_like_ali_ons])
@pytest.mark.parametrize("per_broker", [1, 3, 8, 16])
def test_keys_spread_over_every_queue(select: Selector, per_broker: int) -> None:
    queues = topic_queues(["broker-a"], per_broker)
    counts = Counter(select(queues, f"order-{n}") for n in range(200 * per_broker))
    assert set(counts) == set(queues)
    assert min(counts.values()) > 100  # mean 200: no queue starves


def test_sharding_on_empty_list_is_rejected() -> None:
    with pytest.raises(ValueError):
        select_by_sharding_key([], "k")
    with pytest.raises(ValueError):
        select_like_ali_ons([], "k")
