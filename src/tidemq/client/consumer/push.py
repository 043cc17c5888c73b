"""The push consumer: subscribe, register a listener, start; messages arrive.

:class:`AsyncPushConsumer` is the asyncio core; :class:`PushConsumer` is the
blocking API, a thin wrapper running that core on its own loop thread.

Pieces (each in its own module): the :class:`~.rebalancer.Rebalancer`
decides which queues this client holds (at start, every 20 s and at once on
NOTIFY_CONSUMER_IDS_CHANGED); the :class:`~.pull_service.PullService` pulls
each held queue into its ProcessQueue; the consume service
(:class:`~.consume_concurrently.ConsumeConcurrentlyService`, or the orderly
one with ``orderly=True``) calls the listener and records offsets in the
offset store (the brokers in clustering mode, ``offsets.json`` in
broadcasting mode), which is persisted every 5 s and at shutdown.

Example (blocking API; the listener runs in the consumer's thread pool)::

    def on_messages(messages, context):
        for message in messages:
            handle(message.body)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("order_group", "127.0.0.1:9876", listener=on_messages)
    consumer.subscribe("Orders", "TagA || TagB")
    consumer.start()
    ...
    consumer.shutdown()

With asyncio, ``AsyncPushConsumer`` takes the same arguments and an ``async
def`` listener runs on the loop (``await consumer.start()``, ``await
consumer.shutdown()``, or ``async with``).

``suspend()`` / ``resume()`` (Java ``DefaultMQPushConsumer.suspend`` /
``resume``): while suspended no new pull is sent and no rebalance runs (the
consumer keeps its queues and, orderly, renews their locks); pulls already
sent complete and what is buffered is still consumed. ``resume()`` pulls
again at once and rebalances.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from tidemq.acl.credentials import Credentials
from tidemq.client._base import GroupClient, check_group, make_client_config
from tidemq.client._core import rebalance as rebalance_plan
from tidemq.client._core.allocation import AllocateStrategy, Averagely
from tidemq.client._core.process_queue import ProcessQueue
from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client._loop import BlockingClient
from tidemq.client.consumer.consume_concurrently import ConsumeConcurrentlyService
from tidemq.client.consumer.context import ConsumerContext, ConsumerSettings, ConsumeService
from tidemq.client.consumer.direct import consume_directly
from tidemq.client.consumer.listener import (
    ConcurrentListener,
    ConsumeHook,
    MessageModel,
    OrderlyListener,
)
from tidemq.client.consumer.offset_store import (
    BrokerOffsetStore,
    LocalFileOffsetStore,
    local_store_owner,
)
from tidemq.client.consumer.pull_service import PullService
from tidemq.client.consumer.rebalancer import Rebalancer
from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig, ClientInstance
from tidemq.client.model import TopicRoute
from tidemq.client.producer import check_trace_topic, start_trace_dispatcher
from tidemq.client.trace.dispatcher import TraceDispatcher
from tidemq.client.trace.hooks import ConsumeTracer
from tidemq.client.trace.records import DEFAULT_TRACE_TOPIC
from tidemq.common.message import MessageExt, MessageQueue
from tidemq.common.names import retry_topic_of
from tidemq.common.tasks import TaskSet
from tidemq.protocol import ResponseCode
from tidemq.protocol.heartbeat import CONSUME_PASSIVELY, ConsumerData
from tidemq.transport.tls import TlsConfig

if TYPE_CHECKING:
    from tidemq.client.consumer.consume_orderly import ConsumeOrderlyService
    from tidemq.client.consumer.queue_locks import QueueLockService

__all__ = ["AsyncPushConsumer", "PushConsumer", "QueueListener"]

log = logging.getLogger(__name__)

DEFAULT_AWAIT_TERMINATION_S = 30.0
"""How long shutdown waits for batches in flight before leaving them uncommitted."""

QueueListener = Callable[[str, Sequence[MessageQueue], Sequence[MessageQueue]], None]
"""Java's MessageQueueListener: (topic, all queues, queues now held), after each change."""

Listener = ConcurrentListener | OrderlyListener


class AsyncPushConsumer(GroupClient):
    """A push consumer on the running asyncio loop (see the module docstring).

    ``listener`` (or :meth:`register_listener`) is a concurrent listener
    returning :class:`~.listener.ConsumeStatus`, or with ``orderly=True`` an
    orderly one returning :class:`~.listener.ConsumeOrderlyStatus`; a plain
    function runs in a pool of ``consume_thread_count`` threads, an ``async
    def`` on the loop.

    Broadcasting consumers keep their offsets in
    ``<offset_store_dir>/<client ip>@<instance_name or DEFAULT>/<group>/offsets.json``
    and resume from it after a restart; two broadcasting consumers of one
    group in one process need distinct ``instance_name`` values.

    ``enable_trace=True`` records each listener call (SubBefore and SubAfter
    trace records: when, on which client, the retry count, how long, the
    outcome) in ``trace_topic``, in the background (tidemq.client.trace).
    """

    _kind = "consumer"

    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] = "127.0.0.1:9876",
        *,
        listener: Listener | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: str | None = None,
        allocate_strategy: AllocateStrategy | None = None,
        consume_thread_count: int = 20,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        pull_interval_s: float = 0.0,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue_mib: int = 100,
        consume_concurrently_max_span: int = 2000,
        max_reconsume_times: int = -1,
        consume_timeout_min: float = 15.0,
        suspend_current_queue_time_ms: int = 1000,
        orderly: bool = False,
        offset_store_dir: str | Path | None = None,
        instance_name: str | None = None,
        client_config: ClientConfig | None = None,
        credentials: Credentials | None = None,
        tls: bool | TlsConfig | None = None,
        hooks: Iterable[ConsumeHook] = (),
        queue_listener: QueueListener | None = None,
        rebalance_interval_s: float = 20.0,
        persist_interval_s: float = 5.0,
        enable_trace: bool = False,
        trace_topic: str = DEFAULT_TRACE_TOPIC,
    ) -> None:
        self._group = check_group(group, "consumer")
        self.enable_trace = enable_trace
        self.trace_topic = check_trace_topic(trace_topic)
        self._tracer: ConsumeTracer | None = None
        self.settings = ConsumerSettings(
            message_model=message_model,
            consume_from_where=consume_from_where,
            consume_timestamp=consume_timestamp,
            consume_thread_count=consume_thread_count,
            consume_message_batch_max_size=consume_message_batch_max_size,
            pull_batch_size=pull_batch_size,
            pull_interval_s=pull_interval_s,
            pull_threshold_for_queue=pull_threshold_for_queue,
            pull_threshold_size_for_queue_mib=pull_threshold_size_for_queue_mib,
            consume_concurrently_max_span=consume_concurrently_max_span,
            max_reconsume_times=max_reconsume_times,
            consume_timeout_min=consume_timeout_min,
            suspend_current_queue_time_ms=suspend_current_queue_time_ms,
            orderly=orderly,
            rebalance_interval_s=rebalance_interval_s,
            persist_interval_s=persist_interval_s,
        )
        self.settings.validate()
        if consume_timestamp is not None:
            rebalance_plan.parse_consume_timestamp(consume_timestamp)  # ValueError if malformed
        config = self._config = make_client_config(
            namesrv, instance_name, client_config, credentials, tls
        )
        self._offsets_owner = local_store_owner(
            config.client_ip,
            instance_name or (client_config.instance_name if client_config else None),
        )
        self._strategy: AllocateStrategy = allocate_strategy or Averagely()
        self._offset_store_dir = Path(offset_store_dir) if offset_store_dir else None
        self._listener = listener
        self._hooks = list(hooks)
        self._queue_listener = queue_listener
        self._subscriptions: dict[str, SubscriptionSpec] = {}
        self._instance: ClientInstance | None = None
        self._offset_store: BrokerOffsetStore | LocalFileOffsetStore | None = None
        self._context: ConsumerContext | None = None
        self._consume: ConsumeService | None = None
        self._pull: PullService | None = None
        self._rebalancer: Rebalancer | None = None
        self._lock_service: QueueLockService | None = None
        self._tasks = TaskSet(f"push consumer {group}")
        self._rebalance_wanted = asyncio.Event()
        self._suspended = False
        self._state = "created"

    # -- configuration -------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        """Subscribe ``topic`` with a TAG expression ("*", "TagA || TagB") or SQL92.

        Before start, or while running (the brokers learn it at the next
        heartbeat and the queues are taken at the next rebalance).
        """
        self._check_open()
        spec = SubscriptionSpec.parse(
            topic, expression, expression_type, sub_version=self._config.clock.now_ms()
        )
        self._subscriptions[topic] = spec
        if self._state == "running":
            self._after_subscription_change()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``; its queues are released at the next rebalance."""
        self._subscriptions.pop(topic, None)
        if self._state == "running":
            self._after_subscription_change()

    def _after_subscription_change(self) -> None:
        instance = self._require_instance()
        self._tasks.spawn(instance.send_heartbeat())
        self.rebalance_soon()

    def register_listener(self, listener: Listener) -> None:
        if self._state != "created":
            raise ClientError("register the listener before start()", ResponseCode.SYSTEM_ERROR)
        self._listener = listener

    def subscriptions(self) -> dict[str, SubscriptionSpec]:
        return dict(self._subscriptions)

    # -- life cycle ------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, announce the group, take this client's queues and start consuming.

        ClientError / ValueError for a missing listener or subscription or no
        reachable name server; a topic that does not exist yet only warns.
        """
        if self._state != "created":
            raise ClientError(
                f"this consumer cannot start: it is {self._state}", ResponseCode.SYSTEM_ERROR
            )
        if self._listener is None:
            raise ValueError("register a listener before start()")
        if not self._subscriptions:
            raise ValueError("subscribe to at least one topic before start()")
        settings = self.settings
        clock = self._config.clock
        timestamp = settings.consume_timestamp or rebalance_plan.default_consume_timestamp(
            clock.now_ms()
        )
        rebalance_plan.parse_consume_timestamp(timestamp)  # ValueError if malformed
        user_topics = list(self._subscriptions)
        if not settings.broadcasting:
            self._subscriptions[retry_topic_of(self._group)] = SubscriptionSpec.parse(
                retry_topic_of(self._group), "*", sub_version=clock.now_ms()
            )
        self._state = "starting"
        instance = self._instance = ClientInstance(self._config)
        try:
            await instance.start()
            if self.enable_trace:
                await self._start_tracing(instance)
            for topic in user_topics:
                await instance.route_if_exists(topic, self._group)
            await self._build(instance, timestamp)
            instance.register_consumer(self)
            await instance.send_heartbeat()
            assert self._consume is not None and self._rebalancer is not None
            self._consume.start()
            balanced = self._suspended or await self._rebalancer.rebalance()
        except BaseException:
            self._state = "stopped"
            try:
                await self._stop_work(0.0)
            finally:
                await self._close_quietly()
            raise
        self._tasks.spawn(self._rebalance_forever(balanced))
        self._tasks.spawn(self._persist_forever())
        self._state = "running"
        log.info("%s: push consumer %s started", self._group, instance.client_id)

    async def _build(self, instance: ClientInstance, timestamp: str) -> None:
        settings = self.settings
        if settings.broadcasting:
            store: BrokerOffsetStore | LocalFileOffsetStore = LocalFileOffsetStore(
                self._group, self._offsets_owner, self._offset_store_dir
            )
        else:
            store = BrokerOffsetStore(instance, self._group)
        self._offset_store = store
        if isinstance(store, LocalFileOffsetStore):
            store.claim()
        await store.load()
        process_queues: dict[MessageQueue, ProcessQueue] = {}
        context = ConsumerContext(
            instance=instance,
            group=self._group,
            settings=settings,
            offset_store=store,
            process_queues=process_queues,
            clock=self._config.clock,
            tasks=self._tasks,
            hooks=self._hooks if self._tracer is None else [*self._hooks, self._tracer],
            wake_pull=self._wake_pull,
        )
        self._context = context
        assert self._listener is not None
        if settings.orderly:
            self._consume = self._orderly_service(context)
        else:
            self._consume = ConsumeConcurrentlyService(
                context, cast(ConcurrentListener, self._listener)
            )
        rebalancer = Rebalancer(
            instance=instance,
            group=self._group,
            broadcasting=settings.broadcasting,
            strategy=self._strategy,
            offset_store=store,
            consume_from=settings.consume_from_where,
            consume_timestamp=timestamp,
            listener=self,
            orderly=settings.orderly,
            lock=context.lock,
            drop_pull_expired=True,
        )
        rebalancer.subscriptions = self._subscriptions
        rebalancer.process_queues = process_queues
        self._rebalancer = rebalancer
        self._pull = PullService(
            context, self._subscriptions, self._consume, rebalancer.compute_pull_from_where
        )
        if self._suspended:
            self._pull.suspend()

    async def _start_tracing(self, instance: ClientInstance) -> None:
        """The trace hook; a failure leaves the consumer untraced (as Java)."""
        try:
            dispatcher = await start_trace_dispatcher(
                instance, self._group, "CONSUME", self.trace_topic
            )
        except Exception:
            log.exception(
                "%s: message trace could not start; consumption is not traced", self._group
            )
            return
        self._tracer = ConsumeTracer(dispatcher, self._config.clock)

    @property
    def trace_dispatcher(self) -> TraceDispatcher | None:
        """The dispatcher of this consumer's trace records (None unless tracing)."""
        return None if self._tracer is None else self._tracer.dispatcher

    @property
    def tracer(self) -> ConsumeTracer | None:
        """The trace hook (None unless tracing)."""
        return self._tracer

    def _orderly_service(self, context: ConsumerContext) -> ConsumeService:
        try:
            from tidemq.client.consumer.consume_orderly import ConsumeOrderlyService
        except ImportError as exc:  # pragma: no cover - only while the module is missing
            raise ClientError(
                f"orderly consumption is not available: {exc}", ResponseCode.SYSTEM_ERROR
            ) from None
        service: ConsumeOrderlyService = ConsumeOrderlyService(
            context, cast(OrderlyListener, self._listener)
        )
        self._lock_service = service.lock_service
        if self._lock_service is not None:
            context.lock = self._lock_service.lock
        return service

    async def shutdown(self, await_termination_s: float = DEFAULT_AWAIT_TERMINATION_S) -> None:
        """Stop pulling, let batches in flight finish (up to ``await_termination_s``),
        persist the offsets, unlock (orderly), unregister from the brokers, close."""
        if self._state in ("created", "stopped"):
            self._state = "stopped"
            return
        self._state = "stopping"
        try:
            await self._stop_work(await_termination_s)
            await self._persist_final()
        finally:
            self._state = "stopped"
            await self._close_quietly()
        log.info("%s: push consumer %s shut down", self._group, self.client_id)

    async def _stop_work(self, await_termination_s: float) -> None:
        """Background loops, pulls, then the consume service (batches in flight)."""
        await self._tasks.cancel_all()
        if self._context is not None:
            self._context.stopping = True
        if self._pull is not None:
            await self._pull.stop()
        if self._consume is not None:
            await self._consume.shutdown(await_termination_s)

    async def _persist_final(self) -> None:
        store, rebalancer = self._offset_store, self._rebalancer
        if store is None or rebalancer is None:
            return
        held = list(rebalancer.process_queues)
        for pq in rebalancer.process_queues.values():
            pq.dropped = True
        try:
            await store.persist_all(held, oneway=False)
        except ClientError as exc:
            log.warning("%s: offsets not persisted at shutdown: %s", self._group, exc)
        rebalancer.process_queues.clear()

    async def _close_quietly(self) -> None:
        if isinstance(self._offset_store, LocalFileOffsetStore):
            self._offset_store.release()
        instance = self._instance
        if instance is None:
            return
        if self._tracer is not None:  # the last traces go out before the connections close
            await self._tracer.dispatcher.shutdown()
        with contextlib.suppress(ClientError):
            await instance.unregister(consumer_group=self._group)
        await instance.close()
        if self._context is not None:
            self._context.close_executor(wait=False)

    # -- background -------------------------------------------------------------------

    async def _rebalance_forever(self, balanced: bool) -> None:
        assert self._rebalancer is not None
        while True:
            # unbalanced (an orderly lock refused, a start offset unknown, a
            # busy queue kept): the next round in 1 s, as Java
            wait_s = rebalance_plan.next_round_in_s(balanced, self.settings.rebalance_interval_s)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s):
                    await self._rebalance_wanted.wait()
            self._rebalance_wanted.clear()
            if self._suspended:  # Java skips doRebalance while paused
                balanced = True
                continue
            try:
                balanced = await self._rebalancer.rebalance()
            except Exception:
                log.exception("%s: rebalance failed", self._group)
                balanced = True

    async def _persist_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.persist_interval_s)
            try:
                await self.persist_offsets()
            except Exception:
                log.exception("%s: persisting offsets failed", self._group)

    async def persist_offsets(self) -> None:
        """Send (clustering) or write (broadcasting) the offsets of every held queue."""
        if self._offset_store is not None and self._rebalancer is not None:
            await self._offset_store.persist_all(list(self._rebalancer.process_queues))

    def _wake_pull(self, mq: MessageQueue) -> None:
        if self._pull is not None:
            self._pull.wake(mq)

    # -- RebalanceListener ---------------------------------------------------------------

    async def on_queue_removed(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        store = self._offset_store
        assert store is not None
        if self.settings.orderly and not self.settings.broadcasting:
            service = cast("ConsumeOrderlyService", self._consume)
            request = self._pull.request(mq) if self._pull is not None else None
            if not await service.try_release(mq, pq):
                # Still ours: the pull loop may have ended while the queue looked
                # dropped; resume it where it was.
                pq.dropped = False
                if request is not None and self._pull is not None:
                    self._pull.restart(request)
                return False
        else:
            await store.persist(mq)
        store.remove(mq)
        return True

    async def on_queue_added(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        assert self._pull is not None
        self._pull.add(mq, pq, next_offset)

    def on_assignment_changed(
        self, topic: str, all_queues: Sequence[MessageQueue], assigned: Sequence[MessageQueue]
    ) -> None:
        if self._queue_listener is not None:
            self._queue_listener(topic, all_queues, assigned)

    # -- ConsumerMember (ClientInstance) ---------------------------------------------------

    def consumer_data(self) -> ConsumerData:
        settings = self.settings
        return ConsumerData(
            group_name=self._group,
            consume_type=CONSUME_PASSIVELY,
            message_model=settings.message_model.value,
            consume_from_where=settings.consume_from_where.value,
            subscriptions=tuple(spec.to_wire() for spec in self._subscriptions.values()),
        )

    def subscribed_topics(self) -> Iterable[str]:
        return list(self._subscriptions)

    def on_route_changed(self, topic: str, route: TopicRoute) -> None:
        if self._rebalancer is not None:
            self._rebalancer.on_route_changed(topic, route)

    def rebalance_soon(self) -> None:
        self._rebalance_wanted.set()

    # -- suspend / resume ------------------------------------------------------------------

    @property
    def suspended(self) -> bool:
        """True between :meth:`suspend` and :meth:`resume` (Java ``isPause``)."""
        return self._suspended

    def suspend(self) -> None:
        """Stop pulling new messages (Java ``DefaultMQPushConsumer.suspend``).

        Pulls already sent complete, and every message already buffered is
        still consumed (and committed) as usual; no rebalance runs meanwhile,
        so the consumer keeps its queues (orderly: and renews their locks).
        Before :meth:`start` it makes the consumer start without taking queues.
        """
        self._suspended = True
        if self._pull is not None:
            self._pull.suspend()
        log.info("%s: push consumer suspended", self._group)

    def resume(self) -> None:
        """Pull again at once, and rebalance (Java ``resume`` runs ``doRebalance``)."""
        self._suspended = False
        if self._pull is not None:
            self._pull.resume()
        self.rebalance_soon()
        log.info("%s: push consumer resumed", self._group)

    # -- requests from brokers / admin ---------------------------------------------------------

    def reset_offsets(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: restart the queues of ``topic`` at ``offsets``."""
        if self._state == "running":
            self._tasks.spawn(self._reset_offsets(topic, dict(offsets)))

    async def _reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        store, rebalancer = self._offset_store, self._rebalancer
        assert store is not None and rebalancer is not None
        for mq, offset in offsets.items():
            if mq.topic != topic:
                continue
            pq = rebalancer.process_queues.pop(mq, None)
            if pq is not None:
                pq.dropped = True
                pq.clear()
            store.update(mq, offset, increase_only=False)
            await store.persist(mq, oneway=False)
            store.remove(mq)
        log.info("%s: offsets of %s reset on %d queue(s)", self._group, topic, len(offsets))
        self.rebalance_soon()

    def assigned_queues(self) -> list[MessageQueue]:
        """The queues held now (every topic, the retry topic included)."""
        return sorted(self._rebalancer.process_queues) if self._rebalancer else []

    def process_queue(self, mq: MessageQueue) -> ProcessQueue | None:
        return self._rebalancer.process_queues.get(mq) if self._rebalancer else None

    async def consume_directly(self, message: MessageExt, broker_name: str) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: the listener over `message` alone, offsets and
        retries left alone (consumer/direct.py); the ConsumeMessageDirectlyResult."""
        if self._listener is None:
            raise ClientError("no listener registered", ResponseCode.SYSTEM_ERROR)
        return await consume_directly(
            self._listener,
            message,
            self._group,
            broker_name,
            orderly=self.settings.orderly,
            clock=self._config.clock,
        )

    def running_info(self) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO (Java ConsumerRunningInfo, the useful parts)."""
        settings = self.settings
        rebalancer = self._rebalancer
        table: dict[str, Any] = {}
        if rebalancer is not None and self._offset_store is not None:
            offsets = self._offset_store.table()
            for mq, pq in sorted(rebalancer.process_queues.items()):
                key = f"{mq.topic}@{mq.broker_name}@{mq.queue_id}"
                table[key] = {
                    "commitOffset": offsets.get(mq, -1),
                    "cachedMsgCount": pq.count,
                    "cachedMsgSizeInMiB": pq.size_bytes // (1024 * 1024),
                    "cachedMsgMinOffset": pq.min_offset if pq.min_offset is not None else 0,
                    "cachedMsgMaxOffset": pq.max_offset,
                    "droped": pq.dropped,
                    "locked": pq.locked,
                }
        return {
            "properties": {
                "consumerGroup": self._group,
                "messageModel": settings.message_model.value,
                "consumeType": CONSUME_PASSIVELY,
                "consumeOrderly": str(settings.orderly).lower(),
                "consumeFromWhere": settings.consume_from_where.value,
                "consumeThreadMax": str(settings.consume_thread_count),
                "pullBatchSize": str(settings.pull_batch_size),
                "allocateMessageQueueStrategy": self._strategy.name,
            },
            "subscriptionSet": [spec.to_wire().to_json() for spec in self._subscriptions.values()],
            "mqTable": table,
            "consumeOrderly": settings.orderly,
        }

    # -- statistics -----------------------------------------------------------------------

    @property
    def pull_service(self) -> PullService | None:
        return self._pull

    @property
    def consume_service(self) -> ConsumeService | None:
        return self._consume

    def _require_instance(self) -> ClientInstance:
        if self._instance is None:
            raise ClientError("the consumer is not started", ResponseCode.SYSTEM_ERROR)
        return self._instance


class PushConsumer(BlockingClient[AsyncPushConsumer]):
    """The blocking push consumer: same arguments as :class:`AsyncPushConsumer`;
    the core runs on a private event-loop thread (plain-function listeners run
    in the consumer's thread pool, ``async def`` ones on that loop)."""

    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] = "127.0.0.1:9876",
        *,
        listener: Listener | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: str | None = None,
        allocate_strategy: AllocateStrategy | None = None,
        consume_thread_count: int = 20,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        pull_interval_s: float = 0.0,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue_mib: int = 100,
        consume_concurrently_max_span: int = 2000,
        max_reconsume_times: int = -1,
        consume_timeout_min: float = 15.0,
        suspend_current_queue_time_ms: int = 1000,
        orderly: bool = False,
        offset_store_dir: str | Path | None = None,
        instance_name: str | None = None,
        client_config: ClientConfig | None = None,
        credentials: Credentials | None = None,
        tls: bool | TlsConfig | None = None,
        hooks: Iterable[ConsumeHook] = (),
        queue_listener: QueueListener | None = None,
        rebalance_interval_s: float = 20.0,
        persist_interval_s: float = 5.0,
        enable_trace: bool = False,
        trace_topic: str = DEFAULT_TRACE_TOPIC,
    ) -> None:
        build = functools.partial(
            AsyncPushConsumer,
            group,
            namesrv,
            listener=listener,
            message_model=message_model,
            consume_from_where=consume_from_where,
            consume_timestamp=consume_timestamp,
            allocate_strategy=allocate_strategy,
            consume_thread_count=consume_thread_count,
            consume_message_batch_max_size=consume_message_batch_max_size,
            pull_batch_size=pull_batch_size,
            pull_interval_s=pull_interval_s,
            pull_threshold_for_queue=pull_threshold_for_queue,
            pull_threshold_size_for_queue_mib=pull_threshold_size_for_queue_mib,
            consume_concurrently_max_span=consume_concurrently_max_span,
            max_reconsume_times=max_reconsume_times,
            consume_timeout_min=consume_timeout_min,
            suspend_current_queue_time_ms=suspend_current_queue_time_ms,
            orderly=orderly,
            offset_store_dir=offset_store_dir,
            instance_name=instance_name,
            client_config=client_config,
            credentials=credentials,
            tls=tls,
            hooks=tuple(hooks),
            queue_listener=queue_listener,
            rebalance_interval_s=rebalance_interval_s,
            persist_interval_s=persist_interval_s,
            enable_trace=enable_trace,
            trace_topic=trace_topic,
        )
        super().__init__(build, thread_name=f"tidemq-push-{group}")

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        self._call(self._core.subscribe, topic, expression, expression_type)

    def unsubscribe(self, topic: str) -> None:
        self._call(self._core.unsubscribe, topic)

    def register_listener(self, listener: Listener) -> None:
        self._core.register_listener(listener)

    @property
    def trace_dispatcher(self) -> TraceDispatcher | None:
        """The core's trace dispatcher (its `dropped`, `failed` and `sent` counters);
        None unless tracing."""
        return self._core.trace_dispatcher

    @property
    def suspended(self) -> bool:
        """True between :meth:`suspend` and :meth:`resume`."""
        return self._core.suspended

    def suspend(self) -> None:
        """Stop pulling new messages; see :meth:`AsyncPushConsumer.suspend`."""
        self._call(self._core.suspend)

    def resume(self) -> None:
        """Pull again at once; see :meth:`AsyncPushConsumer.resume`."""
        self._call(self._core.resume)

    def shutdown(self, await_termination_s: float = DEFAULT_AWAIT_TERMINATION_S) -> None:
        """Shut the core down (see AsyncPushConsumer.shutdown) and stop the loop thread."""
        self._stop(self._core.shutdown(await_termination_s))

    def assigned_queues(self) -> list[MessageQueue]:
        return self._call(self._core.assigned_queues)
