"""The dashboard's memory of the last hour: bounded rings of (time, value) points.

Pure (no I/O, no clock of its own): the sampler (sampler.py) reads the
broker every few seconds and adds points; the API hands them to the page,
which draws sparklines and the lag-over-time chart. Everything is bounded:
`capacity` points per series (720: an hour at 5 s) and `max_series` series
(the ones updated longest ago are dropped first).

Rates are computed here from counters (messages put or got since start):
the difference of two readings over the time between them. A counter that
went down (the broker restarted) or readings at the same instant give no
rate rather than a wrong one.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence

__all__ = ["CounterRates", "History", "Ring", "histogram", "rate_per_s"]

Point = tuple[int, float]
"""(epoch milliseconds, value)."""

DEFAULT_CAPACITY = 720
DEFAULT_MAX_SERIES = 2000


class Ring:
    """The newest `capacity` points of one series, oldest first, times rising."""

    __slots__ = ("_points",)

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("a ring holds at least one point")
        self._points: deque[Point] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._points)

    @property
    def capacity(self) -> int:
        return self._points.maxlen or 0

    def add(self, t_ms: int, value: float) -> bool:
        """Keep the point (dropping the oldest when full); a point not later
        than the last one is ignored (a clock that stepped back): False."""
        if self._points and t_ms <= self._points[-1][0]:
            return False
        self._points.append((t_ms, value))
        return True

    def points(self, since_ms: int | None = None) -> list[Point]:
        if since_ms is None:
            return list(self._points)
        return [p for p in self._points if p[0] >= since_ms]

    def last(self) -> Point | None:
        return self._points[-1] if self._points else None


def rate_per_s(before: tuple[int, int] | None, after: tuple[int, int]) -> float | None:
    """Events per second between two readings (t_ms, counter) of a counter;
    None when it cannot be told: no earlier reading, no time passed, or the
    counter went down (restarted)."""
    if before is None:
        return None
    dt_ms = after[0] - before[0]
    delta = after[1] - before[1]
    if dt_ms <= 0 or delta < 0:
        return None
    return delta * 1000.0 / dt_ms


class History:
    """Named series (see the module docstring)."""

    def __init__(
        self, capacity: int = DEFAULT_CAPACITY, max_series: int = DEFAULT_MAX_SERIES
    ) -> None:
        if max_series < 1:
            raise ValueError("a history holds at least one series")
        self.capacity = capacity
        self.max_series = max_series
        self._series: OrderedDict[str, Ring] = OrderedDict()

    def __len__(self) -> int:
        return len(self._series)

    def add(self, name: str, t_ms: int, value: float) -> None:
        ring = self._series.get(name)
        if ring is None:
            ring = self._series[name] = Ring(self.capacity)
        ring.add(t_ms, value)
        self._series.move_to_end(name)
        while len(self._series) > self.max_series:
            self._series.popitem(last=False)

    def series(self, name: str, since_ms: int | None = None) -> list[Point]:
        ring = self._series.get(name)
        return [] if ring is None else ring.points(since_ms)

    def names(self, prefix: str = "") -> list[str]:
        return sorted(name for name in self._series if name.startswith(prefix))

    def forget(self, names: Iterable[str]) -> None:
        for name in names:
            self._series.pop(name, None)


class CounterRates:
    """Turns readings of named counters into rate points of a History."""

    def __init__(self, history: History) -> None:
        self._history = history
        self._last: dict[str, tuple[int, int]] = {}

    def read(self, name: str, t_ms: int, counter: int) -> float | None:
        """Record a reading; the rate since the previous one (also added to
        the history), or None (see rate_per_s)."""
        reading = (t_ms, counter)
        previous = self._last.get(name)
        rate = rate_per_s(previous, reading)
        if previous is None or t_ms > previous[0] or counter < previous[1]:
            self._last[name] = reading
        if rate is not None:
            self._history.add(name, t_ms, rate)
        return rate

    def keep_only(self, names: Iterable[str]) -> None:
        """Forget the readings of counters no longer read."""
        kept = set(names)
        for name in [n for n in self._last if n not in kept]:
            del self._last[name]


def histogram(values: Sequence[int], start: int, end: int, bins: int) -> list[tuple[int, int]]:
    """How many `values` fall in each of `bins` equal spans of [start, end):
    (span start, count) per span; values outside are not counted."""
    if bins < 1 or end <= start:
        raise ValueError("a histogram needs at least one bin over a non-empty span")
    width = -(-(end - start) // bins)
    counts = [0] * bins
    for value in values:
        if start <= value < end:
            counts[min((value - start) // width, bins - 1)] += 1
    return [(start + i * width, count) for i, count in enumerate(counts)]
