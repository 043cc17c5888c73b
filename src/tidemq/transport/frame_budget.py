"""One bound on the memory all connections of a server hold for frames still arriving.

A frame may be 16 MiB, and each connection may hold one while it arrives:
without a shared bound, 40 peers that send the first half of a 16 MiB frame
and stop hold 320 MiB. A ``FrameBudget`` (one per server, 256 MiB by
default) is that bound; each connection has a ``FrameAllowance``.

Policy: a connection whose incomplete frame spans more than one read must
hold a reservation for the frame's whole size (4 + totalLength, known from
its first 4 bytes). If the budget cannot give it, the connection stops
reading (``pause_reading``: TCP flow control makes its peer wait) and queues;
reservations are granted in arrival order as frames complete or connections
close, and the connection reads on. Reserving the whole frame, rather than
counting bytes as they come, is what makes waiting safe: a connection that
reads always holds enough to finish its frame, so granted frames complete
and free the budget, and no set of half-read frames can block each other.
Frames that arrive within one read (almost every request) never reserve.

Only reservations count: a queued connection holds nothing, apart from the
bytes of the read that told it the frame's size (at most one read, 256 KiB
with asyncio). A frame larger than the whole budget can never be granted:
the connection is refused at once. A connection queued for longer than the
frame time limit is closed by the server's sweep (server.py), so a client
sending a large message while others hold the budget is delayed, or refused
with a log line, but never left hanging.
"""

from __future__ import annotations

from collections.abc import Callable

DEFAULT_FRAME_BUDGET = 256 * 1024 * 1024
DEFAULT_FRAME_TIMEOUT_S = 30.0


class FrameBudget:
    """Bytes reserved for frames still arriving, over all connections of one server."""

    __slots__ = ("_queue", "_reserved", "limit", "peak")

    def __init__(self, limit: int = DEFAULT_FRAME_BUDGET) -> None:
        if limit < 1:
            raise ValueError(f"a frame budget must be positive, got {limit}")
        self.limit = limit
        self.peak = 0
        """The most ever reserved at once (never above `limit`)."""
        self._reserved = 0
        self._queue: dict[FrameAllowance, int] = {}  # insertion order is arrival order

    @property
    def reserved(self) -> int:
        return self._reserved

    @property
    def waiting(self) -> int:
        """Connections paused until their frame fits."""
        return len(self._queue)

    def request(self, allowance: FrameAllowance, size: int) -> bool:
        """Make `allowance` hold `size` bytes. False: it holds nothing and is queued
        (its `granted` is called once `size` fits); `size` must fit in `limit`."""
        if size > self.limit:
            raise ValueError(f"{size} bytes can never fit a budget of {self.limit}")
        current = allowance.reserved
        if size <= current or (not self._queue and self._reserved - current + size <= self.limit):
            self._set(allowance, size)
            if size < current:
                self._grant_queued()
            return True
        self._set(allowance, 0)
        self._queue[allowance] = size
        self._grant_queued()  # what it held may let earlier ones, and even itself, go
        return allowance not in self._queue

    def release(self, allowance: FrameAllowance) -> None:
        """Drop what `allowance` holds or waits for."""
        was_queued = self._queue.pop(allowance, None) is not None
        if allowance.reserved or was_queued:  # a head that leaves lets the next one try
            self._set(allowance, 0)
            self._grant_queued()

    def _set(self, allowance: FrameAllowance, size: int) -> None:
        self._reserved += size - allowance.reserved
        allowance.reserved = size
        self.peak = max(self.peak, self._reserved)

    def _grant_queued(self) -> None:
        # First come, first served: a large frame at the head is not starved
        # by smaller ones behind it.
        while self._queue:
            allowance, size = next(iter(self._queue.items()))
            if self._reserved + size > self.limit:
                return
            del self._queue[allowance]
            self._set(allowance, size)
            allowance.granted()


class FrameAllowance:
    """One connection's share of a FrameBudget, and the clocks of its current frame."""

    __slots__ = (
        "_budget",
        "_clock",
        "_pause",
        "_resume",
        "frame_since",
        "reserved",
        "waiting_since",
    )

    def __init__(
        self,
        budget: FrameBudget,
        *,
        pause: Callable[[], None],
        resume: Callable[[], None],
        clock: Callable[[], float],
    ) -> None:
        self._budget = budget
        self._pause = pause
        self._resume = resume
        self._clock = clock
        self.reserved = 0
        self.frame_since: float | None = None
        """When the incomplete frame started arriving (or got its reservation)."""
        self.waiting_since: float | None = None
        """When the connection paused for budget; None while it reads."""

    def after_read(self, pending_frame_size: int, completed_frames: bool) -> bool:
        """Account for the incomplete frame after a read (its whole size, 0: none).

        Pauses the connection when its frame does not fit now; False when it
        never can (larger than the whole budget): the caller closes it.
        """
        if pending_frame_size == 0:
            self.frame_since = None
            if self.reserved:
                self._budget.release(self)
            return True
        if completed_frames or self.frame_since is None:
            self.frame_since = self._clock()
        if pending_frame_size > self._budget.limit:
            return False
        if not self._budget.request(self, pending_frame_size):
            self.waiting_since = self._clock()
            self._pause()
        return True

    def granted(self) -> None:
        """Called by the budget: the frame fits now; its time limit starts again."""
        self.waiting_since = None
        self.frame_since = self._clock()
        self._resume()

    def close(self) -> None:
        self.waiting_since = None
        self.frame_since = None
        self._budget.release(self)
