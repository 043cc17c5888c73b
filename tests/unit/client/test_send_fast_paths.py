"""The shortcuts of the single-message send path give what the plain code gives.

Each shortcut is pinned to a reference copy of the code it replaced: unique
ids (the head of the id cached per millisecond), the latency-to-pause table
(an early return for fast sends), queue selection (no per-broker checks while
no broker is paused) and fault records (updated in place).
"""

from __future__ import annotations

import random
import threading
from datetime import UTC, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.client._core.queue_selection import (
    ISOLATION_LATENCY_MS,
    LATENCY_MAX_MS,
    NOT_AVAILABLE_DURATION_MS,
    LatencyFaultTolerance,
    QueueSelector,
    not_available_duration_ms,
)
from tidemq.common.clock import ManualClock
from tidemq.common.message import MessageQueue
from tidemq.common.message_id import UniqueIdGenerator, month_bounds_ms, parse_unique_id

# -- reference copies of the code before the shortcuts ------------------------------


class ReferenceIds:
    """UniqueIdGenerator.next_id as it was: every id formatted whole."""

    def __init__(self, clock: ManualClock, prefix: str, tz: timezone) -> None:
        self._clock, self._prefix, self._tz = clock, prefix, tz
        self._lock = threading.Lock()
        self._month_start, self._next_month_start = 0, -1
        self._counter, self._time, self._first_counter = -1, -1, 0

    def next_id(self) -> str:
        now = self._clock.now_ms()
        with self._lock:
            if not self._month_start <= now < self._next_month_start:
                self._month_start, self._next_month_start = month_bounds_ms(now, self._tz)
                self._time = -1
            counter = (self._counter + 1) & 0xFFFF
            self._counter = counter
            span = now - self._month_start
            if span > self._time:
                self._time = span
                self._first_counter = counter
            elif counter == self._first_counter:
                self._time += 1
            time_part = self._time
        return f"{self._prefix}{time_part & 0xFFFFFFFF:08X}{counter:04X}"


def reference_duration_ms(latency_ms: int) -> int:
    for threshold, duration in zip(
        reversed(LATENCY_MAX_MS), reversed(NOT_AVAILABLE_DURATION_MS), strict=True
    ):
        if latency_ms >= threshold:
            return duration
    return 0


class ReferenceSelector(QueueSelector):
    """QueueSelector.select as it was: every queue checked, every time."""

    def select(self, last_broker: str | None = None) -> MessageQueue:
        fault = self._fault
        if fault is None:
            mq = self._next_matching(lambda q: q.broker_name != last_broker)
            return mq or self._next()
        mq = self._next_matching(
            lambda q: q.broker_name != last_broker and fault.is_available(q.broker_name)
        )
        if mq is not None:
            return mq
        fallback = fault.pick_one_at_least()
        if fallback is not None and fallback != last_broker:
            mq = self._next_matching(lambda q: q.broker_name == fallback)
            if mq is not None:
                return mq
        mq = self._next_matching(lambda q: q.broker_name != last_broker)
        return mq or self._next()


# -- unique ids -----------------------------------------------------------------------

MONTH_END_MS = 1_706_745_599_000  # 2024-01-31T23:59:59Z: steps cross into February


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(-5, 2_000), st.integers(1, 400)), min_size=1, max_size=10),
    counter=st.integers(0, 0xFFFF),
    east=st.booleans(),
    ipv6=st.booleans(),
)
def test_unique_ids_are_the_reference_ids(
    steps: list[tuple[int, int]], counter: int, east: bool, ipv6: bool
) -> None:
    """Clock steps forward, still and back, counters wrapping within one ms
    (both start at `counter`), month ends: the same ids, character for character."""
    tz = timezone(timedelta(hours=8)) if east else UTC
    clock = ManualClock(MONTH_END_MS)
    ip = bytes(range(16)) if ipv6 else b"\x0a\x00\x00\x09"
    generator = UniqueIdGenerator(clock, ip=ip, pid=4242, salt=0x12345678, tz=tz)
    reference = ReferenceIds(clock, generator.prefix, tz)
    generator._counter = reference._counter = counter - 1
    for step_ms, count in steps:
        clock._now_ms += step_ms  # may go back: the generator must cope
        for _ in range(count):
            made = generator.next_id()
            assert made == reference.next_id()
    parse_unique_id(made)


def test_a_burst_of_ids_within_one_millisecond_stays_unique() -> None:
    clock = ManualClock(MONTH_END_MS)
    generator = UniqueIdGenerator(clock, ip=b"\x7f\x00\x00\x01", pid=1, salt=2)
    ids = [generator.next_id() for _ in range(140_000)]
    assert len(set(ids)) == len(ids)
    assert parse_unique_id(ids[-1]).month_span_ms == parse_unique_id(ids[0]).month_span_ms + 2


# -- latency pauses -------------------------------------------------------------------


@given(st.integers(-(2**40), 2**40))
def test_pause_durations_are_the_reference_table(latency_ms: int) -> None:
    assert not_available_duration_ms(latency_ms) == reference_duration_ms(latency_ms)


def test_pause_durations_at_each_threshold() -> None:
    for threshold in (*LATENCY_MAX_MS, ISOLATION_LATENCY_MS):
        for latency in (threshold - 1, threshold, threshold + 1):
            assert not_available_duration_ms(latency) == reference_duration_ms(latency)


# -- queue selection -------------------------------------------------------------------

BROKERS = ("a", "b", "c")
Operation = tuple[str, int, int]


def _operations() -> st.SearchStrategy[list[Operation]]:
    return st.lists(
        st.tuples(
            st.sampled_from(["select", "retry", "update", "fail", "advance", "remove"]),
            st.integers(0, len(BROKERS) - 1),
            st.integers(0, 700_000),
        ),
        max_size=60,
    )


@settings(max_examples=300, deadline=None)
@given(ops=_operations(), seed=st.integers(0, 2**16), queues_per_broker=st.integers(1, 3))
def test_selection_is_the_reference_selection(
    ops: list[Operation], seed: int, queues_per_broker: int
) -> None:
    """Fast sends, slow sends, failures, time passing, records removed: both
    selectors, each with its own record fed the same reports, pick the same queues."""
    queues = [MessageQueue("T", b, i) for b in BROKERS for i in range(queues_per_broker)]
    clock = ManualClock()
    faults = [LatencyFaultTolerance(clock, random.Random(seed)) for _ in range(2)]
    selectors: list[QueueSelector] = [
        QueueSelector(queues, rng=random.Random(seed), fault_tolerance=faults[0]),
        ReferenceSelector(queues, rng=random.Random(seed), fault_tolerance=faults[1]),
    ]
    for op, broker_index, amount in ops:
        broker = BROKERS[broker_index]
        if op == "advance":
            clock.advance(amount / 1000)
        elif op in ("update", "fail"):
            for fault in faults:
                fault.update(broker, amount, op == "fail")
        elif op == "remove":
            for fault in faults:
                fault.remove(broker)
        else:
            last = broker if op == "retry" else None
            fast, reference = (s.select(last) for s in selectors)
            assert fast == reference
        assert all(faults[0].is_available(b) == faults[1].is_available(b) for b in BROKERS)


def test_without_fault_tolerance_selection_is_plain_round_robin() -> None:
    queues = [MessageQueue("T", b, 0) for b in BROKERS]
    fast = QueueSelector(queues, rng=random.Random(7))
    reference = ReferenceSelector(queues, rng=random.Random(7))

    def picks(selector: QueueSelector) -> list[MessageQueue]:
        return [selector.select(last) for last in (None, "a", None, "b", "c", None)]

    assert picks(fast) == picks(reference)


def test_a_broker_paused_by_a_failure_is_skipped_until_its_pause_ends() -> None:
    clock = ManualClock()
    fault = LatencyFaultTolerance(clock, random.Random(1))
    queues = [MessageQueue("T", b, 0) for b in ("a", "b")]
    selector = QueueSelector(queues, rng=random.Random(1), fault_tolerance=fault)
    assert fault.none_paused(clock.monotonic())
    fault.update("a", 10, isolation=True)
    assert not fault.none_paused(clock.monotonic())
    assert {selector.select().broker_name for _ in range(6)} == {"b"}
    clock.advance(not_available_duration_ms(ISOLATION_LATENCY_MS) / 1000)
    assert fault.none_paused(clock.monotonic())
    assert {selector.select().broker_name for _ in range(6)} == {"a", "b"}
