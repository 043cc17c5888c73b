"""Writes waiting for a slave's acknowledgement: the SYNC_MASTER policy, pure.

A write of a SYNC_MASTER is answered once a slave has reported an offset at
or past the write's end (RocketMQ's GroupTransferService: push2SlaveMaxOffset
>= the request's nextOffset), or when its deadline passes (then
FLUSH_SLAVE_TIMEOUT). Reports only move forward: the book keeps the highest
offset any slave reported (push2SlaveMaxOffset is a max too), so a slave that
reconnects lower does not take acknowledgements back.

One entry per waiting write, and a write is a whole group of sends (the store
groups concurrent sends into one append, see `tidemq.store.group_commit`):
many sends wait on one entry, and one report answers every entry it covers.
Entries sit in two heaps (by offset, by deadline) with lazy deletion, so a
report or an expiry costs O(log n) per entry it answers. No clock, no loop:
the caller says what time it is (`tidemq.ha.waits` runs it on the event loop).
"""

from __future__ import annotations

import heapq
from typing import Generic, TypeVar

T = TypeVar("T")

__all__ = ["AckBook", "slave_available"]

_COMPACT_SLACK = 64


def slave_available(reporting_slaves: int, write_end: int, acked: int, max_gap: int) -> bool:
    """Whether a SYNC_MASTER should wait for its slaves at all: some slave is
    connected and reporting, and the one furthest ahead is less than `max_gap`
    bytes behind the write (HAService.isSlaveOK; haSlaveFallbehindMax in 4.x,
    haMaxGapNotInSync in 5.x). Otherwise the write is answered
    SLAVE_NOT_AVAILABLE at once."""
    return reporting_slaves > 0 and write_end - acked < max_gap


class AckBook(Generic[T]):
    """Tokens (futures, say) waiting for `acked` to reach their offset."""

    __slots__ = ("_by_deadline", "_by_offset", "_seq", "_waiting", "acked")

    def __init__(self, acked: int = 0) -> None:
        self.acked = acked
        """The highest offset a slave has reported."""
        self._by_offset: list[tuple[int, int]] = []
        self._by_deadline: list[tuple[float, int]] = []
        self._waiting: dict[int, T] = {}
        self._seq = 0

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, offset: int, deadline: float, token: T) -> bool:
        """Wait for `offset` until `deadline`; False (nothing kept) when a
        report already covers it."""
        if offset <= self.acked:
            return False
        seq = self._seq
        self._seq = seq + 1
        self._waiting[seq] = token
        heapq.heappush(self._by_offset, (offset, seq))
        heapq.heappush(self._by_deadline, (deadline, seq))
        return True

    def acknowledge(self, offset: int) -> list[T]:
        """A slave reported `offset`: the tokens it answers, lowest offset first."""
        if offset > self.acked:
            self.acked = offset
        answered: list[T] = []
        heap, waiting = self._by_offset, self._waiting
        while heap and heap[0][0] <= self.acked:
            _, seq = heapq.heappop(heap)
            token = waiting.pop(seq, None)
            if token is not None:
                answered.append(token)
        self._compact()
        return answered

    def expire(self, now: float) -> list[T]:
        """The tokens whose deadline is at or before `now`, earliest first."""
        expired: list[T] = []
        heap, waiting = self._by_deadline, self._waiting
        while heap and heap[0][0] <= now:
            _, seq = heapq.heappop(heap)
            token = waiting.pop(seq, None)
            if token is not None:
                expired.append(token)
        self._compact()
        return expired

    def next_deadline(self) -> float | None:
        """When the earliest waiting token expires; None when none waits."""
        heap, waiting = self._by_deadline, self._waiting
        while heap and heap[0][1] not in waiting:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def drain(self) -> list[T]:
        """Every waiting token, the book left empty (the service is stopping)."""
        tokens = [self._waiting[seq] for _, seq in sorted(self._by_offset) if seq in self._waiting]
        self._waiting.clear()
        self._by_offset.clear()
        self._by_deadline.clear()
        return tokens

    def _compact(self) -> None:
        """Drop the entries the other heap answered once they outnumber the live ones."""
        bound = 2 * len(self._waiting) + _COMPACT_SLACK
        waiting = self._waiting
        if len(self._by_offset) > bound:
            self._by_offset = [entry for entry in self._by_offset if entry[1] in waiting]
            heapq.heapify(self._by_offset)
        if len(self._by_deadline) > bound:
            self._by_deadline = [entry for entry in self._by_deadline if entry[1] in waiting]
            heapq.heapify(self._by_deadline)
