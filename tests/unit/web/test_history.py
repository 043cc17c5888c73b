"""The dashboard's history: rings stay bounded and ordered, rates are honest,
histograms count every value once (properties, with hypothesis)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.web.history import CounterRates, History, Ring, histogram, rate_per_s

times = st.lists(st.integers(0, 10**13), max_size=200)


@given(times, st.integers(1, 50))
def test_a_ring_keeps_the_newest_points_in_rising_time(stamps: list[int], capacity: int) -> None:
    ring = Ring(capacity)
    kept: list[int] = []
    for t in stamps:
        if ring.add(t, float(t)):
            kept.append(t)
    points = ring.points()
    assert len(points) == min(len(kept), capacity) <= capacity
    assert [t for t, _ in points] == kept[-capacity:]
    assert all(a[0] < b[0] for a, b in itertools.pairwise(points))


def test_a_point_not_after_the_last_is_ignored() -> None:
    ring = Ring(3)
    assert ring.add(10, 1.0)
    assert not ring.add(10, 2.0)
    assert not ring.add(5, 3.0)
    assert ring.points() == [(10, 1.0)]
    assert ring.points(since_ms=11) == []


@given(
    st.integers(0, 10**12),
    st.integers(0, 10**9),
    st.integers(-(10**6), 10**6),
    st.integers(-(10**9), 10**9),
)
def test_a_rate_is_the_difference_over_the_time_or_none(
    t: int, counter: int, dt: int, delta: int
) -> None:
    rate = rate_per_s((t, counter), (t + dt, counter + delta))
    if dt <= 0 or delta < 0:
        assert rate is None
    else:
        assert rate == pytest.approx(delta * 1000 / dt)
        assert rate >= 0


def test_no_rate_without_an_earlier_reading() -> None:
    assert rate_per_s(None, (1000, 5)) is None


def test_counter_rates_skip_a_restart_and_go_on_after_it() -> None:
    history = History()
    rates = CounterRates(history)
    assert rates.read("put", 0, 100) is None
    assert rates.read("put", 1000, 150) == 50.0
    assert rates.read("put", 2000, 10) is None  # restarted: counted from 0 again
    assert rates.read("put", 3000, 40) == 30.0
    assert history.series("put") == [(1000, 50.0), (3000, 30.0)]


@given(st.lists(st.text(min_size=1, max_size=3), max_size=60), st.integers(1, 10))
def test_a_history_holds_at_most_max_series(names: list[str], limit: int) -> None:
    history = History(capacity=4, max_series=limit)
    for t, name in enumerate(names):
        history.add(name, t, 1.0)
    assert len(history) <= limit
    if names:
        assert names[-1] in history.names()


@given(
    st.lists(st.integers(-1000, 3000), max_size=300),
    st.integers(0, 1000),
    st.integers(1, 2000),
    st.integers(1, 40),
)
def test_a_histogram_counts_each_value_in_range_once(
    values: list[int], start: int, span: int, bins: int
) -> None:
    end = start + span
    result = histogram(values, start, end, bins)
    assert len(result) == bins
    assert sum(count for _, count in result) == sum(start <= v < end for v in values)
    assert [s for s, _ in result] == sorted(s for s, _ in result)
    assert result[0][0] == start


def test_a_histogram_needs_a_span() -> None:
    with pytest.raises(ValueError, match="bin"):
        histogram([1], 5, 5, 3)
