"""Group commit: the writes made while the event loop is busy, appended as one.

Why a component of its own: a write that appends alone pays the whole fixed
cost of an append (the store's checks, room reservation, a write per file, a
result object) and, in sync-flush mode, its own flush wait, timer and
wake-up. Sixteen producers with one message in flight each then cost sixteen
times that per fsync round. The committer makes the writers of one loop tick
share all of it. It is kept apart from the store because it is about
scheduling, not storage: it sees the store only as `append(messages) ->
BatchPutResult` and the flush service's `wait_async`.

How a group forms: the first write of a tick opens a group and schedules its
commit with `loop.call_soon`; asyncio runs that callback after every callback
already queued, so the writers made ready in the same tick (say, the sixteen
woken by one fsync round) join before it runs. The commit is one `append` of
the group's messages in call order (offsets increase in the order of the
calls); each caller gets its own results (offsets, msg id) from it. A group
is bounded (`max_messages`, `max_bytes`): the write that fills it commits it
at once, and a write that would overflow it commits the group before joining
a new one. A batch of `alone_batch` messages or more is appended at once
(after the pending group, to keep the call order): grouping it gains little.
In async-flush mode, a task whose last write was alone in its group (a loop
of awaited puts) writes at once, without waiting for the tick to end.

Sync flush: one `wait_async(end of the group)` per group and one timer. When
the flush does not complete within the sync-flush timeout (or flushing
failed), every message of the group is answered FLUSH_DISK_TIMEOUT with its
offsets, as a lone write was before. Groups do not wait for each other: the
next group appends while the previous one's fsync runs. The flush thread
needs the GIL to start a sync, though, and gets it when the loop waits for
events (or lets go of it in a system call): writers woken together by one
sync run in one tick and share the next sync, which starts when their tick
is done. Splitting a tick in two, with the loop handing the GIL over so that
the first half's sync overlaps the second half's work, was tried: it doubled
the fsyncs and the CPU per message and was slower on a small shared machine.

SYNC_MASTER: when the store has a replica gate (`store.replica`), a stored
group also waits for a slave to have it: one wait per group (the gate keeps
one entry for the group's end offset, answered by one slave report), started
with the flush wait and combined with it as RocketMQ's handleDiskFlushAndHA
does (a replica failure, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE, wins over
a flush timeout). Either way the messages are stored and carry their offsets.

Failures are not shared for the wrong reason. A refusal that concerns a
message (MESSAGE_ILLEGAL, PROPERTIES_SIZE_EXCEEDED), or an exception raised
before anything was written, says nothing about the other callers: the group
is then appended again caller by caller, in order, and each gets its own
answer (the illegal message its refusal, the others their results). A
refusal by the store (closed, read-only, disk full, flush failed) is every
caller's.

Ownership: no tasks. The commit is a loop callback, the flush wait a future
with a done callback and a timer handle. `close` (called by the store before
it stops flushing) commits the pending group when called on the loop's
thread, so its callers get their results and the final flush makes them
durable; from another thread it leaves the group to its scheduled commit,
which then finds the store closed and answers SERVICE_NOT_AVAILABLE. A caller
never waits on a group nobody will commit while its loop runs. A caller
cancelled while its group is pending still has its message stored, as a put
cancelled during its flush wait always had.

Writes that bypass the committer (`append`, `put_messages_blocking`) are not
ordered after a pending group unless they call `commit_pending` first.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from typing import Any

from tidemq.store.api import BatchPutResult, MessageToStore, PutResult, PutStatus
from tidemq.store.flush import FlushService
from tidemq.store.replica import REPLICA_REMARKS, combine

DEFAULT_MAX_MESSAGES = 256
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
"""Bodies plus properties per group (an estimate of the record bytes)."""

DEFAULT_ALONE_BATCH = 16
"""A batch this large is appended at once, as its own group: it already
shares one append and one flush wait among its messages, and waiting for the
tick to end would only start its fsync later (when the loop's work per tick
exceeds an fsync, the earliest writers' fsync overlaps the later ones' work)."""

FLUSH_TIMEOUT_REMARK = "flush to disk timed out"

_MESSAGE_REFUSALS = frozenset({PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED})
"""Refusals caused by one message of a group, not by the store."""


_Caller = tuple[asyncio.Future[Any], int, int, bool, bool]
"""One `put_message` or `put_messages` call: (future, start, count, batch,
wait). Its messages are `messages[start : start + count]` of its group;
`batch`: answered with a BatchPutResult, else with its one PutResult; `wait`:
answered once durable (False: once appended, the sender's WAIT=false, see
`MessageToStore.wait_store`). A tuple, not an object: one is made per single
send, on the hottest path of the broker."""


class _Group:
    __slots__ = ("callers", "committed", "first_writer", "handle", "loop", "messages", "size")

    def __init__(self, loop: asyncio.AbstractEventLoop, first_writer: int) -> None:
        self.loop = loop
        self.first_writer = first_writer
        """id() of the task that opened the group."""
        self.messages: list[MessageToStore] = []
        self.callers: list[_Caller] = []
        self.size = 0
        self.handle: asyncio.Handle | None = None
        self.committed = False


class GroupCommitter:
    """Collects concurrent writes and appends each group with one call."""

    def __init__(
        self,
        append: Callable[[Sequence[MessageToStore]], BatchPutResult],
        flush: FlushService,
        *,
        sync_timeout_s: float,
        written_end: Callable[[], int],
        replicate: Callable[[int], PutStatus | asyncio.Future[PutStatus]] | None = None,
        max_messages: int = DEFAULT_MAX_MESSAGES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        alone_batch: int = DEFAULT_ALONE_BATCH,
    ) -> None:
        if max_messages < 1 or max_bytes < 1:
            raise ValueError("a group must hold at least one message")
        self._append = append
        self._flush = flush
        self._sync_timeout = sync_timeout_s
        self._written_end = written_end
        """Where the commitlog ends: unchanged by an append that wrote nothing."""
        self.replicate = replicate
        """A SYNC_MASTER's wait for a slave to have the log up to an offset:
        PUT_OK, an answer at once, or a future (see `tidemq.store.replica`);
        None: nothing to wait for (set by the store when a gate is attached)."""
        self._max_messages = max_messages
        self._max_bytes = max_bytes
        self._alone_batch = alone_batch
        self._pending: _Group | None = None
        self._lone_writer = 0
        """In async-flush mode, id() of the task whose write was the only one
        of the last group (else 0). Such a task writes one at a time, typically
        a loop of awaited puts, which never yields in this mode: waiting a tick
        would only delay it and nobody else can join while it runs, so its
        writes are appended at once. In sync mode it stays 0: every writer
        waits for the flush anyway, and going alone could cost a second fsync
        where one would do. A reused id only makes one write go alone."""
        self.groups = 0
        """Group appends made (a group appended caller by caller counts once)."""
        self.messages = 0
        """Messages handed to those appends."""
        self.flush_waits = 0
        """Flush waits started (sync mode): one per group that was stored."""
        self.largest_group = 0

    @property
    def pending_messages(self) -> int:
        """Messages waiting in the group not yet appended."""
        group = self._pending
        return 0 if group is None else len(group.messages)

    # -- callers ---------------------------------------------------------------

    def submit(self, message: MessageToStore) -> PutResult | asyncio.Future[PutResult]:
        """Store `message` in the current group: its result, or (usually) a
        future of it, set once stored (in sync mode: and flushed)."""
        lone = self._lone_writer
        if (
            lone
            and self._pending is None
            and self.replicate is None
            and id(asyncio.current_task()) == lone
        ):
            # This task wrote alone last time: see `_lone_writer`.
            self.groups += 1
            self.messages += 1
            outcome = self._append((message,))
            if len(outcome.results) == 1:
                return outcome.results[0]
            return PutResult(outcome.status, remark=outcome.remark)
        return self._join_one(message)

    def _join_one(self, message: MessageToStore) -> asyncio.Future[PutResult]:
        """`_join` for one message of a `put_message` (the common case, kept short)."""
        loop = asyncio.get_running_loop()
        group = self._pending
        size = len(message.body) + len(message.properties)
        if (
            group is None
            or group.loop is not loop
            or len(group.messages) >= self._max_messages
            or group.size + size > self._max_bytes
        ):
            return self._join((message,), size, batch=False)
        future: asyncio.Future[PutResult] = loop.create_future()
        messages = group.messages
        group.callers.append((future, len(messages), 1, False, message.wait_store))
        messages.append(message)
        group.size += size
        if len(messages) >= self._max_messages or group.size >= self._max_bytes:
            self._commit(group)
        return future

    def submit_batch(
        self, messages: Sequence[MessageToStore]
    ) -> BatchPutResult | asyncio.Future[BatchPutResult]:
        """The same for a batch, stored as consecutive records, whole or not
        at all (as `append` stores a batch)."""
        lone = self._lone_writer
        if (
            lone
            and self._pending is None
            and self.replicate is None
            and id(asyncio.current_task()) == lone
        ):
            self.groups += 1
            self.messages += len(messages)
            self.largest_group = max(self.largest_group, len(messages))
            return self._append(messages)
        if len(messages) == 1:  # a producer's single send, wrapped: no generator
            only = messages[0]
            size = len(only.body) + len(only.properties)
        else:
            size = sum(len(m.body) + len(m.properties) for m in messages)
        return self._join(messages, size, batch=True, alone=len(messages) >= self._alone_batch)

    def _join(
        self, messages: Sequence[MessageToStore], size: int, *, batch: bool, alone: bool = False
    ) -> asyncio.Future[Any]:
        """Add a call to the pending group (`alone`: commit the pending group,
        then append this call at once as a group of its own)."""
        loop = asyncio.get_running_loop()
        group = self._pending
        if group is not None:
            if group.loop is not loop:
                # Left by a loop that is not running here; its own scheduled
                # commit answers it if that loop ever runs again.
                group = self._pending = None
            elif (
                alone
                or len(group.messages) + len(messages) > self._max_messages
                or group.size + size > self._max_bytes
            ):
                self._commit(group)
                group = None
        if group is None:
            group = _Group(loop, id(asyncio.current_task(loop)))
            if not alone:
                self._pending = group
                group.handle = loop.call_soon(self._commit, group)
        future: asyncio.Future[Any] = loop.create_future()
        group.callers.append(
            (future, len(group.messages), len(messages), batch, messages[0].wait_store)
        )
        group.messages.extend(messages)
        group.size += size
        if alone or len(group.messages) >= self._max_messages or group.size >= self._max_bytes:
            self._commit(group)
        return future

    def close(self) -> None:
        """Call before the store stops taking writes: commits the pending group
        when called on its loop's thread (see the module docstring)."""
        self.commit_pending()

    def commit_pending(self) -> None:
        """Append the pending group now (on its loop's thread; elsewhere this
        does nothing). For a write that bypasses the committer and must come
        after the calls already made, and for `close`."""
        group = self._pending
        if group is None:
            return
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is group.loop:
            self._commit(group)

    # -- committing ------------------------------------------------------------

    def _commit(self, group: _Group) -> None:
        if group.committed:
            return
        group.committed = True
        if group.handle is not None:
            group.handle.cancel()
        if self._pending is group:
            self._pending = None
        messages = group.messages
        callers = group.callers
        if len(callers) == 1 and not self._flush.sync_mode and self.replicate is None:
            self._lone_writer = group.first_writer
        else:
            self._lone_writer = 0
        self.groups += 1
        self.messages += len(messages)
        if len(messages) > self.largest_group:
            self.largest_group = len(messages)
        end_before = self._written_end()
        try:
            outcome = self._append(messages)
        except Exception as exc:
            if len(callers) > 1 and self._written_end() == end_before:
                self._one_by_one(callers, messages)
                return
            for future, *_ in callers:
                if not future.done():
                    future.set_exception(exc)
            return
        except BaseException as exc:  # an interrupt: nobody is left waiting
            for future, *_ in callers:
                if not future.done():
                    future.set_exception(exc)
            raise
        if outcome.status is PutStatus.PUT_OK:
            self._stored(callers, outcome.results)
        elif len(callers) > 1 and outcome.status in _MESSAGE_REFUSALS:
            self._one_by_one(callers, messages)
        else:
            _refuse(callers, outcome)

    def _one_by_one(self, callers: list[_Caller], messages: list[MessageToStore]) -> None:
        """Append each caller's messages alone, in call order; one flush wait
        for all that were stored."""
        stored: list[_Caller] = []
        results: list[PutResult] = []
        for caller in callers:
            future, start, count, batch, wait = caller
            try:
                outcome = self._append(messages[start : start + count])
            except Exception as exc:
                if not future.done():
                    future.set_exception(exc)
                continue
            if outcome.status is PutStatus.PUT_OK:
                stored.append((future, len(results), count, batch, wait))
                results.extend(outcome.results)
            else:
                _refuse((caller,), outcome)
        if stored:
            self._stored(stored, tuple(results))

    def _stored(self, callers: list[_Caller], results: tuple[PutResult, ...]) -> None:
        """Answer the callers whose messages were appended: at once, or in
        sync mode once flushed (one wait, one timer for all of them), and on
        a SYNC_MASTER once a slave has them (one wait for all of them).
        Callers that do not wait (WAIT=false) are answered at once either
        way, and the flush is hurried along for them (Java's
        `DefaultFlushManager.handleDiskFlush` wakes its GroupCommitService;
        `CommitLog.needHandleHA` skips the slave wait)."""
        flush = self._flush
        replicate = self.replicate
        if (flush.sync_mode or replicate is not None) and not all(c[4] for c in callers):
            _answer([c for c in callers if not c[4]], results)
            flush.wake()
            callers = [c for c in callers if c[4]]
            if not callers:
                return
        last = results[-1]
        end = last.physical_offset + last.size
        replica = PutStatus.PUT_OK if replicate is None else replicate(end)
        if not flush.sync_mode:
            if replica is PutStatus.PUT_OK:
                _answer(callers, results)
            elif isinstance(replica, PutStatus):
                _answer_with(callers, results, replica)
            else:
                replica.add_done_callback(
                    functools.partial(_replicated, callers, results, PutStatus.PUT_OK)
                )
            return
        self.flush_waits += 1
        durable = flush.wait_async(end)
        if durable.done():
            self._flushed(callers, results, replica, None, durable)
            return
        timer = durable.get_loop().call_later(self._sync_timeout, durable.cancel)
        durable.add_done_callback(
            functools.partial(self._flushed, callers, results, replica, timer)
        )

    @staticmethod
    def _flushed(
        callers: list[_Caller],
        results: tuple[PutResult, ...],
        replica: PutStatus | asyncio.Future[PutStatus],
        timer: asyncio.TimerHandle | None,
        durable: asyncio.Future[bool],
    ) -> None:
        if timer is not None:
            timer.cancel()
        ok = not durable.cancelled() and durable.result()
        flushed = PutStatus.PUT_OK if ok else PutStatus.FLUSH_DISK_TIMEOUT
        if isinstance(replica, PutStatus):
            _answer_with(callers, results, combine(flushed, replica))
        elif replica.done():
            _replicated(callers, results, flushed, replica)
        else:
            replica.add_done_callback(functools.partial(_replicated, callers, results, flushed))


def _replicated(
    callers: list[_Caller],
    results: tuple[PutResult, ...],
    flushed: PutStatus,
    replica: asyncio.Future[PutStatus],
) -> None:
    """A SYNC_MASTER's slave wait ended (after the flush's, if any)."""
    status = PutStatus.FLUSH_SLAVE_TIMEOUT if replica.cancelled() else replica.result()
    _answer_with(callers, results, combine(flushed, status))


def _answer_with(
    callers: Sequence[_Caller], results: tuple[PutResult, ...], status: PutStatus
) -> None:
    """Answer stored messages with `status` (PUT_OK, or what durability they lack)."""
    if status is PutStatus.PUT_OK:
        _answer(callers, results)
        return
    remark = (
        FLUSH_TIMEOUT_REMARK if status is PutStatus.FLUSH_DISK_TIMEOUT else REPLICA_REMARKS[status]
    )
    marked = tuple(
        PutResult(
            status, r.physical_offset, r.size, r.queue_offset, r.store_timestamp, r.msg_id, remark
        )
        for r in results
    )
    _answer(callers, marked, status, remark)


def _answer(
    callers: Sequence[_Caller],
    results: tuple[PutResult, ...],
    status: PutStatus = PutStatus.PUT_OK,
    remark: str = "",
) -> None:
    for future, start, count, batch, _ in callers:
        if future.done():  # the caller was cancelled; its message is stored
            continue
        if batch:
            future.set_result(BatchPutResult(status, results[start : start + count], remark))
        else:
            future.set_result(results[start])


def _refuse(callers: Sequence[_Caller], outcome: BatchPutResult) -> None:
    for future, _, _, batch, _ in callers:
        if future.done():
            continue
        if batch:
            future.set_result(outcome)
        elif len(outcome.results) == 1:
            future.set_result(outcome.results[0])
        else:
            future.set_result(PutResult(outcome.status, remark=outcome.remark))
