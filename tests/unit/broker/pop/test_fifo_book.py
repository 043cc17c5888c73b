"""FIFO order info (seed 004): delta encoding, the commit bitmap, blocking
within the invisible time, Java's consumed-count rule, acks of an earlier
delivery (stale: nothing marked), a change of invisible time that keeps the
pop time, persistence."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tidemq.broker.pop.fifo_book import (
    NOT_DONE,
    NOT_IN_BATCH,
    STALE,
    FifoBook,
    delta_decode,
    delta_encode,
)
from tidemq.common.clock import ManualClock

batches = st.lists(st.integers(0, 10**12), min_size=1, max_size=32, unique=True).map(sorted)


@given(batches)
def test_delta_round_trip(offsets: list[int]) -> None:
    encoded = delta_encode(offsets)
    assert encoded[0] == offsets[0]
    assert delta_decode(encoded) == offsets


@given(batches, st.randoms())
def test_last_ack_commits_the_batch(offsets: list[int], rnd: object) -> None:
    clock = ManualClock()
    book = FifoBook(Path("/nonexistent/consumerOrderInfo.json"), clock)
    popped = clock.now_ms()
    assert book.update("T", "G", 0, offsets, popped, 30_000) == 0
    order = list(offsets)
    rnd.shuffle(order)  # type: ignore[attr-defined]
    for i, offset in enumerate(order):
        assert book.check_block("T", "G", 0)
        assert book.commit_and_next("T", "G", 0, offset, popped - 1) == STALE
        result = book.commit_and_next("T", "G", 0, offset, popped)
        if i < len(order) - 1:
            assert result == NOT_DONE
        else:
            assert result == max(offsets) + 1
    assert not book.check_block("T", "G", 0)
    assert book.commit_and_next("T", "G", 0, max(offsets) + 10**13, popped) == NOT_IN_BATCH


def test_block_ends_with_the_invisible_time_and_count_rises_on_redelivery() -> None:
    clock = ManualClock()
    book = FifoBook(Path("/nonexistent/x.json"), clock)
    assert book.update("T", "G", 1, [5, 6, 9], clock.now_ms(), 1000) == 0
    assert book.check_block("T", "G", 1)
    assert not book.check_block("T", "G", 0) and not book.check_block("T", "H", 1)
    clock.advance(1.0)
    assert not book.check_block("T", "G", 1)
    assert book.update("T", "G", 1, [5, 6, 9], clock.now_ms(), 1000) == 1
    assert book.update("T", "G", 1, [5, 6, 9], clock.now_ms(), 1000) == 2
    assert book.update("T", "G", 1, [5, 6], clock.now_ms(), 1000) == 0  # batch changed
    assert book.update("T", "G", 1, [7], clock.now_ms(), 1000) == 0
    popped = clock.now_ms()
    clock.advance(0.5)
    assert book.change_invisible("T", "G", 1, 7, clock.now_ms(), 5000)
    info = book.get("T", "G", 1)
    assert info is not None and (info.pop_ms, info.invisible_ms) == (popped, 5500)
    clock.advance(2.0)
    assert book.check_block("T", "G", 1)
    clock.advance(3.0)
    assert not book.check_block("T", "G", 1)
    # the handles of that delivery still ack it; a redelivery's pop time is new
    assert book.commit_and_next("T", "G", 1, 7, popped) == 8
    assert not book.change_invisible("T", "G", 1, 99, clock.now_ms(), 5000)


def test_persist_and_load(tmp_path: Path) -> None:
    clock = ManualClock()
    path = tmp_path / "config" / "consumerOrderInfo.json"
    book = FifoBook(path, clock)
    popped = clock.now_ms()
    book.update("T", "G", 0, [3, 4], popped, 60_000)
    book.commit_and_next("T", "G", 0, 3, popped)
    book.persist()
    again = FifoBook(path, clock)
    again.load()
    assert again.check_block("T", "G", 0)
    assert again.is_acked("T", "G", 0, 3) and not again.is_acked("T", "G", 0, 4)
    assert again.commit_and_next("T", "G", 0, 4, popped) == 5
    assert '"T@G"' in path.read_text()


def test_corrupt_file_starts_empty(tmp_path: Path) -> None:
    path = tmp_path / "consumerOrderInfo.json"
    path.write_text("{not json")
    book = FifoBook(path, ManualClock())
    book.load()
    assert not book.check_block("T", "G", 0)
