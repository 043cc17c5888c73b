"""The epoch file and the consistent point (EpochFileCache.findConsistentPoint) as properties."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.ha.epochs import EpochEntry, EpochFile, consistent_point, epoch_at


def entries_of(segments: list[tuple[int, int]]) -> tuple[list[EpochEntry], int, list[int]]:
    """(epoch, length) segments -> epoch entries, the log end, each byte's epoch."""
    entries: list[EpochEntry] = []
    labels: list[int] = []
    for epoch, length in segments:
        if length == 0:
            continue
        entries.append(EpochEntry(epoch, len(labels)))
        labels += [epoch] * length
    return entries, len(labels), labels


@given(
    shared=st.lists(st.integers(1, 5), max_size=4),
    cut_a=st.integers(0, 5),
    cut_b=st.integers(0, 5),
    own_a=st.lists(st.integers(1, 5), max_size=3),
    own_b=st.lists(st.integers(1, 5), max_size=3),
)
def test_the_consistent_point_is_where_the_two_logs_part(
    shared: list[int], cut_a: int, cut_b: int, own_a: list[int], own_b: list[int]
) -> None:
    """Two replicas share a history of epochs 1..n (each may miss the tail of
    the last shared one); after it each was master in epochs of its own. The
    point is exactly where their bytes stop being the same."""
    base = [(i + 1, n) for i, n in enumerate(shared)]
    n = len(base)

    def history(cut: int, own: list[int], first_epoch: int) -> list[tuple[int, int]]:
        mine = list(base)
        if mine and own:
            epoch, length = mine[-1]
            mine[-1] = (epoch, max(1, length - cut))  # it missed the tail of the last
        return mine + [(first_epoch + i, length) for i, length in enumerate(own)]

    a_entries, a_end, a_labels = entries_of(history(cut_a, own_a, n + 1))
    b_entries, b_end, b_labels = entries_of(history(cut_b, own_b, n + 1 + len(own_a)))
    common = 0
    while common < min(a_end, b_end) and a_labels[common] == b_labels[common]:
        common += 1
    point = consistent_point(a_entries, a_end, b_entries, b_end)
    if not a_entries or not b_entries or a_entries[0] != b_entries[0]:
        assert point is None or point == common
    else:
        assert point == common
    assert consistent_point(b_entries, b_end, a_entries, a_end) == point


def test_no_common_epoch_means_no_point() -> None:
    assert consistent_point([EpochEntry(1, 0)], 10, [EpochEntry(2, 0)], 10) is None


def test_epoch_at_says_the_newest_epoch_with_bytes() -> None:
    entries = [EpochEntry(1, 0), EpochEntry(3, 100)]
    assert epoch_at(entries, 50) == 1
    assert epoch_at(entries, 100) == 1
    assert epoch_at(entries, 101) == 3
    assert epoch_at([EpochEntry(1, 0)], 0) == 1
    assert epoch_at([], 10) == 0


def test_the_file_keeps_its_entries_and_refuses_going_back(tmp_path: Path) -> None:
    path = tmp_path / "epochFileCheckpoint"
    epochs = EpochFile(path)
    assert epochs.entries == [] and epochs.last_epoch == 0
    assert epochs.append(1, 0) and epochs.append(2, 500)
    assert not epochs.append(2, 600) and not epochs.append(3, 400)
    assert epochs.append(2, 500)  # a repeat is a no-op
    assert path.read_text() == "1-0\n2-500\n"
    assert EpochFile(path).entries == [EpochEntry(1, 0), EpochEntry(2, 500)]
    epochs.truncate_from(500)
    assert EpochFile(path).entries == [EpochEntry(1, 0)]
    assert epochs.append(4, 0) is True and epochs.entries == [EpochEntry(4, 0)]
    path.write_text("1-0\nnonsense\n")
    with pytest.raises(ValueError, match="not an epoch-startOffset line"):
        EpochFile(path)
