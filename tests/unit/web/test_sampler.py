"""The history sampler on a manual clock: rates from the second reading on,
lags as read, and a failing read does not stop it (driven by sample_once and
the owned task, no sleeping in the test)."""

from __future__ import annotations

import asyncio

import pytest

from tidemq.common.clock import ManualClock
from tidemq.web.history import History
from tidemq.web.sampler import Reading, Sampler


def test_rates_and_lags_are_recorded_per_name() -> None:
    clock = ManualClock(1_000_000)
    readings = iter(
        [
            Reading({"b": (100, 40)}, {"T": 100}, {"G": 7}),
            Reading({"b": (160, 70)}, {"T": 160}, {"G": 3}),
        ]
    )
    history = History()
    sampler = Sampler(lambda: next(readings), history, clock, interval_s=5)
    sampler.sample_once()
    clock.advance(5)
    sampler.sample_once()
    assert history.series("broker:b:put") == [(1_005_000, 12.0)]
    assert history.series("broker:b:get") == [(1_005_000, 6.0)]
    assert history.series("topic:T:put") == [(1_005_000, 12.0)]
    assert history.series("group:G:lag") == [(1_000_000, 7), (1_005_000, 3)]
    assert sampler.samples == 2


async def test_the_owned_task_keeps_sampling_after_a_failed_read() -> None:
    clock = ManualClock()
    calls = 0
    sampled = asyncio.Event()

    def source() -> Reading:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("table changed")
        sampled.set()
        return Reading(groups={"G": calls})

    sampler = Sampler(source, History(), clock, interval_s=0.001)
    sampler.start()
    try:
        async with asyncio.timeout(5):
            await sampled.wait()
    finally:
        await sampler.stop()
    assert sampler.samples >= 1
    assert sampler.last_error is None


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval"):
        Sampler(Reading, History(), ManualClock(), interval_s=0)
