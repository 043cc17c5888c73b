"""ProcessQueue: model checks against plain sets (ARCHITECTURE principle 9)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tidemq.client._core.process_queue import (
    MiB,
    ProcessQueue,
    stamp_consume_start,
)
from tidemq.common import properties as props
from tidemq.common.clock import ManualClock
from tidemq.common.message import MessageExt


def msg(offset: int, size: int = 1) -> MessageExt:
    return MessageExt(topic="T", body=b"x" * size, queue_offset=offset)


def body_size(offset: int) -> int:
    return offset % 7 + 1


# -- concurrent mode: put / remove --------------------------------------------


class ConcurrentModel(RuleBasedStateMachine):
    """Puts of increasing offsets (with gaps, as filtered pulls have), removes of
    arbitrary subsets in any order, compared with a set.

    Invariant under test: remove() returns min(held) when something is left,
    max seen + 1 when the queue ran empty, -1 when it was empty on entry; and
    its non-negative results never decrease, because every put is above all
    offsets seen so far, so min(held) only grows.
    """

    def __init__(self) -> None:
        super().__init__()
        self.pq = ProcessQueue(ManualClock())
        self.held: set[int] = set()
        self.max_seen = -1
        self.next = 0
        self.last_commit = -1

    @rule(
        n=st.integers(1, 8),
        gaps=st.lists(st.integers(0, 3), min_size=8, max_size=8),
        dup=st.booleans(),
    )
    def put(self, n: int, gaps: list[int], dup: bool) -> None:
        offsets = []
        for i in range(n):
            self.next += gaps[i]
            offsets.append(self.next)
            self.next += 1
        batch = [msg(o, body_size(o)) for o in offsets]
        if dup and self.held:
            batch.insert(0, msg(min(self.held), 999))  # already held: ignored
        self.pq.put(batch)
        self.held.update(offsets)
        self.max_seen = max(self.max_seen, *offsets)

    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        pool = [*sorted(self.held), self.next + 5]  # plus one never put
        chosen = data.draw(st.lists(st.sampled_from(pool), unique=True, max_size=len(pool)))
        was_empty = not self.held
        result = self.pq.remove([msg(o) for o in chosen])
        self.held.difference_update(chosen)
        if was_empty:
            assert result == -1
            return
        expected = min(self.held) if self.held else self.max_seen + 1
        assert result == expected
        assert result >= self.last_commit
        self.last_commit = result

    @invariant()
    def counters_agree(self) -> None:
        assert self.pq.count == len(self.held) == len(self.pq)
        assert self.pq.size_bytes == sum(body_size(o) for o in self.held)
        assert self.pq.span == (max(self.held) - min(self.held) if self.held else 0)
        assert self.pq.max_offset == self.max_seen
        assert self.pq.min_offset == (min(self.held) if self.held else None)


TestConcurrentModel = ConcurrentModel.TestCase
TestConcurrentModel.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)


@given(st.permutations(list(range(20))))
def test_commit_offset_never_decreases_whatever_the_remove_order(order: list[int]) -> None:
    pq = ProcessQueue(ManualClock())
    pq.put([msg(o) for o in range(20)])
    commits = [pq.remove([msg(o)]) for o in order]
    assert commits == sorted(commits)
    assert commits[-1] == 20
    assert pq.remove([msg(3)]) == -1  # empty on entry: nothing to commit


def test_remove_before_any_put_and_after_clear() -> None:
    pq = ProcessQueue(ManualClock())
    assert pq.remove([msg(0)]) == -1
    pq.put([msg(5), msg(6)])
    pq.clear()
    assert pq.remove([msg(5)]) == -1
    assert (pq.count, pq.size_bytes, pq.max_offset) == (0, 0, -1)


def test_put_tells_when_to_dispatch() -> None:
    pq = ProcessQueue(ManualClock())
    assert pq.put([]) is False
    assert pq.put([msg(0)]) is True
    assert pq.put([msg(1)]) is False  # a task is already marked running
    assert [m.queue_offset for m in pq.take(10)] == [0, 1]
    assert pq.take(10) == []  # the task finds nothing: mark cleared
    assert pq.put([msg(2)]) is True


def test_out_of_order_put_is_sorted() -> None:
    pq = ProcessQueue(ManualClock())
    pq.put([msg(10), msg(3), msg(7)])
    assert pq.min_offset == 3
    assert pq.span == 7
    assert pq.remove([msg(3)]) == 7


# -- flow control ----------------------------------------------------------------


def test_over_limits_count_size_span() -> None:
    pq = ProcessQueue(ManualClock())
    pq.put([msg(o) for o in range(1000)])
    assert pq.over_limits() is None  # limits are exclusive
    pq.put([msg(1000)])
    reason = pq.over_limits()
    assert reason is not None and "count 1001 > 1000" in reason

    big = ProcessQueue(ManualClock())
    big.put([msg(0, 60 * MiB), msg(1, 40 * MiB)])
    assert big.over_limits() is None
    big.put([msg(2, 1)])
    assert big.over_limits() is None  # Java compares whole MiB: 100 MiB + 1 B is 100
    big.put([msg(3, MiB - 1)])
    reason = big.over_limits()
    assert reason is not None and "size 101 MiB > 100 MiB" in reason
    assert big.over_limits(max_size_mib=101) is None

    wide = ProcessQueue(ManualClock())
    wide.put([msg(0), msg(2000)])
    assert wide.over_limits() is None
    wide.put([msg(2001)])
    reason = wide.over_limits()
    assert reason is not None and "span 2001 > 2000" in reason
    assert wide.over_limits(max_span=None) is None  # orderly: no span limit


# -- time-based expiry ----------------------------------------------------------


def test_pull_and_lock_expiry() -> None:
    clock = ManualClock()
    pq = ProcessQueue(clock)
    clock.advance(120)
    assert not pq.is_pull_expired()
    clock.advance(0.001)
    assert pq.is_pull_expired()
    pq.mark_pulled()
    assert not pq.is_pull_expired()

    locked_at_start = pq.locked
    assert not locked_at_start
    pq.mark_locked()
    assert pq.locked and pq.last_lock_at == clock.monotonic()
    clock.advance(30)
    assert not pq.is_lock_expired()
    clock.advance(0.5)
    assert pq.is_lock_expired()
    pq.mark_unlocked()
    assert not pq.locked


def test_expired_messages_scan_the_head_only() -> None:
    clock = ManualClock()
    pq = ProcessQueue(clock)
    msgs = [msg(o) for o in range(20)]
    pq.put(msgs)
    stamp_consume_start(msgs[:3], clock.now_ms())
    clock.advance(60)
    stamp_consume_start(msgs[3:], clock.now_ms())
    clock.advance(15 * 60 - 60)
    assert pq.expired_messages() == []  # exactly 15 min: not yet
    clock.advance(1)
    assert [m.queue_offset for m in pq.expired_messages()] == [0, 1, 2]
    clock.advance(60)
    assert len(pq.expired_messages()) == 16  # Java's per-scan limit
    pq.remove(msgs[:1])
    msgs[1].properties.pop(props.CONSUME_START_TIME)  # not started: the scan stops
    assert pq.expired_messages() == []


# -- orderly mode ------------------------------------------------------------------


class OrderlyModel(RuleBasedStateMachine):
    """take / commit / make_available_again never lose a message and hand
    messages out in offset order; a failed batch comes back first."""

    def __init__(self) -> None:
        super().__init__()
        self.pq = ProcessQueue(ManualClock())
        self.held: set[int] = set()
        self.consuming: list[MessageExt] = []
        self.committed: set[int] = set()
        self.all: set[int] = set()
        self.next = 0
        self.last_commit = -1
        self.retries: dict[int, int] = {}

    @rule(n=st.integers(1, 5), gap=st.integers(0, 2))
    def put(self, n: int, gap: int) -> None:
        self.next += gap
        offsets = list(range(self.next, self.next + n))
        self.next += n
        self.pq.put([msg(o, body_size(o)) for o in offsets])
        self.held.update(offsets)
        self.all.update(offsets)

    @precondition(lambda self: not self.consuming)
    @rule(k=st.integers(1, 4))
    def take(self, k: int) -> None:
        batch = self.pq.take(k)
        offsets = [m.queue_offset for m in batch]
        assert offsets == sorted(self.held)[:k]
        for m in batch:
            assert m.reconsume_times == self.retries.get(m.queue_offset, 0)
        self.held.difference_update(offsets)
        self.consuming = batch

    @rule()
    def commit(self) -> None:
        result = self.pq.commit()
        if not self.consuming:
            assert result == -1
            return
        offsets = {m.queue_offset for m in self.consuming}
        assert result == max(offsets) + 1
        assert all(o >= result for o in self.held)  # nothing older is left behind
        assert result > self.last_commit
        self.last_commit = result
        self.committed.update(offsets)
        self.consuming = []

    @precondition(lambda self: bool(self.consuming))
    @rule()
    def fail_batch(self) -> None:
        self.pq.make_available_again(self.consuming)
        for m in self.consuming:
            assert m.reconsume_times == self.retries.get(m.queue_offset, 0)  # originals untouched
            self.retries[m.queue_offset] = self.retries.get(m.queue_offset, 0) + 1
            self.held.add(m.queue_offset)
        self.consuming = []

    @invariant()
    def nothing_lost(self) -> None:
        consuming = {m.queue_offset for m in self.consuming}
        assert self.held | consuming | self.committed == self.all
        assert not (self.held & consuming) and not (self.held & self.committed)
        assert len(self.pq) == len(self.held)
        assert self.pq.count == len(self.held) + len(consuming)
        assert self.pq.size_bytes == sum(body_size(o) for o in self.held | consuming)
        assert self.pq.has_consuming() == bool(consuming)


TestOrderlyModel = OrderlyModel.TestCase
TestOrderlyModel.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)


def test_make_available_again_copies_and_counts_a_retry() -> None:
    pq = ProcessQueue(ManualClock())
    original = msg(0)
    original.properties["k"] = "v"
    pq.put([original, msg(1)])
    batch = pq.take(1)
    pq.make_available_again(batch)
    pq.make_available_again([msg(1)])  # not in the consuming batch: ignored
    again = pq.take(2)
    assert [m.queue_offset for m in again] == [0, 1]
    assert again[0] is not original and again[0].reconsume_times == 1
    assert original.reconsume_times == 0
    again[0].properties["k"] = "changed"
    assert original.properties["k"] == "v"
    assert again[1].reconsume_times == 0
    assert pq.commit() == 2
    assert pq.count == 0


def test_rollback_puts_the_batch_back_unchanged() -> None:
    pq = ProcessQueue(ManualClock())
    pq.put([msg(0), msg(1), msg(2)])
    first = pq.take(2)
    pq.put([msg(1, 50)])  # an offset being consumed is not taken twice
    pq.rollback()
    assert not pq.has_consuming()
    again = pq.take(3)
    assert again[:2] == first and [m.reconsume_times for m in again] == [0, 0, 0]
    assert again[1].body == b"x"


def test_take_rejects_a_bad_batch_size() -> None:
    with pytest.raises(ValueError):
        ProcessQueue(ManualClock()).take(0)


# -- the list fast paths (a pulled run put whole, a polled head removed whole) --


def _state(queue: ProcessQueue) -> tuple[object, ...]:
    return (
        queue.count,
        queue.size_bytes,
        queue.span,
        queue.max_offset,
        queue.min_offset,
        len(queue),
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["put", "remove_head", "remove_some"]),
            st.lists(st.integers(0, 60), max_size=12),
        ),
        max_size=25,
    )
)
def test_list_fast_paths_equal_the_message_by_message_paths(
    operations: list[tuple[str, list[int]]],
) -> None:
    """The same operations as lists (which may take the fast paths) and as
    tuples (which never do) leave equal queues and return equal answers."""
    fast, slow = ProcessQueue(ManualClock()), ProcessQueue(ManualClock())
    made: dict[int, MessageExt] = {}

    def message(offset: int) -> MessageExt:
        return made.setdefault(offset, msg(offset, body_size(offset)))

    for action, offsets in operations:
        if action == "put":
            batch = [message(o) for o in offsets]
            assert fast.put(batch) == slow.put(tuple(batch))
        else:
            held = sorted(fast._msgs)
            chosen = held[: len(offsets)] if action == "remove_head" else offsets
            batch = [message(o) for o in chosen]
            assert fast.remove(batch) == slow.remove(tuple(batch))
        assert _state(fast) == _state(slow)
