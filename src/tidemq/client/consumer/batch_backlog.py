"""What one queue of the lite pull consumer has pulled and not yet seen polled,
counted per batch for flow control (messages, body MiB, offset span).

Why not a ProcessQueue: that one tracks every message (a dict and a sorted
offset list) because a push consumer finishes messages in any order and its
commit offset is the smallest one still held. ``poll`` returns a queue's
batches whole and in pull order, and the consumed position comes from the
batch itself (its pull's next offset), so counting batches is enough: a put
and a settle are O(1) per batch, where the per-message bookkeeping cost about
a tenth of the consumer's CPU.

Used on the consumer's event loop only (no lock).
"""

from __future__ import annotations

from collections import deque

from tidemq.client._core.process_queue import (
    DEFAULT_CONSUME_CONCURRENTLY_MAX_SPAN,
    DEFAULT_PULL_THRESHOLD_FOR_QUEUE,
    DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE_MIB,
    flow_control_reason,
)
from tidemq.client.consumer.poll_buffer import PolledBatch

__all__ = ["BatchBacklog"]


class BatchBacklog:
    """One queue's pulled batches (oldest first) until their polls are settled."""

    def __init__(self) -> None:
        self._batches: deque[PolledBatch] = deque()
        self._count = 0
        self._size = 0
        self._max_seen = -1

    @property
    def count(self) -> int:
        """Messages pulled and not yet settled as polled."""
        return self._count

    @property
    def size_bytes(self) -> int:
        """Their body bytes (what Java's ``pullThresholdSizeForQueue`` limits)."""
        return self._size

    @property
    def min_offset(self) -> int | None:
        """The smallest offset buffered, if any."""
        return self._batches[0].messages[0].queue_offset if self._batches else None

    @property
    def max_offset(self) -> int:
        """The highest offset ever added, -1 before the first."""
        return self._max_seen

    @property
    def span(self) -> int:
        """Highest minus smallest offset buffered (0 when empty)."""
        if not self._batches:
            return 0
        return self._last_offset() - self._batches[0].messages[0].queue_offset

    def __len__(self) -> int:
        """Batches buffered."""
        return len(self._batches)

    def add(self, batch: PolledBatch) -> None:
        """A pulled batch (non-empty, offsets ascending, after every earlier one)."""
        if not batch.messages:
            return
        self._batches.append(batch)
        self._count += len(batch.messages)
        self._size += batch.size_bytes
        self._max_seen = max(self._max_seen, batch.messages[-1].queue_offset)

    def settle(self, batch: PolledBatch) -> bool:
        """`batch` was polled: stop counting it. False when it is not buffered."""
        batches = self._batches
        if batches and batches[0] is batch:
            batches.popleft()  # the usual case: a queue's batches are polled in order
        else:
            for position, held in enumerate(batches):
                if held is batch:
                    del batches[position]
                    break
            else:
                return False
        self._count -= len(batch.messages)
        self._size -= batch.size_bytes
        return True

    def clear(self) -> None:
        """Forget every batch (a seek)."""
        self._batches.clear()
        self._count = 0
        self._size = 0
        self._max_seen = -1

    def over_limits(
        self,
        max_count: int = DEFAULT_PULL_THRESHOLD_FOR_QUEUE,
        max_size_mib: int = DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE_MIB,
        max_span: int = DEFAULT_CONSUME_CONCURRENTLY_MAX_SPAN,
    ) -> str | None:
        """Why the next pull must wait, or None (the ProcessQueue's rules)."""
        return flow_control_reason(
            self._count, self._size, self.span, self._describe, max_count, max_size_mib, max_span
        )

    def _describe(self) -> str:
        low = self.min_offset
        if low is None:
            return "no message held"
        return f"offsets {low}..{self._last_offset()}, {self._count} messages"

    def _last_offset(self) -> int:
        return self._batches[-1].messages[-1].queue_offset
