"""Orderly consumption (Java ``ConsumeMessageOrderlyService``): each queue is
consumed by one task at a time, in offset order, only while this consumer
holds the queue's broker lock (clustering).

How a queue is consumed:

* :meth:`ConsumeOrderlyService.submit` starts a consume task when
  ``pq.put`` asked for one; the task holds the queue's *run lock* (Java's
  ``MessageQueueLock``), so tasks of one queue never overlap;
* the task takes batches of ``consume_message_batch_max_size`` smallest
  offsets (``pq.take``) and hands each to the listener under the queue's
  *consume lock* (Java's ``pq.consumeLock``), which rebalance waits for
  before it gives a queue away (:meth:`ConsumeOrderlyService.try_release`);
* SUCCESS commits the batch (``pq.commit``) and records the offset; a
  failure (SUSPEND_CURRENT_QUEUE_A_MOMENT, an exception, None) puts the batch
  back with reconsume times + 1 and retries the queue after the suspend time
  (local retry: nothing later in the queue is consumed meanwhile); a message
  that already failed ``max_reconsume_times`` goes to ``%DLQ%<group>``
  (CONSUMER_SEND_MSG_BACK with delay level -1) and counts as done; if that
  send fails it is retried locally like any failure;
* a task stops after 60 s of continuous consumption and re-schedules itself,
  so one busy queue cannot hold a pool slot for ever;
* clustering: before every batch the lock must be held and not expired on
  the client side (30 s since the last renewal); otherwise the task stops,
  tries to lock the queue again a moment later and resumes when it wins
  (Java ``tryLockLaterAndReconsume``). Broadcasting needs no lock.

Locks are renewed every 20 s by a :class:`~.queue_locks.QueueLockService`,
started and stopped with this service.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from tidemq.client._core.backoff import ORDERLY_MAX_CONSUME_CONTINUOUSLY_MS, orderly_suspend_ms
from tidemq.client._core.process_queue import ProcessQueue
from tidemq.client.consumer.context import ConsumerContext
from tidemq.client.consumer.listener import (
    CONSUME_CONTEXT_TYPE,
    ConsumeHookContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    OrderlyListener,
    consume_return_type,
    orderly_status,
)
from tidemq.client.consumer.offset_store import BrokerOffsetStore
from tidemq.client.consumer.queue_locks import QueueLockService
from tidemq.client.errors import ClientError
from tidemq.common.message import MessageExt, MessageQueue
from tidemq.common.tasks import TaskSet

__all__ = [
    "DLQ_DELAY_LEVEL",
    "RELEASE_WAIT_S",
    "UNLOCK_DELAY_S",
    "ConsumeOrderlyService",
    "FailedBatchPlan",
    "plan_failed_batch",
]

log = logging.getLogger(__name__)

DLQ_DELAY_LEVEL = -1
"""A send-back delay level below 0 makes the broker store the copy in the DLQ."""
RELEASE_WAIT_S = 1.0
"""Java ``removeUnnecessaryMessageQueue``: wait at most 1 s for the batch in flight."""
UNLOCK_DELAY_S = 20.0
"""Java ``UNLOCK_DELAY_TIME_MILLS``: a queue released with a batch still
taken is unlocked only after this delay."""
RESUME_AFTER_YIELD_S = 0.01
"""Java re-submits after 10 ms when a task yields or wins a lock back."""
RELOCK_AFTER_NOT_LOCKED_S = 0.1
"""Java ``tryLockLaterAndReconsume(..., 100)`` when a task finds no lock at start."""
RELOCK_AFTER_EXPIRED_S = 0.01
"""... and after 10 ms when the lock is lost in the middle of a run."""
RETRY_AFTER_LOCK_REFUSED_S = 3.0
"""Java re-submits after 3 s when the broker refuses the lock."""


@dataclass(frozen=True, slots=True)
class FailedBatchPlan:
    """What to do with a batch whose listener did not succeed."""

    retry_locally: list[MessageExt]
    """Put back (reconsume times + 1) and consumed again after the suspend time."""
    to_dlq: list[MessageExt]
    """Failed ``max_reconsume_times`` already: sent to the DLQ and counted as done."""


def plan_failed_batch(messages: Sequence[MessageExt], max_reconsume_times: int) -> FailedBatchPlan:
    """Split a failed batch as Java's ``checkReconsumeTimes`` does: a message whose
    ``reconsume_times`` reached ``max_reconsume_times`` leaves for the DLQ, the
    others are retried locally. Both lists keep offset order."""
    ordered = sorted(messages, key=lambda msg: msg.queue_offset)
    return FailedBatchPlan(
        retry_locally=[msg for msg in ordered if msg.reconsume_times < max_reconsume_times],
        to_dlq=[msg for msg in ordered if msg.reconsume_times >= max_reconsume_times],
    )


class ConsumeOrderlyService:
    """The orderly :class:`~.context.ConsumeService` of a push consumer.

    ``lock_service`` renews the broker locks (clustering); one is built from
    the context when none is given. To (re-)lock one queue the service uses
    ``context.lock`` when set, else ``lock_service.lock``.
    """

    def __init__(
        self,
        context: ConsumerContext,
        listener: OrderlyListener,
        *,
        lock_service: QueueLockService | None = None,
        max_consume_continuously_ms: int = ORDERLY_MAX_CONSUME_CONTINUOUSLY_MS,
    ) -> None:
        self._ctx = context
        self._listener = listener
        self._max_continuous_s = max_consume_continuously_ms / 1000
        if lock_service is None and not context.broadcasting:
            lock_service = QueueLockService(
                context.instance, context.group, context.process_queues, context.clock
            )
        self._lock_service = lock_service
        self._run_locks: dict[MessageQueue, asyncio.Lock] = {}
        self._consume_locks: dict[MessageQueue, asyncio.Lock] = {}
        self._tasks = TaskSet(f"orderly consume {context.group}")
        self._unlock_pending: set[MessageQueue] = set()
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopped = False

    @property
    def lock_service(self) -> QueueLockService | None:
        """The renewal service (None in broadcasting mode)."""
        return self._lock_service

    # -- ConsumeService --------------------------------------------------------------

    def start(self) -> None:
        """Clustering: start renewing the broker locks of every assigned queue."""
        if self._lock_service is not None:
            self._lock_service.start()

    def submit(
        self,
        messages: list[MessageExt],
        pq: ProcessQueue,
        mq: MessageQueue,
        dispatch_to_consume: bool,
    ) -> None:
        """Start a consume task for ``mq`` when ``pq.put`` asked for one; the
        messages themselves are read from ``pq``."""
        if dispatch_to_consume and not self._stopping:
            self._tasks.spawn(self._consume_queue(mq, pq))

    async def shutdown(self, await_termination_s: float) -> None:
        """Take no new batch, wait up to ``await_termination_s`` for the ones in
        flight, stop the renewals, persist the offsets and (clustering) unlock
        every queue. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(await_termination_s, 0.0)):
                await self._idle.wait()
        if self._in_flight:
            log.warning(
                "%s: %d orderly batch(es) still running at shutdown; their offsets "
                "are not committed",
                self._ctx.group,
                self._in_flight,
            )
        await self._tasks.cancel_all()
        if self._lock_service is None:
            return
        await self._lock_service.stop()
        mqs = list(self._ctx.process_queues)
        try:
            await self._persist(mqs)
        finally:
            await self._lock_service.unlock_all()
            for mq in sorted(self._unlock_pending - set(mqs)):  # delayed unlocks cut short
                await self._lock_service.unlock(mq)
            self._unlock_pending.clear()

    # -- rebalance ---------------------------------------------------------------------

    async def try_release(
        self, mq: MessageQueue, pq: ProcessQueue, *, wait_s: float = RELEASE_WAIT_S
    ) -> bool:
        """Give a queue up (rebalance dropped it): wait up to ``wait_s`` for the
        batch in flight, then persist the offset and unlock the queue.

        Marks ``pq`` dropped while waiting so no new batch starts. False when
        the batch did not finish in time: ``pq.dropped`` is put back as it was
        and the caller keeps the queue and tries again at the next rebalance
        (Java ``removeUnnecessaryMessageQueue``). The offset is persisted but
        not removed from the store (the caller does that).
        """
        was_dropped = pq.dropped
        pq.dropped = True
        consume_lock = self._consume_lock(mq)
        try:
            async with asyncio.timeout(wait_s):
                await consume_lock.acquire()
        except TimeoutError:
            pq.dropped = was_dropped
            log.warning(
                "%s: %s is still being consumed; kept until the next rebalance",
                self._ctx.group,
                mq,
            )
            return False
        try:
            await self._persist([mq])
            if self._lock_service is not None:
                if pq.has_consuming():
                    # A batch was taken but not finished: delay the unlock as Java
                    # does, so the next owner starts after it settled.
                    self._unlock_pending.add(mq)
                    self._tasks.spawn(self._unlock_later(mq, UNLOCK_DELAY_S))
                else:
                    await self._lock_service.unlock(mq)
        finally:
            consume_lock.release()
        return True

    async def _unlock_later(self, mq: MessageQueue, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        self._unlock_pending.discard(mq)
        if self._lock_service is not None and mq not in self._ctx.process_queues:
            await self._lock_service.unlock(mq)

    # -- the consume task ----------------------------------------------------------------

    @property
    def _stopping(self) -> bool:
        return self._stopped or self._ctx.stopping

    def _gone(self, pq: ProcessQueue) -> bool:
        """The queue was given away or the consumer is stopping: no new batch."""
        return pq.dropped or self._stopping

    def _lock_ready(self, pq: ProcessQueue) -> bool:
        return self._ctx.broadcasting or (pq.locked and not pq.is_lock_expired())

    async def _consume_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """One consume task: batches of ``mq`` in offset order until the queue is
        empty, a batch fails, the lock is lost or 60 s have passed."""
        if self._gone(pq):
            return
        async with self._run_lock(mq):
            if self._gone(pq):
                return
            if not self._lock_ready(pq):
                self._try_lock_later(mq, pq, RELOCK_AFTER_NOT_LOCKED_S)
                return
            started = self._ctx.clock.monotonic()
            while not self._gone(pq):
                if not self._lock_ready(pq):
                    self._try_lock_later(mq, pq, RELOCK_AFTER_EXPIRED_S)
                    return
                if self._ctx.clock.monotonic() - started > self._max_continuous_s:
                    self._resume_later(mq, pq, RESUME_AFTER_YIELD_S)
                    return
                if not await self._consume_one_batch(mq, pq):
                    return

    async def _consume_one_batch(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Take and consume one batch; False when the task should stop."""
        async with self._consume_lock(mq):
            if self._gone(pq):
                return False
            batch = pq.take(self._ctx.settings.consume_message_batch_max_size)
            if not batch:
                return False  # empty: take() cleared the dispatch mark
            self._in_flight += 1
            self._idle.clear()
            try:
                return await self._consume_batch(mq, pq, batch)
            finally:
                self._in_flight -= 1
                if not self._in_flight:
                    self._idle.set()

    async def _consume_batch(
        self, mq: MessageQueue, pq: ProcessQueue, batch: list[MessageExt]
    ) -> bool:
        ctx = self._ctx
        ctx.restore_retry_topics(batch)
        listener_context = ConsumeOrderlyContext(mq=mq)
        hook_context = ConsumeHookContext(
            group=ctx.group, mq=mq, messages=list(batch), orderly=True
        )
        ctx.hooks_before(hook_context)
        hook_context.started_ms = ctx.clock.now_ms()
        status: ConsumeOrderlyStatus
        result: object = None
        raised = False
        try:
            result = await ctx.call_listener(self._listener, list(batch), listener_context)
            status = orderly_status(result)
            hook_context.status = status.value
        except Exception:
            raised = True
            log.exception(
                "%s: orderly listener failed on %s offsets %d..%d",
                ctx.group,
                mq,
                batch[0].queue_offset,
                batch[-1].queue_offset,
            )
            status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            hook_context.status = "EXCEPTION"
        hook_context.success = status is ConsumeOrderlyStatus.SUCCESS
        if ctx.hooks:
            hook_context.properties[CONSUME_CONTEXT_TYPE] = consume_return_type(
                result,
                raised,
                ctx.clock.now_ms() - hook_context.started_ms,
                round(ctx.settings.consume_timeout_min * 60_000),
            )
        ctx.hooks_after(hook_context)
        if not listener_context.auto_commit:
            log.debug("%s: auto_commit=False is not supported; SUCCESS commits", ctx.group)
        if status is ConsumeOrderlyStatus.SUCCESS:
            self._commit(mq, pq)
            return True
        return await self._handle_failure(mq, pq, batch, listener_context)

    async def _handle_failure(
        self,
        mq: MessageQueue,
        pq: ProcessQueue,
        batch: list[MessageExt],
        listener_context: ConsumeOrderlyContext,
    ) -> bool:
        """Dead-letter what failed too often, retry the rest locally; True when
        nothing is left to retry (the task goes on with the next batch)."""
        plan = plan_failed_batch(batch, self._ctx.max_reconsume_times)
        retry = list(plan.retry_locally)
        for msg in plan.to_dlq:
            if await self._ctx.send_back(msg, DLQ_DELAY_LEVEL, mq.broker_name):
                log.info(
                    "%s: message %s (%s offset %d) failed %d times, sent to the DLQ",
                    self._ctx.group,
                    msg.msg_id,
                    mq,
                    msg.queue_offset,
                    msg.reconsume_times,
                )
            else:
                retry.append(msg)
        if not retry:
            self._commit(mq, pq)
            return True
        # Messages sent to the DLQ stay in the consuming batch and are committed
        # with the next successful batch; the rest goes back in offset order.
        pq.make_available_again(sorted(retry, key=lambda msg: msg.queue_offset))
        suspend_ms = orderly_suspend_ms(
            listener_context.suspend_current_queue_time_ms,
            self._ctx.settings.suspend_current_queue_time_ms,
        )
        self._resume_later(mq, pq, suspend_ms / 1000)
        return False

    def _commit(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """Record the batch as consumed.

        Unlike Java (and ``ConsumerContext.update_offset``) the offset is kept
        even when the queue was marked dropped meanwhile: the batch ran under
        the consume lock, which :meth:`try_release` waits for before it
        persists and unlocks, so the next owner starts after this batch
        instead of consuming it again. A stale entry cannot leak: the store
        forgets queues no longer assigned when it persists.
        """
        offset = pq.commit()
        if offset >= 0:
            self._ctx.offset_store.update(mq, offset, increase_only=True)

    # -- scheduling ----------------------------------------------------------------------

    def _resume_later(self, mq: MessageQueue, pq: ProcessQueue, delay_s: float) -> None:
        if self._gone(pq):
            return
        self._tasks.spawn(self._after(delay_s, lambda: self._consume_queue(mq, pq)))

    def _try_lock_later(self, mq: MessageQueue, pq: ProcessQueue, delay_s: float) -> None:
        if self._gone(pq):
            return
        self._tasks.spawn(self._after(delay_s, lambda: self._relock_and_resume(mq, pq)))

    async def _relock_and_resume(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        if self._gone(pq):
            return
        if await self._lock(mq):
            self._ctx.wake_pull(mq)
            self._resume_later(mq, pq, RESUME_AFTER_YIELD_S)
        else:
            self._resume_later(mq, pq, RETRY_AFTER_LOCK_REFUSED_S)

    async def _lock(self, mq: MessageQueue) -> bool:
        if self._ctx.lock is not None:
            return await self._ctx.lock(mq)
        if self._lock_service is not None:
            return await self._lock_service.lock(mq)
        return True

    @staticmethod
    async def _after(delay_s: float, action: Callable[[], Awaitable[None]]) -> None:
        await asyncio.sleep(delay_s)
        await action()

    async def _persist(self, mqs: Sequence[MessageQueue]) -> None:
        """Send the offsets to the store now, awaiting the broker's answer when
        it is the broker store, so an unlock that follows cannot overtake the
        commit. Failures are logged: the unlock must still happen."""
        store = self._ctx.offset_store
        if not mqs:
            return
        try:
            if isinstance(store, BrokerOffsetStore):
                if len(mqs) == 1:
                    await store.persist(mqs[0], oneway=False)
                else:
                    await store.persist_all(mqs, oneway=False)
            elif len(mqs) == 1:
                await store.persist(mqs[0])
            else:
                await store.persist_all(mqs)
        except (ClientError, OSError) as exc:
            log.warning("%s: persisting offsets failed: %s", self._ctx.group, exc)

    # -- per-queue locks -------------------------------------------------------------------

    def _run_lock(self, mq: MessageQueue) -> asyncio.Lock:
        return self._run_locks.setdefault(mq, asyncio.Lock())

    def _consume_lock(self, mq: MessageQueue) -> asyncio.Lock:
        return self._consume_locks.setdefault(mq, asyncio.Lock())
