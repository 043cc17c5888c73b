"""Producer queue selection: round robin with latency fault tolerance, and
sharding-key selectors for partition order.

Mirrors RocketMQ 4.9.x `TopicPublishInfo.selectOneMessageQueue`,
`MQFaultStrategy` and `LatencyFaultToleranceImpl`: a send that took long, or
failed, makes its broker "not available" for a while (the longer the latency,
the longer the pause) and selection skips it while other brokers remain.

Sans-IO: time comes from an injected Clock, randomness from an injected
`random.Random`; the producer reports each send's outcome with
`LatencyFaultTolerance.update`.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tidemq.common.clock import Clock
from tidemq.common.hashing import java_string_hash
from tidemq.common.message import MessageQueue

__all__ = [
    "ISOLATION_LATENCY_MS",
    "LATENCY_MAX_MS",
    "NOT_AVAILABLE_DURATION_MS",
    "LatencyFaultTolerance",
    "QueueSelector",
    "not_available_duration_ms",
    "select_by_sharding_key",
    "select_like_ali_ons",
]

LATENCY_MAX_MS: tuple[int, ...] = (50, 100, 550, 1000, 2000, 3000, 15000)
"""Latency thresholds (RocketMQ 4.9.x `MQFaultStrategy.latencyMax`)."""
NOT_AVAILABLE_DURATION_MS: tuple[int, ...] = (0, 0, 30000, 60000, 120000, 180000, 600000)
"""Pause for a latency at or above the matching threshold (`notAvailableDuration`)."""
ISOLATION_LATENCY_MS = 30000
"""A failed send counts as this latency (4.9.x), hence a 600 s pause."""


_STEPS_LONGEST_FIRST = tuple(
    zip(reversed(LATENCY_MAX_MS), reversed(NOT_AVAILABLE_DURATION_MS), strict=True)
)
_FIRST_PAUSING_MS = min(
    (t for t, d in zip(LATENCY_MAX_MS, NOT_AVAILABLE_DURATION_MS, strict=True) if d > 0),
    default=1 << 62,
)
"""Latencies below this never pause a broker (the common case: one comparison)."""


def not_available_duration_ms(latency_ms: int) -> int:
    """How long a broker is avoided after a send of this latency."""
    if latency_ms < _FIRST_PAUSING_MS:
        return 0
    for threshold, duration in _STEPS_LONGEST_FIRST:
        if latency_ms >= threshold:
            return duration
    return 0


@dataclass(slots=True)
class _FaultItem:
    name: str
    latency_ms: int
    available_at: float
    """Clock.monotonic() seconds from which the broker is available again."""


class LatencyFaultTolerance:
    """Per-broker latency record and availability (`LatencyFaultToleranceImpl`).

    `update` replaces the previous record (as Java: a fast send after a slow
    one makes the broker available again at once).
    """

    def __init__(self, clock: Clock, rng: random.Random | None = None) -> None:
        self._clock = clock
        self._items: dict[str, _FaultItem] = {}
        self._worst_index = (rng or random.Random()).randrange(1 << 31)
        self._paused_until = 0.0
        """No broker is paused from this Clock.monotonic() time on (an upper
        bound: the latest pause ever recorded), so selection can skip the
        per-broker checks while nothing is paused."""

    def update(
        self, broker_name: str, latency_ms: int, isolation: bool, now: float | None = None
    ) -> None:
        """Record a send to `broker_name`; `isolation` means the send failed.
        `now` is Clock.monotonic() when the caller has just read it."""
        duration = not_available_duration_ms(ISOLATION_LATENCY_MS if isolation else latency_ms)
        available_at = (self._clock.monotonic() if now is None else now) + duration / 1000
        item = self._items.get(broker_name)
        if item is None:
            self._items[broker_name] = _FaultItem(broker_name, latency_ms, available_at)
        else:  # replaced in place: the same record, one allocation less per send
            item.latency_ms = latency_ms
            item.available_at = available_at
        if duration and available_at > self._paused_until:
            self._paused_until = available_at

    def is_available(self, broker_name: str, now: float | None = None) -> bool:
        item = self._items.get(broker_name)
        if item is None:
            return True
        return (self._clock.monotonic() if now is None else now) >= item.available_at

    def clock_now(self) -> float:
        """The injected clock's Clock.monotonic()."""
        return self._clock.monotonic()

    def none_paused(self, now: float) -> bool:
        """True when every broker is available at `now` (Clock.monotonic())."""
        return now >= self._paused_until

    def remove(self, broker_name: str) -> None:
        self._items.pop(broker_name, None)

    def pick_one_at_least(self) -> str | None:
        """A broker to use when none is available, None if none is recorded.

        As Java: records sorted available first, then by latency, then by the
        end of their pause; one of the better half, rotating between calls.
        """
        if not self._items:
            return None
        now = self._clock.monotonic()
        ranked = sorted(
            self._items.values(),
            key=lambda item: (now < item.available_at, item.latency_ms, item.available_at),
        )
        half = len(ranked) // 2
        if half == 0:
            return ranked[0].name
        self._worst_index += 1
        return ranked[self._worst_index % half].name


class QueueSelector:
    """Round robin over one topic's writable queues (`TopicPublishInfo`).

    The position starts at a random index (from `rng`) and advances by one per
    queue examined. `fault_tolerance` given means sendLatencyFaultEnable is on.
    `select(last_broker)` falls back step by step, never failing:

    1. a queue on an available broker other than `last_broker` (the broker the
       previous attempt of this send failed on; None on a first attempt);
    2. with fault tolerance, a queue of `pick_one_at_least()`'s broker if it is
       not `last_broker` and has queues here (Java rewrites a queue to point at
       that broker; we keep to the route's queues);
    3. a queue on a broker other than `last_broker`, available or not;
    4. the next queue.
    """

    def __init__(
        self,
        queues: Sequence[MessageQueue],
        *,
        rng: random.Random | None = None,
        fault_tolerance: LatencyFaultTolerance | None = None,
    ) -> None:
        if not queues:
            raise ValueError("a topic with no writable queue has nothing to select")
        self._queues = list(queues)
        self._index = (rng or random.Random()).randrange(len(self._queues))
        self._fault = fault_tolerance

    @property
    def queues(self) -> list[MessageQueue]:
        return list(self._queues)

    def _next(self) -> MessageQueue:
        mq = self._queues[self._index % len(self._queues)]
        self._index += 1
        return mq

    def _next_matching(self, accept: Callable[[MessageQueue], bool]) -> MessageQueue | None:
        for _ in range(len(self._queues)):
            mq = self._next()
            if accept(mq):
                return mq
        return None

    def select(self, last_broker: str | None = None) -> MessageQueue:
        fault = self._fault
        if last_broker is None and (fault is None or fault.none_paused(fault.clock_now())):
            return self._next()  # a first attempt with every broker available: step 1 at once
        if fault is None:
            mq = self._next_matching(lambda q: q.broker_name != last_broker)
            return mq or self._next()
        now = fault.clock_now()
        mq = self._next_matching(
            lambda q: q.broker_name != last_broker and fault.is_available(q.broker_name, now)
        )
        if mq is not None:
            return mq
        fallback = fault.pick_one_at_least()
        if fallback is not None and fallback != last_broker:
            mq = self._next_matching(lambda q: q.broker_name == fallback)
            if mq is not None:
                return mq
        mq = self._next_matching(lambda q: q.broker_name != last_broker)
        return mq or self._next()


def select_by_sharding_key(queues: Sequence[MessageQueue], key: str) -> MessageQueue:
    """RocketMQ's `SelectMessageQueueByHash` with a string argument:
    `abs(key.hashCode() % n)` in Java's truncating arithmetic, which equals
    `abs(hashCode) % n`, over Java's `String.hashCode()`. Same key, same list:
    same queue, as a Java producer would choose."""
    if not queues:
        raise ValueError("no queue to select from")
    return queues[abs(java_string_hash(key)) % len(queues)]


def select_like_ali_ons(queues: Sequence[MessageQueue], key: str) -> MessageQueue:
    """ali-ons' sharding-key choice (protocol-remoting.md §5.4).

    The distinct queue ids, in order of first appearance, are indexed by the
    first 4 bytes of MD5(UTF-8 key) as a big-endian uint32 modulo their count;
    the result is the first queue with that id. (ali-ons itself rotates among
    the brokers holding that id, skipping the last failed one, and, because it
    tests the id for truthiness, treats id 0 as "any queue".)
    """
    if not queues:
        raise ValueError("no queue to select from")
    queue_ids = list(dict.fromkeys(mq.queue_id for mq in queues))
    digest = hashlib.md5(key.encode("utf-8")).digest()
    wanted = queue_ids[int.from_bytes(digest[:4], "big") % len(queue_ids)]
    return next(mq for mq in queues if mq.queue_id == wanted)
