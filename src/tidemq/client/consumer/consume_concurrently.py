"""Concurrent consumption (Java ``ConsumeMessageConcurrentlyService``).

Pulled messages are cut into batches of ``consume_message_batch_max_size``
and given to the listener, many batches at once (``consume_thread_count``
threads for a plain function, as many concurrent calls for an ``async def``).
After each call:

* CONSUME_SUCCESS acknowledges the batch up to ``context.ack_index``; the
  rest, and the whole batch on RECONSUME_LATER / an exception / None, failed;
* clustering: failed messages are sent back (CONSUMER_SEND_MSG_BACK) with
  ``delay_level_when_next_consume`` (0 = the broker decides); a message the
  broker did not take back stays buffered and is consumed again here after
  5 s with ``reconsume_times`` + 1; broadcasting: failures are only logged;
* the messages done are removed from the ProcessQueue and the offset it
  reports (smallest still buffered, or max + 1) is stored, increase only.

Every ``consume_timeout_min`` minutes, buffered messages whose consumption
started longer ago than that are sent back (delay level 3) and removed.

Lean path: the batches of one pull run as a few jobs, so thread hand-offs,
tasks and bookkeeping are per job, not per message: one job when the listener
is quick (under 0.2 ms a call on average: more threads would only fight over
the GIL), else one per idle thread so slow (blocking) listeners run in
parallel. Hooks run where the listener runs
(the pool thread for plain functions).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from tidemq.client._core.backoff import LOCAL_RETRY_AFTER_SEND_BACK_FAILURE_MS
from tidemq.client._core.process_queue import ProcessQueue, stamp_consume_start
from tidemq.client.consumer.context import ConsumerContext
from tidemq.client.consumer.listener import (
    CONSUME_CONTEXT_TYPE,
    ConcurrentListener,
    ConsumeConcurrentlyContext,
    ConsumeHookContext,
    ConsumeStatus,
    concurrent_status,
    consume_return_type,
    is_async_listener,
)
from tidemq.common.message import MessageExt, MessageQueue
from tidemq.common.names import is_retry_topic
from tidemq.common.tasks import TaskSet

__all__ = ["EXPIRED_SEND_BACK_DELAY_LEVEL", "ConsumeConcurrentlyService", "split_jobs"]

log = logging.getLogger(__name__)

EXPIRED_SEND_BACK_DELAY_LEVEL = 3
"""Java sends a message whose consumption timed out back at delay level 3."""
QUICK_LISTENER_CALL_S = 0.0002
"""Below this average call time the batches of one pull run as one job: the
thread hand-off would cost more than the parallelism brings."""
CALL_TIME_WEIGHT = 0.2
"""Weight of the newest job in the moving average of the listener's call time."""

Outcome = tuple[list[MessageExt], ConsumeStatus, ConsumeConcurrentlyContext]


def split_jobs(batches: list[list[MessageExt]], jobs: int) -> list[list[list[MessageExt]]]:
    """Cut ``batches`` into ``jobs`` (at least 1) contiguous groups of nearly equal size."""
    count = max(1, min(jobs, len(batches)))
    size, extra = divmod(len(batches), count)
    groups: list[list[list[MessageExt]]] = []
    start = 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        groups.append(batches[start:end])
        start = end
    return groups


class ConsumeConcurrentlyService:
    """Implements :class:`~.context.ConsumeService` for concurrent listeners."""

    def __init__(self, context: ConsumerContext, listener: ConcurrentListener) -> None:
        self._context = context
        self._listener = listener
        self._is_async = is_async_listener(listener)
        self._jobs = TaskSet(f"consume {context.group}")
        self._background = TaskSet(f"consume timers {context.group}")
        self._in_flight = 0
        self._call_time_s = 1.0
        """Moving average of one listener call (starts "slow": jobs are split)."""
        self._stopped = False
        self.consumed_ok = 0
        self.consumed_failed = 0

    # -- ConsumeService ----------------------------------------------------------

    def start(self) -> None:
        self._background.spawn(self._clean_expired_forever())

    async def shutdown(self, await_termination_s: float) -> None:
        self._stopped = True
        await self._background.cancel_all()
        if not await self._jobs.wait(await_termination_s):
            log.warning(
                "%s: %d consume job(s) still running after %.1f s; their messages stay uncommitted",
                self._context.group,
                len(self._jobs),
                await_termination_s,
            )
        await self._jobs.cancel_all()

    def submit(
        self,
        messages: list[MessageExt],
        pq: ProcessQueue,
        mq: MessageQueue,
        dispatch_to_consume: bool,
    ) -> None:
        if self._stopped or not messages:
            return
        if is_retry_topic(mq.topic):
            self._context.restore_retry_topics(messages)
        size = self._context.settings.consume_message_batch_max_size
        if len(messages) <= size:
            batches = [messages]
        else:
            batches = [messages[i : i + size] for i in range(0, len(messages), size)]
        if self._call_time_s < QUICK_LISTENER_CALL_S:
            jobs = 1  # a quick listener gains nothing from more threads (one GIL)
        else:
            jobs = self._context.settings.consume_thread_count - self._in_flight
        for group in split_jobs(batches, jobs):
            self._in_flight += 1
            self._jobs.spawn(self._job(group, pq, mq))

    @property
    def in_flight(self) -> int:
        """Jobs submitted and not finished."""
        return self._in_flight

    # -- one job -------------------------------------------------------------------

    async def _job(
        self, batches: list[list[MessageExt]], pq: ProcessQueue, mq: MessageQueue
    ) -> None:
        try:
            if pq.dropped:
                return
            started = time.perf_counter()
            if self._is_async:
                outcomes = await self._consume_async(batches, pq, mq)
            else:
                loop = asyncio.get_running_loop()
                outcomes = await loop.run_in_executor(
                    self._context.executor, self._consume_in_thread, batches, pq, mq
                )
            if outcomes:
                per_call = (time.perf_counter() - started) / len(outcomes)
                self._call_time_s += (per_call - self._call_time_s) * CALL_TIME_WEIGHT
            await self._process(outcomes, pq, mq)
        finally:
            self._in_flight -= 1

    def _consume_in_thread(
        self, batches: list[list[MessageExt]], pq: ProcessQueue, mq: MessageQueue
    ) -> list[Outcome]:
        """Runs in a pool thread: the listener over each batch, in order."""
        listener = self._listener
        hooks = self._stamp(batches)
        outcomes: list[Outcome] = []
        for batch in batches:
            if pq.dropped:
                break
            call_context = ConsumeConcurrentlyContext(mq)
            hook_context = self._before(batch, mq) if hooks else None
            try:
                result: object = listener(batch, call_context)
                failure: Exception | None = None
            except Exception as exc:
                result, failure = None, exc
            if result.__class__ is ConsumeStatus and hook_context is None:
                outcomes.append((batch, result, call_context))
            else:
                outcomes.append(
                    self._outcome(batch, mq, call_context, hook_context, result, failure)
                )
        return outcomes

    async def _consume_async(
        self, batches: list[list[MessageExt]], pq: ProcessQueue, mq: MessageQueue
    ) -> list[Outcome]:
        """On the loop: the listener over each batch, in order, holding one of the
        ``consume_thread_count`` slots for the whole job."""
        listener = self._listener
        hooks = self._stamp(batches)
        outcomes: list[Outcome] = []
        async with self._context.async_slots:
            for batch in batches:
                if pq.dropped:
                    break
                call_context = ConsumeConcurrentlyContext(mq)
                hook_context = self._before(batch, mq) if hooks else None
                try:
                    result: object = await listener(batch, call_context)  # type: ignore[misc]
                    failure: Exception | None = None
                except Exception as exc:
                    result, failure = None, exc
                if result.__class__ is ConsumeStatus and hook_context is None:
                    outcomes.append((batch, result, call_context))
                else:
                    outcomes.append(
                        self._outcome(batch, mq, call_context, hook_context, result, failure)
                    )
        return outcomes

    def _stamp(self, batches: list[list[MessageExt]]) -> bool:
        """Mark a job's messages as being consumed from now (for the consume
        timeout); whether before/after hooks run."""
        now_ms = self._context.clock.now_ms()
        for batch in batches:
            stamp_consume_start(batch, now_ms)
        return bool(self._context.hooks)

    def _outcome(
        self,
        batch: list[MessageExt],
        mq: MessageQueue,
        call_context: ConsumeConcurrentlyContext,
        hook_context: ConsumeHookContext | None,
        result: object,
        failure: Exception | None,
    ) -> Outcome:
        """One listener call's outcome when it is not a plain ConsumeStatus
        without hooks (that common case stays inline in the callers): an
        exception counts as RECONSUME_LATER, anything else goes through
        concurrent_status; the after-hooks run here. Shared by the thread and
        the asyncio paths."""
        if failure is not None:
            status = ConsumeStatus.RECONSUME_LATER
            self._log_failure(batch, mq, failure)
        elif result.__class__ is ConsumeStatus:
            status = result
        else:
            status = concurrent_status(result)
        if hook_context is not None:
            self._after(hook_context, status, failure, result)
        return (batch, status, call_context)

    def _before(self, batch: Sequence[MessageExt], mq: MessageQueue) -> ConsumeHookContext:
        hook_context = ConsumeHookContext(
            group=self._context.group, mq=mq, messages=batch, orderly=False
        )
        self._context.hooks_before(hook_context)
        hook_context.started_ms = self._context.clock.now_ms()
        return hook_context

    def _after(
        self,
        hook_context: ConsumeHookContext,
        status: ConsumeStatus,
        failure: Exception | None,
        result: object,
    ) -> None:
        context = self._context
        hook_context.status = "EXCEPTION" if failure is not None else status.value
        hook_context.success = status is ConsumeStatus.CONSUME_SUCCESS
        hook_context.properties[CONSUME_CONTEXT_TYPE] = consume_return_type(
            result,
            failure is not None,
            context.clock.now_ms() - hook_context.started_ms,
            round(context.settings.consume_timeout_min * 60_000),
        )
        context.hooks_after(hook_context)

    def _log_failure(self, batch: Sequence[MessageExt], mq: MessageQueue, exc: Exception) -> None:
        log.warning(
            "%s: the listener raised on %d message(s) of %s (RECONSUME_LATER): %r",
            self._context.group,
            len(batch),
            mq,
            exc,
            exc_info=exc,
        )

    # -- results -------------------------------------------------------------------

    async def _process(self, outcomes: list[Outcome], pq: ProcessQueue, mq: MessageQueue) -> None:
        """Java processConsumeResult for a job's batches."""
        context = self._context
        if pq.dropped:
            log.info("%s: %s was dropped; results of a consume job ignored", context.group, mq)
            return
        done: list[MessageExt] = []
        failed: list[tuple[MessageExt, int]] = []
        for batch, status, call_context in outcomes:
            if status is ConsumeStatus.CONSUME_SUCCESS:
                acked = min(call_context.ack_index, len(batch) - 1) + 1
            else:
                acked = 0
            self.consumed_ok += acked
            if acked >= len(batch):
                done.extend(batch)
                continue
            done.extend(batch[:acked])
            self.consumed_failed += len(batch) - acked
            level = call_context.delay_level_when_next_consume
            for msg in batch[acked:]:
                failed.append((msg, level))
        retry_here: list[MessageExt] = []
        if failed:
            if context.broadcasting:
                for msg, _ in failed:
                    log.warning(
                        "%s: broadcasting: message %s of %s not consumed; it is not retried",
                        context.group,
                        msg.msg_id,
                        mq,
                    )
                done.extend(msg for msg, _ in failed)
            else:
                taken = await asyncio.gather(
                    *(context.send_back(msg, level, mq.broker_name) for msg, level in failed)
                )
                for (msg, _), ok in zip(failed, taken, strict=True):
                    if ok:
                        done.append(msg)
                    else:
                        msg.reconsume_times += 1
                        retry_here.append(msg)
        offset = pq.remove(done)
        context.update_offset(mq, pq, offset)
        if retry_here:
            self._background.spawn(self._consume_later(retry_here, pq, mq))

    async def _consume_later(
        self, messages: list[MessageExt], pq: ProcessQueue, mq: MessageQueue
    ) -> None:
        await asyncio.sleep(LOCAL_RETRY_AFTER_SEND_BACK_FAILURE_MS / 1000)
        if not pq.dropped:
            self.submit(messages, pq, mq, True)

    # -- consume timeout -------------------------------------------------------------

    async def _clean_expired_forever(self) -> None:
        interval_s = self._context.settings.consume_timeout_min * 60
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.clean_expired()
            except Exception:
                log.exception("%s: expired-message scan failed", self._context.group)

    async def clean_expired(self) -> int:
        """Send back and remove messages consumed for longer than the timeout;
        returns how many (Java cleanExpireMsg)."""
        context = self._context
        timeout_ms = round(context.settings.consume_timeout_min * 60_000)
        count = 0
        for mq, pq in list(context.process_queues.items()):
            for msg in pq.expired_messages(timeout_ms):
                log.warning(
                    "%s: message %s of %s consumed for over %d ms: sent back",
                    context.group,
                    msg.msg_id,
                    mq,
                    timeout_ms,
                )
                if not context.broadcasting and not await context.send_back(
                    msg, EXPIRED_SEND_BACK_DELAY_LEVEL, mq.broker_name
                ):
                    continue
                context.update_offset(mq, pq, pq.remove([msg]))
                count += 1
        return count
