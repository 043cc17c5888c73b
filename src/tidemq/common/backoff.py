"""Doubling delays with a cap: the retry pause shared by the flush thread and the acceptor."""

from __future__ import annotations


def doubling_delay(previous: float | None, *, first: float, maximum: float) -> float:
    """The pause before the next try: `first`, then doubling, never above `maximum`."""
    if previous is None:
        return min(first, maximum)
    return min(max(previous * 2, first), maximum)
