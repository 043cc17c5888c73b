"""Producers: `AsyncProducer` (the asyncio core) and `Producer`, its blocking
twin running the same core on a loop thread.

Behaviour follows Java's DefaultMQProducer (4.9.x):

* routes come from the ClientInstance (refreshed every 30 s, and at once when
  a send fails on its connection or with a retried code: after a controller
  failover the next attempt goes to the new master); a topic the name
  server does not know is sent along the TBW102 template route, so a broker
  that auto-creates topics creates it;
* the queue is picked round robin, skipping brokers the latency fault
  tolerance marks slow or failing; every attempt reports its latency (a failed
  one isolates its broker);
* `send` makes up to 1 + `retry_times_when_send_failed` attempts, each on
  another broker when there is one, all within `send_timeout_s`; retried are
  transport failures and the broker codes Java retries (RETRY_ON_CODES);
  a send with a chosen queue, selector or sharding key makes one attempt;
* `send_async` retries only transport failures (as Java's async path), up to
  `retry_times_when_send_async_failed` times; its first attempt usually runs
  without a task (written at once, ended by the answer's callback);
  `send_oneway` tries once;
* bodies of at least `compress_over_bytes` travel zlib-compressed; every
  message gets a unique id (UNIQ_KEY) unless it has one;
* with `auto_batch=True` (RocketMQ 5's DefaultMQProducer.setAutoBatch),
  single sends without a selector, sharding key or own timeout are held up to
  `batch_max_delay_ms` (10) or until they pass `batch_max_bytes` (32 KiB) and
  go out as one batch per topic, tags and WAIT (and queue, when chosen); each
  caller gets its own SendResult (tidemq.client._accumulator);
* with `enable_trace`, every send the broker answers (sync, async, batch,
  from a calling thread; not oneway, as Java) is recorded as a Pub trace
  record in `trace_topic` (tidemq.client.trace), by a trace producer sharing
  this producer's ClientInstance, in the background.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import itertools
import logging
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tidemq.acl.credentials import Credentials
from tidemq.client._accumulator import (
    DEFAULT_BATCH_MAX_BYTES,
    DEFAULT_BATCH_MAX_DELAY_MS,
    DEFAULT_TOTAL_BATCH_MAX_BYTES,
    BatchLimits,
    SendAccumulator,
)
from tidemq.client._base import GroupClient, check_group, make_client_config
from tidemq.client._core.queue_selection import (
    LatencyFaultTolerance,
    QueueSelector,
    select_by_sharding_key,
)
from tidemq.client._loop import BlockingClient
from tidemq.client._recall import recall_answer, recall_request
from tidemq.client._send import (
    DEFAULT_COMPRESS_OVER_BYTES,
    DEFAULT_PRODUCER_GROUP,
    DEFAULT_TOPIC,
    DEFAULT_TOPIC_QUEUE_NUMS,
    RETRY_ON_CODES,
    PreparedSend,
    SendCodec,
    make_message,
    route_from_template,
    send_result,
    topic_problem,
)
from tidemq.client._wire import CALL_FAILURES, call, call_error
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig, ClientInstance
from tidemq.client.model import SendResult, SendStatus, TopicRoute
from tidemq.client.trace.dispatcher import TraceDispatcher
from tidemq.client.trace.hooks import SendTracer
from tidemq.client.trace.records import DEFAULT_TRACE_TOPIC
from tidemq.common import properties as props
from tidemq.common.message import MAX_MESSAGE_SIZE, Message, MessageQueue
from tidemq.common.message_id import UniqueIdGenerator, host_bytes
from tidemq.common.tasks import TaskSet
from tidemq.protocol import RemotingCommand, RequestCode, ResponseCode
from tidemq.transport.blocking import BlockingChannels
from tidemq.transport.connection import Connection
from tidemq.transport.tls import TlsConfig

__all__ = [
    "AsyncProducer",
    "MessageQueueSelector",
    "Producer",
    "SendCallback",
    "check_trace_topic",
    "make_message",
    "start_trace_dispatcher",
]

log = logging.getLogger(__name__)

ROUTE_REFRESH_AFTER_FAILURE_S = 0.2
"""A failed send refreshes its topic's route at most this often."""
T = TypeVar("T")

DEFAULT_CALLER_THREAD_CONNECTIONS = 4
"""Sockets per broker a blocking Producer may open for sends on the calling
threads (beyond them, a send goes through the loop thread's connection)."""

MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
"""Java's MessageQueueSelector.select(mqs, msg, arg): picks one of the topic's writable queues."""
SendCallback = Callable[[SendResult | BaseException], None]
"""Called once with the SendResult, or the exception the send ended with."""

TRACE_PRODUCER_GROUP_PREFIX = "_INNER_TRACE_PRODUCER"
"""TraceConstants.GROUP_NAME_PREFIX: trace producers are named
`_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>-<n>` (AsyncTraceDispatcher)."""
TRACE_SEND_TIMEOUT_S = 5.0
"""AsyncTraceDispatcher's trace producer: sendMsgTimeout 5000 ms."""
_trace_producers = itertools.count(1)


def check_trace_topic(trace_topic: object) -> str:
    """`trace_topic` if traces can be sent there, else ValueError."""
    problem = topic_problem(trace_topic)
    if problem is not None:
        raise ValueError(f"trace_topic: {problem}")
    assert isinstance(trace_topic, str)
    return trace_topic


def trace_producer_group(host_group: str, kind: str) -> str:
    """The group of a client's trace producer (unique in the process, <= 255 characters)."""
    suffix = f"-{kind}-{next(_trace_producers)}"
    room = 255 - len(TRACE_PRODUCER_GROUP_PREFIX) - 1 - len(suffix)
    return f"{TRACE_PRODUCER_GROUP_PREFIX}-{host_group[:room]}{suffix}"


async def start_trace_dispatcher(
    instance: ClientInstance, host_group: str, kind: str, trace_topic: str
) -> TraceDispatcher:
    """A started TraceDispatcher sending through a producer of its own on the
    started `instance` (shared: no extra connections); shutting the dispatcher
    down shuts that producer down. `kind`: "PRODUCE" or "CONSUME"."""
    producer = AsyncProducer(
        trace_producer_group(host_group, kind),
        client_instance=instance,
        send_timeout_s=TRACE_SEND_TIMEOUT_S,
    )
    await producer.start()
    dispatcher = TraceDispatcher(producer.send, trace_topic, on_close=producer.shutdown)
    dispatcher.start()
    return dispatcher


@dataclass(slots=True)
class _PublishInfo:
    """What sending to one topic needs, rebuilt whenever its route changes."""

    route: TopicRoute
    queues: tuple[MessageQueue, ...]
    queue_set: frozenset[MessageQueue]
    selector: QueueSelector
    masters: dict[str, str]
    from_template: bool
    """True while the topic is unknown to the name server (TBW102 route)."""


class AsyncProducer(GroupClient):
    """Sends messages; `await start()` first (or `async with`), `await shutdown()` at the end.

    `client_instance`, when given, is a started ClientInstance shared with its
    owner (for example a consumer's send-back fallback); the producer then
    neither starts nor closes it. Otherwise the producer owns a ClientInstance
    made from `client_config` (or from `namesrv` and `instance_name`).

    `enable_trace=True` records every answered send in `trace_topic`
    (RMQ_SYS_TRACE_TOPIC by default) in RocketMQ's message-trace format, so
    `tidemq message trace MSGID` (or `tidemq.client.trace.trace_timeline`)
    shows it; tracing runs in the background and never delays or fails a send.
    """

    _kind = "producer"

    def __init__(
        self,
        group: str = DEFAULT_PRODUCER_GROUP,
        namesrv: str | Sequence[str] = "127.0.0.1:9876",
        *,
        send_timeout_s: float = 3.0,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        retry_another_broker_when_not_store_ok: bool = False,
        compress_over_bytes: int = DEFAULT_COMPRESS_OVER_BYTES,
        max_message_size: int = MAX_MESSAGE_SIZE,
        send_latency_fault_enable: bool = True,
        create_topic_key: str = DEFAULT_TOPIC,
        default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
        instance_name: str | None = None,
        client_config: ClientConfig | None = None,
        credentials: Credentials | None = None,
        tls: bool | TlsConfig | None = None,
        client_instance: ClientInstance | None = None,
        enable_trace: bool = False,
        trace_topic: str = DEFAULT_TRACE_TOPIC,
        auto_batch: bool = False,
        batch_max_delay_ms: int = DEFAULT_BATCH_MAX_DELAY_MS,
        batch_max_bytes: int = DEFAULT_BATCH_MAX_BYTES,
        total_batch_max_bytes: int = DEFAULT_TOTAL_BATCH_MAX_BYTES,
    ) -> None:
        check_group(group, "producer")
        limits = BatchLimits(batch_max_delay_ms, batch_max_bytes, total_batch_max_bytes)
        check_trace_topic(trace_topic)
        if send_timeout_s <= 0:
            raise ValueError("send_timeout_s must be positive")
        if retry_times_when_send_failed < 0 or retry_times_when_send_async_failed < 0:
            raise ValueError("retry times must not be negative")
        if not 0 < default_topic_queue_nums <= 1024:
            raise ValueError("default_topic_queue_nums must be between 1 and 1024")
        if client_instance is not None:
            self._instance = client_instance
            self._owns_instance = False
        else:
            self._instance = ClientInstance(
                make_client_config(namesrv, instance_name, client_config, credentials, tls)
            )
            self._owns_instance = True
        self._config = self._instance.config
        self._group = group
        self._clock = self._instance.clock
        self.send_timeout_s = send_timeout_s
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self._create_topic_key = create_topic_key
        self._default_topic_queue_nums = default_topic_queue_nums
        self._fault = LatencyFaultTolerance(self._clock) if send_latency_fault_enable else None
        self._ids = UniqueIdGenerator(self._clock, ip=_ip_bytes(self._instance.config.client_ip))
        self._codec = SendCodec(
            group,
            self._ids.next_id,
            compress_over_bytes=compress_over_bytes,
            max_message_size=max_message_size,
            default_topic=create_topic_key,
            default_topic_queue_nums=default_topic_queue_nums,
        )
        self._publish: dict[str, _PublishInfo] = {}
        self._published: set[str] = set()
        """Every topic a route was installed for: its route is refreshed even
        while it has no writable queue (a master died and the new one is not
        registered yet), as RocketMQ keeps a topicPublishInfoTable entry; else
        a producer idle through a failover would never learn the new master
        (nor send it heartbeats, so its transactions could not be checked)."""
        self._refreshed_after_failure: dict[str, float] = {}
        self._route_locks: dict[str, asyncio.Lock] = {}
        self._sends = TaskSet(f"producer {group} async sends")
        self._direct: set[asyncio.Future[SendResult]] = set()
        """Async sends whose first attempt runs without a task (`_send_direct`)."""
        self._live_connection: Callable[[str], Connection | None] = getattr(
            self._instance.remoting, "live_connection", _no_connection
        )
        """The open connection to an address, if any (a remoting without a
        pool, such as a test double, always goes through `call`)."""
        self.enable_trace = enable_trace
        self.trace_topic = trace_topic
        self._tracer: SendTracer | None = None
        """Set at start with `enable_trace`: records each answered send."""
        self._accumulator: SendAccumulator | None = None
        if auto_batch:
            self._accumulator = SendAccumulator(self._send_batch, limits, self._sends)
        self._state = "created"

    # -- life cycle ---------------------------------------------------------------------

    @property
    def client_instance(self) -> ClientInstance:
        return self._instance

    @property
    def auto_batch(self) -> bool:
        """Whether single sends are held and sent in batches (RocketMQ 5's autoBatch)."""
        return self._accumulator is not None

    @property
    def fault_tolerance(self) -> LatencyFaultTolerance | None:
        """The per-broker latency record (None when send_latency_fault_enable is off)."""
        return self._fault

    async def start(self) -> None:
        """Start the client plumbing and join it as a producer (idempotent)."""
        if self._state == "running":
            return
        if self._state != "created":
            raise ClientError("this producer has been shut down", ResponseCode.SYSTEM_ERROR)
        if self._owns_instance:
            await self._instance.start()
        self._instance.register_producer(self)
        if self.enable_trace:
            await self._start_tracing()
        self._state = "running"

    async def _start_tracing(self) -> None:
        """Start the trace dispatcher; a failure leaves the producer untraced (as Java)."""
        try:
            dispatcher = await start_trace_dispatcher(
                self._instance, self._group, "PRODUCE", self.trace_topic
            )
        except Exception:
            log.exception("%s: message trace could not start; sends are not traced", self._group)
            return
        self._tracer = SendTracer(
            dispatcher, self._group, self._clock, self._instance.master_address
        )

    @property
    def trace_dispatcher(self) -> TraceDispatcher | None:
        """The dispatcher of this producer's trace records (None unless tracing)."""
        return None if self._tracer is None else self._tracer.dispatcher

    @property
    def tracer(self) -> SendTracer | None:
        return self._tracer

    async def shutdown(self) -> None:
        """Let in-flight async sends finish (up to send_timeout_s), leave the
        producer group on every broker and close the connections (idempotent)."""
        if self._state != "running":
            self._state = "closed"
            return
        self._state = "closing"
        try:
            if self._accumulator is not None:
                self._accumulator.flush_all()
            if not await self._wait_for_sends(self.send_timeout_s):
                log.warning("%s: async sends still running at shutdown are cancelled", self._group)
            for send in list(self._direct):
                send.cancel()
            await self._sends.cancel_all()
            if self._tracer is not None:  # the last traces go out before the connections close
                await self._tracer.dispatcher.shutdown()
            await self._instance.unregister(producer_group=self._group)
        finally:
            self._state = "closed"
            if self._owns_instance:
                await self._instance.close()

    # -- ProducerMember -----------------------------------------------------------------

    def published_topics(self) -> Iterable[str]:
        topics = list(self._published)
        if any(info.from_template for info in self._publish.values()):
            topics.append(self._create_topic_key)
        return topics

    def on_route_changed(self, topic: str, route: TopicRoute) -> None:
        if topic in self._published:
            self._install(topic, route, from_template=False)
        if topic == self._create_topic_key:
            for name, info in list(self._publish.items()):
                if info.from_template:
                    derived = route_from_template(name, route, self._default_topic_queue_nums)
                    self._install(name, derived, from_template=True)

    # -- sending ------------------------------------------------------------------------

    async def send(
        self,
        message: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
        timeout_s: float | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer (SEND_OK or a flush/slave status).

        Without `queue`, `selector` or `sharding_key` the queue is chosen round
        robin and failures are retried on other brokers; with one of them the
        send goes to that queue once (partition order)."""
        self._check_running()
        held = self._hold(message, queue, selector, sharding_key, timeout_s)
        if held is not None:
            return await held
        prepared = self._codec.prepare(message)
        timeout = self.send_timeout_s if timeout_s is None else timeout_s
        if queue is None and selector is None and sharding_key is None:
            sending = self._send_with_retries(
                prepared, timeout, 1 + self.retry_times_when_send_failed, retry_codes=True
            )
        else:
            sending = self._send_to_chosen(
                prepared, message, queue, selector, arg, sharding_key, timeout
            )
        if self._tracer is None:
            return await sending
        return await self._traced(sending, message, len(prepared.body))

    async def _traced(
        self,
        sending: Coroutine[Any, Any, SendResult],
        message: Message,
        body_length: int,
        started_ms: int | None = None,
    ) -> SendResult:
        """`sending`'s result, recorded as a Pub trace record (the send began at
        `started_ms`, or now)."""
        if started_ms is None:
            started_ms = self._clock.now_ms()
        result = await sending
        if self._tracer is not None:
            self._tracer.sent(message, body_length, result, started_ms)
        return result

    def _trace_when_done(
        self, future: asyncio.Future[SendResult], message: Message, body_length: int
    ) -> None:
        """Record an async send once its future ends with a result."""
        tracer = self._tracer
        if tracer is None:
            return
        started_ms = self._clock.now_ms()

        def done(finished: asyncio.Future[SendResult]) -> None:
            if not finished.cancelled() and finished.exception() is None:
                tracer.sent(message, body_length, finished.result(), started_ms)

        future.add_done_callback(done)

    def send_async(
        self,
        message: Message,
        callback: SendCallback | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
        timeout_s: float | None = None,
    ) -> asyncio.Future[SendResult]:
        """Start a send and return its future at once; `callback` gets the
        SendResult or the exception (invalid messages included) when it ends.

        With the route, the master and its connection at hand (the steady
        state), the first attempt is written now and the future is a plain
        Future ended by the answer's callback: no task, no coroutine per send.
        A retry, or anything to wait for first, runs in a task as `send` does."""
        self._check_running()
        # Prepared here, not in a task: a message that fails its checks still
        # ends the returned future (through `_failed`).
        coro: Coroutine[Any, Any, SendResult]
        body_length = 0
        try:
            held = self._hold(message, queue, selector, sharding_key, timeout_s)
            if held is not None:
                if callback is not None:
                    held.add_done_callback(functools.partial(_deliver, callback))
                return held
            prepared = self._codec.prepare(message)
        except Exception as exc:
            coro = _failed(exc)
        else:
            body_length = len(prepared.body)
            timeout = self.send_timeout_s if timeout_s is None else timeout_s
            if queue is None and selector is None and sharding_key is None:
                attempts = 1 + self.retry_times_when_send_async_failed
                direct, progress = self._send_direct(prepared, timeout, attempts)
                if direct is not None:
                    if self._tracer is not None:
                        self._trace_when_done(direct, message, body_length)
                    if callback is not None:
                        direct.add_done_callback(functools.partial(_deliver, callback))
                    return direct
                coro = self._send_with_retries(
                    prepared, timeout, attempts, retry_codes=False, progress=progress
                )
            else:
                coro = self._send_to_chosen(
                    prepared, message, queue, selector, arg, sharding_key, timeout
                )
        task: asyncio.Future[SendResult] = self._sends.spawn(coro)
        if self._tracer is not None and body_length:
            self._trace_when_done(task, message, body_length)
        if callback is not None:
            task.add_done_callback(functools.partial(_deliver, callback))
        return task

    def _hold(
        self,
        message: Message,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        sharding_key: str | None,
        timeout_s: float | None,
    ) -> asyncio.Future[SendResult] | None:
        """With `auto_batch`, the future of `message` held for a batch; None when
        it is sent on its own (no auto_batch, a selector, sharding key or own
        timeout, a message Java never batches, or the accumulator full)."""
        accumulator = self._accumulator
        if accumulator is None or selector is not None or sharding_key is not None:
            return None
        if timeout_s is not None:
            return None
        self._codec.check_batchable(message)
        return accumulator.offer(message, queue)

    async def send_async_coro(
        self,
        message: Message,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
        timeout_s: float | None = None,
    ) -> SendResult:
        """The body of `send_async` (retries on transport failures only, as Java)."""
        self._check_running()
        prepared = self._codec.prepare(message)
        timeout = self.send_timeout_s if timeout_s is None else timeout_s
        if queue is None and selector is None and sharding_key is None:
            sending = self._send_with_retries(
                prepared, timeout, 1 + self.retry_times_when_send_async_failed, retry_codes=False
            )
        else:
            sending = self._send_to_chosen(
                prepared, message, queue, selector, arg, sharding_key, timeout
            )
        if self._tracer is None:
            return await sending
        return await self._traced(sending, message, len(prepared.body))

    async def send_oneway(
        self,
        message: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> None:
        """Write the message to a broker without waiting for any answer (one attempt)."""
        self._check_running()
        prepared = self._codec.prepare(message)
        info = await self._publish_info(prepared.topic)
        mq = self._choose(info, message, queue, selector, arg, sharding_key)
        if mq is None:
            mq = info.selector.select(None)
        address = await self._address(info, mq)
        command = prepared.request(mq.queue_id, self._clock.now_ms())
        try:
            await self._instance.remoting.invoke_oneway(address, command)
        except Exception as exc:
            self._update_fault(mq.broker_name, 0.0, isolation=True)
            raise ClientError(
                f"oneway send to topic {prepared.topic} on broker {mq.broker_name} at "
                f"{address} failed ({exc})",
                ResponseCode.RPC_SEND_TO_CHANNEL_FAILED,
            ) from exc

    async def send_batch(
        self,
        messages: Sequence[Message],
        *,
        queue: MessageQueue | None = None,
        timeout_s: float | None = None,
    ) -> SendResult:
        """Send messages of one topic as one request, stored on one queue with
        consecutive offsets (all or nothing). `msg_id` of the result joins the
        messages' unique ids with ","; `queue_offset` is the first one's."""
        self._check_running()
        return await self._send_batch(messages, queue, timeout_s)

    async def _send_batch(
        self,
        messages: Sequence[Message],
        queue: MessageQueue | None = None,
        timeout_s: float | None = None,
    ) -> SendResult:
        """`send_batch` without the running check: a held batch still goes out
        while the producer shuts down."""
        prepared = self._codec.prepare_batch(messages)
        timeout = self.send_timeout_s if timeout_s is None else timeout_s
        if queue is None:
            sending = self._send_with_retries(
                prepared, timeout, 1 + self.retry_times_when_send_failed, retry_codes=True
            )
        else:
            sending = self._send_to_chosen(prepared, messages[0], queue, None, None, None, timeout)
        return await self._traced_batch(sending, messages)

    async def _traced_batch(
        self, sending: Coroutine[Any, Any, SendResult], messages: Sequence[Message]
    ) -> SendResult:
        """`sending`'s result, recorded as one Pub trace record per message when tracing."""
        if self._tracer is None:
            return await sending
        started_ms = self._clock.now_ms()
        result = await sending
        if self._tracer is not None:
            self._tracer.sent_batch(messages, result, started_ms)
        return result

    async def send_halves(
        self,
        messages: Sequence[Message],
        queue: MessageQueue,
        *,
        timeout_s: float | None = None,
    ) -> SendResult:
        """Store `messages` (one topic) as transactional halves on `queue` in one
        request: TIDEMQ_SEND_HALF_BATCH, a tidemq extension that RocketMQ
        brokers do not know. Each half is ended like one sent alone
        (END_TRANSACTION, or TIDEMQ_END_TRANSACTIONS for many). `offset_msg_id`
        of the result joins the halves' offset ids with ","; their half-queue
        offsets run from `queue_offset`; `msg_id` joins their unique keys,
        which are their transaction ids."""
        self._check_running()
        for message in messages:
            message.properties[props.TRAN_MSG] = "true"
            message.properties[props.PGROUP] = self.group
        prepared = dataclasses.replace(
            self._codec.prepare_batch(messages), code=RequestCode.TIDEMQ_SEND_HALF_BATCH
        )
        timeout = self.send_timeout_s if timeout_s is None else timeout_s
        return await self._traced_batch(
            self._send_to_chosen(prepared, messages[0], queue, None, None, None, timeout), messages
        )

    async def publish_queues(self, topic: str) -> list[MessageQueue]:
        """The writable queues a send to `topic` chooses from (Java fetchPublishMessageQueues)."""
        self._check_running()
        return list((await self._publish_info(topic)).queues)

    async def recall(
        self, topic: str, recall_handle: str, *, timeout_s: float | None = None
    ) -> str:
        """Cancel a timer message before it is due (RECALL_MESSAGE, RocketMQ 5.3):
        `recall_handle` is its SendResult's. Returns the recalled message's id;
        ClientError (ILLEGAL_OPERATION, 604) when it was delivered already, the
        time has passed, or the handle is not one."""
        self._check_running()
        broker_name, fields = recall_request(topic, recall_handle, self.group)
        address = await self._instance.require_master(broker_name, topic)
        timeout = self.send_timeout_s if timeout_s is None else timeout_s
        response = await self._instance.invoke(
            address, RequestCode.RECALL_MESSAGE, fields, timeout=timeout
        )
        return recall_answer(response, topic)

    # -- internals ----------------------------------------------------------------------

    async def _send_with_retries(
        self,
        prepared: PreparedSend,
        timeout: float,
        attempts: int,
        *,
        retry_codes: bool,
        progress: _Progress | None = None,
    ) -> SendResult:
        """Up to `attempts` attempts within `timeout`; `progress`: carry on
        from the attempts made so far (or with the queue already chosen)."""
        clock = self._clock
        fault = self._fault
        topic = prepared.topic
        if progress is None:
            started = begin = clock.monotonic()
            progress = _Progress(started, started)
        else:
            started, begin = progress.started, progress.begin
        last_broker = progress.last_broker
        last_error = progress.last_error
        last_result = progress.last_result
        chosen = progress.next_queue
        made = progress.made
        info = self._publish.get(topic) or await self._publish_info(topic)
        for _ in range(attempts - made):
            remaining = timeout - (begin - started)
            if remaining <= 0:
                break
            info = self._publish.get(topic) or info
            if chosen is None:
                mq = info.selector.select(last_broker)
            else:
                mq, chosen = chosen, None
            broker = last_broker = mq.broker_name
            made += 1
            try:
                address = info.masters.get(broker) or await self._address(info, mq)
                command = prepared.request(mq.queue_id, clock.now_ms())
                connection = self._live_connection(address)
                if connection is None:  # none open yet (or a test double): connect first
                    response = await call(self._instance.remoting, address, command, remaining)
                else:  # the usual case: straight to the open connection, errors as `call`'s
                    try:
                        response = await connection.request(command, remaining, owned=True)
                    except CALL_FAILURES as exc:
                        raise call_error(exc, address, remaining) from exc
                result = send_result(response, prepared, mq)
            except ClientError as exc:
                end = clock.monotonic()
                self._update_fault(broker, end - begin, isolation=True)
                begin = end
                last_error = exc
                if exc.transport_failure or exc.code in RETRY_ON_CODES:
                    await self._refresh_after_failure(topic)
                if exc.transport_failure or (retry_codes and exc.code in RETRY_ON_CODES):
                    log.debug("%s: attempt %d failed: %s", self._group, made, exc)
                    continue
                raise
            if (
                result.status is SendStatus.SEND_OK
                or not self.retry_another_broker_when_not_store_ok
            ):
                if fault is not None:  # else no clock read: nothing more needs the time
                    end = clock.monotonic()
                    fault.update(broker, int((end - begin) * 1000), False, end)
                return result
            end = clock.monotonic()
            self._update_fault(broker, end - begin, isolation=False)
            begin = end
            last_result = result
        if last_result is not None:
            return last_result
        spent = clock.monotonic() - started
        if last_error is None:
            raise ClientError(
                f"send to topic {prepared.topic} timed out: {spent:.3g} s spent before the "
                f"first attempt (timeout {timeout:g} s)",
                ResponseCode.RPC_TIME_OUT,
            )
        raise ClientError(
            f"send to topic {prepared.topic} failed after {made} attempt(s) in {spent:.3g} s: "
            f"{last_error.message}",
            last_error.code,
        ) from last_error

    def _send_direct(
        self, prepared: PreparedSend, timeout: float, attempts: int
    ) -> tuple[asyncio.Future[SendResult] | None, _Progress | None]:
        """The first attempt of an async send without a task, when nothing on
        its way needs awaiting (route, master and connection at hand): the
        answer's done callback ends the send, or hands it to the retry loop.
        Else (None, what to carry on from) for the task path."""
        info = self._publish.get(prepared.topic)
        if info is None:
            return None, None
        clock = self._clock
        started = clock.monotonic()
        mq = info.selector.select(None)
        address = info.masters.get(mq.broker_name)
        connection = None if address is None else self._live_connection(address)
        if address is None or connection is None:
            return None, _Progress(started, started, next_queue=mq)
        command = prepared.request(mq.queue_id, clock.now_ms())
        try:
            answer = connection.request_nowait(command, timeout, owned=True)
        except CALL_FAILURES:  # closed meanwhile, or unencodable: nothing was sent
            return None, _Progress(started, started, next_queue=mq)
        send: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        self._direct.add(send)
        answer.add_done_callback(
            functools.partial(
                self._direct_answered, send, prepared, mq, address, timeout, attempts, started
            )
        )
        return send, None

    def _direct_answered(
        self,
        send: asyncio.Future[SendResult],
        prepared: PreparedSend,
        mq: MessageQueue,
        address: str,
        timeout: float,
        attempts: int,
        begin: float,
        answer: asyncio.Future[RemotingCommand],
    ) -> None:
        """The first attempt's answer: as the retry loop's first iteration."""
        error = None if answer.cancelled() else answer.exception()
        if send.done():  # cancelled by its caller or by shutdown
            self._direct.discard(send)
            return
        if answer.cancelled():
            error = ClientError("the request was cancelled", ResponseCode.RPC_UNKNOWN)
        try:
            outcome = self._first_outcome(
                prepared,
                mq,
                address,
                timeout,
                begin,
                None if error is not None else answer.result(),
                error,
                retry_codes=False,  # async sends retry transport failures only (as Java)
            )
        except ClientError as exc:
            self._direct.discard(send)
            send.set_exception(exc)
            return
        if isinstance(outcome, _Progress):
            self._resume(send, prepared, timeout, attempts, outcome)
            return
        self._direct.discard(send)
        send.set_result(outcome)

    def _first_outcome(
        self,
        prepared: PreparedSend,
        mq: MessageQueue,
        address: str,
        timeout: float,
        begin: float,
        response: RemotingCommand | None,
        error: BaseException | None,
        *,
        retry_codes: bool,
    ) -> SendResult | _Progress:
        """How a first attempt made outside the retry loop ends the send: its
        SendResult, or where the retry loop carries on from (a failure it
        retries, a status not SEND_OK with retry_another_broker_when_not_store_ok);
        raises the ClientError that ends it. `error` is a ClientError or one of
        CALL_FAILURES (no answer); `begin` is Clock.monotonic() at the start."""
        clock = self._clock
        broker = mq.broker_name
        try:
            if isinstance(error, ClientError):
                raise error
            if error is not None:
                raise call_error(error, address, timeout) from error
            assert response is not None
            result = send_result(response, prepared, mq)
        except ClientError as exc:
            end = clock.monotonic()
            self._update_fault(broker, end - begin, isolation=True)
            if exc.transport_failure or (retry_codes and exc.code in RETRY_ON_CODES):
                log.debug("%s: attempt 1 failed: %s", self._group, exc)
                return _Progress(begin, end, 1, broker, last_error=exc)
            raise
        if result.status is SendStatus.SEND_OK or not self.retry_another_broker_when_not_store_ok:
            fault = self._fault
            if fault is not None:
                end = clock.monotonic()
                fault.update(broker, int((end - begin) * 1000), False, end)
            return result
        end = clock.monotonic()
        self._update_fault(broker, end - begin, isolation=False)
        return _Progress(begin, end, 1, broker, last_result=result)

    def send_from_thread(
        self,
        message: Message,
        channels: BlockingChannels,
        timeout_s: float | None = None,
    ) -> SendResult | Coroutine[Any, Any, SendResult]:
        """`send` without a queue choice, for a blocking caller on a thread of
        its own (not the loop's): with the route and the master at hand and a
        channel of `channels` free, the first attempt is made here, on the
        calling thread. What is left (no route yet, every channel busy, a
        retry) is returned as a coroutine for the caller to run on the loop,
        carrying on from what was done: same attempts, timeout, fault
        tolerance and errors as `send`. Thread-safe with the loop's sends:
        it reads the route and updates only what they tolerate (the round-robin
        position, fault records, unique ids under their lock)."""
        self._check_running()
        prepared = self._codec.prepare(message)
        if self._tracer is not None:
            started_ms = self._clock.now_ms()
            outcome = self._send_prepared_from_thread(prepared, channels, timeout_s)
            if isinstance(outcome, SendResult):
                self._tracer.sent(message, len(prepared.body), outcome, started_ms)
                return outcome
            return self._traced(outcome, message, len(prepared.body), started_ms)
        return self._send_prepared_from_thread(prepared, channels, timeout_s)

    def _send_prepared_from_thread(
        self, prepared: PreparedSend, channels: BlockingChannels, timeout_s: float | None
    ) -> SendResult | Coroutine[Any, Any, SendResult]:
        """`send_from_thread` after the message was prepared."""
        timeout = self.send_timeout_s if timeout_s is None else timeout_s
        attempts = 1 + self.retry_times_when_send_failed
        info = self._publish.get(prepared.topic)
        if info is None:  # the first send to a topic: routes are the loop's work
            return self._send_with_retries(prepared, timeout, attempts, retry_codes=True)
        clock = self._clock
        started = clock.monotonic()
        mq = info.selector.select(None)
        address = info.masters.get(mq.broker_name)
        if address is None:
            return self._send_with_retries(
                prepared,
                timeout,
                attempts,
                retry_codes=True,
                progress=_Progress(started, started, next_queue=mq),
            )
        response: RemotingCommand | None = None
        error: BaseException | None = None
        try:
            channel = channels.acquire(address, timeout)
            if channel is None:  # every channel busy: the loop's shared connection
                return self._send_with_retries(
                    prepared,
                    timeout,
                    attempts,
                    retry_codes=True,
                    progress=_Progress(started, started, next_queue=mq),
                )
            try:
                response = channel.request(prepared.request(mq.queue_id, clock.now_ms()), timeout)
            finally:
                channels.release(channel)
        except CALL_FAILURES as exc:
            error = exc
        outcome = self._first_outcome(
            prepared, mq, address, timeout, started, response, error, retry_codes=True
        )
        if isinstance(outcome, _Progress):
            return self._send_with_retries(
                prepared, timeout, attempts, retry_codes=True, progress=outcome
            )
        return outcome

    def _resume(
        self,
        send: asyncio.Future[SendResult],
        prepared: PreparedSend,
        timeout: float,
        attempts: int,
        progress: _Progress,
    ) -> None:
        """Carry a send on in the retry loop (a task); its outcome ends `send`."""
        task = self._sends.spawn(
            self._send_with_retries(
                prepared, timeout, attempts, retry_codes=False, progress=progress
            )
        )
        task.add_done_callback(functools.partial(_settle, send, self._direct))

    async def _wait_for_sends(self, timeout: float) -> bool:
        """Wait up to `timeout` for every async send; False if some still run."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._direct:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await asyncio.wait(set(self._direct), timeout=remaining)
        return await self._sends.wait(deadline - loop.time())

    async def _send_to_chosen(
        self,
        prepared: PreparedSend,
        message: Message,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: Any,
        sharding_key: str | None,
        timeout: float,
    ) -> SendResult:
        clock = self._clock
        started = clock.monotonic()
        info = await self._publish_info(prepared.topic)
        mq = self._choose(info, message, queue, selector, arg, sharding_key)
        assert mq is not None
        address = await self._address(info, mq)
        remaining = timeout - (clock.monotonic() - started)
        if remaining <= 0:
            raise ClientError(
                f"send to topic {prepared.topic} timed out before it was sent "
                f"(timeout {timeout:g} s)",
                ResponseCode.RPC_TIME_OUT,
            )
        command = prepared.request(mq.queue_id, clock.now_ms())
        response = await call(self._instance.remoting, address, command, remaining)
        return send_result(response, prepared, mq)

    def _choose(
        self,
        info: _PublishInfo,
        message: Message,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: Any,
        sharding_key: str | None,
    ) -> MessageQueue | None:
        """The caller's queue choice, checked; None when the caller made none."""
        chosen = sum(x is not None for x in (queue, selector, sharding_key))
        if chosen > 1:
            raise ValueError("give at most one of queue, selector and sharding_key")
        topic = info.route.topic
        if queue is not None:
            if not isinstance(queue, MessageQueue) or queue.topic != message.topic:
                raise ClientError(
                    f"the queue {queue!r} is not a queue of topic {message.topic}",
                    ResponseCode.MESSAGE_ILLEGAL,
                )
            return queue
        if selector is not None:
            picked = selector(info.queues, message, arg)
            if picked not in info.queue_set:
                raise ClientError(
                    f"the selector returned {picked!r}, not one of the "
                    f"{len(info.queues)} writable queues of topic {topic}",
                    ResponseCode.MESSAGE_ILLEGAL,
                )
            return picked
        if sharding_key is not None:
            if not isinstance(sharding_key, str) or not sharding_key:
                raise ValueError("sharding_key must be a non-empty str")
            return select_by_sharding_key(info.queues, sharding_key)
        return None

    async def _refresh_after_failure(self, topic: str) -> None:
        """A send failed on the connection, or the broker could not take it
        (SERVICE_NOT_AVAILABLE: a slave, a fenced old master): fetch the
        topic's route again now rather than at the next 30 s poll, so that
        the next attempt goes to the master the name servers know now (after
        a controller failover: the new one). At most once per
        `ROUTE_REFRESH_AFTER_FAILURE_S` per topic."""
        now = self._clock.monotonic()
        if now - self._refreshed_after_failure.get(topic, -1e9) < ROUTE_REFRESH_AFTER_FAILURE_S:
            return
        self._refreshed_after_failure[topic] = now
        try:
            await self._instance.route(topic, refresh=True)
        except ClientError as exc:
            log.debug("%s: route of %s not refreshed after a failure: %s", self._group, topic, exc)

    async def _address(self, info: _PublishInfo, mq: MessageQueue) -> str:
        """The master of `mq`'s broker: the route's, else the instance's (refreshing once)."""
        address = info.masters.get(mq.broker_name)
        if address is None:
            address = await self._instance.require_master(mq.broker_name, mq.topic)
        return address

    def _update_fault(self, broker_name: str, seconds: float, *, isolation: bool) -> None:
        if self._fault is not None:
            self._fault.update(broker_name, int(seconds * 1000), isolation)

    async def _publish_info(self, topic: str) -> _PublishInfo:
        info = self._publish.get(topic)
        if info is not None:
            return info
        lock = self._route_locks.setdefault(topic, asyncio.Lock())
        async with lock:
            info = self._publish.get(topic)
            if info is not None:
                return info
            try:
                route = await self._instance.route(topic)
                from_template = False
            except ClientError as exc:
                if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                    raise
                route = await self._template_route(topic)
                from_template = True
            info = self._install(topic, route, from_template=from_template)
            if info is None and not from_template:
                # the cached route has no master (one died; the new one is not
                # registered yet, or was not when the route was fetched): ask again
                await self._refresh_after_failure(topic)
                info = self._install(topic, await self._instance.route(topic), from_template=False)
            if info is None:
                raise ClientError(
                    f"topic {topic} has no writable queue on a broker with a master",
                    ResponseCode.NO_PERMISSION,
                )
            return info

    async def _template_route(self, topic: str) -> TopicRoute:
        """The TBW102-derived route of a topic the name server does not know."""
        no_route = ClientError(
            f"no route for topic {topic}: the name server does not know it and no broker "
            f"offers to create it ({self._create_topic_key} has no inheritable queue); "
            f"create it with `tidemq topic create {topic}`",
            ResponseCode.TOPIC_NOT_EXIST,
        )
        try:
            template = await self._instance.route(self._create_topic_key)
        except ClientError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                raise no_route from None
            raise
        route = route_from_template(topic, template, self._default_topic_queue_nums)
        if not route.write_queues():
            raise no_route
        return route

    def _install(
        self, topic: str, route: TopicRoute, *, from_template: bool
    ) -> _PublishInfo | None:
        """Build and keep the publish info of `route`; a route without writable
        queues drops the topic's info (the next send reloads and reports it)."""
        self._published.add(topic)
        queues = tuple(route.write_queues())
        if not queues:
            self._publish.pop(topic, None)
            return None
        info = _PublishInfo(
            route=route,
            queues=queues,
            queue_set=frozenset(queues),
            selector=QueueSelector(queues, fault_tolerance=self._fault),
            masters=route.masters(),
            from_template=from_template,
        )
        self._publish[topic] = info
        return info


def _deliver(
    callback: SendCallback,
    future: asyncio.Future[SendResult] | concurrent.futures.Future[SendResult],
) -> None:
    """Hand a finished send's result (or exception) to the user's callback."""
    outcome: SendResult | BaseException
    if future.cancelled():
        outcome = ClientError(
            "the send was cancelled (producer shut down)", ResponseCode.SYSTEM_ERROR
        )
    else:
        outcome = future.exception() or future.result()
    try:
        callback(outcome)
    except Exception:
        log.exception("send callback %r failed", callback)


@dataclass(slots=True)
class _Progress:
    """Where a send stands, for the retry loop to carry on from."""

    started: float
    begin: float
    """Clock.monotonic() of the send's start and of the next attempt's."""
    made: int = 0
    last_broker: str | None = None
    last_error: ClientError | None = None
    last_result: SendResult | None = None
    next_queue: MessageQueue | None = None
    """Chosen already for the next attempt."""


def _settle(
    send: asyncio.Future[SendResult],
    sends: set[asyncio.Future[SendResult]],
    task: asyncio.Future[SendResult],
) -> None:
    """End `send` as its retry task ended."""
    sends.discard(send)
    if task.cancelled():
        send.cancel()
        return
    error = task.exception()
    if send.done():
        return
    if error is not None:
        send.set_exception(error)
    else:
        send.set_result(task.result())


async def _failed(exc: BaseException) -> SendResult:
    """A send that failed before it started (its future carries `exc`)."""
    raise exc


def _no_connection(address: str) -> Connection | None:
    return None


def _ip_bytes(address: str) -> bytes | None:
    try:
        return host_bytes(address)
    except ValueError:
        return None


class Producer(BlockingClient[AsyncProducer]):
    """The blocking producer: the AsyncProducer core on its own loop thread.

    Same arguments as AsyncProducer; `start()` (or `with Producer(...) as p`)
    before sending, `shutdown()` at the end (it also stops the loop thread).
    `send_async` returns a concurrent.futures.Future; its callback runs on the
    loop thread, so it must not call this producer's blocking methods.

    `send` without a queue choice makes its first attempt on the calling
    thread, over a socket of its own to the broker (up to
    `caller_thread_connections`, 4, per broker, shared by the calling
    threads): no hand-off to the loop thread and back. Routes, retries and
    anything else stay on the loop (`AsyncProducer.send_from_thread`); 0
    sends everything through the loop thread's connection.
    """

    _channels: BlockingChannels | None = None
    """The caller-thread sockets (None: every send goes through the loop)."""

    def __init__(
        self,
        group: str = DEFAULT_PRODUCER_GROUP,
        namesrv: str | Sequence[str] = "127.0.0.1:9876",
        *,
        send_timeout_s: float = 3.0,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        retry_another_broker_when_not_store_ok: bool = False,
        compress_over_bytes: int = DEFAULT_COMPRESS_OVER_BYTES,
        max_message_size: int = MAX_MESSAGE_SIZE,
        send_latency_fault_enable: bool = True,
        create_topic_key: str = DEFAULT_TOPIC,
        default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
        instance_name: str | None = None,
        client_config: ClientConfig | None = None,
        credentials: Credentials | None = None,
        tls: bool | TlsConfig | None = None,
        caller_thread_connections: int = DEFAULT_CALLER_THREAD_CONNECTIONS,
        enable_trace: bool = False,
        trace_topic: str = DEFAULT_TRACE_TOPIC,
        auto_batch: bool = False,
        batch_max_delay_ms: int = DEFAULT_BATCH_MAX_DELAY_MS,
        batch_max_bytes: int = DEFAULT_BATCH_MAX_BYTES,
        total_batch_max_bytes: int = DEFAULT_TOTAL_BATCH_MAX_BYTES,
    ) -> None:
        if caller_thread_connections < 0:
            raise ValueError("caller_thread_connections must not be negative")
        build = functools.partial(
            AsyncProducer,
            group,
            namesrv,
            send_timeout_s=send_timeout_s,
            retry_times_when_send_failed=retry_times_when_send_failed,
            retry_times_when_send_async_failed=retry_times_when_send_async_failed,
            retry_another_broker_when_not_store_ok=retry_another_broker_when_not_store_ok,
            compress_over_bytes=compress_over_bytes,
            max_message_size=max_message_size,
            send_latency_fault_enable=send_latency_fault_enable,
            create_topic_key=create_topic_key,
            default_topic_queue_nums=default_topic_queue_nums,
            instance_name=instance_name,
            client_config=client_config,
            credentials=credentials,
            tls=tls,
            enable_trace=enable_trace,
            trace_topic=trace_topic,
            auto_batch=auto_batch,
            batch_max_delay_ms=batch_max_delay_ms,
            batch_max_bytes=batch_max_bytes,
            total_batch_max_bytes=total_batch_max_bytes,
        )
        super().__init__(build, thread_name=f"tidemq-producer-{group}")
        if caller_thread_connections and not auto_batch:  # held sends meet on the loop
            config = self._core._config  # credentials and TLS as the loop's connections have them
            self._channels = BlockingChannels(
                caller_thread_connections,
                sign=config.credentials.sign if config.credentials is not None else None,
                tls=config.tls,
            )

    def send(
        self,
        message: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
        timeout_s: float | None = None,
    ) -> SendResult:
        channels = self._channels
        if (
            channels is not None
            and queue is None
            and selector is None
            and sharding_key is None
            and not self._stopped
            and not self._loop.in_loop_thread()  # `_run` refuses that, as it must
        ):
            outcome = self._core.send_from_thread(message, channels, timeout_s)
            if isinstance(outcome, SendResult):
                return outcome
            return self._run(outcome)
        return self._run(
            self._core.send(
                message,
                queue=queue,
                selector=selector,
                arg=arg,
                sharding_key=sharding_key,
                timeout_s=timeout_s,
            )
        )

    def send_async(
        self,
        message: Message,
        callback: SendCallback | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
        timeout_s: float | None = None,
    ) -> concurrent.futures.Future[SendResult]:
        future = self._submit(
            self._core.send_async_coro(message, queue, selector, arg, sharding_key, timeout_s)
        )
        if callback is not None:
            future.add_done_callback(functools.partial(_deliver, callback))
        return future

    def send_oneway(
        self,
        message: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> None:
        self._run(
            self._core.send_oneway(
                message, queue=queue, selector=selector, arg=arg, sharding_key=sharding_key
            )
        )

    def send_batch(
        self,
        messages: Sequence[Message],
        *,
        queue: MessageQueue | None = None,
        timeout_s: float | None = None,
    ) -> SendResult:
        return self._run(self._core.send_batch(messages, queue=queue, timeout_s=timeout_s))

    def publish_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(self._core.publish_queues(topic))

    @property
    def trace_dispatcher(self) -> TraceDispatcher | None:
        """The core's trace dispatcher (its `dropped`, `failed` and `sent` counters);
        None unless tracing."""
        return self._core.trace_dispatcher

    def shutdown(self) -> None:
        """Shut the core down, stop the loop thread, close the caller-thread sockets."""
        try:
            super().shutdown()
        finally:
            if self._channels is not None:
                self._channels.close()

    def recall(self, topic: str, recall_handle: str, *, timeout_s: float | None = None) -> str:
        return self._run(self._core.recall(topic, recall_handle, timeout_s=timeout_s))
