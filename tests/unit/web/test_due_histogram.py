"""The Timers page's histogram of due times, and which timers still wait."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidemq.timer.buckets import Unit, UnitKind
from tidemq.timer.inventory import waiting_units
from tidemq.web.api_timers import due_histogram


@given(st.lists(st.integers(0, 10**7), max_size=100), st.integers(0, 10**7), st.integers(1, 50))
def test_every_due_time_is_counted_once(due: list[int], now: int, bins: int) -> None:
    due = sorted(due)
    result = due_histogram(due, now, bins)
    if not due:
        assert result == []
        return
    assert len(result) == bins
    assert sum(count for _, count in result) == len(due)
    assert result[0][0] == min(now, due[0])


def unit(eff: int, source: int, key: int = 0, kind: UnitKind = UnitKind.NORMAL) -> Unit:
    return Unit(eff, -1 if kind is UnitKind.RECALL else source * 10, source, key, kind)


def test_waiting_units_leave_out_delivered_recalled_and_duplicates() -> None:
    files = [
        [unit(100, 1), unit(200, 2, key=7), unit(300, 3, key=8)],
        [unit(200, 9, key=7, kind=UnitKind.RECALL), unit(400, 3, key=8), unit(500, 4)],
    ]
    waiting, cut = waiting_units(files, watermark=(100, 1), recalled={99}, delivered={4})
    assert [(u.eff_ms, u.source_offset) for u in waiting] == [(300, 3)]
    assert not cut


def test_a_listing_stops_at_its_limit() -> None:
    waiting, cut = waiting_units([[unit(i, i) for i in range(10)]], (-1, -1), limit=4)
    assert cut and [u.source_offset for u in waiting] == [0, 1, 2, 3]
