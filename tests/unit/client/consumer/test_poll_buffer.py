"""PollBuffer: a model check of its rules (order, pause, seek, revoke, the
consumed log) and threads racing takes against revokes and seeks."""

from __future__ import annotations

import itertools
import threading
import time

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tidemq.client.consumer.poll_buffer import PollBuffer, PolledBatch, QueueGate
from tidemq.common.message import MessageExt, MessageQueue
from tidemq.testing.waiting import HANG_GUARD_S

QUEUES = [MessageQueue("T", "b", i) for i in range(3)]


def batch(
    mq: MessageQueue, gate: QueueGate, number: int, generation: int | None = None
) -> PolledBatch:
    """A one-message batch whose offset is `number` (unique per test)."""
    message = MessageExt(topic=mq.topic, queue_id=mq.queue_id, queue_offset=number)
    used = gate.generation if generation is None else generation
    return PolledBatch(mq, gate, used, [message], number + 1, 1)


class BufferModel(RuleBasedStateMachine):
    """The buffer against a plain list: the ready batches in order, each queue's
    held list, generation and revoked flag. Every take must be exactly the
    model's next batch, so order, purges and pauses are all checked."""

    def __init__(self) -> None:
        super().__init__()
        self.wakes = 0
        self.buffer = PollBuffer(on_consumed=self.woken)
        self.gates = {mq: QueueGate() for mq in QUEUES}
        self.ready: list[PolledBatch] = []
        self.held: dict[MessageQueue, list[PolledBatch]] = {mq: [] for mq in QUEUES}
        self.paused: set[MessageQueue] = set()
        self.revoked: set[MessageQueue] = set()
        self.log: list[PolledBatch] = []  # taken, not drained yet
        self.numbers = itertools.count()

    def woken(self) -> None:
        self.wakes += 1

    @rule(q=st.sampled_from(QUEUES), stale=st.booleans())
    def offer(self, q: MessageQueue, stale: bool) -> None:
        gate = self.gates[q]
        if stale and gate.generation == 0:
            stale = False
        made = batch(q, gate, next(self.numbers), gate.generation - 1 if stale else None)
        accepted = self.buffer.offer(made)
        assert accepted == (not stale and q not in self.revoked)
        if not accepted:
            return
        if q in self.paused:
            self.held[q].append(made)
        else:
            self.ready.append(made)

    @rule(q=st.sampled_from(QUEUES))
    def pause(self, q: MessageQueue) -> None:
        self.buffer.pause(self.gates[q])
        if q in self.paused or q in self.revoked:
            return
        self.paused.add(q)
        self.held[q] = [b for b in self.ready if b.mq == q]
        self.ready = [b for b in self.ready if b.mq != q]

    @rule(q=st.sampled_from(QUEUES))
    def resume(self, q: MessageQueue) -> None:
        self.buffer.resume(self.gates[q])
        if q not in self.paused:
            return
        self.paused.discard(q)
        self.ready += self.held[q]
        self.held[q] = []

    @rule(q=st.sampled_from(QUEUES))
    def reposition(self, q: MessageQueue) -> None:
        before = self.gates[q].generation
        assert self.buffer.reposition(self.gates[q]) == before + 1
        self.held[q] = []
        self.ready = [b for b in self.ready if b.mq != q]

    @rule(q=st.sampled_from(QUEUES))
    def revoke(self, q: MessageQueue) -> None:
        self.buffer.revoke(self.gates[q])
        self.revoked.add(q)
        self.held[q] = []
        self.ready = [b for b in self.ready if b.mq != q]

    @rule()
    def take(self) -> None:
        wakes = self.wakes
        taken = self.buffer.take()
        if not self.ready:
            assert taken is None
            return
        expected = self.ready.pop(0)
        assert taken is expected
        assert self.wakes == wakes + (1 if not self.log else 0)  # once per burst
        self.log.append(expected)

    @rule()
    def drain(self) -> None:
        assert self.buffer.drain_consumed() == self.log
        self.log = []

    @invariant()
    def agrees(self) -> None:
        assert len(self.buffer) == len(self.ready)
        for mq, gate in self.gates.items():
            assert gate.held == self.held[mq]
            assert gate.paused == (mq in self.paused)
            assert gate.revoked == (mq in self.revoked)
        for ready in self.ready:  # only pollable batches are ready
            gate = self.gates[ready.mq]
            assert not gate.paused and not gate.revoked
            assert ready.generation == gate.generation


TestBufferModel = BufferModel.TestCase
TestBufferModel.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)


def test_a_per_queue_order_survives_pause_and_resume() -> None:
    buffer = PollBuffer()
    a, b = QueueGate(), QueueGate()
    qa, qb = QUEUES[0], QUEUES[1]
    for number in range(3):
        buffer.offer(batch(qa, a, number))
        buffer.offer(batch(qb, b, 10 + number))
    first = buffer.take()
    assert first is not None and first.next_offset == 1
    buffer.pause(a)
    buffer.offer(batch(qa, a, 3))  # pulled while paused: held behind the others
    taken = [buffer.take() for _ in range(3)]
    assert [t.next_offset for t in taken if t] == [11, 12, 13]
    assert buffer.take() is None
    buffer.resume(a)
    rest = [buffer.take() for _ in range(3)]
    assert [r.next_offset for r in rest if r] == [2, 3, 4]


def test_a_waiting_take_wakes_for_an_offer_and_for_close() -> None:
    buffer = PollBuffer()
    gate = QueueGate()
    got: list[PolledBatch | None] = []
    waiter = threading.Thread(target=lambda: got.append(buffer.take(HANG_GUARD_S)))
    waiter.start()
    offered = batch(QUEUES[0], gate, 0)
    buffer.offer(offered)
    waiter.join(HANG_GUARD_S)
    assert got == [offered]
    waiter = threading.Thread(target=lambda: got.append(buffer.take(HANG_GUARD_S)))
    waiter.start()
    buffer.close()
    waiter.join(HANG_GUARD_S)
    assert not waiter.is_alive()
    assert got == [offered, None]
    assert buffer.take() is None  # closed: nothing more, not even new offers
    assert not buffer.offer(batch(QUEUES[0], gate, 1))


def test_take_times_out_empty() -> None:
    buffer = PollBuffer()
    started = time.monotonic()
    assert buffer.take(0.05) is None
    assert time.monotonic() - started >= 0.04


def test_takes_racing_revokes_and_seeks_never_return_what_was_invalidated() -> None:
    """Pollers on three threads against a loop thread that offers, seeks and revokes.

    A take that starts after a revoke (or a seek) returned must not return a
    batch of that queue (or of its earlier generation): each poller notes what
    was invalidated before it calls take and checks the batch it gets.
    """
    buffer = PollBuffer()
    rounds = 300
    revoked: set[MessageQueue] = set()
    generations: dict[MessageQueue, int] = {}
    lock = threading.Lock()  # guards the two notes above
    failures: list[str] = []
    taken_count = [0]
    done = threading.Event()
    took = threading.Event()  # set by a poller after each take: the rounds wait for one

    def poller() -> None:
        deadline = time.monotonic() + HANG_GUARD_S
        while not done.is_set() and time.monotonic() < deadline:
            with lock:
                gone = set(revoked)
                floor = dict(generations)
            got = buffer.take(0.001)
            if got is None:
                continue
            taken_count[0] += 1
            took.set()
            if got.mq in gone:
                failures.append(f"{got.mq} polled after its revoke")
            if got.generation < floor.get(got.mq, 0):
                failures.append(f"{got.mq} generation {got.generation} polled after a seek")

    threads = [threading.Thread(target=poller) for _ in range(3)]
    for thread in threads:
        thread.start()
    numbers = itertools.count()
    try:
        for round_number in range(rounds):
            mq = MessageQueue("T", "b", round_number)  # a fresh queue each round
            gate = QueueGate()
            took.clear()
            for _ in range(20):
                buffer.offer(batch(mq, gate, next(numbers)))
            # the pollers take part in every round, however the threads are scheduled
            assert took.wait(HANG_GUARD_S), "no poller took a batch"
            new_generation = buffer.reposition(gate)
            with lock:
                generations[mq] = new_generation
            for _ in range(20):
                buffer.offer(batch(mq, gate, next(numbers)))
            buffer.revoke(gate)
            with lock:
                revoked.add(mq)
            assert not buffer.offer(batch(mq, gate, next(numbers)))
    finally:
        done.set()
        for thread in threads:
            thread.join(HANG_GUARD_S)
    assert not failures, failures[:5]
    assert taken_count[0] > 0  # the pollers did race the offers
    assert len(buffer) == 0  # every queue was revoked: nothing left ready
