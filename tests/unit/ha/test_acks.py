"""The SYNC_MASTER waiting policy: every write answered once, by the right event."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidemq.ha.acks import AckBook, slave_available

operations = st.lists(
    st.tuples(st.sampled_from(["add", "ack", "tick"]), st.integers(0, 400), st.integers(1, 50)),
    max_size=80,
)
"""(kind, number, timeout): add a write at offset `number` waiting `timeout`;
a report of offset `number`; time moving by `number` % 30."""


@given(operations)
def test_each_write_is_answered_once_and_rightly(ops: list[tuple[str, int, int]]) -> None:
    """Against a plain model: a write is acknowledged iff some report at or past
    its offset came before its deadline, expired iff none did; never both, never twice."""
    book: AckBook[int] = AckBook()
    now = 0
    pending: dict[int, tuple[int, int]] = {}  # token -> (offset, deadline)
    best = 0
    answered: dict[int, str] = {}
    for token, (kind, number, timeout) in enumerate(ops):
        if kind == "add":
            if book.add(number, now + timeout, token):
                assert number > best
                pending[token] = (number, now + timeout)
            else:
                assert number <= best
                answered[token] = "at once"
            got: list[int] = []
        elif kind == "ack":
            best = max(best, number)
            got = book.acknowledge(number)
            assert sorted(got) == sorted(t for t, (o, _) in pending.items() if o <= best)
        else:
            now += number % 30
            got = book.expire(now)
            assert sorted(got) == sorted(t for t, (_, d) in pending.items() if d <= now)
        for t in got:
            assert t not in answered
            answered[t] = kind
            del pending[t]
        assert all(offset > best for offset, _ in pending.values())
        assert len(book) == len(pending)
        assert book.acked == best
        deadlines = [deadline for _, deadline in pending.values()]
        assert book.next_deadline() == (min(deadlines) if deadlines else None)
    assert sorted(book.drain()) == sorted(pending)
    assert len(book) == 0 and book.next_deadline() is None


def test_one_report_answers_a_whole_backlog_in_offset_order() -> None:
    book: AckBook[str] = AckBook()
    for offset in (300, 100, 200):
        book.add(offset, 10.0, f"w{offset}")
    assert book.acknowledge(250) == ["w100", "w200"]
    assert book.acknowledge(120) == []  # reports only move forward
    assert book.acked == 250
    assert book.acknowledge(300) == ["w300"]


def test_heaps_stay_small_when_acks_come_before_deadlines() -> None:
    book: AckBook[int] = AckBook()
    for i in range(10_000):
        book.add(i + 1, 100.0 + i, i)
        assert book.acknowledge(i + 1) == [i]
    assert len(book) == 0
    assert len(book._by_deadline) <= 64  # answered entries are dropped as they pile up


@given(
    st.integers(0, 3),
    st.integers(0, 10_000),
    st.integers(0, 10_000),
    st.integers(1, 5_000),
)
def test_a_slave_is_waited_for_only_when_reporting_and_close(
    slaves: int, end: int, acked: int, gap: int
) -> None:
    available = slave_available(slaves, end, acked, gap)
    assert available == (slaves > 0 and end - acked < gap)
