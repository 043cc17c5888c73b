"""Making writes durable: async flush, and sync flush with group commit.

One owned thread does all fsyncs, because fdatasync blocks and must not stall
the event loop. In async mode it syncs the commitlog every 500 ms. In sync
mode a writer appends, then waits for "flushed >= my end offset"; the thread
takes every waiter queued so far, syncs once, and wakes them all: many
writers share one fsync (group commit). In both modes the consumequeues and
the index are synced, and the checkpoint written, every second.

A failure does not end the thread unless it has to (see flush_retry.py for
which errors are retried and why). A transient one (no file descriptor for
``checkpoint.tmp``, no memory) is retried with a backoff of 10 ms doubling to
1 s; one WARNING opens the episode and one more line closes it, and
``trouble`` says what is failing and since when. While the commitlog sync
fails, sync writers are not acknowledged: they keep waiting (their put times
out as FLUSH_DISK_TIMEOUT) and the next successful sync wakes those still
there. A permanent failure (EIO on fdatasync: the data may be lost) fails
every waiter, sets ``failed`` and ends the thread: the store then refuses
writes until restart.

In sync mode the thread also prepares the commitlog's next stretch after each
round (``prepare_commitlog``: zeros written ahead of its end, see
``mapped_file.MappedFileQueue.zero_ahead``), after the writers of the round
were woken. It is only a speed-up: if it fails, it is logged once and not
tried again.
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

from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.store.flush_retry import (
    FIRST_RETRY_DELAY_S,
    MAX_RETRY_DELAY_S,
    FlushPart,
    describe,
    is_transient,
    next_retry_delay,
)

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Waiter:
    offset: int
    loop: asyncio.AbstractEventLoop | None
    future: asyncio.Future[bool] | None = None
    event: threading.Event | None = None
    result: list[bool] = field(default_factory=list)

    @property
    def abandoned(self) -> bool:
        """An async writer that stopped waiting (its put timed out)."""
        return self.future is not None and self.future.done()


@dataclass(frozen=True, slots=True)
class FlushTrouble:
    """A flush that keeps failing with a transient error and is being retried."""

    part: FlushPart
    error: str
    since_ms: int
    """Wall-clock time of the episode's first failure."""
    retries: int

    def __str__(self) -> str:
        return f"{self.part.value} flush failing since {self.since_ms} ms: {self.error}"


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
        clock: Clock = SYSTEM_CLOCK,
        retry_first_delay_s: float = FIRST_RETRY_DELAY_S,
        retry_max_delay_s: float = MAX_RETRY_DELAY_S,
        prepare_commitlog: Callable[[], object] | None = None,
    ) -> None:
        self.sync_mode = sync_mode
        self._flush_commitlog = flush_commitlog
        self._prepare_commitlog = prepare_commitlog if sync_mode else None
        self._flush_derived = flush_derived
        self._commitlog_interval = commitlog_interval_ms / 1000
        self._derived_interval = derived_interval_ms / 1000
        self._clock = clock
        self._retry_first = retry_first_delay_s
        self._retry_max = retry_max_delay_s
        self._cond = threading.Condition()
        self._waiters: list[_Waiter] = []
        self._hurried = False
        """A write nobody waits for was made (`wake`): sync it soon anyway."""
        self._stopping = False
        self._idle = False
        self._failed: BaseException | None = None
        self._trouble: dict[FlushPart, FlushTrouble] = {}
        self._delays: dict[FlushPart, float] = {}
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
        """The permanent failure that stopped flushing (writes are refused), if any."""
        return self._failed

    @property
    def trouble(self) -> FlushTrouble | None:
        """The transient failure being retried now (the commitlog's first), if any."""
        trouble = self._trouble
        return trouble.get(FlushPart.COMMITLOG) or trouble.get(FlushPart.DERIVED)

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

    def wake(self) -> None:
        """A write was answered without waiting for its flush (the sender's
        WAIT=false): in sync mode, sync it with the next round rather than
        after the half-second pause, as Java's GroupCommitService.wakeup does;
        in async mode nothing (the periodic flush takes it)."""
        if not self.sync_mode:
            return
        with self._cond:
            self._hurried = True
            if self._idle:
                self._idle = False
                self._cond.notify()

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

    # -- the thread ----------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # a bug here must fail writers, not leave them waiting
            if self._failed is None:
                self._fail(FlushPart.COMMITLOG, exc, [], stopping=False)
            raise

    def _loop(self) -> None:
        next_derived = time.monotonic() + self._derived_interval
        while True:
            with self._cond:
                if not self._stopping and not (self.sync_mode and (self._waiters or self._hurried)):
                    self._idle = True
                    pause = min(self._commitlog_interval, next_derived - time.monotonic())
                    self._cond.wait(timeout=max(pause, 0.0))
                    self._idle = False
                waiters, self._waiters = self._waiters, []
                self._hurried = False
                stopping = self._stopping
            if not self._sync_commitlog(waiters, stopping):
                return
            if self._prepare_commitlog is not None and not stopping:
                self._prepare()
            now = time.monotonic()
            if stopping or now >= next_derived:
                if not self._sync_derived(stopping):
                    return
                delay = self._delays.get(FlushPart.DERIVED)
                next_derived = now + (self._derived_interval if delay is None else delay)
            if stopping:
                with self._cond:
                    leftover, self._waiters = self._waiters, []
                self._finish(
                    leftover, ok=self.flushed_offset >= max((w.offset for w in leftover), default=0)
                )
                return

    def _sync_commitlog(self, waiters: list[_Waiter], stopping: bool) -> bool:
        """Sync until it works (False: failed for good, the thread ends); wake the waiters."""
        while True:
            try:
                flushed = self._flush_commitlog()
                break
            except BaseException as exc:  # the thread must report, not vanish
                if stopping or not is_transient(exc, FlushPart.COMMITLOG):
                    self._fail(FlushPart.COMMITLOG, exc, waiters, stopping)
                    return False
                delay = self._retrying(FlushPart.COMMITLOG, exc)
            with self._cond:
                # Not durable: the waiters wait on (a timed-out put left already).
                waiters = [w for w in waiters + self._waiters if not w.abandoned]
                self._waiters = []
                if not self._stopping:
                    self._cond.wait(timeout=delay)
                stopping = self._stopping
        self._recovered(FlushPart.COMMITLOG)
        self.flushed_offset = flushed
        self.flush_count += 1
        done = [w for w in waiters if w.offset <= flushed]
        later = [w for w in waiters if w.offset > flushed]
        self._finish(done, ok=True)
        if later:
            with self._cond:
                self._waiters[:0] = later
        return True

    def _prepare(self) -> None:
        prepare = self._prepare_commitlog
        assert prepare is not None
        try:
            prepare()
        except Exception as exc:  # a speed-up only: never a flush failure
            self._prepare_commitlog = None
            log.warning(
                "preparing the commitlog ahead of its end failed (%s); syncs go on without it",
                describe(exc),
            )

    def _sync_derived(self, stopping: bool) -> bool:
        """One try; a transient failure is retried on a later round (the writers go on)."""
        try:
            self._flush_derived()
        except BaseException as exc:
            if stopping or not is_transient(exc, FlushPart.DERIVED):
                self._fail(FlushPart.DERIVED, exc, [], stopping)
                return False
            self._retrying(FlushPart.DERIVED, exc)
            return True
        self._recovered(FlushPart.DERIVED)
        return True

    def _retrying(self, part: FlushPart, exc: BaseException) -> float:
        """Note one more failed try of `part`; the pause before the next one."""
        delay = next_retry_delay(
            self._delays.get(part), first=self._retry_first, maximum=self._retry_max
        )
        self._delays[part] = delay
        current = self._trouble.get(part)
        if current is None:
            consequence = (
                "sync sends are not acknowledged until it works again"
                if part is FlushPart.COMMITLOG
                else "sends are still acknowledged; the checkpoint stays where it was"
            )
            log.warning(
                "%s flush failed (%s); retrying with backoff up to %gs: %s",
                part.value,
                describe(exc),
                self._retry_max,
                consequence,
            )
            self._trouble[part] = FlushTrouble(part, describe(exc), self._clock.now_ms(), 0)
        else:
            self._trouble[part] = FlushTrouble(
                part, describe(exc), current.since_ms, current.retries + 1
            )
        return delay

    def _recovered(self, part: FlushPart) -> None:
        self._delays.pop(part, None)
        trouble = self._trouble.pop(part, None)
        if trouble is not None:
            # WARNING, like the line that opened the episode: a log that shows
            # the failure must also show its end at the default level.
            log.warning(
                "%s flush recovered after %d retries (%.1fs)",
                part.value,
                trouble.retries + 1,
                (self._clock.now_ms() - trouble.since_ms) / 1000,
            )

    def _fail(
        self, part: FlushPart, exc: BaseException, waiters: list[_Waiter], stopping: bool
    ) -> None:
        """Give up for good: fail every waiter; the store refuses writes from now on."""
        if stopping and is_transient(exc, part):
            log.error(
                "%s flush still failing at shutdown (%s); the next start recovers",
                part.value,
                describe(exc),
            )
        else:
            log.error(
                "%s flush failed (%s): not retryable, writes are refused until restart",
                part.value,
                describe(exc),
                exc_info=exc,
            )
        self._failed = exc
        with self._cond:
            waiters = waiters + self._waiters
            self._waiters = []
        self._finish(waiters, ok=False)

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
