"""The fixed-bucket histogram: Prometheus' `le` rule, cumulative buckets, the sum."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.common.histogram import Histogram
from tidemq.common.rpc_stats import RPC_LATENCY_BOUNDS_MS, RpcStats

BOUNDS = (1.0, 3.0, 5.0, 10.0)


def test_a_value_on_a_bound_is_counted_in_that_bucket() -> None:
    histogram = Histogram(BOUNDS)
    for value in (0.0, 1.0, 1.5, 3.0, 10.0, 10.5):
        histogram.observe(value)
    assert histogram.counts == [2, 2, 0, 1, 1]
    assert histogram.cumulative() == [(1.0, 2), (3.0, 4), (5.0, 4), (10.0, 5), (float("inf"), 6)]
    assert histogram.count == 6
    assert histogram.total == pytest.approx(26.0)


def test_a_batch_observation_counts_its_items() -> None:
    histogram = Histogram(BOUNDS)
    histogram.observe(4.0, times=3)
    assert histogram.counts == [0, 0, 3, 0, 0]
    assert histogram.total == 12.0


@pytest.mark.parametrize("bounds", [(3.0, 1.0), (1.0, 1.0)])
def test_bounds_must_rise_strictly(bounds: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="rise strictly"):
        Histogram(bounds)


@given(st.lists(st.floats(min_value=0, max_value=5000, allow_nan=False), max_size=60))
def test_every_bucket_counts_the_values_at_or_below_its_bound(values: list[float]) -> None:
    histogram = Histogram(RPC_LATENCY_BOUNDS_MS)
    for value in values:
        histogram.observe(value)
    for bound, cumulative in histogram.cumulative():
        assert cumulative == sum(1 for v in values if v <= bound)
    assert histogram.count == len(values)
    assert histogram.total == pytest.approx(sum(values))


def test_rpc_stats_keeps_one_histogram_per_request_response_and_kind() -> None:
    stats = RpcStats("remoting", str, str)
    stats.record(310, 0, 0.4)
    stats.record(310, 0, 2.0)
    stats.record(310, 17, 1.0)
    stats.record(11, 0, 500.0, long_polling=True)
    assert {key: h.count for key, h in stats.table.items()} == {
        (310, 0, False, False): 2,
        (310, 17, False, False): 1,
        (11, 0, True, False): 1,
    }
    assert stats.table[(310, 0, False, False)].cumulative()[:2] == [(1, 1), (3, 2)]
