"""Request deadlines of one connection, kept with a single timer.

`asyncio.timeout` around each request costs a Timeout object, a timer
handle and a cancellation dance per request: about 3 µs, a tenth of the
client's work for a single-message send. A connection's requests are
answered in milliseconds and time out in seconds, so one timer for the
earliest deadline does the same job (RocketMQ's Java client sweeps its
response table once a second; this one fires on time): arming it is a
comparison, and when it fires it fails the requests that are due and sets
itself for the next one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

TOLERANCE_S = 0.001
"""A deadline this close is treated as reached: uvloop's timers have
millisecond resolution and may fire that much early."""


class Deadlines:
    """Opaque -> deadline, with one timer for the earliest; `expire(opaque)`
    is called for each that is reached while still registered."""

    __slots__ = ("_due", "_expire", "_loop", "_timer", "_timer_at")

    def __init__(self, loop: asyncio.AbstractEventLoop, expire: Callable[[int], None]) -> None:
        self._loop = loop
        self._expire = expire
        self._due: dict[int, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def __len__(self) -> int:
        return len(self._due)

    def add(self, opaque: int, deadline: float) -> None:
        self._due[opaque] = deadline
        if self._timer is None or deadline < self._timer_at:
            self._arm(deadline)

    def discard(self, opaque: int) -> None:
        self._due.pop(opaque, None)  # the timer stays; it re-arms or stops when it fires

    def close(self) -> None:
        self._due.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer = None
        reached = self._loop.time() + TOLERANCE_S
        due = [opaque for opaque, deadline in self._due.items() if deadline <= reached]
        for opaque in due:
            if self._due.pop(opaque, None) is not None:
                self._expire(opaque)
        if self._due and self._timer is None:
            self._arm(min(self._due.values()))
