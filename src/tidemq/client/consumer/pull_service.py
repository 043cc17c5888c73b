"""The push consumer's pull loop (Java ``PullMessageService`` +
``DefaultMQPushConsumerImpl.pullMessage``).

Each held queue has one :class:`PullRequest`; the service runs one owned
task per request that pulls, buffers the messages in the queue's
ProcessQueue, hands them to the consume service and pulls again:

* flow control: more than ``pull_threshold_for_queue`` messages, more than
  ``pull_threshold_size_for_queue_mib`` MiB, or (concurrent mode) an offset
  span over ``consume_concurrently_max_span`` held -> try again in 50 ms
  (logged every 1000 times, as Java);
* orderly clustering: pull only while the queue's broker lock is held (else
  try again in 3 s); the first pull after locking re-reads the offset from the
  store, because another consumer may have moved it meanwhile;
* clustering: the in-memory consumed offset rides along (COMMIT_OFFSET);
* FOUND -> next offset, put, submit, then pull again (after
  ``pull_interval_s`` if set; else after one loop pass, so that the consume
  job starts first); NO_NEW_MSG / NO_MATCHED_MSG -> next offset
  (stored at once when nothing is buffered, Java's correctTagsOffset);
  OFFSET_ILLEGAL -> the queue is dropped, and 10 s later the corrected
  offset is stored and persisted and the queue forgotten, so the next
  rebalance starts it afresh from there (Java);
* any failure -> try again in 3 s;
* suspended (:meth:`PullService.suspend`, Java's ``pause``): no new pull is
  sent; each loop looks again every 1 s (Java), which also keeps its queue
  from looking pull-expired to the rebalancer. A pull already sent completes
  and its messages are buffered and consumed as usual.
  :meth:`PullService.resume` wakes every loop at once.

A request ends when its ProcessQueue is dropped or the service stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidemq.client._core.backoff import (
    PULL_DELAY_ON_EXCEPTION_MS,
    PULL_DELAY_ON_FLOW_CONTROL_MS,
    PULL_DELAY_ON_SUSPEND_MS,
)
from tidemq.client._core.process_queue import ProcessQueue
from tidemq.client.consumer.context import ConsumerContext, ConsumeService
from tidemq.client.consumer.offset_store import ReadOffsetType
from tidemq.client.consumer.pull_api import PullStatus, pull_message
from tidemq.client.consumer.pull_nodes import PullNodeTable
from tidemq.client.errors import ClientError
from tidemq.common.message import MessageQueue
from tidemq.common.tasks import TaskSet

if TYPE_CHECKING:
    from tidemq.client.consumer.subscription import SubscriptionSpec

__all__ = ["PullRequest", "PullService"]

log = logging.getLogger(__name__)

EXCEPTION_DELAY_S = PULL_DELAY_ON_EXCEPTION_MS / 1000
FLOW_CONTROL_DELAY_S = PULL_DELAY_ON_FLOW_CONTROL_MS / 1000
SUSPENDED_DELAY_S = PULL_DELAY_ON_SUSPEND_MS / 1000
OFFSET_ILLEGAL_FIX_DELAY_S = 10.0
"""Java waits 10 s before storing the corrected offset of an OFFSET_ILLEGAL queue."""
FLOW_CONTROL_LOG_EVERY = 1000


@dataclass(slots=True, eq=False)
class PullRequest:
    """One held queue's pull position."""

    mq: MessageQueue
    pq: ProcessQueue
    next_offset: int
    previously_locked: bool = False
    running: bool = False
    """A pull loop serves this request now."""
    suspended_waits: int = 0
    """How often its loop found the service suspended (and sent no pull)."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)


class PullService:
    """Runs a pull loop per held queue; see the module docstring."""

    def __init__(
        self,
        context: ConsumerContext,
        subscriptions: Mapping[str, SubscriptionSpec],
        consume_service: ConsumeService,
        compute_pull_from_where: Callable[[MessageQueue], Awaitable[int]],
    ) -> None:
        self._context = context
        self._subscriptions = subscriptions
        self._consume = consume_service
        self._compute_pull_from_where = compute_pull_from_where
        self._tasks = TaskSet(f"pull {context.group}")
        self._requests: dict[MessageQueue, PullRequest] = {}
        self._stopped = False
        self._suspended = False
        self.flow_control_times = 0
        """How often a pull waited for flow control (all queues)."""
        self.nodes = PullNodeTable()
        """Which broker each queue is pulled from next (the brokers' suggestions)."""
        self.pulls = 0
        self.messages_pulled = 0
        self.suspended_waits = 0
        """How often a loop found the service suspended and waited (all queues)."""

    # -- requests -------------------------------------------------------------------

    def add(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> PullRequest:
        """Start pulling ``mq`` at ``next_offset`` into ``pq``."""
        request = PullRequest(mq, pq, next_offset)
        self._requests[mq] = request
        self.restart(request)
        return request

    def restart(self, request: PullRequest) -> None:
        """(Re)start the loop of ``request`` unless one runs or its queue is dropped;
        for a queue whose release failed (its loop may have seen it dropped)."""
        if self._stopped or request.running or request.pq.dropped:
            return
        request.running = True
        self._requests[request.mq] = request
        self._tasks.spawn(self._run(request))

    def wake(self, mq: MessageQueue) -> None:
        """Pull ``mq`` now instead of after its current wait."""
        request = self._requests.get(mq)
        if request is not None:
            request.wake.set()

    def request(self, mq: MessageQueue) -> PullRequest | None:
        return self._requests.get(mq)

    # -- suspend / resume -------------------------------------------------------------

    @property
    def suspended(self) -> bool:
        return self._suspended

    def suspend(self) -> None:
        """Send no new pull until :meth:`resume` (pulls already sent complete)."""
        self._suspended = True

    def resume(self) -> None:
        """Pull again, at once rather than at each loop's next 1 s look."""
        self._suspended = False
        for request in self._requests.values():
            request.wake.set()

    async def stop(self) -> None:
        """Stop every pull loop (pulls in flight are abandoned; nothing is lost:
        their messages were never buffered, so never committed)."""
        self._stopped = True
        await self._tasks.cancel_all()
        self._requests.clear()

    # -- the loop ---------------------------------------------------------------------

    async def _run(self, request: PullRequest) -> None:
        try:
            while not request.pq.dropped and not self._stopped:
                try:
                    delay = await self._pull_once(request)
                except ClientError as exc:
                    log.warning(
                        "%s: pulling %s failed (retry in %.0f s): %s",
                        self._context.group,
                        request.mq,
                        EXCEPTION_DELAY_S,
                        exc,
                    )
                    delay = EXCEPTION_DELAY_S
                except Exception:
                    log.exception("%s: pulling %s failed", self._context.group, request.mq)
                    delay = EXCEPTION_DELAY_S
                if delay > 0 and not request.pq.dropped:
                    request.wake.clear()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(delay):
                            await request.wake.wait()
        finally:
            request.running = False
            if self._requests.get(request.mq) is request:
                del self._requests[request.mq]

    async def _pull_once(self, request: PullRequest) -> float:
        """One pull; returns how long to wait before the next one (seconds)."""
        context = self._context
        settings = context.settings
        mq, pq = request.mq, request.pq
        pq.mark_pulled()
        if self._suspended:
            request.suspended_waits += 1
            self.suspended_waits += 1
            log.debug("%s: suspended, %s pulled later", context.group, mq)
            return SUSPENDED_DELAY_S
        reason = pq.over_limits(
            settings.pull_threshold_for_queue,
            settings.pull_threshold_size_for_queue_mib,
            None if settings.orderly else settings.consume_concurrently_max_span,
        )
        if reason is not None:
            if self.flow_control_times % FLOW_CONTROL_LOG_EVERY == 0:
                # Normal backpressure (a backlog): INFO, once per 1000 as Java logs it.
                log.info(
                    "%s: flow control on %s: %s (flow control times %d)",
                    context.group,
                    mq,
                    reason,
                    self.flow_control_times,
                )
            self.flow_control_times += 1
            return FLOW_CONTROL_DELAY_S
        if settings.orderly and not context.broadcasting:
            if not pq.locked:
                log.debug("%s: %s not locked yet, pull later", context.group, mq)
                return EXCEPTION_DELAY_S
            if not request.previously_locked:
                offset = await self._compute_pull_from_where(mq)
                if offset < 0:
                    return EXCEPTION_DELAY_S
                if offset < request.next_offset:
                    log.info(
                        "%s: %s restarts at the stored offset %d (was %d)",
                        context.group,
                        mq,
                        offset,
                        request.next_offset,
                    )
                request.previously_locked = True
                request.next_offset = offset
        subscription = self._subscriptions.get(mq.topic)
        if subscription is None:
            log.warning("%s: no subscription for %s, pull later", context.group, mq)
            return EXCEPTION_DELAY_S
        commit_offset: int | None = None
        if not context.broadcasting:
            in_memory = await context.offset_store.read(mq, ReadOffsetType.READ_FROM_MEMORY)
            commit_offset = in_memory if in_memory > 0 else None
        result = await pull_message(
            context.instance,
            group=context.group,
            mq=mq,
            subscription=subscription,
            offset=request.next_offset,
            max_nums=settings.pull_batch_size,
            commit_offset=commit_offset,
            suspend_ms=settings.suspend_ms,
            nodes=self.nodes,
        )
        self.pulls += 1
        if pq.dropped:
            return 0.0
        status = result.status
        if status is PullStatus.FOUND:
            request.next_offset = result.next_begin_offset
            messages = result.messages
            if not messages:
                return 0.0
            self.messages_pulled += len(messages)
            dispatch = pq.put(messages)
            self._consume.submit(messages, pq, mq, dispatch)
            if not settings.pull_interval_s:
                # One loop pass for the consume job just submitted: it starts
                # (or is handed to its thread) before the next pull is built.
                await asyncio.sleep(0)
            return settings.pull_interval_s
        if status is PullStatus.OFFSET_ILLEGAL:
            log.warning(
                "%s: offset %d of %s is illegal (broker min %d, max %d): restarting at %d",
                context.group,
                request.next_offset,
                mq,
                result.min_offset,
                result.max_offset,
                result.next_begin_offset,
            )
            request.next_offset = result.next_begin_offset
            pq.dropped = True
            context.spawn(self._fix_illegal_offset(mq, pq, result.next_begin_offset))
            return 0.0
        # NO_NEW_MSG, NO_MATCHED_MSG: the broker already held the pull (long
        # polling), so pull again at once, as Java does
        request.next_offset = result.next_begin_offset
        if pq.count == 0:
            context.offset_store.update(mq, request.next_offset, increase_only=True)
        return 0.0

    async def _fix_illegal_offset(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        await asyncio.sleep(OFFSET_ILLEGAL_FIX_DELAY_S)
        store = self._context.offset_store
        store.update(mq, offset, increase_only=False)
        await store.persist(mq)
        if self._context.process_queues.get(mq) is pq:
            del self._context.process_queues[mq]
        store.remove(mq)
        log.warning("%s: %s offset corrected to %d", self._context.group, mq, offset)
