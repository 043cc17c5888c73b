"""The client-side buffer of one assigned queue (RocketMQ's ProcessQueue).

The pull loop puts pulled messages here; the consume service takes them out;
the offset to commit is derived from what is still held (SPEC §3, protocol
§6.6). Everything here is pure bookkeeping: no I/O, and time comes from an
injected :class:`~tidemq.common.clock.Clock` (monotonic seconds for the
idle/lock deadlines, wall milliseconds for CONSUME_START_TIME).

Thread-safety: none, on purpose. The consumer core runs every ProcessQueue on
one asyncio event loop, so a method call is never interleaved with another;
the listener's own threads (if any) must hand results back to the loop rather
than call in here.

Offsets are held in a dict (offset -> message) plus a sorted list of offsets
kept with :mod:`bisect`; pulls deliver increasing offsets, so a put is an
append, and a remove is a binary search plus a small ``del``.

Semantics follow Java's ``ProcessQueue`` (4.9) with these notes:

* the size counter counts body bytes (Java's ``msgSize`` adds
  ``body.length``; the 100 MiB flow-control limit is about bodies), and the
  size limit is checked in whole MiB as Java does (``msgSize / MiB >
  pullThresholdSizeForQueue``, integer division), so 100 MiB + 1 byte is not
  yet over a 100 MiB limit;
* ``put`` keeps the message already held for an offset (Java replaces the
  value but does not count it again: same counters either way);
* :meth:`remove` returns -1 when nothing was held on entry (Java's rule), so a
  late remove after :meth:`clear` or after the queue ran empty never commits
  past messages that were not consumed.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Callable, Iterable, Sequence

from tidemq.common import properties as props
from tidemq.common.clock import Clock
from tidemq.common.message import MessageExt

MiB = 1024 * 1024

PULL_MAX_IDLE_S = 120.0
"""A queue not pulled for this long is stale (Java ``PULL_MAX_IDLE_TIME``,
``rocketmq.client.pull.pullMaxIdleTime``, 120 s); rebalance drops and re-adds it."""

REBALANCE_LOCK_MAX_LIVE_S = 30.0
"""Client-side life of a broker lock (Java ``REBALANCE_LOCK_MAX_LIVE_TIME``,
``rocketmq.client.rebalance.lockMaxLiveTime``, 30 s); the broker keeps it 60 s
and the client renews every 20 s."""

DEFAULT_PULL_THRESHOLD_FOR_QUEUE = 1000
DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE_MIB = 100
"""Java ``pullThresholdSizeForQueue``: a size in MiB (valid 1..1024)."""
DEFAULT_CONSUME_CONCURRENTLY_MAX_SPAN = 2000
DEFAULT_CONSUME_TIMEOUT_MS = 15 * 60 * 1000
EXPIRED_SCAN_LIMIT = 16
"""Java's ``cleanExpiredMsg`` looks at no more than 16 head messages per scan."""


def stamp_consume_start(messages: Iterable[MessageExt], now_ms: int) -> None:
    """Set CONSUME_START_TIME on messages about to be handed to a concurrent
    listener (Java does so in ``ConsumeRequest.run``); :meth:`ProcessQueue.expired_messages`
    reads it."""
    value = str(now_ms)
    for msg in messages:
        msg.properties[props.CONSUME_START_TIME] = value


def flow_control_reason(
    count: int,
    size_bytes: int,
    span: int,
    held: Callable[[], str],
    max_count: int = DEFAULT_PULL_THRESHOLD_FOR_QUEUE,
    max_size_mib: int = DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE_MIB,
    max_span: int | None = DEFAULT_CONSUME_CONCURRENTLY_MAX_SPAN,
) -> str | None:
    """Why the next pull of a queue buffering `count` messages of `size_bytes`
    body bytes over an offset `span` must wait (flow control), or None to pull now.

    Limits are exclusive (Java pauses when a value is *greater*). The size
    is compared in whole MiB, rounded down, as Java's
    ``cachedMessageSizeInMiB > pullThresholdSizeForQueue`` does. Pass
    ``max_span=None`` for orderly consumption, which has no span limit.
    `held` describes what is buffered, for the reason's text.
    """
    if count > max_count:
        return f"cached message count {count} > {max_count} ({held()})"
    size_mib = size_bytes // MiB
    if size_mib > max_size_mib:
        return f"cached message size {size_mib} MiB > {max_size_mib} MiB ({held()})"
    if max_span is not None and span > max_span:
        return f"offset span {span} > {max_span} ({held()})"
    return None


class ProcessQueue:
    """Buffered messages of one MessageQueue, ordered by queue offset."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._msgs: dict[int, MessageExt] = {}
        self._offsets: list[int] = []  # sorted keys of _msgs
        self._consuming: dict[int, MessageExt] = {}  # orderly: taken, not committed
        self._count = 0  # held + consuming (Java's msgCount)
        self._size = 0  # body bytes of held + consuming (Java's msgSize)
        self._max_seen = -1  # highest offset ever put (Java's queueOffsetMax)
        self._dispatching = False  # Java's `consuming` flag
        self.dropped = False
        """Set when rebalance gives the queue away; pulls and commits stop."""
        self.locked = False
        """Orderly: the broker lock is believed held (see :meth:`is_lock_expired`)."""
        now = clock.monotonic()
        self.last_pull_at = now
        self.last_consume_at = now
        self.last_lock_at = now

    # -- counters ------------------------------------------------------------

    @property
    def count(self) -> int:
        """Messages held, including an orderly batch being consumed."""
        return self._count

    @property
    def size_bytes(self) -> int:
        """Body bytes of the messages counted by :attr:`count`."""
        return self._size

    @property
    def span(self) -> int:
        """max - min offset held (0 when empty; the consuming batch is not held)."""
        return self._offsets[-1] - self._offsets[0] if self._offsets else 0

    @property
    def max_offset(self) -> int:
        """The highest offset ever put, -1 before the first put."""
        return self._max_seen

    @property
    def min_offset(self) -> int | None:
        """The smallest offset held, if any."""
        return self._offsets[0] if self._offsets else None

    def __len__(self) -> int:
        """Messages held and not taken (orderly) — the ones a consumer can still get."""
        return len(self._offsets)

    def has_consuming(self) -> bool:
        """Orderly: a taken batch is waiting for :meth:`commit` or a put-back."""
        return bool(self._consuming)

    # -- put / remove (both modes) ------------------------------------------

    def put(self, messages: Iterable[MessageExt]) -> bool:
        """Buffer pulled messages; offsets already held are ignored.

        Returns True when a consume task should be dispatched: the queue holds
        messages and no task is marked running (Java's ``dispatchToConsume``).
        The mark is set here and cleared when :meth:`take` finds nothing, so an
        orderly consumer gets one task per burst. Concurrent consumers ignore
        the result (Java submits every pulled batch).
        """
        if isinstance(messages, list) and self._append_run(messages):
            added = len(messages)
        else:
            added = self._put_each(messages)
        self._count += added
        if self._offsets and not self._dispatching:
            self._dispatching = True
            return True
        return False

    def _append_run(self, messages: list[MessageExt]) -> bool:
        """The common pull: offsets ascending, all past what is held. Put at
        C speed (one extend, one dict update); False, nothing changed, otherwise."""
        if not messages:
            return True
        offsets = [msg.queue_offset for msg in messages]
        first = offsets[0]
        if (self._offsets and first <= self._offsets[-1]) or first in self._consuming:
            return False
        if any(b <= a for a, b in itertools.pairwise(offsets)):
            return False
        if self._consuming and not self._consuming.keys().isdisjoint(offsets):
            return False
        self._msgs.update(zip(offsets, messages, strict=True))
        self._offsets.extend(offsets)
        self._size += sum(len(msg.body) for msg in messages)
        self._max_seen = max(self._max_seen, offsets[-1])
        return True

    def _put_each(self, messages: Iterable[MessageExt]) -> int:
        added = 0
        for msg in messages:
            offset = msg.queue_offset
            if offset in self._msgs or offset in self._consuming:
                continue
            self._msgs[offset] = msg
            if not self._offsets or offset > self._offsets[-1]:
                self._offsets.append(offset)
            else:
                bisect.insort(self._offsets, offset)
            added += 1
            self._size += len(msg.body)
            self._max_seen = max(self._max_seen, offset)
        return added

    def remove(self, messages: Iterable[MessageExt]) -> int:
        """Drop consumed messages; return the offset to commit.

        That is the smallest offset still held, or, when none is left, the
        highest offset seen + 1. Returns -1 when nothing was held on entry
        (nothing to commit; Java's rule). Messages not held are ignored.
        """
        self.last_consume_at = self._clock.monotonic()
        if not self._offsets:
            return -1
        if isinstance(messages, list) and self._remove_head(messages):
            return self._offsets[0] if self._offsets else self._max_seen + 1
        for msg in messages:
            offset = msg.queue_offset
            held = self._msgs.pop(offset, None)
            if held is None:
                continue
            del self._offsets[bisect.bisect_left(self._offsets, offset)]
            self._count -= 1
            self._size -= len(held.body)
        return self._offsets[0] if self._offsets else self._max_seen + 1

    def _remove_head(self, messages: list[MessageExt]) -> bool:
        """The common consume: exactly the oldest held messages, in order
        (a polled batch). One slice delete instead of one per message; False,
        nothing changed, otherwise."""
        count = len(messages)
        if count == 0 or count > len(self._offsets):
            return False
        msgs = self._msgs
        for position, msg in enumerate(messages):
            offset = msg.queue_offset
            if self._offsets[position] != offset or msgs.get(offset) is not msg:
                return False
        for msg in messages:
            del msgs[msg.queue_offset]
        del self._offsets[:count]
        self._count -= count
        self._size -= sum(len(msg.body) for msg in messages)
        return True

    def clear(self) -> None:
        """Forget every message (held and consuming); counters go back to zero."""
        self._msgs.clear()
        self._offsets.clear()
        self._consuming.clear()
        self._count = 0
        self._size = 0
        self._max_seen = -1

    # -- flow control and expiry --------------------------------------------

    def over_limits(
        self,
        max_count: int = DEFAULT_PULL_THRESHOLD_FOR_QUEUE,
        max_size_mib: int = DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE_MIB,
        max_span: int | None = DEFAULT_CONSUME_CONCURRENTLY_MAX_SPAN,
    ) -> str | None:
        """Why the next pull must wait (flow control), or None to pull now
        (see :func:`flow_control_reason`)."""
        return flow_control_reason(
            self._count, self._size, self.span, self._range, max_count, max_size_mib, max_span
        )

    def _range(self) -> str:
        if not self._offsets:
            return "no message held"
        return f"offsets {self._offsets[0]}..{self._offsets[-1]}, {self._count} messages"

    def mark_pulled(self) -> None:
        self.last_pull_at = self._clock.monotonic()

    def is_pull_expired(self, max_idle_s: float = PULL_MAX_IDLE_S) -> bool:
        return self._clock.monotonic() - self.last_pull_at > max_idle_s

    def expired_messages(
        self,
        consume_timeout_ms: int = DEFAULT_CONSUME_TIMEOUT_MS,
        limit: int = EXPIRED_SCAN_LIMIT,
    ) -> list[MessageExt]:
        """Concurrent mode: head messages whose consumption started more than
        ``consume_timeout_ms`` ago (CONSUME_START_TIME, wall clock).

        The scan runs from the smallest offset and stops at the first message
        that is not expired (or not started), as Java's ``cleanExpiredMsg``
        does. The caller sends each back (delay level 3) and then removes it.
        """
        now = self._clock.now_ms()
        found: list[MessageExt] = []
        for offset in self._offsets[:limit]:
            msg = self._msgs[offset]
            raw = msg.properties.get(props.CONSUME_START_TIME)
            if not raw or not raw.isdigit() or now - int(raw) <= consume_timeout_ms:
                break
            found.append(msg)
        return found

    # -- orderly ---------------------------------------------------------------

    def take(self, batch_size: int) -> list[MessageExt]:
        """Orderly: move up to ``batch_size`` smallest offsets to the consuming
        batch and return them in offset order. An empty result clears the
        dispatch mark (the next :meth:`put` asks for a new task)."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.last_consume_at = self._clock.monotonic()
        taken = self._offsets[:batch_size]
        del self._offsets[:batch_size]
        batch = [self._msgs.pop(offset) for offset in taken]
        for msg in batch:
            self._consuming[msg.queue_offset] = msg
        if not batch:
            self._dispatching = False
        return batch

    def commit(self) -> int:
        """Orderly: the consuming batch is done; return max of it + 1, or -1
        when there was no batch."""
        if not self._consuming:
            return -1
        self._count -= len(self._consuming)
        self._size -= sum(len(msg.body) for msg in self._consuming.values())
        offset = max(self._consuming)
        self._consuming.clear()
        return offset + 1

    def make_available_again(self, messages: Sequence[MessageExt]) -> None:
        """Orderly: put failed messages back for a local retry.

        Each goes back as a copy with ``reconsume_times`` + 1 (Java bumps the
        count in ``checkReconsumeTimes`` before ``makeMessageToConsumeAgain``);
        the listener's references are left untouched. Only messages of the
        consuming batch are accepted; counters do not change (they still count
        the batch).
        """
        for msg in messages:
            offset = msg.queue_offset
            if self._consuming.pop(offset, None) is None:
                continue
            again = dataclasses.replace(
                msg, properties=dict(msg.properties), reconsume_times=msg.reconsume_times + 1
            )
            self._msgs[offset] = again
            bisect.insort(self._offsets, offset)

    def rollback(self) -> None:
        """Orderly: put the whole consuming batch back unchanged (Java's
        ``rollback``, for the deprecated ROLLBACK status)."""
        for offset, msg in self._consuming.items():
            self._msgs[offset] = msg
            bisect.insort(self._offsets, offset)
        self._consuming.clear()

    def mark_locked(self) -> None:
        """The broker granted (or renewed) the lock for this queue."""
        self.locked = True
        self.last_lock_at = self._clock.monotonic()

    def mark_unlocked(self) -> None:
        self.locked = False

    def is_lock_expired(self, max_live_s: float = REBALANCE_LOCK_MAX_LIVE_S) -> bool:
        return self._clock.monotonic() - self.last_lock_at > max_live_s
