"""Making writes durable: async flush, and sync flush with group commit.

One owned thread does all fsyncs, because fdatasync blocks and must not stall
the event loop. In async mode it syncs the commitlog every 500 ms. In sync
mode a writer appends, then waits for "flushed >= my end offset"; the thread
takes every waiter queued so far, syncs once, and wakes them all: many
writers share one fsync (group commit). In both modes the consumequeues and
the index are synced, and the checkpoint written, every second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Waiter:
    offset: int
    loop: asyncio.AbstractEventLoop | None
    future: asyncio.Future[bool] | None = None
    event: threading.Event | None = None
    result: list[bool] = field(default_factory=list)


def _resolve(futures: list[tuple[asyncio.Future[bool], bool]]) -> None:
    for future, ok in futures:
        if not future.done():
            future.set_result(ok)


class FlushService:
    def __init__(
        self,
        *,
        sync_mode: bool,
        flush_commitlog: Callable[[], int],
        flush_derived: Callable[[], None],
        commitlog_interval_ms: int = 500,
        derived_interval_ms: int = 1000,
        name: str = "tidemq-flush",
    ) -> None:
        self.sync_mode = sync_mode
        self._flush_commitlog = flush_commitlog
        self._flush_derived = flush_derived
        self._commitlog_interval = commitlog_interval_ms / 1000
        self._derived_interval = derived_interval_ms / 1000
        self._cond = threading.Condition()
        self._waiters: list[_Waiter] = []
        self._stopping = False
        self._idle = False
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.flushed_offset = 0
        self.flush_count = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread after a last flush of everything."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join()

    @property
    def failed(self) -> BaseException | None:
        return self._failed

    def wait_async(self, offset: int) -> asyncio.Future[bool]:
        """A future set to True once `offset` is durable (False if flushing failed)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        if offset <= self.flushed_offset:
            future.set_result(True)
            return future
        self._enqueue(_Waiter(offset, loop, future=future))
        return future

    def wait_blocking(self, offset: int, timeout: float) -> bool:
        if offset <= self.flushed_offset:
            return True
        waiter = _Waiter(offset, None, event=threading.Event())
        self._enqueue(waiter)
        assert waiter.event is not None
        return waiter.event.wait(timeout) and bool(waiter.result) and waiter.result[0]

    def _enqueue(self, waiter: _Waiter) -> None:
        with self._cond:
            if self._failed is not None or (self._stopping and not self._thread.is_alive()):
                self._finish([waiter], ok=False)
                return
            self._waiters.append(waiter)
            if self._idle:
                # Only the first waiter of a round wakes the thread; the rest
                # ride along (no GIL tug-of-war per write).
                self._idle = False
                self._cond.notify()

    def _run(self) -> None:
        last_derived = time.monotonic()
        while True:
            with self._cond:
                if not self._stopping and not (self.sync_mode and self._waiters):
                    self._idle = True
                    self._cond.wait(timeout=self._commitlog_interval)
                    self._idle = False
                waiters, self._waiters = self._waiters, []
                stopping = self._stopping
            try:
                self.flushed_offset = self._flush_commitlog()
                self.flush_count += 1
            except BaseException as exc:  # the thread must report, not vanish
                log.exception("commitlog flush failed; writes are no longer acknowledged")
                self._failed = exc
                with self._cond:
                    waiters += self._waiters
                    self._waiters = []
                self._finish(waiters, ok=False)
                return
            done = [w for w in waiters if w.offset <= self.flushed_offset]
            later = [w for w in waiters if w.offset > self.flushed_offset]
            self._finish(done, ok=True)
            if later:
                with self._cond:
                    self._waiters[:0] = later
            now = time.monotonic()
            if stopping or now - last_derived >= self._derived_interval:
                try:
                    self._flush_derived()
                except BaseException as exc:
                    log.exception("consumequeue/index flush failed")
                    self._failed = exc
                    return
                last_derived = now
            if stopping:
                with self._cond:
                    leftover, self._waiters = self._waiters, []
                self._finish(
                    leftover, ok=self.flushed_offset >= max((w.offset for w in leftover), default=0)
                )
                return

    @staticmethod
    def _finish(waiters: list[_Waiter], ok: bool) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[bool], bool]]]
        by_loop = defaultdict(list)
        for waiter in waiters:
            if waiter.event is not None:
                waiter.result.append(ok)
                waiter.event.set()
            elif waiter.loop is not None and waiter.future is not None:
                by_loop[waiter.loop].append((waiter.future, ok))
        for loop, futures in by_loop.items():
            # A closed loop raises RuntimeError: nobody waits there any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, futures)
