"""Fixtures of the timer tests (helpers live in timer_rig)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from timer_rig import START_MS, TimerRig

from tidemq.common.clock import ManualClock
from tidemq.timer import TimerSettings


@pytest.fixture
def settings() -> TimerSettings:
    return TimerSettings(
        precision_ms=10,
        bucket_span_ms=10_000,
        checkpoint_interval_s=0.05,
        segment_size=64 * 1024,
        failure_backoff_s=0.02,
        idle_poll_s=0.02,
        fsync=False,
    )


@pytest.fixture
async def rig(tmp_path: Path, settings: TimerSettings) -> AsyncIterator[TimerRig]:
    instance = TimerRig(tmp_path, ManualClock(START_MS), settings)
    yield instance
    await instance.stop()
