"""The lite pull consumer: the application asks for messages with ``poll``
(Java's DefaultLitePullConsumer, 4.9).

Queues come either from ``subscribe`` (the group shares each topic's queues,
rebalanced by :class:`~tidemq.client.consumer.rebalancer.Rebalancer` at
start, every 20 s and when the group changes) or from ``assign`` (exactly
these queues, no rebalance); the two are mutually exclusive.

Every held queue has one owned pull task: it long-polls the queue's master
(PULL_MESSAGE via :mod:`~tidemq.client.consumer.pull_api`) and appends each
batch to the queue's :class:`~tidemq.client.consumer.batch_backlog.BatchBacklog`
(flow control: messages, MiB and offset span per queue, and messages over all
queues; over a limit it backs off 50 ms, or less once polls make room) and to
the shared :class:`~tidemq.client.consumer.poll_buffer.PollBuffer` ``poll``
reads, so the buffer holds at most about ``pull_threshold_for_all`` messages.
The queue's ProcessQueue only carries its life (dropped, last pull) for the
rebalancer. ``poll`` returns one batch (up to ``pull_batch_size`` messages of
one queue, in offset order). The blocking consumer's ``poll`` takes it on the
caller's thread, with no round trip to the loop; the loop settles what was
polled afterwards (the backlog's counters, and the queue's consumed position:
the pull's next offset after the polled batch), so the position lags the
polls by a moment, never leads them. Whatever reads positions or counters
(commits, ``buffered``, releasing a queue) settles first.

Positions are committed to the offset store (the broker when clustering,
``offsets.json`` when broadcasting) by ``commit_sync``/``commit_async``, or,
with ``auto_commit``, by ``poll`` once every ``auto_commit_interval_s`` (the
positions polled before that call: a batch counts as consumed when the
application asks for the next one) and at shutdown. A seek moves a queue's
pull and consumed positions and discards what it buffered. ``pause`` stops a
queue's pulls and holds back its buffered batches until ``resume``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidemq.acl.credentials import Credentials
from tidemq.client._base import GroupClient, check_group, make_client_config
from tidemq.client._core.allocation import AllocateStrategy, Averagely
from tidemq.client._core.process_queue import (
    DEFAULT_CONSUME_CONCURRENTLY_MAX_SPAN,
    DEFAULT_PULL_THRESHOLD_FOR_QUEUE,
    DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE_MIB,
    ProcessQueue,
)
from tidemq.client._core.rebalance import (
    ConsumeFromWhere,
    default_consume_timestamp,
    parse_consume_timestamp,
)
from tidemq.client._loop import BlockingClient
from tidemq.client.consumer import queue_offsets
from tidemq.client.consumer.batch_backlog import BatchBacklog
from tidemq.client.consumer.listener import MessageModel
from tidemq.client.consumer.offset_store import (
    BrokerOffsetStore,
    LocalFileOffsetStore,
    ReadOffsetType,
    local_store_owner,
)
from tidemq.client.consumer.poll_buffer import PollBuffer, PolledBatch, QueueGate
from tidemq.client.consumer.pull_api import PullStatus, pull_message
from tidemq.client.consumer.pull_nodes import PullNodeTable
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
from tidemq.common.tasks import TaskSet
from tidemq.protocol import ResponseCode
from tidemq.protocol.heartbeat import CONSUME_ACTIVELY, ConsumerData
from tidemq.transport.tls import TlsConfig

__all__ = ["AsyncLitePullConsumer", "CommitCallback", "LitePullConsumer"]

log = logging.getLogger(__name__)


DEFAULT_PULL_BATCH_SIZE = 10
DEFAULT_PULL_THRESHOLD_FOR_ALL = 10_000
"""Java ``pullThresholdForAll``: messages buffered over every queue."""
DEFAULT_POLL_TIMEOUT_S = 5.0
DEFAULT_AUTO_COMMIT_INTERVAL_S = 5.0
SUSPEND_MS = 20_000
"""Long-polling hold of a pull (Java lite pull's brokerSuspendMaxTimeMillis)."""
FLOW_CONTROL_BACKOFF_S = 0.05
PULL_ERROR_BACKOFF_S = 1.0
"""Pause of a queue's pulls after a failed pull or start-offset lookup."""
REBALANCE_INTERVAL_S = 20.0
PERSIST_INTERVAL_S = 5.0
FLOW_CONTROL_LOG_EVERY = 1000
"""Log one flow-control back-off in this many (Java logs every 1000th)."""

CommitCallback = Callable[[BaseException | None], None]
"""Called on the loop with None after a commit, or with its exception."""


@dataclass(slots=True, eq=False)
class _QueueState:
    """One held queue: its buffer, positions and pull task (used on the loop only)."""

    mq: MessageQueue
    pq: ProcessQueue
    subscription: SubscriptionSpec
    pull_offset: int = -1
    """Next offset to pull; -1 = compute the start (stored offset / ConsumeFromWhere)."""
    consumed_offset: int = -1
    """Next offset after what poll handed out and the loop settled (what a commit
    stores); -1 = none yet."""
    backlog: BatchBacklog = field(default_factory=BatchBacklog)
    """Pulled and not yet settled as polled (flow control)."""
    gate: QueueGate = field(default_factory=QueueGate)
    """Generation (seeks), paused and revoked, shared with the pollers' threads."""
    resumed: asyncio.Event = field(default_factory=asyncio.Event)
    space: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when polls brought the queue back under its flow-control limits."""
    task: asyncio.Task[None] | None = None


class AsyncLitePullConsumer(GroupClient):
    """Pull-style consumer; ``subscribe`` or ``assign``, ``await start()``, then ``poll``.

    Use as ``async with AsyncLitePullConsumer("group", namesrv) as consumer``
    (after subscribe/assign) or call ``start()`` / ``shutdown()``.

    ``enable_trace=True`` records each batch ``poll`` returns in ``trace_topic``
    (a SubBefore and a successful SubAfter per message, as Java's
    DefaultLitePullConsumer does).
    """

    _kind = "consumer"

    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] = "127.0.0.1:9876",
        *,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: str | None = None,
        allocate_strategy: AllocateStrategy | None = None,
        auto_commit: bool = True,
        auto_commit_interval_s: float = DEFAULT_AUTO_COMMIT_INTERVAL_S,
        pull_batch_size: int = DEFAULT_PULL_BATCH_SIZE,
        pull_threshold_for_queue: int = DEFAULT_PULL_THRESHOLD_FOR_QUEUE,
        pull_threshold_size_for_queue_mib: int = DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE_MIB,
        pull_threshold_for_all: int = DEFAULT_PULL_THRESHOLD_FOR_ALL,
        consume_max_span: int = DEFAULT_CONSUME_CONCURRENTLY_MAX_SPAN,
        poll_timeout_s: float = DEFAULT_POLL_TIMEOUT_S,
        rebalance_interval_s: float = REBALANCE_INTERVAL_S,
        persist_interval_s: float = PERSIST_INTERVAL_S,
        offset_store_dir: str | Path | None = None,
        instance_name: str | None = None,
        client_config: ClientConfig | None = None,
        credentials: Credentials | None = None,
        tls: bool | TlsConfig | None = None,
        enable_trace: bool = False,
        trace_topic: str = DEFAULT_TRACE_TOPIC,
    ) -> None:
        check_group(group, "consumer")
        self.enable_trace = enable_trace
        self.trace_topic = check_trace_topic(trace_topic)
        self._tracer: ConsumeTracer | None = None
        _check_range("auto_commit_interval_s", auto_commit_interval_s, 0.0, None, open_low=True)
        _check_range("pull_batch_size", pull_batch_size, 1, 1024)
        _check_range("pull_threshold_for_queue", pull_threshold_for_queue, 1, 65535)
        _check_range(
            "pull_threshold_size_for_queue_mib", pull_threshold_size_for_queue_mib, 1, 1024
        )
        _check_range("pull_threshold_for_all", pull_threshold_for_all, 1, None)
        _check_range("consume_max_span", consume_max_span, 1, 65535)
        _check_range("poll_timeout_s", poll_timeout_s, 0.0, None)
        _check_range("rebalance_interval_s", rebalance_interval_s, 0.0, None, open_low=True)
        _check_range("persist_interval_s", persist_interval_s, 0.0, None, open_low=True)
        if consume_timestamp is not None:
            parse_consume_timestamp(consume_timestamp)  # ValueError when malformed
        config = self._config = make_client_config(
            namesrv, instance_name, client_config, credentials, tls
        )
        self._group = group
        self._instance = ClientInstance(config)
        self._clock = self._instance.clock
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp = consume_timestamp or default_consume_timestamp(
            self._clock.now_ms()
        )
        self.auto_commit = auto_commit
        self.auto_commit_interval_s = auto_commit_interval_s
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue_mib = pull_threshold_size_for_queue_mib
        self.pull_threshold_for_all = pull_threshold_for_all
        self.consume_max_span = consume_max_span
        self.poll_timeout_s = poll_timeout_s
        self.rebalance_interval_s = rebalance_interval_s
        self.persist_interval_s = persist_interval_s
        self.suspend_ms = SUSPEND_MS
        self._nodes = PullNodeTable()
        """Which broker each queue is pulled from next (the brokers' suggestions)."""
        self._store: BrokerOffsetStore | LocalFileOffsetStore
        if message_model is MessageModel.BROADCASTING:
            directory = Path(offset_store_dir) if offset_store_dir is not None else None
            owner = local_store_owner(
                config.client_ip,
                instance_name or (client_config.instance_name if client_config else None),
            )
            self._store = LocalFileOffsetStore(group, owner, directory)
        else:
            self._store = BrokerOffsetStore(self._instance, group)
        self._rebalancer = Rebalancer(
            instance=self._instance,
            group=group,
            broadcasting=message_model is MessageModel.BROADCASTING,
            strategy=allocate_strategy or Averagely(),
            offset_store=self._store,
            consume_from=consume_from_where,
            consume_timestamp=self.consume_timestamp,
            listener=self,
        )
        self._mode: str | None = None  # "subscribe" or "assign"
        self._subscriptions: dict[str, SubscriptionSpec] = {}
        self._assigned: set[MessageQueue] = set()
        self._queues: dict[MessageQueue, _QueueState] = {}
        self._buffer = PollBuffer(on_consumed=self._request_settle)
        self._batch_ready = asyncio.Event()
        """Set on the loop when batches become ready (for ``poll`` awaited on the loop)."""
        self._flow_waiting: set[_QueueState] = set()
        """Queues whose pull loop waits for room (flow control)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks = TaskSet(f"lite pull consumer {group}")
        self._rebalance_wakeup = asyncio.Event()
        self._next_auto_commit = 0.0
        self._flow_control_count = 0
        self._state = "created"

    # -- properties --------------------------------------------------------------------

    @property
    def client_instance(self) -> ClientInstance:
        return self._instance

    @property
    def offset_store(self) -> BrokerOffsetStore | LocalFileOffsetStore:
        return self._store

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer holds now."""
        return set(self._queues)

    def buffered(self, mq: MessageQueue | None = None) -> int:
        """Messages pulled but not yet polled, of `mq` or of every held queue."""
        self._settle()
        if mq is not None:
            state = self._queues.get(mq)
            return 0 if state is None else state.backlog.count
        return sum(state.backlog.count for state in self._queues.values())

    # -- choosing queues ---------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        """Share `topic`'s queues with the group (rebalanced); ValueError when malformed."""
        self._check_open()
        if self._mode == "assign":
            raise ClientError(
                "subscribe and assign are mutually exclusive: this consumer uses assign",
                ResponseCode.INVALID_PARAMETER,
            )
        spec = SubscriptionSpec.parse(
            topic, expression, expression_type, sub_version=self._clock.now_ms()
        )
        self._mode = "subscribe"
        self._subscriptions[topic] = spec
        self._rebalancer.subscriptions[topic] = spec
        for mq, state in self._queues.items():
            if mq.topic == topic:
                state.subscription = spec  # the next pulls filter with it
        if self._state == "running":
            self._tasks.spawn(self._after_subscription_change())

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming `topic`; its queues are released at the next rebalance (now)."""
        self._check_open()
        self._subscriptions.pop(topic, None)
        self._rebalancer.subscriptions.pop(topic, None)
        if self._state == "running":
            self._tasks.spawn(self._after_subscription_change())

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Consume exactly `queues` (no rebalance); replaces an earlier assignment."""
        self._check_open()
        if self._mode == "subscribe":
            raise ClientError(
                "subscribe and assign are mutually exclusive: this consumer uses subscribe",
                ResponseCode.INVALID_PARAMETER,
            )
        wanted = set(queues)
        for mq in wanted:
            if not isinstance(mq, MessageQueue):
                raise ValueError(f"assign() takes MessageQueues, not {mq!r}")
        self._mode = "assign"
        self._assigned = wanted
        if self._state == "running":
            self._apply_assignment()

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of `topic` (ClientError TOPIC_NOT_EXIST if unknown)."""
        route = await self._instance.route(topic, refresh=True)
        return route.read_queues()

    # -- life cycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, start pulling the subscribed or assigned queues."""
        if self._state == "running":
            return
        self._check_open()
        self._state = "running"
        self._loop = asyncio.get_running_loop()
        try:
            await self._instance.start()
            if self.enable_trace:
                await self._start_tracing()
            self._instance.register_consumer(self)
            if isinstance(self._store, LocalFileOffsetStore):
                self._store.claim()
            await self._store.load()
            for topic in sorted(self.subscribed_topics()):  # brokers to heartbeat
                await self._instance.route_if_exists(topic, self._group)
            await self._instance.send_heartbeat()
            if self._mode == "assign":
                self._apply_assignment()
            elif self._mode == "subscribe":
                await self._rebalancer.rebalance()
            self._next_auto_commit = self._clock.monotonic() + self.auto_commit_interval_s
            self._tasks.spawn(self._rebalance_loop())
            self._tasks.spawn(self._persist_loop())
        except BaseException:
            await self._close()
            raise

    async def _start_tracing(self) -> None:
        """The poll tracer; a failure leaves the consumer untraced (as Java)."""
        try:
            dispatcher = await start_trace_dispatcher(
                self._instance, self._group, "CONSUME", self.trace_topic
            )
        except Exception:
            log.exception("%s: message trace could not start; polls are not traced", self._group)
            return
        self._tracer = ConsumeTracer(dispatcher, self._clock)

    @property
    def trace_dispatcher(self) -> TraceDispatcher | None:
        """The dispatcher of this consumer's trace records (None unless tracing)."""
        return None if self._tracer is None else self._tracer.dispatcher

    @property
    def tracer(self) -> ConsumeTracer | None:
        """The poll tracer (None unless tracing)."""
        return self._tracer

    async def shutdown(self) -> None:
        """Stop pulling, commit (auto-commit) and persist offsets, unregister, close."""
        if self._state in ("stopping", "closed"):
            return
        if self._state == "created":
            self._state = "closed"
            await self._instance.close()
            return
        self._state = "stopping"
        self._buffer.close()  # nothing more is polled: what was, is committed below
        self._batch_ready.set()
        await self._tasks.cancel_all()
        if self.auto_commit:
            self._commit_in_memory(None)
        held = [mq for mq, state in self._queues.items() if not state.pq.dropped]
        for state in self._queues.values():
            state.pq.dropped = True
        try:
            await self._store.persist_all(held, oneway=False)
        except ClientError as exc:
            log.warning("%s: offsets not persisted at shutdown: %s", self._group, exc)
        await self._close()

    async def _close(self) -> None:
        self._state = "closed"
        await self._tasks.cancel_all()
        if isinstance(self._store, LocalFileOffsetStore):
            self._store.release()
        if self._tracer is not None:  # the last traces go out before the connections close
            await self._tracer.dispatcher.shutdown()
        with contextlib.suppress(ClientError):
            await self._instance.unregister(consumer_group=self._group)
        await self._instance.close()
        self._buffer.close()  # wakes any poll
        self._batch_ready.set()

    # -- polling ---------------------------------------------------------------------

    async def poll(self, timeout_s: float | None = None) -> list[MessageExt]:
        """The next batch of messages of one queue, or [] after `timeout_s` (default
        ``poll_timeout_s``) without any."""
        timeout = self.poll_timeout(timeout_s)
        await self.maybe_auto_commit()
        batch = self._buffer.take()
        if batch is None and timeout > 0:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while batch is None and not self._buffer.closed:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                self._batch_ready.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        await self._batch_ready.wait()
                batch = self._buffer.take()
        if batch is None:
            return []
        self._settle()
        if self._tracer is not None:
            self._tracer.polled(self._group, batch.messages)
        return batch.messages

    def poll_timeout(self, timeout_s: float | None) -> float:
        """`timeout_s` or the default, checked; ClientError unless running (any thread)."""
        self._check_running()
        timeout = self.poll_timeout_s if timeout_s is None else timeout_s
        if timeout < 0:
            raise ValueError(f"poll timeout must be >= 0, not {timeout}")
        return timeout

    def auto_commit_due(self) -> bool:
        """Whether the next poll commits first (any thread)."""
        return self.auto_commit and self._clock.monotonic() >= self._next_auto_commit

    def take_polled(self, timeout_s: float) -> list[MessageExt]:
        """The next ready batch, waiting up to `timeout_s`: ``poll`` without the loop.

        Thread-safe (the one core method that is): the blocking consumer calls it
        on the application's thread; the loop settles the bookkeeping later.
        """
        batch = self._buffer.take(timeout_s)
        if batch is None:
            return []
        if self._tracer is not None:
            self._tracer.polled(self._group, batch.messages)
        return batch.messages

    def _request_settle(self) -> None:
        """Called by the buffer (on a poller's thread) when polls wait to be settled."""
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed at shutdown
            loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        """On the loop: account for the batches polled since the last settle.

        Each one leaves its queue's backlog, and the queue's consumed position moves to
        the pull's next offset after it (further, to the pull offset, when nothing
        of the queue is buffered any more: later pulls found nothing to return). A
        batch polled before a seek is skipped: the seek set the position.
        """
        polled = self._buffer.drain_consumed()
        if not polled:
            return
        for batch in polled:
            state = self._queues.get(batch.mq)
            if state is None or state.gate is not batch.gate:
                continue
            if batch.generation != state.gate.generation:
                continue
            state.backlog.settle(batch)
            offset = batch.next_offset
            if state.backlog.count == 0 and state.pull_offset > offset:
                offset = state.pull_offset
            state.consumed_offset = offset
        if self._flow_waiting:
            self._wake_pull_loops_with_room()

    # -- positions -------------------------------------------------------------------

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Consume `mq` from `offset` next; ClientError when outside [min, max] offset."""
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise ValueError(f"seek offset must be an int, not {offset!r}")
        state = self._held(mq)
        low = await queue_offsets.min_offset(self._instance, mq)
        high = await queue_offsets.max_offset(self._instance, mq)
        if not low <= offset <= high:
            raise ClientError(
                f"seek offset {offset} of {_describe(mq)} is outside its range [{low}, {high}]",
                ResponseCode.INVALID_PARAMETER,
            )
        if self._queues.get(mq) is state:
            self._reset_position(state, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        state = self._held(mq)
        offset = await queue_offsets.min_offset(self._instance, mq)
        if self._queues.get(mq) is state:
            self._reset_position(state, offset)

    async def seek_to_end(self, mq: MessageQueue) -> None:
        state = self._held(mq)
        offset = await queue_offsets.max_offset(self._instance, mq)
        if self._queues.get(mq) is state:
            self._reset_position(state, offset)

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset of `mq` stored at or after `timestamp_ms` (for ``seek``)."""
        self._check_running()
        return await queue_offsets.search_offset(self._instance, mq, timestamp_ms)

    async def committed(self, mq: MessageQueue) -> int:
        """The committed offset of `mq` (memory first, else the store); -1 if none."""
        self._check_running()
        return await self._store.read(mq, ReadOffsetType.MEMORY_FIRST_THEN_STORE)

    async def commit_sync(self, offsets: Mapping[MessageQueue, int] | None = None) -> None:
        """Commit the polled positions (or `offsets`) and wait until they are stored."""
        self._check_running()
        await self._persist_each(self._commit_in_memory(offsets))

    def commit_async(
        self,
        offsets: Mapping[MessageQueue, int] | None = None,
        callback: CommitCallback | None = None,
    ) -> asyncio.Task[None]:
        """Commit like commit_sync, storing in the background; `callback` gets the outcome.

        Bad `offsets` raise at once; a failure to store goes to the callback
        (and the returned task), or is logged when there is no callback."""
        self._check_running()
        task = self._tasks.spawn(self._persist_each(self._commit_in_memory(offsets)))

        def done(finished: asyncio.Task[None]) -> None:
            error: BaseException | None
            if finished.cancelled():
                error = ClientError(
                    "the commit was cancelled by shutdown (which persists committed offsets)",
                    ResponseCode.SYSTEM_ERROR,
                )
            else:
                error = finished.exception()
            if error is not None and callback is None:
                log.warning("%s: async commit failed: %s", self._group, error)
            if callback is not None:
                try:
                    callback(error)
                except Exception:
                    log.exception("%s: commit callback %r failed", self._group, callback)

        task.add_done_callback(done)
        return task

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """Stop pulling `queues` and hold back their buffered messages."""
        for mq in queues:
            state = self._queues.get(mq)
            if state is not None:
                self._buffer.pause(state.gate)
                state.resumed.clear()

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        """Undo ``pause``: pulls start again and held batches go back to poll."""
        for mq in queues:
            state = self._queues.get(mq)
            if state is None or not state.gate.paused:
                continue
            self._buffer.resume(state.gate)
            self._batch_ready.set()
            state.resumed.set()

    def _held(self, mq: MessageQueue) -> _QueueState:
        self._check_running()
        state = self._queues.get(mq)
        if state is None or state.pq.dropped:
            raise ClientError(
                f"{_describe(mq)} is not assigned to this consumer "
                "(not assigned, or moved by a rebalance)",
                ResponseCode.INVALID_PARAMETER,
            )
        return state

    def _reset_position(self, state: _QueueState, offset: int) -> None:
        """Pull and consume `state`'s queue from `offset`; buffered messages are discarded."""
        self._buffer.reposition(state.gate)  # no poll returns what was pulled before
        state.backlog.clear()
        state.pull_offset = offset
        state.consumed_offset = offset
        self._restart_pulling(state)

    def _commit_in_memory(self, offsets: Mapping[MessageQueue, int] | None) -> list[MessageQueue]:
        """Put positions in the offset store's memory; the queues to persist."""
        self._settle()
        if offsets is None:
            chosen = {
                mq: state.consumed_offset
                for mq, state in self._queues.items()
                if state.consumed_offset >= 0 and not state.pq.dropped
            }
        else:
            chosen = {}
            for mq, offset in offsets.items():
                if mq not in self._queues:
                    raise ClientError(
                        f"cannot commit {_describe(mq)}: it is not assigned to this consumer",
                        ResponseCode.INVALID_PARAMETER,
                    )
                if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                    raise ValueError(f"offset of {_describe(mq)} must be an int >= 0")
                chosen[mq] = offset
        for mq, offset in chosen.items():
            self._store.update(mq, offset)
        return sorted(chosen)

    async def _persist_each(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            await self._store.persist(mq, oneway=False)

    async def maybe_auto_commit(self) -> None:
        """Commit the polled positions if the auto-commit interval has passed
        (``poll`` does, before it takes the next batch)."""
        if not self.auto_commit_due():
            return
        self._next_auto_commit = self._clock.monotonic() + self.auto_commit_interval_s
        for mq in self._commit_in_memory(None):
            await self._store.persist(mq)

    # -- holding queues --------------------------------------------------------------

    def _subscription_of(self, mq: MessageQueue) -> SubscriptionSpec:
        spec = self._subscriptions.get(mq.topic)
        if spec is None:
            spec = SubscriptionSpec.parse(mq.topic, "*", sub_version=self._clock.now_ms())
        return spec

    def _hold(self, mq: MessageQueue, pq: ProcessQueue, start_offset: int) -> _QueueState:
        state = _QueueState(
            mq=mq,
            pq=pq,
            subscription=self._subscription_of(mq),
            pull_offset=start_offset,
            consumed_offset=start_offset,
        )
        state.resumed.set()
        self._queues[mq] = state
        self._restart_pulling(state)
        return state

    def _drop(self, mq: MessageQueue) -> bool:
        """Stop `mq`'s pulls, forget it and (auto-commit) commit its position in memory."""
        state = self._queues.get(mq)
        if state is None:
            return False
        self._buffer.revoke(state.gate)  # from here no poll returns its messages
        self._settle()  # and what polls returned before counts as consumed
        del self._queues[mq]
        state.pq.dropped = True
        if state.task is not None:
            state.task.cancel()
        if self.auto_commit and state.consumed_offset >= 0:
            self._store.update(mq, state.consumed_offset)
        return True

    async def _persist_released(self, mq: MessageQueue) -> None:
        """Store a released queue's offset (awaited: its next owner reads it) and forget it."""
        try:
            await self._store.persist(mq, oneway=False)
        except ClientError as exc:
            log.warning("%s: offset of %s not persisted: %s", self._group, _describe(mq), exc)
        if mq not in self._queues:
            self._store.remove(mq)

    def _apply_assignment(self) -> None:
        for mq in sorted(set(self._queues) - self._assigned):
            if self._drop(mq):
                self._tasks.spawn(self._persist_released(mq))
        for mq in sorted(self._assigned - set(self._queues)):
            self._hold(mq, ProcessQueue(self._clock), -1)

    # Rebalancer's listener (subscribe mode)

    async def on_queue_removed(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        if self._drop(mq):
            await self._persist_released(mq)
        return True

    async def on_queue_added(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        self._hold(mq, pq, next_offset)

    def on_assignment_changed(
        self, topic: str, all_queues: Sequence[MessageQueue], assigned: Sequence[MessageQueue]
    ) -> None:
        log.info(
            "%s: %s: holding %d of %d queues", self._group, topic, len(assigned), len(all_queues)
        )

    # ClientInstance's member interface

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self._group,
            consume_type=CONSUME_ACTIVELY,
            message_model=self.message_model.value,
            consume_from_where=self.consume_from_where.value,
            subscriptions=tuple(spec.to_wire() for _, spec in sorted(self._subscriptions.items())),
        )

    def subscribed_topics(self) -> set[str]:
        return set(self._subscriptions) | {mq.topic for mq in self._assigned}

    def on_route_changed(self, topic: str, route: TopicRoute) -> None:
        self._rebalancer.on_route_changed(topic, route)
        if topic in self._subscriptions:
            self.rebalance_soon()

    def rebalance_soon(self) -> None:
        if self._mode == "subscribe":
            self._rebalance_wakeup.set()

    def reset_offsets(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (admin reset): held queues restart there."""
        for mq, offset in offsets.items():
            state = self._queues.get(mq)
            if state is not None and mq.topic == topic and offset >= 0:
                self._reset_position(state, offset)
                self._store.update(mq, offset)

    def running_info(self) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO (Java ConsumerRunningInfo, the useful parts)."""
        offsets = self._store.table()
        table: dict[str, Any] = {}
        for mq, state in sorted(self._queues.items()):
            backlog = state.backlog
            table[f"{mq.topic}@{mq.broker_name}@{mq.queue_id}"] = {
                "commitOffset": offsets.get(mq, -1),
                "pullOffset": state.pull_offset,
                "consumedOffset": state.consumed_offset,
                "cachedMsgCount": backlog.count,
                "cachedMsgSizeInMiB": backlog.size_bytes // (1024 * 1024),
                "cachedMsgMinOffset": backlog.min_offset if backlog.min_offset is not None else 0,
                "cachedMsgMaxOffset": backlog.max_offset,
                "droped": state.pq.dropped,
                "paused": state.gate.paused,
            }
        return {
            "properties": {
                "consumerGroup": self._group,
                "messageModel": self.message_model.value,
                "consumeType": CONSUME_ACTIVELY,
                "consumeFromWhere": self.consume_from_where.value,
                "pullBatchSize": str(self.pull_batch_size),
                "autoCommit": str(self.auto_commit).lower(),
                "allocateMessageQueueStrategy": self._rebalancer.strategy.name,
            },
            "subscriptionSet": [
                spec.to_wire().to_json() for _, spec in sorted(self._subscriptions.items())
            ],
            "mqTable": table,
            "consumeOrderly": False,
        }

    # -- background work ---------------------------------------------------------------

    async def _after_subscription_change(self) -> None:
        await self._instance.send_heartbeat()
        self.rebalance_soon()

    async def _rebalance_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.rebalance_interval_s):
                    await self._rebalance_wakeup.wait()
            self._rebalance_wakeup.clear()
            if self._mode != "subscribe":
                continue
            try:
                await self._rebalancer.rebalance()
            except Exception:
                log.exception("%s: rebalance failed", self._group)

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.persist_interval_s)
            held = [mq for mq, state in self._queues.items() if not state.pq.dropped]
            try:
                await self._store.persist_all(held)
            except Exception:
                log.exception("%s: persisting offsets failed", self._group)

    def _restart_pulling(self, state: _QueueState) -> None:
        if state.task is not None:
            state.task.cancel()
        state.task = self._tasks.spawn(self._pull_loop(state))

    def _flow_control(self, state: _QueueState, total: int | None = None) -> str | None:
        if total is None:
            total = sum(held.backlog.count for held in self._queues.values())
        if total > self.pull_threshold_for_all:
            return f"{total} messages buffered > {self.pull_threshold_for_all} over all queues"
        return state.backlog.over_limits(
            self.pull_threshold_for_queue,
            self.pull_threshold_size_for_queue_mib,
            self.consume_max_span,
        )

    async def _pull_loop(self, state: _QueueState) -> None:
        mq = state.mq
        while not state.pq.dropped and self._queues.get(mq) is state:
            if state.gate.paused:
                await state.resumed.wait()
                continue
            reason = self._flow_control(state)
            if reason is not None:
                self._flow_control_count += 1
                if self._flow_control_count % FLOW_CONTROL_LOG_EVERY == 1:
                    # Backpressure while the application reads a backlog is normal:
                    # INFO (not shown unless asked for), once per 1000 as Java logs it.
                    log.info("%s: flow control on %s: %s", self._group, _describe(mq), reason)
                await self._wait_for_room(state)
                continue
            if state.pull_offset < 0:
                start = await self._rebalancer.compute_pull_from_where(mq)
                if start < 0:
                    await asyncio.sleep(PULL_ERROR_BACKOFF_S)
                    continue
                state.pull_offset = start
                if state.consumed_offset < 0:
                    state.consumed_offset = start
            await self._pull_once(state)

    async def _wait_for_room(self, state: _QueueState) -> None:
        """Java's 50 ms flow-control back-off, cut short once polls made room: a
        fixed pause let a fast reader drain the whole buffer and then wait."""
        state.space.clear()
        self._flow_waiting.add(state)
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FLOW_CONTROL_BACKOFF_S):
                    await state.space.wait()
        finally:
            self._flow_waiting.discard(state)

    def _wake_pull_loops_with_room(self) -> None:
        total = sum(held.backlog.count for held in self._queues.values())
        for state in self._flow_waiting:
            if self._flow_control(state, total) is None:
                state.space.set()

    async def _pull_once(self, state: _QueueState) -> None:
        gate = state.gate
        offset, generation = state.pull_offset, gate.generation
        try:
            result = await pull_message(
                self._instance,
                group=self._group,
                mq=state.mq,
                subscription=state.subscription,
                offset=offset,
                max_nums=self.pull_batch_size,
                suspend_ms=self.suspend_ms,
                nodes=self._nodes,
            )
        except ClientError as exc:
            log.warning("%s: pulling %s failed: %s", self._group, _describe(state.mq), exc)
            await asyncio.sleep(PULL_ERROR_BACKOFF_S)
            return
        if state.pq.dropped or gate.revoked or gate.generation != generation:
            return
        state.pq.mark_pulled()
        if result.status is PullStatus.OFFSET_ILLEGAL:
            log.warning(
                "%s: offset %d of %s is illegal (queue holds %d..%d); moving to %d",
                self._group,
                offset,
                _describe(state.mq),
                result.min_offset,
                result.max_offset,
                result.next_begin_offset,
            )
        next_offset = result.next_begin_offset
        if result.messages:
            messages = result.messages
            size = sum(len(message.body) for message in messages)
            batch = PolledBatch(state.mq, gate, generation, messages, next_offset, size)
            state.backlog.add(batch)
            if self._buffer.offer(batch):
                self._batch_ready.set()
        else:
            self._settle()
            if state.backlog.count == 0:
                # Nothing buffered and nothing matched: everything before the next
                # offset was polled or filtered out, so the position moves too.
                state.consumed_offset = max(state.consumed_offset, next_offset)
        state.pull_offset = next_offset


def _check_range(
    name: str,
    value: float,
    low: float,
    high: float | None,
    *,
    open_low: bool = False,
) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number, not {value!r}")
    too_low = value <= low if open_low else value < low
    if too_low or (high is not None and value > high):
        bound = f"> {low}" if open_low else f">= {low}"
        limit = f"{bound} and <= {high}" if high is not None else bound
        raise ValueError(f"{name} must be {limit}, not {value}")


def _describe(mq: MessageQueue) -> str:
    return f"{mq.topic}/{mq.broker_name}/{mq.queue_id}"


# -- blocking API -------------------------------------------------------------------------


class LitePullConsumer(BlockingClient[AsyncLitePullConsumer]):
    """The blocking lite pull consumer: the AsyncLitePullConsumer core on a loop thread.

    Same arguments and methods as the async consumer, without ``await``;
    ``commit_async`` returns a concurrent.futures.Future (its callback runs on
    the loop thread). ``shutdown()`` also stops the loop thread. ``poll``
    takes its batch on the calling thread (the other methods run on the loop
    thread and wait for it); any number of threads may poll.
    """

    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] = "127.0.0.1:9876",
        *,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: str | None = None,
        allocate_strategy: AllocateStrategy | None = None,
        auto_commit: bool = True,
        auto_commit_interval_s: float = DEFAULT_AUTO_COMMIT_INTERVAL_S,
        pull_batch_size: int = DEFAULT_PULL_BATCH_SIZE,
        pull_threshold_for_queue: int = DEFAULT_PULL_THRESHOLD_FOR_QUEUE,
        pull_threshold_size_for_queue_mib: int = DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE_MIB,
        pull_threshold_for_all: int = DEFAULT_PULL_THRESHOLD_FOR_ALL,
        consume_max_span: int = DEFAULT_CONSUME_CONCURRENTLY_MAX_SPAN,
        poll_timeout_s: float = DEFAULT_POLL_TIMEOUT_S,
        rebalance_interval_s: float = REBALANCE_INTERVAL_S,
        persist_interval_s: float = PERSIST_INTERVAL_S,
        offset_store_dir: str | Path | None = None,
        instance_name: str | None = None,
        client_config: ClientConfig | None = None,
        credentials: Credentials | None = None,
        tls: bool | TlsConfig | None = None,
        enable_trace: bool = False,
        trace_topic: str = DEFAULT_TRACE_TOPIC,
    ) -> None:
        build = functools.partial(
            AsyncLitePullConsumer,
            group,
            namesrv,
            message_model=message_model,
            consume_from_where=consume_from_where,
            consume_timestamp=consume_timestamp,
            allocate_strategy=allocate_strategy,
            auto_commit=auto_commit,
            auto_commit_interval_s=auto_commit_interval_s,
            pull_batch_size=pull_batch_size,
            pull_threshold_for_queue=pull_threshold_for_queue,
            pull_threshold_size_for_queue_mib=pull_threshold_size_for_queue_mib,
            pull_threshold_for_all=pull_threshold_for_all,
            consume_max_span=consume_max_span,
            poll_timeout_s=poll_timeout_s,
            rebalance_interval_s=rebalance_interval_s,
            persist_interval_s=persist_interval_s,
            offset_store_dir=offset_store_dir,
            instance_name=instance_name,
            client_config=client_config,
            credentials=credentials,
            tls=tls,
            enable_trace=enable_trace,
            trace_topic=trace_topic,
        )
        super().__init__(build, thread_name=f"tidemq-lite-pull-{group}")

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        self._call(self._core.subscribe, topic, expression, expression_type)

    def unsubscribe(self, topic: str) -> None:
        self._call(self._core.unsubscribe, topic)

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        self._call(self._core.assign, list(queues))

    def assignment(self) -> set[MessageQueue]:
        return self._call(self._core.assignment)

    @property
    def trace_dispatcher(self) -> TraceDispatcher | None:
        """The core's trace dispatcher (its `dropped`, `failed` and `sent` counters);
        None unless tracing."""
        return self._core.trace_dispatcher

    def buffered(self, mq: MessageQueue | None = None) -> int:
        return self._call(self._core.buffered, mq)

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        self._call(self._core.pause, list(queues))

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        self._call(self._core.resume, list(queues))

    def poll(self, timeout_s: float | None = None) -> list[MessageExt]:
        """The next batch, taken on this thread (no round trip to the loop thread,
        except for the auto-commit once every ``auto_commit_interval_s``)."""
        if self._loop.in_loop_thread():
            raise RuntimeError(
                "a blocking client call was made from its own event loop thread; "
                "use the async API (tidemq.aio) inside async listeners"
            )
        core = self._core
        if self._stopped:
            raise ClientError(
                f"{type(self).__name__} {core.group} is shut down", ResponseCode.SYSTEM_ERROR
            )
        timeout = core.poll_timeout(timeout_s)
        if core.auto_commit_due():
            self._run(core.maybe_auto_commit())
        return core.take_polled(timeout)

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._run(self._core.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._run(self._core.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._run(self._core.seek_to_end(mq))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._run(self._core.offset_for_timestamp(mq, timestamp_ms))

    def committed(self, mq: MessageQueue) -> int:
        return self._run(self._core.committed(mq))

    def commit_sync(self, offsets: Mapping[MessageQueue, int] | None = None) -> None:
        self._run(self._core.commit_sync(offsets))

    def commit_async(
        self,
        offsets: Mapping[MessageQueue, int] | None = None,
        callback: CommitCallback | None = None,
    ) -> concurrent.futures.Future[None]:
        """A concurrent.futures.Future that settles when the commit is stored."""
        chosen = dict(offsets) if offsets is not None else None

        async def commit() -> None:
            await self._core.commit_async(chosen, callback)

        return self._submit(commit())

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(self._core.fetch_message_queues(topic))
