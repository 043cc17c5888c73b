"""Disk space policies (properties) and the guard that applies them."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.common.clock import ManualClock
from tidemq.store.disk_guard import DiskGuard, disk_used_ratio
from tidemq.store.space import (
    NO_SPACE_MARGIN,
    disk_full_next,
    page_ceil,
    reservation_end,
    used_ratio,
    writable_again_at,
)

sizes = st.integers(1, 1 << 34)
chunks = st.integers(1, 1 << 26)
ratios = st.floats(0, 1, allow_nan=False)


@given(st.integers(0, 1 << 34), sizes, chunks)
def test_reservation_covers_the_write_within_the_file_and_a_chunk(
    needed: int, size: int, chunk: int
) -> None:
    end = reservation_end(needed, size, chunk)

    assert end <= size
    assert end >= min(needed, size)
    assert end - needed <= chunk  # never more than a chunk ahead
    assert end == size or end % chunk == 0


@given(st.integers(0, 1 << 30), st.integers(0, 1 << 30), sizes, chunks)
def test_reservation_grows_with_the_write_position(a: int, b: int, size: int, chunk: int) -> None:
    low, high = sorted((a, b))
    assert reservation_end(low, size, chunk) <= reservation_end(high, size, chunk)


def test_reservation_refuses_a_chunk_of_nothing() -> None:
    with pytest.raises(ValueError, match="chunk"):
        reservation_end(10, 100, 0)


@given(st.integers(1, 1 << 40), st.data())
def test_used_ratio_is_rocketmqs_rounded_up_percentage(total: int, data: st.DataObject) -> None:
    free = data.draw(st.integers(0, total))
    available = data.draw(st.integers(0, free))
    ratio = used_ratio(total, free, available)
    used = total - free

    assert 0 <= ratio <= 1
    assert ratio == round(ratio, 2)
    if used + available:
        exact = used / (used + available)
        assert exact <= ratio + 1e-12
        assert ratio < exact + 0.01 + 1e-12


def test_used_ratio_examples() -> None:
    assert used_ratio(0, 0, 0) == 0.0
    assert used_ratio(100, 100, 100) == 0.0
    assert used_ratio(100, 0, 0) == 1.0
    assert used_ratio(1000, 95, 50) == math.ceil(905 * 100 / 955) / 100  # root's blocks left out


@given(st.booleans(), ratios, ratios, ratios)
def test_full_above_warning_and_ok_at_or_below_the_clean_ratio(
    full: bool, ratio: float, a: float, b: float
) -> None:
    clean, warning = sorted((a, b))
    after = disk_full_next(full, ratio, warning_ratio=warning, clean_ratio=clean)

    if ratio > warning:
        assert after
    elif ratio <= clean:
        assert not after
    else:  # between the two: the state does not change (no flapping)
        assert after == full


@given(ratios, ratios, ratios, ratios)
def test_after_enospc_space_must_be_freed_before_writes_resume(
    ratio: float, failed_at: float, a: float, b: float
) -> None:
    clean, warning = sorted((a, b))
    after = disk_full_next(
        True, ratio, warning_ratio=warning, clean_ratio=clean, no_space_ratio=failed_at
    )
    if not after:
        assert ratio <= clean
        assert ratio <= max(0.0, failed_at - NO_SPACE_MARGIN)
    assert writable_again_at(clean, failed_at) <= clean


def test_guard_measures_at_most_once_an_interval_and_logs_each_transition(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    clock = ManualClock()
    ratio = [0.5]
    calls: list[Path] = []

    def usage(path: Path) -> float:
        calls.append(path)
        return ratio[0]

    guard = DiskGuard(
        tmp_path, usage, clock, warning_ratio=0.9, clean_ratio=0.85, check_interval_s=1.0
    )
    caplog.set_level(logging.INFO, logger="tidemq.store.disk_guard")

    assert guard.writable() and len(calls) == 1
    ratio[0] = 0.95
    assert guard.writable() and len(calls) == 1  # cached within the interval
    clock.advance(1.0)
    assert not guard.writable()
    assert "0.95 used of" in guard.remark() and "disk is full" in guard.remark()
    ratio[0] = 0.87
    clock.advance(1.0)
    assert not guard.writable()  # hysteresis: still above the clean ratio
    ratio[0] = 0.85
    clock.advance(1.0)
    assert guard.writable()

    records = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in records] == ["WARNING", "INFO"]
    assert str(tmp_path) in records[0][1] and "95%" in records[0][1]


def test_guard_turns_full_at_enospc_and_waits_for_freed_space(tmp_path: Path) -> None:
    clock = ManualClock()
    ratio = [0.6]
    guard = DiskGuard(
        tmp_path,
        lambda _: ratio[0],
        clock,
        warning_ratio=0.9,
        clean_ratio=0.85,
        check_interval_s=1.0,
    )
    guard.no_space(OSError(28, "No space left on device", str(tmp_path / "commitlog" / "0")))
    assert not guard.writable()
    assert "no space left writing commitlog/0" in guard.remark()
    clock.advance(1.0)
    assert not guard.writable()  # nothing freed: 0.60 is where the write failed
    ratio[0] = 0.55
    clock.advance(1.0)
    assert guard.writable()


def test_the_real_disk_use_is_a_ratio(tmp_path: Path) -> None:
    assert 0.0 <= disk_used_ratio(tmp_path) <= 1.0


def test_page_ceil_rounds_up_to_pages() -> None:
    assert page_ceil(0) == 0
    assert page_ceil(1) == page_ceil(4096) >= 4096
