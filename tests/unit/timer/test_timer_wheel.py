"""The in-memory wheel against a plain model (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.timer.wheel import TimerWheel, WheelEntry

entries = st.lists(
    st.tuples(st.integers(0, 5_000), st.integers(1, 6)),  # (eff_ms, key hash)
    max_size=120,
)


@settings(max_examples=150, deadline=None)
@given(
    added=entries,
    recalled=st.sets(st.integers(1, 6), max_size=3),
    pops=st.lists(st.tuples(st.integers(0, 600), st.integers(1, 40)), max_size=25),
    precision=st.sampled_from([10, 100, 1000]),
)
def test_pop_due_returns_each_due_unrecalled_entry_once_in_order(
    added: list[tuple[int, int]],
    recalled: set[int],
    pops: list[tuple[int, int]],
    precision: int,
) -> None:
    wheel = TimerWheel(precision)
    all_entries = [
        WheelEntry(eff, source, source * 10, khash) for source, (eff, khash) in enumerate(added)
    ]
    for entry in all_entries:
        wheel.add(entry)
    until = max((e.eff_ms for e in all_entries), default=0)
    for khash in recalled:
        wheel.recall(khash, until)
    now = 0
    popped: list[WheelEntry] = []
    for step, limit in pops:
        now += step
        batch = wheel.pop_due(now, limit)
        assert len(batch) <= limit
        assert all(e.eff_ms <= now for e in batch)
        popped.extend(batch)
    rest = wheel.pop_due(10_000)
    popped.extend(rest)
    expected = sorted(e for e in all_entries if e.key_hash not in recalled)
    assert popped == expected
    assert len(wheel) == 0
    assert wheel.next_due_ms() is None


def test_next_due_and_unsorted_slot() -> None:
    wheel = TimerWheel(100)
    wheel.add(WheelEntry(250, 2, 0, 0))
    wheel.add(WheelEntry(210, 1, 0, 0))  # same slot, earlier: the slot is re-sorted
    wheel.add(WheelEntry(990, 3, 0, 0))
    assert wheel.next_due_ms() == 210
    assert wheel.pop_due(209) == []
    assert [e.source_offset for e in wheel.pop_due(249)] == [1]
    assert wheel.next_due_ms() == 250
    assert [e.source_offset for e in wheel.pop_due(1_000)] == [2, 3]


def test_recall_marks_are_forgotten_once_popped_past() -> None:
    wheel = TimerWheel(10)
    wheel.add(WheelEntry(100, 1, 0, 7))
    wheel.recall(7, 150)
    wheel.add(WheelEntry(200, 2, 0, 0))
    assert wheel.pop_due(120) == []
    assert wheel.skipped_recalled == 1
    assert wheel.recall_marks == 1
    assert [e.source_offset for e in wheel.pop_due(300)] == [2]
    assert wheel.recall_marks == 0
    wheel.recall(0, 500)  # key hash 0 means "no key": never recalled
    assert wheel.recall_marks == 0
