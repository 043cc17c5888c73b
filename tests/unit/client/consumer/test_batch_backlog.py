"""BatchBacklog: its counters against a plain list of the buffered messages,
and its flow-control answers against a ProcessQueue holding the same ones."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tidemq.client._core.process_queue import ProcessQueue
from tidemq.client.consumer.batch_backlog import BatchBacklog
from tidemq.client.consumer.poll_buffer import PolledBatch, QueueGate
from tidemq.common.clock import ManualClock
from tidemq.common.message import MessageExt, MessageQueue

MQ = MessageQueue("T", "b", 0)


def body_size(offset: int) -> int:
    return offset % 5 + 1


def make_batch(offsets: list[int]) -> PolledBatch:
    messages = [MessageExt(topic="T", body=b"x" * body_size(o), queue_offset=o) for o in offsets]
    size = sum(len(m.body) for m in messages)
    return PolledBatch(MQ, QueueGate(), 0, messages, offsets[-1] + 1, size)


class BacklogModel(RuleBasedStateMachine):
    """Adds of ascending runs (with gaps, as filtered pulls have), settles in
    order and now and then out of order, clears; compared with a list."""

    def __init__(self) -> None:
        super().__init__()
        self.backlog = BatchBacklog()
        self.batches: list[PolledBatch] = []
        self.next = 0
        self.max_seen = -1

    @rule(n=st.integers(1, 6), gap=st.integers(0, 3))
    def add(self, n: int, gap: int) -> None:
        self.next += gap
        made = make_batch(list(range(self.next, self.next + n)))
        self.next += n
        self.backlog.add(made)
        self.batches.append(made)
        self.max_seen = self.next - 1

    @rule(data=st.data())
    def settle(self, data: st.DataObject) -> None:
        if not self.batches:
            assert not self.backlog.settle(make_batch([0]))
            return
        in_order = data.draw(st.booleans())
        index = 0 if in_order else data.draw(st.integers(0, len(self.batches) - 1))
        chosen = self.batches.pop(index)
        assert self.backlog.settle(chosen)
        assert not self.backlog.settle(chosen)  # once only

    @rule()
    def clear(self) -> None:
        self.backlog.clear()
        self.batches = []
        self.max_seen = -1

    @invariant()
    def counters_agree(self) -> None:
        offsets = [m.queue_offset for b in self.batches for m in b.messages]
        assert self.backlog.count == len(offsets)
        assert len(self.backlog) == len(self.batches)
        assert self.backlog.size_bytes == sum(body_size(o) for o in offsets)
        assert self.backlog.min_offset == (offsets[0] if offsets else None)
        assert self.backlog.span == (offsets[-1] - offsets[0] if offsets else 0)
        assert self.backlog.max_offset == self.max_seen


TestBacklogModel = BacklogModel.TestCase
TestBacklogModel.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)


@given(
    runs=st.lists(st.integers(1, 400), min_size=1, max_size=8),
    limits=st.tuples(st.integers(1, 1500), st.integers(0, 2), st.integers(1, 2500)),
)
def test_flow_control_answers_as_a_process_queue_would(
    runs: list[int], limits: tuple[int, int, int]
) -> None:
    backlog = BatchBacklog()
    pq = ProcessQueue(ManualClock())
    offsets = itertools.count()
    for n in runs:
        made = make_batch([next(offsets) for _ in range(n)])
        backlog.add(made)
        pq.put(made.messages)
    assert backlog.over_limits(*limits) == pq.over_limits(*limits)
    assert backlog.over_limits() == pq.over_limits()


def test_the_size_limit_counts_whole_mib_of_bodies() -> None:
    backlog = BatchBacklog()
    body = b"x" * (1024 * 1024 + 1)
    messages = [MessageExt(topic="T", body=body, queue_offset=o) for o in range(2)]
    backlog.add(PolledBatch(MQ, QueueGate(), 0, messages[:1], 1, len(body)))
    assert backlog.over_limits(max_size_mib=1) is None  # 1 MiB + 1 byte: not over 1 MiB
    backlog.add(PolledBatch(MQ, QueueGate(), 0, messages[1:], 2, len(body)))
    reason = backlog.over_limits(max_size_mib=1)
    assert reason is not None and "2 MiB > 1 MiB" in reason and "offsets 0..1" in reason
