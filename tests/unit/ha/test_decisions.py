"""Where the master starts, and what a slave does with each transfer."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from tidemq.ha.decisions import Append, Refuse, StartAt, Truncate, on_transfer, start_offset

FILE = 1024
positions = st.integers(0, 20 * FILE)


@given(positions, positions, positions)
def test_the_master_starts_inside_what_it_has(requested: int, low: int, high: int) -> None:
    master_min, master_max = min(low, high), max(low, high)
    start = start_offset(requested, master_min, master_max)
    assert master_min <= start <= master_max
    if master_min <= requested <= master_max:
        assert start == requested  # a slave resumes exactly where it is
    elif requested > master_max:
        assert start == master_max  # an ahead slave hears the master's end
    else:
        assert start == master_min  # an empty or far-behind slave hears the oldest byte


def test_a_new_slave_gets_everything_the_master_still_has() -> None:
    """RocketMQ would start a slave reporting 0 at the last file; tidemq at the oldest."""
    assert start_offset(0, 0, 5 * FILE + 10) == 0
    assert start_offset(0, 2 * FILE, 5 * FILE + 10) == 2 * FILE


def decide(offset: int, slave_min: int, slave_end: int, *, first: bool = True) -> object:
    return on_transfer(
        offset,
        slave_min=slave_min,
        slave_end=slave_end,
        slave_empty=False,
        first=first,
        file_size=FILE,
    )


@given(positions, positions, positions, st.booleans())
def test_a_slave_appends_only_at_its_end_and_truncates_only_on_connecting(
    offset: int, a: int, b: int, first: bool
) -> None:
    slave_min, slave_end = min(a, b), max(a, b)
    decision = decide(offset, slave_min, slave_end, first=first)
    if offset == slave_end:
        assert decision == Append()
    elif offset > slave_end:
        assert isinstance(decision, Refuse) and "missing" in decision.reason
    elif first and offset >= slave_min:
        assert decision == Truncate(offset, slave_end - offset)
    else:
        assert isinstance(decision, Refuse)


def test_an_ahead_slave_truncates_to_the_masters_end() -> None:
    assert decide(1500, 0, 1800) == Truncate(1500, 300)
    assert isinstance(decide(1500, 0, 1800, first=False), Refuse)  # mid-connection: a bug
    assert isinstance(decide(500, 1024, 1800), Refuse)  # nothing in common with the master


@given(positions)
def test_an_empty_slave_starts_on_a_file_boundary_only(offset: int) -> None:
    assume(offset != 0)
    decision = on_transfer(
        offset, slave_min=0, slave_end=0, slave_empty=True, first=True, file_size=FILE
    )
    if offset % FILE == 0:
        assert decision == StartAt(offset)
    else:
        assert isinstance(decision, Refuse) and "file boundary" in decision.reason


def test_a_gap_names_the_missing_bytes_and_the_remedy() -> None:
    decision = decide(4096, 0, 1000)
    assert isinstance(decision, Refuse)
    assert "3096 bytes missing" in decision.reason
    assert "move this slave's store aside" in decision.reason
