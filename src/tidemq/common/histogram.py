"""A fixed-bucket histogram counted with plain integer adds (no locks, no labels).

Prometheus' and OpenTelemetry's explicit-bucket rule: an observation `v`
goes into the first bucket whose upper bound `b` has v <= b (Prometheus'
`le`), the last bucket (+Inf) taking the rest. The hot path is one
`bisect_left` over a short tuple and two adds; exposition reads `counts`
and `total` at scrape time (`cumulative`).
"""

from __future__ import annotations

from bisect import bisect_left

__all__ = ["Histogram"]


class Histogram:
    """Observations counted per bucket (`counts[i]`: bounds[i-1] < v <= bounds[i])."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        if list(bounds) != sorted(set(bounds)):
            raise ValueError(f"bucket bounds must rise strictly: {bounds}")
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        """One more than `bounds`: the last counts what is above every bound."""
        self.total = 0.0
        """The sum of the observed values (Prometheus' `_sum`)."""

    def observe(self, value: float, times: int = 1) -> None:
        """Count `value` (`times` times: a batch whose items share one value)."""
        self.counts[bisect_left(self.bounds, value)] += times
        self.total += value * times

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations at or below it), +Inf last: Prometheus' buckets."""
        running = 0
        result: list[tuple[float, int]] = []
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            result.append((bound, running))
        return result
