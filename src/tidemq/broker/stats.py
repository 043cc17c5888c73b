"""Runtime statistics of the broker: what `tidemq cluster list` and /metrics show.

Everything here is counted on the request path with plain integer adds into
entries found by one dict lookup (an entry is made once per topic, group or
type), never through a metrics library: the Prometheus exposition reads these
tables when it is scraped (tidemq.web.metrics).

- puts: per topic a one-minute rate (put TPS) and, per RocketMQ message type
  ("normal", "fifo", "delay", "transaction"), the messages, bytes and a
  message size histogram: rocketmq_messages_in_total,
  rocketmq_throughput_in_total and rocketmq_message_size. As RocketMQ
  (SendMessageProcessor.handlePutMessageResult) a put is counted under the
  topic it is stored in (SCHEDULE_TOPIC_XXXX for a delay level, the timer
  topic for a delivery time, RMQ_SYS_TRANS_HALF_TOPIC for a half message),
  and once more under its own topic when it is delivered there; one size
  observation per put: its bytes over its messages.
- gets: per (topic, group) of pulls the rate, the bytes and the offset each
  queue's last pull reached (RocketMQ's pull offset, which the in-flight and
  ready figures need); POP deliveries per (topic, group, from the retry
  topic or not).
- dead letters per (group, original topic), ended transactions per topic.

`detailed=False` (metrics off) keeps only what `cluster list` shows: the rates.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TypeVar

from tidemq.common.clock import Clock
from tidemq.common.histogram import Histogram

K = TypeVar("K")

STATS_WINDOW_S = 60

NORMAL = "normal"
FIFO = "fifo"
DELAY = "delay"
TRANSACTION = "transaction"
"""RocketMQ's message_type label values (TopicMessageType.getMetricsValue)."""

MESSAGE_SIZE_BOUNDS: tuple[float, ...] = (
    1024,
    4 * 1024,
    512 * 1024,
    1024 * 1024,
    2 * 1024 * 1024,
    4 * 1024 * 1024,
)
"""rocketmq_message_size buckets: 1 KiB, 4 KiB, 512 KiB, 1, 2, 4 MiB
(BrokerMetricsManager.registerMetricsView)."""

FINISH_LATENCY_BOUNDS_S: tuple[float, ...] = (5, 60, 600, 3600, 12 * 3600, 24 * 3600)
"""rocketmq_finish_message_latency buckets, in seconds: 5 s, 1 min, 10 min,
1 h, 12 h, 24 h (BrokerMetricsManager.registerMetricsView, commitLatencyBuckets)."""


class RateCounter:
    """Events per second over a sliding window of one-second buckets (bounded)."""

    __slots__ = ("_buckets", "_window", "total")

    def __init__(self, window_s: int = STATS_WINDOW_S) -> None:
        self._window = window_s
        self._buckets: deque[list[int]] = deque()
        self.total = 0

    def add(self, count: int, now_s: float) -> None:
        second = int(now_s)
        buckets = self._buckets
        if buckets and buckets[-1][0] == second:
            buckets[-1][1] += count  # the common case: nothing can have expired
        else:
            buckets.append([second, count])
            self._trim(second)
        self.total += count

    def _trim(self, second: int) -> None:
        buckets = self._buckets
        while buckets and buckets[0][0] <= second - self._window:
            buckets.popleft()

    def in_window(self, now_s: float) -> int:
        self._trim(int(now_s))
        return sum(count for _, count in self._buckets)

    def tps(self, now_s: float) -> float:
        return self.in_window(now_s) / self._window


class TypedPuts:
    """The puts of one message type into one topic."""

    __slots__ = ("bytes", "messages", "sizes")

    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0
        self.sizes = Histogram(MESSAGE_SIZE_BOUNDS)


class TopicPuts:
    """The puts into one topic."""

    __slots__ = ("by_type", "rate")

    def __init__(self) -> None:
        self.rate = RateCounter()
        self.by_type: dict[str, TypedPuts] = {}


class GroupGets:
    """What one consumer group pulled from one topic."""

    __slots__ = ("bytes", "pulled", "rate")

    def __init__(self) -> None:
        self.rate = RateCounter()
        self.bytes = 0
        self.pulled: dict[int, int] = {}
        """Queue id -> the next offset its last pull returned (RocketMQ's pull offset)."""


class Deliveries:
    """Messages and bytes handed out (POP deliveries of one topic, group, retry flag)."""

    __slots__ = ("bytes", "messages")

    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0


class EndedTransactions:
    """The transactions of one topic ended since start."""

    __slots__ = ("commits", "latency", "rollbacks")

    def __init__(self) -> None:
        self.commits = 0
        self.rollbacks = 0
        self.latency = Histogram(FINISH_LATENCY_BOUNDS_S)
        """Seconds from the half's birth to its commit (whole seconds, as Java)."""


@dataclass(slots=True)
class BrokerStats:
    """The broker's counters (see the module docstring)."""

    clock: Clock
    detailed: bool = True
    """Count what only /metrics shows (types, bytes, sizes, pull offsets, POP,
    dead letters, transactions); off, only the rates `cluster list` shows."""
    puts: dict[str, TopicPuts] = field(default_factory=dict)
    gets: dict[tuple[str, str], GroupGets] = field(default_factory=dict)
    pops: dict[tuple[str, str, bool], Deliveries] = field(default_factory=dict)
    dead_letters: dict[tuple[str, str], int] = field(default_factory=dict)
    """(consumer group, original topic) -> messages sent to the group's DLQ."""
    transactions: dict[str, EndedTransactions] = field(default_factory=dict)
    all_puts: RateCounter = field(default_factory=RateCounter)
    all_gets: RateCounter = field(default_factory=RateCounter)

    def _now(self) -> float:
        return self.clock.monotonic()

    def record_put(self, topic: str, count: int, size: int, message_type: str = NORMAL) -> None:
        """`count` messages of `size` bytes in all stored into `topic` by one put."""
        now = self._now()
        entry = self.puts.get(topic)
        if entry is None:
            entry = self.puts[topic] = TopicPuts()
        entry.rate.add(count, now)
        self.all_puts.add(count, now)
        if self.detailed:
            typed = entry.by_type.get(message_type)
            if typed is None:
                typed = entry.by_type[message_type] = TypedPuts()
            typed.messages += count
            typed.bytes += size
            typed.sizes.observe(size // count if count > 0 else size)

    def record_get(
        self,
        topic: str,
        group: str,
        count: int,
        size: int,
        queue_id: int = -1,
        next_offset: int = -1,
    ) -> None:
        """A pull of `group` found `count` messages (`size` bytes) in `topic`;
        `next_offset`: where the queue's next pull starts."""
        now = self._now()
        key = (topic, group)
        entry = self.gets.get(key)
        if entry is None:
            entry = self.gets[key] = GroupGets()
        entry.rate.add(count, now)
        self.all_gets.add(count, now)
        if self.detailed:
            entry.bytes += size
            if queue_id >= 0:
                entry.pulled[queue_id] = next_offset

    def record_pop(self, topic: str, group: str, count: int, size: int, is_retry: bool) -> None:
        """A POP of `group` handed out `count` messages of `topic` (from its
        POP retry topic when `is_retry`)."""
        self.all_gets.add(count, self._now())
        if not self.detailed:
            return
        key = (topic, group, is_retry)
        entry = self.pops.get(key)
        if entry is None:
            entry = self.pops[key] = Deliveries()
        entry.messages += count
        entry.bytes += size

    def record_dead_letter(self, group: str, topic: str, count: int = 1) -> None:
        """Messages of `topic` that `group` failed too often went to its DLQ."""
        if self.detailed:
            key = (group, topic)
            self.dead_letters[key] = self.dead_letters.get(key, 0) + count

    def record_end(
        self, topic: str, commit: bool, latency_s: int | None = None, count: int = 1
    ) -> None:
        """Transactions of `topic` committed or rolled back; `latency_s`: from
        birth to commit, when known."""
        if not self.detailed:
            return
        entry = self.transactions.get(topic)
        if entry is None:
            entry = self.transactions[topic] = EndedTransactions()
        if commit:
            entry.commits += count
            if latency_s is not None:
                entry.latency.observe(latency_s, count)
        else:
            entry.rollbacks += count

    def put_tps(self, topic: str | None = None) -> float:
        if topic is None:
            return self.all_puts.tps(self._now())
        entry = self.puts.get(topic)
        return 0.0 if entry is None else entry.rate.tps(self._now())

    def get_tps(self, topic: str | None = None, group: str | None = None) -> float:
        if topic is None and group is None:
            return self.all_gets.tps(self._now())
        now = self._now()
        return sum(
            entry.rate.tps(now)
            for (t, g), entry in self.gets.items()
            if (topic is None or t == topic) and (group is None or g == group)
        )

    def pulled(self, topic: str, group: str) -> dict[int, int]:
        """Queue id -> the offset its last pull reached (empty when none was seen)."""
        entry = self.gets.get((topic, group))
        return {} if entry is None else entry.pulled

    def forget_topic(self, topic: str) -> None:
        self.puts.pop(topic, None)
        self.transactions.pop(topic, None)
        for key in [k for k in self.gets if k[0] == topic]:
            self.gets.pop(key, None)
        for pop_key in [k for k in self.pops if k[0] == topic]:
            self.pops.pop(pop_key, None)
