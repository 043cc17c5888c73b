"""Runtime statistics of the broker: put and get rates, last minute and total."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TypeVar

from tidemq.common.clock import Clock

K = TypeVar("K")

STATS_WINDOW_S = 60


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


def _counter(counters: dict[K, RateCounter], key: K) -> RateCounter:
    """The counter of `key`, created on first use (not one throw-away per call)."""
    counter = counters.get(key)
    if counter is None:
        counter = counters[key] = RateCounter()
    return counter


@dataclass(slots=True)
class BrokerStats:
    """Put and get counts per topic and per (topic, group), last minute and total."""

    clock: Clock
    puts: dict[str, RateCounter] = field(default_factory=dict)
    put_bytes: dict[str, RateCounter] = field(default_factory=dict)
    gets: dict[tuple[str, str], RateCounter] = field(default_factory=dict)
    get_bytes: dict[tuple[str, str], RateCounter] = field(default_factory=dict)
    all_puts: RateCounter = field(default_factory=RateCounter)
    all_gets: RateCounter = field(default_factory=RateCounter)

    def _now(self) -> float:
        return self.clock.monotonic()

    def record_put(self, topic: str, count: int, size: int) -> None:
        now = self._now()
        _counter(self.puts, topic).add(count, now)
        _counter(self.put_bytes, topic).add(size, now)
        self.all_puts.add(count, now)

    def record_get(self, topic: str, group: str, count: int, size: int) -> None:
        now = self._now()
        key = (topic, group)
        _counter(self.gets, key).add(count, now)
        _counter(self.get_bytes, key).add(size, now)
        self.all_gets.add(count, now)

    def put_tps(self, topic: str | None = None) -> float:
        counter = self.all_puts if topic is None else self.puts.get(topic)
        return 0.0 if counter is None else counter.tps(self._now())

    def get_tps(self, topic: str | None = None, group: str | None = None) -> float:
        if topic is None and group is None:
            return self.all_gets.tps(self._now())
        now = self._now()
        return sum(
            counter.tps(now)
            for (t, g), counter in self.gets.items()
            if (topic is None or t == topic) and (group is None or g == group)
        )

    def forget_topic(self, topic: str) -> None:
        self.puts.pop(topic, None)
        self.put_bytes.pop(topic, None)
        for key in [k for k in self.gets if k[0] == topic]:
            self.gets.pop(key, None)
            self.get_bytes.pop(key, None)
