"""Retry and backoff policies: RocketMQ's tables, bounds and caps."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.client._core.backoff import (
    DEFAULT_DELAY_LEVELS_MS,
    PULL_DELAY_ON_EXCEPTION_MS,
    PULL_DELAY_ON_FLOW_CONTROL_MS,
    RECONNECT_CAP_MS,
    backoff_ceiling_ms,
    consumer_retry_delay_ms,
    effective_max_reconsume_times,
    orderly_suspend_ms,
    reconnect_delay_ms,
    retry_delay_level,
)

S, M, H = 1000, 60_000, 3_600_000


def test_documented_defaults() -> None:
    assert PULL_DELAY_ON_EXCEPTION_MS == 3000
    assert PULL_DELAY_ON_FLOW_CONTROL_MS == 50
    assert len(DEFAULT_DELAY_LEVELS_MS) == 18
    assert DEFAULT_DELAY_LEVELS_MS[0] == 1 * S and DEFAULT_DELAY_LEVELS_MS[-1] == 2 * H


def test_consumer_retry_schedule_is_sixteen_retries_then_dlq() -> None:
    schedule = [consumer_retry_delay_ms(n) for n in range(17)]
    assert schedule == [
        10 * S,
        30 * S,
        1 * M,
        2 * M,
        3 * M,
        4 * M,
        5 * M,
        6 * M,
        7 * M,
        8 * M,
        9 * M,
        10 * M,
        20 * M,
        30 * M,
        1 * H,
        2 * H,
        None,
    ]
    assert consumer_retry_delay_ms(3, max_reconsume_times=3) is None
    assert consumer_retry_delay_ms(2, max_reconsume_times=3) == 1 * M


def test_retry_delay_level() -> None:
    assert retry_delay_level(0) == 3
    assert retry_delay_level(15) == 18
    assert retry_delay_level(40) == 18  # capped at the highest level
    assert retry_delay_level(40, levels=20) == 20
    assert retry_delay_level(0, requested_level=1) == 1
    with pytest.raises(ValueError):
        retry_delay_level(-1)


@given(st.integers(0, 10_000), st.integers(1, 64))
def test_retry_delay_never_exceeds_the_last_level(times: int, levels: int) -> None:
    table = tuple(range(1, levels + 1))
    delay = consumer_retry_delay_ms(times, max_reconsume_times=10**9, delay_levels_ms=table)
    assert delay is not None and 1 <= delay <= table[-1]


def test_effective_max_reconsume_times() -> None:
    assert effective_max_reconsume_times() == 16
    assert effective_max_reconsume_times(orderly=True) == 2**31 - 1
    assert effective_max_reconsume_times(3, orderly=True) == 3


def test_orderly_suspend_is_clamped() -> None:
    assert orderly_suspend_ms() == 1000
    assert orderly_suspend_ms(0) == 10
    assert orderly_suspend_ms(500) == 500
    assert orderly_suspend_ms(60_000) == 30_000
    assert orderly_suspend_ms(-1, default_ms=2000) == 2000


@given(st.integers(0, 2000), st.integers(1, 10_000), st.integers(1, 10**7))
def test_backoff_ceiling_is_capped_and_monotonic(attempt: int, base: int, cap: int) -> None:
    ceiling = backoff_ceiling_ms(attempt, base, cap)
    assert 0 < ceiling <= cap
    assert ceiling <= backoff_ceiling_ms(attempt + 1, base, cap)
    assert ceiling == min(cap, base * 2**attempt)


@given(st.integers(0, 200), st.integers(0, 2**32))
def test_full_jitter_stays_within_the_ceiling(attempt: int, seed: int) -> None:
    delay = reconnect_delay_ms(attempt, random.Random(seed))
    assert 0 <= delay <= backoff_ceiling_ms(attempt) <= RECONNECT_CAP_MS
    assert delay == reconnect_delay_ms(attempt, random.Random(seed))  # replayable


def test_backoff_rejects_negative_attempts() -> None:
    with pytest.raises(ValueError):
        backoff_ceiling_ms(-1)
    assert backoff_ceiling_ms(5, base_ms=0) == 0
