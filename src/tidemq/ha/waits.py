"""A SYNC_MASTER's writes waiting for a slave: the store's ReplicaGate on the event loop.

`wait_replicated(end)` answers SLAVE_NOT_AVAILABLE at once when no slave is
reporting or the nearest is too far behind (`acks.slave_available`), PUT_OK
when a report already covers `end`, and otherwise a future that a report
answers PUT_OK or the deadline FLUSH_SLAVE_TIMEOUT. The futures wait in an
`acks.AckBook`; one loop timer, armed for the earliest deadline, expires them:
no task per write. Everything runs on the loop's thread (the store writes
there, the HA connections report there).
"""

from __future__ import annotations

import asyncio
import logging

from tidemq.ha.acks import AckBook, slave_available
from tidemq.store.api import PutStatus

__all__ = ["ReplicaWaits"]

log = logging.getLogger(__name__)


class ReplicaWaits:
    def __init__(self, *, timeout_s: float, max_gap: int) -> None:
        self._timeout_s = timeout_s
        self._max_gap = max_gap
        self._book: AckBook[asyncio.Future[PutStatus]] = AckBook()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self.reporting_slaves = 0
        """Slave connections that have reported at least once (kept by the HA server)."""
        self.timeouts = 0
        """Writes answered FLUSH_SLAVE_TIMEOUT."""
        self.unavailable = 0
        """Writes answered SLAVE_NOT_AVAILABLE."""

    @property
    def acked(self) -> int:
        """The highest commitlog offset a slave has reported."""
        return self._book.acked

    @property
    def waiting(self) -> int:
        return len(self._book)

    def wait_replicated(self, end: int) -> PutStatus | asyncio.Future[PutStatus]:
        book = self._book
        if not slave_available(self.reporting_slaves, end, book.acked, self._max_gap):
            self.unavailable += 1
            return PutStatus.SLAVE_NOT_AVAILABLE
        return self._wait(end)

    def _wait(self, end: int) -> PutStatus | asyncio.Future[PutStatus]:
        """PUT_OK when acknowledged already, else a future the acknowledgement
        (PUT_OK) or the deadline (FLUSH_SLAVE_TIMEOUT) answers."""
        book = self._book
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout_s
        future: asyncio.Future[PutStatus] = loop.create_future()
        if not book.add(end, deadline, future):
            return PutStatus.PUT_OK
        self._arm(loop, deadline)
        return future

    def acknowledge(self, offset: int) -> None:
        """A slave reported `offset`: answer every write it covers."""
        for future in self._book.acknowledge(offset):
            if not future.done():
                future.set_result(PutStatus.PUT_OK)

    def close(self) -> None:
        """The master stops: writes still waiting are answered FLUSH_SLAVE_TIMEOUT."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for future in self._book.drain():
            if not future.done():
                future.set_result(PutStatus.FLUSH_SLAVE_TIMEOUT)

    def _arm(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        if self._timer is not None and self._timer_at <= deadline:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = loop.call_at(deadline, self._expire, loop)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        expired = self._book.expire(loop.time())
        for future in expired:
            if not future.done():
                future.set_result(PutStatus.FLUSH_SLAVE_TIMEOUT)
        if expired:
            self.timeouts += len(expired)
            log.warning(
                "%d write(s) not acknowledged by a slave within %.1f s: answered "
                "FLUSH_SLAVE_TIMEOUT (stored on the master)",
                len(expired),
                self._timeout_s,
            )
        following = self._book.next_deadline()
        if following is not None:
            self._arm(loop, following)
