"""What a push consumer's consume services share.

The push consumer (``push.py``) builds one :class:`ConsumerContext` and hands
it to its consume service: :class:`~.consume_concurrently.ConsumeConcurrentlyService`
or the orderly one. The context gathers the client instance, the settings,
the offset store, the assigned ProcessQueues, the owned tasks and the thread
pool, and offers the few actions every service needs (call a listener with
its hooks, send a message back, update an offset, re-schedule a pull).

Everything here runs on the consumer's event loop; only a synchronous
listener runs in the thread pool (:meth:`ConsumerContext.call_listener`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tidemq.client._core.backoff import effective_max_reconsume_times
from tidemq.client._core.process_queue import (
    DEFAULT_CONSUME_CONCURRENTLY_MAX_SPAN,
    DEFAULT_PULL_THRESHOLD_FOR_QUEUE,
    DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE_MIB,
    ProcessQueue,
)
from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer.listener import (
    ConsumeHook,
    ConsumeHookContext,
    MessageModel,
    is_async_listener,
)
from tidemq.client.consumer.send_back import restore_retry_topics, send_message_back
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientInstance
from tidemq.common.clock import Clock
from tidemq.common.message import MessageExt, MessageQueue
from tidemq.common.tasks import TaskSet

if TYPE_CHECKING:
    from tidemq.client.consumer.offset_store import OffsetStore

__all__ = ["ConsumeService", "ConsumerContext", "ConsumerSettings"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ConsumerSettings:
    """A push consumer's tunables (Java ``DefaultMQPushConsumer`` fields)."""

    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp: str | None = None
    """``yyyyMMddHHmmss`` for CONSUME_FROM_TIMESTAMP; None = 30 minutes ago."""
    consume_thread_count: int = 20
    consume_message_batch_max_size: int = 1
    pull_batch_size: int = 32
    pull_interval_s: float = 0.0
    pull_threshold_for_queue: int = DEFAULT_PULL_THRESHOLD_FOR_QUEUE
    pull_threshold_size_for_queue_mib: int = DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE_MIB
    consume_concurrently_max_span: int = DEFAULT_CONSUME_CONCURRENTLY_MAX_SPAN
    max_reconsume_times: int = -1
    """-1: 16 for concurrent consumption, unlimited for orderly (Java)."""
    consume_timeout_min: float = 15.0
    suspend_current_queue_time_ms: int = 1000
    orderly: bool = False
    suspend_ms: int = 15_000
    """Long-polling time a pull asks the broker for (Java brokerSuspendMaxTimeMillis)."""
    persist_interval_s: float = 5.0
    rebalance_interval_s: float = 20.0

    def validate(self) -> None:
        """ValueError with a readable message for a value Java would refuse."""
        checks: list[tuple[bool, str]] = [
            (1 <= self.consume_thread_count <= 1000, "consume_thread_count must be 1..1000"),
            (
                1 <= self.consume_message_batch_max_size <= 1024,
                "consume_message_batch_max_size must be 1..1024",
            ),
            (1 <= self.pull_batch_size <= 1024, "pull_batch_size must be 1..1024"),
            (0 <= self.pull_interval_s <= 65.535, "pull_interval_s must be 0..65.535"),
            (
                1 <= self.pull_threshold_for_queue <= 65535,
                "pull_threshold_for_queue must be 1..65535",
            ),
            (
                1 <= self.pull_threshold_size_for_queue_mib <= 1024,
                "pull_threshold_size_for_queue_mib must be 1..1024",
            ),
            (
                1 <= self.consume_concurrently_max_span <= 65535,
                "consume_concurrently_max_span must be 1..65535",
            ),
            (self.max_reconsume_times >= -1, "max_reconsume_times must be -1 or more"),
            (self.consume_timeout_min > 0, "consume_timeout_min must be positive"),
            (
                10 <= self.suspend_current_queue_time_ms <= 30_000,
                "suspend_current_queue_time_ms must be 10..30000",
            ),
            (self.suspend_ms >= 0, "suspend_ms cannot be negative"),
            (self.persist_interval_s > 0, "persist_interval_s must be positive"),
            (self.rebalance_interval_s > 0, "rebalance_interval_s must be positive"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    @property
    def broadcasting(self) -> bool:
        return self.message_model is MessageModel.BROADCASTING

    @property
    def effective_max_reconsume_times(self) -> int:
        return effective_max_reconsume_times(self.max_reconsume_times, orderly=self.orderly)


class ConsumeService(Protocol):
    """Turns pulled messages into listener calls (concurrent or orderly)."""

    def start(self) -> None:
        """Start background work (expiry scans, ...); called once by the consumer."""
        ...

    async def shutdown(self, await_termination_s: float) -> None:
        """Stop taking work and wait up to ``await_termination_s`` for batches in flight."""
        ...

    def submit(
        self,
        messages: list[MessageExt],
        pq: ProcessQueue,
        mq: MessageQueue,
        dispatch_to_consume: bool,
    ) -> None:
        """Messages just put into ``pq`` (``dispatch_to_consume`` is what
        ``pq.put`` returned); must not block."""
        ...


class ConsumerContext:
    """The shared state and actions of one push consumer's consume service."""

    def __init__(
        self,
        *,
        instance: ClientInstance,
        group: str,
        settings: ConsumerSettings,
        offset_store: OffsetStore,
        process_queues: dict[MessageQueue, ProcessQueue],
        clock: Clock,
        tasks: TaskSet,
        hooks: Sequence[ConsumeHook] = (),
        wake_pull: Callable[[MessageQueue], None] | None = None,
        lock: Callable[[MessageQueue], Awaitable[bool]] | None = None,
    ) -> None:
        self.instance = instance
        self.group = group
        self.settings = settings
        self.offset_store = offset_store
        self.process_queues = process_queues
        """The Rebalancer's table of assigned queues (read only here)."""
        self.clock = clock
        self.tasks = tasks
        """Owned by the consumer; cancelled at shutdown."""
        self.hooks: list[ConsumeHook] = list(hooks)
        self._wake_pull = wake_pull
        self.lock = lock
        """Orderly: try to (re-)lock a queue at the broker (QueueLockService.lock)."""
        self._executor: ThreadPoolExecutor | None = None
        self.async_slots = asyncio.Semaphore(settings.consume_thread_count)
        """At most ``consume_thread_count`` async listener calls (or jobs) at once."""
        self.stopping = False
        """Set when shutdown starts: services take no new batches."""

    # -- settings shortcuts ----------------------------------------------------

    @property
    def broadcasting(self) -> bool:
        return self.settings.broadcasting

    @property
    def max_reconsume_times(self) -> int:
        return self.settings.effective_max_reconsume_times

    # -- tasks and pulls ---------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        return self.tasks.spawn(coro)

    def wake_pull(self, mq: MessageQueue) -> None:
        """Ask the pull service to pull ``mq`` now (orderly: after a lock was won)."""
        if self._wake_pull is not None:
            self._wake_pull(mq)

    # -- listeners ---------------------------------------------------------------

    @property
    def executor(self) -> ThreadPoolExecutor:
        """The listener thread pool, created on first use (async listeners need none)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self.settings.consume_thread_count,
                thread_name_prefix=f"tidemq-consume-{self.group}",
            )
        return self._executor

    async def call_listener(self, listener: Callable[..., Any], *args: Any) -> object:
        """Run a listener: a plain function in the thread pool, an ``async def``
        on the loop (at most ``consume_thread_count`` at once). The listener's
        exception propagates."""
        if is_async_listener(listener):
            async with self.async_slots:
                return await listener(*args)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, listener, *args)

    def hooks_before(self, hook_context: ConsumeHookContext) -> None:
        for hook in self.hooks:
            try:
                hook.consume_message_before(hook_context)
            except Exception:
                log.exception("%s: consume hook %r failed (before)", self.group, hook)

    def hooks_after(self, hook_context: ConsumeHookContext) -> None:
        for hook in self.hooks:
            try:
                hook.consume_message_after(hook_context)
            except Exception:
                log.exception("%s: consume hook %r failed (after)", self.group, hook)

    def close_executor(self, wait: bool = False) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=wait, cancel_futures=True)

    # -- messages and offsets ------------------------------------------------------

    def restore_retry_topics(self, messages: Sequence[MessageExt]) -> None:
        """Retry copies get their original topic back (Java resetRetryAndNamespace)."""
        restore_retry_topics(messages, self.group)

    async def send_back(self, message: MessageExt, delay_level: int, broker_name: str) -> bool:
        """CONSUMER_SEND_MSG_BACK; False (logged) when the broker is unreachable
        or refuses: the caller then re-consumes the message locally."""
        try:
            await send_message_back(
                self.instance,
                group=self.group,
                message=message,
                delay_level=delay_level,
                broker_name=broker_name,
                max_reconsume_times=self.max_reconsume_times,
            )
        except ClientError as exc:
            log.warning("%s: sending message %s back failed: %s", self.group, message.msg_id, exc)
            return False
        return True

    def update_offset(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        """Record a consumed position (increase only); ignored for a dropped
        queue or a negative offset (nothing to commit)."""
        if offset >= 0 and not pq.dropped:
            self.offset_store.update(mq, offset, increase_only=True)
