"""Rebalance decisions: the diff partition and computePullFromWhere's table."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.client._core.rebalance import (
    UNBALANCED_RETRY_MS,
    AskMaxOffset,
    ConsumeFromWhere,
    DoNotStart,
    SearchByTimestamp,
    StartAt,
    StartPlan,
    default_consume_timestamp,
    diff,
    format_consume_timestamp,
    next_round_in_s,
    parse_consume_timestamp,
    start_offset_plan,
)
from tidemq.common.message import MessageQueue
from tidemq.common.names import is_retry_topic

queues = st.builds(
    MessageQueue,
    topic=st.just("T"),
    broker_name=st.sampled_from(["broker-a", "broker-b"]),
    queue_id=st.integers(0, 7),
)
queue_sets = st.frozensets(queues, max_size=16)


@given(queue_sets, queue_sets, st.data())
def test_diff_partitions_current_and_allocated(
    current: frozenset[MessageQueue], allocated: frozenset[MessageQueue], data: st.DataObject
) -> None:
    expired = data.draw(st.frozensets(st.sampled_from(sorted(current)))) if current else set()
    d = diff(current, allocated, expired)
    drop, add, keep = set(d.to_drop), set(d.to_add), set(d.unchanged)
    # every list sorted and duplicate-free
    for part in (d.to_drop, d.to_add, d.unchanged):
        assert part == sorted(set(part))
    # drop and keep partition what is held; add and keep make up the allocation,
    # except stale queues, which are dropped this round and re-added next round
    assert drop | keep == current and not (drop & keep)
    assert add == allocated - current
    assert keep == (current & allocated) - expired
    assert drop == (current - allocated) | (current & allocated & expired)
    assert not (add & current)
    assert d.changed == bool(drop or add)
    # the next round, from the new holding, is stable
    held_next = keep | add
    again = diff(held_next, allocated)
    assert again.to_drop == [] and again.to_add == sorted(allocated - held_next)


def test_diff_example() -> None:
    q = [MessageQueue("T", "b", i) for i in range(4)]
    d = diff({q[0], q[1], q[2]}, {q[1], q[2], q[3]}, pull_expired={q[2]})
    assert d.to_drop == [q[0], q[2]]
    assert d.to_add == [q[3]]
    assert d.unchanged == [q[1]]


# -- computePullFromWhere ---------------------------------------------------------

W = ConsumeFromWhere
TS = 1_700_000_000_000
LAST_LIKE = [
    W.CONSUME_FROM_LAST_OFFSET,
    W.CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST,
    W.CONSUME_FROM_MIN_OFFSET,
    W.CONSUME_FROM_MAX_OFFSET,
]


def expected_plan(stored: int, where: ConsumeFromWhere, retry: bool) -> StartPlan | None:
    """RocketMQ 4.9 RebalancePushImpl.computePullFromWhereWithException, as a table
    (None = "do not start", whose reason text is not compared)."""
    if stored >= 0:
        return StartAt(stored)
    if stored != -1:
        return None
    if where in LAST_LIKE:
        return StartAt(0) if retry else AskMaxOffset()
    if where is W.CONSUME_FROM_FIRST_OFFSET:
        return StartAt(0)
    assert where is W.CONSUME_FROM_TIMESTAMP
    return AskMaxOffset() if retry else SearchByTimestamp(TS)


@pytest.mark.parametrize("where", list(W))
@pytest.mark.parametrize("stored", [-1, 0, 42, -2, -7])
@pytest.mark.parametrize("retry", [False, True])
def test_start_offset_plan_table(stored: int, where: ConsumeFromWhere, retry: bool) -> None:
    plan = start_offset_plan(stored, where, retry, consume_timestamp_ms=TS)
    expected = expected_plan(stored, where, retry)
    if expected is None:
        assert isinstance(plan, DoNotStart) and str(stored) in plan.reason
    else:
        assert plan == expected


def test_every_enum_value_is_covered() -> None:
    assert set(W) == {*LAST_LIKE, W.CONSUME_FROM_FIRST_OFFSET, W.CONSUME_FROM_TIMESTAMP}
    assert {w.effective for w in LAST_LIKE} == {W.CONSUME_FROM_LAST_OFFSET}


def test_timestamp_plan_needs_a_timestamp_only_when_it_searches() -> None:
    with pytest.raises(ValueError):
        start_offset_plan(-1, W.CONSUME_FROM_TIMESTAMP, False)
    assert start_offset_plan(-1, W.CONSUME_FROM_TIMESTAMP, True) == AskMaxOffset()
    assert start_offset_plan(5, W.CONSUME_FROM_TIMESTAMP, False) == StartAt(5)


def test_is_retry_topic() -> None:
    assert is_retry_topic("%RETRY%group")
    assert not is_retry_topic("orders")
    assert not is_retry_topic("%DLQ%group")


# -- consumeTimestamp ----------------------------------------------------------------

UTC8 = dt.timezone(dt.timedelta(hours=8))


def test_parse_consume_timestamp_in_a_zone() -> None:
    assert parse_consume_timestamp("19700101080000", UTC8) == 0
    assert parse_consume_timestamp("20231114221320", dt.UTC) == 1_699_999_999_000 + 1000


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2023111422132",
        "202311142213200",
        "2023-11-14 22:1",
        "20231314000000",
        "20230231000000",
        "2023111425000x",
    ],
)
def test_parse_consume_timestamp_rejects_bad_text(text: str) -> None:
    with pytest.raises(ValueError):
        parse_consume_timestamp(text, dt.UTC)


@given(st.integers(0, 4_000_000_000).map(lambda s: s * 1000))
def test_format_then_parse_round_trips_to_the_second(epoch_ms: int) -> None:
    for tz in (dt.UTC, UTC8):
        assert parse_consume_timestamp(format_consume_timestamp(epoch_ms, tz), tz) == epoch_ms


def test_default_consume_timestamp_is_30_minutes_earlier() -> None:
    now = parse_consume_timestamp("20240301120000", dt.UTC)
    assert default_consume_timestamp(now, dt.UTC) == "20240301113000"
    assert default_consume_timestamp(now + 999, dt.UTC) == "20240301113000"  # truncated


def test_local_time_zone_by_default() -> None:
    now = 1_700_000_000_000
    text = default_consume_timestamp(now)
    assert parse_consume_timestamp(text) == now - 30 * 60 * 1000


@given(balanced=st.booleans(), interval_s=st.floats(0.01, 3600))
def test_an_unbalanced_round_is_followed_by_another_within_a_second(
    balanced: bool, interval_s: float
) -> None:
    wait_s = next_round_in_s(balanced, interval_s)
    assert 0 < wait_s <= interval_s
    if balanced:
        assert wait_s == interval_s
    else:
        assert wait_s <= UNBALANCED_RETRY_MS / 1000
