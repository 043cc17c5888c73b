"""Pulled batches waiting for ``poll``: offered on the consumer's event loop,
taken by any thread without a round trip to that loop.

Why: a blocking ``poll`` that runs on the loop thread pays a hand-off to the
loop and back on every call (tens of microseconds bare, hundreds under load)
for what is a pop from a queue; the lite pull consumer spent most of its time
there. Here the application's thread takes the batch itself, under one lock
shared with the loop (Java's ``consumeRequestCache`` is a blocking queue for
the same reason).

The invariant the lock keeps: the ready queue holds only batches that may be
returned now, that is of a queue that is not revoked, of its current
generation (no seek since the batch was pulled) and not paused. Each change
to those (:meth:`revoke`, :meth:`reposition`, :meth:`pause`) is made under
the lock and purges the batches it invalidates, so once it returns no
:meth:`take` returns such a batch. A queue's batches come out in the order
they were offered: a paused queue's batches wait in its gate, in order, and
go back behind the ready ones when it resumes.

A taken batch is also appended to the consumed log. The loop drains it
(:meth:`drain_consumed`) and does the bookkeeping (ProcessQueue counters,
consumed offsets) on its own thread, later: a committed position may lag
what ``poll`` returned, never lead it. ``on_consumed`` is called, outside the
lock, when the log turns non-empty, so the loop is told once per burst of
polls, not once per poll.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from tidemq.common.message import MessageExt, MessageQueue

__all__ = ["PollBuffer", "PolledBatch", "QueueGate"]


@dataclass(slots=True, eq=False)
class QueueGate:
    """Whether one held queue's batches may be polled; changed only under the
    buffer's lock (through its methods), read anywhere."""

    generation: int = 0
    """Bumped by :meth:`PollBuffer.reposition` (a seek): older batches are stale."""
    revoked: bool = False
    """The queue was released (rebalance, assign, shutdown): nothing more of it is polled."""
    paused: bool = False
    held: list[PolledBatch] = field(default_factory=list)
    """Batches kept back while paused, oldest first; empty while not paused."""


@dataclass(slots=True, eq=False)
class PolledBatch:
    """One pull's messages of one queue, in offset order."""

    mq: MessageQueue
    gate: QueueGate
    generation: int
    """The gate's generation when pulled."""
    messages: list[MessageExt]
    next_offset: int
    """The pull's next begin offset: once this batch is polled, everything of its
    queue below it has been returned (or filtered out by the broker)."""
    size_bytes: int = 0
    """Body bytes of the messages (for flow control)."""


def _nothing() -> None:
    pass


class PollBuffer:
    """The ready batches of every held queue; see the module docstring."""

    def __init__(self, on_consumed: Callable[[], None] = _nothing) -> None:
        self._lock = threading.Lock()
        self._nonempty = threading.Condition(self._lock)
        self._ready: deque[PolledBatch] = deque()
        self._consumed: list[PolledBatch] = []
        self._closed = False
        self._on_consumed = on_consumed

    def __len__(self) -> int:
        """Batches ready to be taken now."""
        return len(self._ready)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- the loop's side ---------------------------------------------------------------

    def offer(self, batch: PolledBatch) -> bool:
        """Add a pulled batch; False (dropped) when its queue is revoked or it is stale."""
        gate = batch.gate
        with self._lock:
            if self._closed or gate.revoked or batch.generation != gate.generation:
                return False
            if gate.paused:
                gate.held.append(batch)
            else:
                self._ready.append(batch)
                self._nonempty.notify()
            return True

    def pause(self, gate: QueueGate) -> None:
        """Hold back the queue's batches (ready ones too) until :meth:`resume`."""
        with self._lock:
            if gate.paused or gate.revoked:
                return
            gate.paused = True
            gate.held.extend(b for b in self._ready if b.gate is gate)
            self._purge_ready(gate)

    def resume(self, gate: QueueGate) -> None:
        """Give the held batches back, behind the ready ones, in their order."""
        with self._lock:
            if not gate.paused:
                return
            gate.paused = False
            if gate.held:
                self._ready.extend(gate.held)
                gate.held.clear()
                self._nonempty.notify_all()

    def reposition(self, gate: QueueGate) -> int:
        """A seek: discard the queue's batches; returns the new generation."""
        with self._lock:
            gate.generation += 1
            gate.held.clear()
            self._purge_ready(gate)
            return gate.generation

    def revoke(self, gate: QueueGate) -> None:
        """The queue is released: discard its batches and refuse later ones."""
        with self._lock:
            gate.revoked = True
            gate.held.clear()
            self._purge_ready(gate)

    def drain_consumed(self) -> list[PolledBatch]:
        """The batches taken since the last drain, in the order they were taken."""
        with self._lock:
            taken, self._consumed = self._consumed, []
            return taken

    def close(self) -> None:
        """Shutting down: forget every batch; waiting and later takes get None."""
        with self._lock:
            self._closed = True
            self._ready.clear()
            self._nonempty.notify_all()

    def _purge_ready(self, gate: QueueGate) -> None:
        if any(b.gate is gate for b in self._ready):
            self._ready = deque(b for b in self._ready if b.gate is not gate)

    # -- the pollers' side (any thread) ------------------------------------------------

    def take(self, timeout_s: float = 0.0) -> PolledBatch | None:
        """The oldest ready batch, waiting up to `timeout_s` for one; None at the
        timeout or once closed. The batch is logged as consumed."""
        with self._lock:
            if not self._ready and timeout_s > 0 and not self._closed:
                self._nonempty.wait_for(self._ready_or_closed, timeout_s)
            if self._closed or not self._ready:
                return None
            batch = self._ready.popleft()
            first = not self._consumed
            self._consumed.append(batch)
        if first:
            self._on_consumed()
        return batch

    def _ready_or_closed(self) -> bool:
        return bool(self._ready) or self._closed
