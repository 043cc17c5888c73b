"""BrokerService: what a broker does, whatever protocol asked.

The remoting handlers (handlers.py) and, later, the gRPC servicer translate
requests into calls here and results back into responses; every semantic
rule lives once, in this module. Refusals raise `BrokerError(code, remark)`
with a RocketMQ response code and a remark a person can read; normal
outcomes (including the PULL_* codes) are returned.

Java references (rocketmq-all 4.9.7): SendMessageProcessor and
AbstractSendMessageProcessor.msgCheck (send, retry/DLQ, auto-create),
PullMessageProcessor (pull checks, status mapping, commit offset, suspend),
ConsumerManageProcessor (offsets), ClientManageProcessor (heartbeat,
unregister), QueryMessageProcessor, AdminBrokerProcessor (admin bodies).
Deliberate differences are noted where they are made.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import random
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tidemq.broker import retry
from tidemq.broker.config import BrokerConfig
from tidemq.broker.consumers import (
    BROADCASTING,
    CONSUME_FROM_TIMESTAMP,
    EXPRESSION_TAG,
    ClientChannel,
    ClientConnection,
    ConsumerManager,
    HeartbeatData,
    ProducerManager,
)
from tidemq.broker.groups import GroupError, SubscriptionGroupConfig, SubscriptionGroupManager
from tidemq.broker.locks import QueueLockManager
from tidemq.broker.long_polling import LongPollingService
from tidemq.broker.offsets import ConsumerOffsetManager, plan_reset
from tidemq.broker.topics import (
    MULTI_TAG,
    TopicConfig,
    TopicConfigManager,
    TopicError,
    is_not_allowed_send_topic,
    is_readable,
    is_writeable,
    validate_topic_name,
)
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.common.message_id import host_text
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.message_codec import decode_batch, decode_record
from tidemq.store.api import (
    DispatchRequest,
    GetResult,
    GetStatus,
    MessageFilter,
    MessageStore,
    MessageToStore,
    PutResult,
    PutStatus,
    QueryResult,
)
from tidemq.store.config import SCHEDULE_TOPIC, parse_delay_levels
from tidemq.store.filters import TagFilter

log = logging.getLogger(__name__)

VERSION_DESC = "tidemq 0.1.0"
MASTER_ID = 0
DEFAULT_QUERY_MAX_NUM = 32
MAX_PULL_BATCH = 1024
MAX_MESSAGE_SIZE = 4 * 1024 * 1024
STATS_WINDOW_S = 60


class BrokerError(Exception):
    """A refused request: a RocketMQ response code and a readable remark."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = int(code)
        self.remark = remark


def message_queue_key(topic: str, broker_name: str, queue_id: int) -> str:
    """A MessageQueue as a JSON map key: the object's compact text, keys sorted.

    Java's fastjson writes such maps with object keys, which standard JSON
    cannot hold; fastjson reads this string form back, and so does tidemq's
    admin client."""
    return json.dumps(
        {"brokerName": broker_name, "queueId": queue_id, "topic": topic},
        separators=(",", ":"),
        sort_keys=True,
    )


# -- requests and results ---------------------------------------------------------


@dataclass(slots=True)
class SendRequest:
    """One send (or one batch) as the protocol front door decoded it."""

    producer_group: str
    topic: str
    queue_id: int
    body: bytes
    properties: str = ""
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = b"\x7f\x00\x00\x01"
    born_port: int = 0
    reconsume_times: int = 0
    max_reconsume_times: int | None = None
    default_topic: str = "TBW102"
    default_topic_queue_nums: int = 4
    unit_mode: bool = False
    batch: bool = False


@dataclass(slots=True)
class SendResult:
    code: int
    """SUCCESS, or FLUSH_DISK_TIMEOUT (stored, not yet durable)."""
    msg_id: str
    """Offset message id(s); comma-separated for a batch."""
    queue_id: int
    queue_offset: int
    remark: str | None = None


@dataclass(slots=True)
class PullRequest:
    group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int = 32
    sys_flag: int = 0
    commit_offset: int = 0
    suspend_timeout_ms: int = 0
    subscription: str | None = None
    sub_version: int = 0
    expression_type: str | None = None
    max_msg_bytes: int | None = None
    client_address: str = ""


@dataclass(slots=True)
class PullResult:
    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int = MASTER_ID
    body: bytes = b""
    message_count: int = 0
    remark: str | None = None


MessageQueueKey = tuple[str, str, int]
"""(topic, broker name, queue id)."""


# -- runtime statistics ---------------------------------------------------------------


class RateCounter:
    """Events per second over a sliding window of one-second buckets (bounded)."""

    __slots__ = ("_buckets", "_window", "total")

    def __init__(self, window_s: int = STATS_WINDOW_S) -> None:
        self._window = window_s
        self._buckets: deque[list[int]] = deque()
        self.total = 0

    def add(self, count: int, now_s: float) -> None:
        second = int(now_s)
        buckets = self._buckets
        if buckets and buckets[-1][0] == second:
            buckets[-1][1] += count
        else:
            buckets.append([second, count])
        self.total += count
        self._trim(second)

    def _trim(self, second: int) -> None:
        buckets = self._buckets
        while buckets and buckets[0][0] <= second - self._window:
            buckets.popleft()

    def in_window(self, now_s: float) -> int:
        self._trim(int(now_s))
        return sum(count for _, count in self._buckets)

    def tps(self, now_s: float) -> float:
        return self.in_window(now_s) / self._window


@dataclass(slots=True)
class BrokerStats:
    """Put and get counts per topic and per (topic, group), last minute and total."""

    clock: Clock
    puts: dict[str, RateCounter] = field(default_factory=dict)
    put_bytes: dict[str, RateCounter] = field(default_factory=dict)
    gets: dict[tuple[str, str], RateCounter] = field(default_factory=dict)
    get_bytes: dict[tuple[str, str], RateCounter] = field(default_factory=dict)
    all_puts: RateCounter = field(default_factory=RateCounter)
    all_gets: RateCounter = field(default_factory=RateCounter)

    def _now(self) -> float:
        return self.clock.monotonic()

    def record_put(self, topic: str, count: int, size: int) -> None:
        now = self._now()
        self.puts.setdefault(topic, RateCounter()).add(count, now)
        self.put_bytes.setdefault(topic, RateCounter()).add(size, now)
        self.all_puts.add(count, now)

    def record_get(self, topic: str, group: str, count: int, size: int) -> None:
        now = self._now()
        self.gets.setdefault((topic, group), RateCounter()).add(count, now)
        self.get_bytes.setdefault((topic, group), RateCounter()).add(size, now)
        self.all_gets.add(count, now)

    def put_tps(self, topic: str | None = None) -> float:
        counter = self.all_puts if topic is None else self.puts.get(topic)
        return 0.0 if counter is None else counter.tps(self._now())

    def get_tps(self, topic: str | None = None, group: str | None = None) -> float:
        if topic is None and group is None:
            return self.all_gets.tps(self._now())
        now = self._now()
        return sum(
            counter.tps(now)
            for (t, g), counter in self.gets.items()
            if (topic is None or t == topic) and (group is None or g == group)
        )

    def forget_topic(self, topic: str) -> None:
        self.puts.pop(topic, None)
        self.put_bytes.pop(topic, None)
        for key in [k for k in self.gets if k[0] == topic]:
            self.gets.pop(key, None)
            self.get_bytes.pop(key, None)


# -- status mappings --------------------------------------------------------------

_PUT_ERRORS: dict[PutStatus, tuple[int, str]] = {
    PutStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now, the store may be closing or its disk failed",
    ),
    PutStatus.CREATE_MAPPED_FILE_FAILED: (
        ResponseCode.SYSTEM_ERROR,
        "create mapped file failed, server is busy or broken",
    ),
    PutStatus.MESSAGE_ILLEGAL: (ResponseCode.MESSAGE_ILLEGAL, "the message is illegal"),
    PutStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message properties are too long",
    ),
    PutStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "unknown error while storing"),
}


def pull_code(status: GetStatus, request_offset: int) -> int:
    """PULL_MESSAGE response code for a store read status (protocol doc §6.4)."""
    if status is GetStatus.FOUND:
        return ResponseCode.SUCCESS
    if status in (GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING):
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    if status in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE):
        return (
            ResponseCode.PULL_OFFSET_MOVED if request_offset != 0 else ResponseCode.PULL_NOT_FOUND
        )
    if status in (GetStatus.OFFSET_FOUND_NULL, GetStatus.OFFSET_OVERFLOW_ONE):
        return ResponseCode.PULL_NOT_FOUND
    return ResponseCode.PULL_OFFSET_MOVED  # OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL


@functools.lru_cache(maxsize=1024)
def _tag_filter(expression: str | None) -> TagFilter | None:
    """The (shared, immutable) filter of a tag expression; None matches everything."""
    tag_filter = TagFilter.from_expression(expression)
    return None if tag_filter.matches_everything else tag_filter


def _put_failure(result: PutResult) -> BrokerError:
    code, text = _PUT_ERRORS.get(result.status, (ResponseCode.SYSTEM_ERROR, "store failure"))
    return BrokerError(code, result.remark or text)


def _append_property(properties: str, key: str, value: str) -> str:
    if properties and not properties.endswith(props.PROPERTY_SEPARATOR):
        properties += props.PROPERTY_SEPARATOR
    return f"{properties}{key}{props.NAME_VALUE_SEPARATOR}{value}{props.PROPERTY_SEPARATOR}"


def _has_key(properties: str, key: str) -> bool:
    """Cheap pre-check before decoding a property string."""
    return (key + props.NAME_VALUE_SEPARATOR) in properties


class BrokerService:
    """The broker's semantics over one store. Use from the event loop thread."""

    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        *,
        store_host: bytes,
        store_port: int,
        clock: Clock = SYSTEM_CLOCK,
        topics: TopicConfigManager | None = None,
        groups: SubscriptionGroupManager | None = None,
        offsets: ConsumerOffsetManager | None = None,
        max_message_size: int = MAX_MESSAGE_SIZE,
    ) -> None:
        self.config = config
        self.store = store
        self.store_host = store_host
        self.store_port = store_port
        self.clock = clock
        self.max_message_size = max_message_size
        self.delay_levels_ms = parse_delay_levels(config.delay_levels)
        self.topics = topics or TopicConfigManager(
            config.config_dir,
            broker_name=config.broker_name,
            cluster_name=config.cluster_name,
            auto_create_topic=config.auto_create_topic,
            default_topic_queue_nums=config.default_topic_queue_nums,
            schedule_queue_nums=len(self.delay_levels_ms),
            clock=clock,
        )
        self.groups = groups or SubscriptionGroupManager(
            config.config_dir, auto_create=config.auto_create_subscription_group, clock=clock
        )
        self.offsets = offsets or ConsumerOffsetManager(config.config_dir)
        self.consumers = ConsumerManager(
            clock=clock, expiry_s=config.client_expiry_s, on_change=self._group_changed
        )
        self.producers = ProducerManager(clock=clock, expiry_s=config.client_expiry_s)
        self.long_polling = LongPollingService(clock=clock)
        self.locks = QueueLockManager(clock, config.queue_lock_expiry_s)
        self.stats = BrokerStats(clock)
        self.scheduler: Any = None
        """The DelayScheduler (set by the app): `schedule(message, level)`."""
        self.sql_filter_factory: Callable[[str], MessageFilter] | None = None
        """Builds SQL92 filters when set; without it SQL92 pulls are refused (as Java)."""
        self.group_change_listeners: list[Callable[[str, list[ClientChannel]], None]] = []
        """Called when a consumer group's members change (NOTIFY_CONSUMER_IDS_CHANGED)."""
        self.boot_ms = clock.now_ms()
        self._loop: asyncio.AbstractEventLoop | None = None
        store.add_arrival_listener(self._on_arrival)

    def load(self) -> None:
        """Read the config files (topics, groups, offsets)."""
        self.topics.load()
        self.groups.load()
        self.offsets.load()

    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop long polls live on (arrivals from other threads hop onto it)."""
        self._loop = loop

    @property
    def address(self) -> str:
        return f"{host_text(self.store_host)}:{self.store_port}"

    # -- arrivals and long polling ---------------------------------------------------

    def _on_arrival(self, request: DispatchRequest) -> None:
        args = (request.topic, request.queue_id, request.queue_offset, request.tags_code)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and (self._loop is None or running is self._loop):
            self.long_polling.notify_arrival(*args)
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.long_polling.notify_arrival, *args)

    def recheck_long_polls(self) -> int:
        return self.long_polling.recheck(self.store.max_offset)

    # -- send ------------------------------------------------------------------------------

    def _send_topic(self, request: SendRequest) -> TopicConfig:
        """msgCheck: topic name, permission, existence (auto-creation)."""
        topic = request.topic
        problem = validate_topic_name(topic)
        if problem is not None:
            raise BrokerError(ResponseCode.MESSAGE_ILLEGAL, problem)
        if is_not_allowed_send_topic(topic):
            raise BrokerError(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        config = self.topics.get(topic)
        if config is None:
            config = self.topics.create_in_send(
                topic, request.default_topic, request.default_topic_queue_nums
            )
            if config is None and retry.is_retry_topic(topic):
                config = self.topics.ensure_retry_topic(retry.group_of(topic) or "")
            if config is None:
                raise BrokerError(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please!",
                )
        if not is_writeable(config.perm):
            raise BrokerError(
                ResponseCode.NO_PERMISSION,
                f"the topic[{topic}] sending message is forbidden",
            )
        return config

    def _queue_for_send(self, request: SendRequest, config: TopicConfig) -> int:
        queue_id = request.queue_id
        if queue_id < 0:
            return random.randrange(max(1, config.write_queue_nums))
        if queue_id >= config.queue_nums:
            raise BrokerError(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, topic {config.topic_name} has "
                f"{config.queue_nums} queues, producer {request.producer_group}",
            )
        return queue_id

    def _check_body(self, body: bytes, what: str = "the message body") -> None:
        if len(body) > self.max_message_size:
            raise BrokerError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"{what} is {len(body)} bytes, more than the maximum of "
                f"{self.max_message_size} bytes",
            )

    def _route_retry(self, request: SendRequest) -> tuple[str, bool]:
        """Retry-topic sends past the max reconsume times go to the DLQ (§5.3)."""
        group = retry.group_of(request.topic) or ""
        group_config = self.groups.find(group)
        if group_config is None:
            raise BrokerError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        topic, to_dlq = retry.retry_route_for_send(
            request.topic,
            request.reconsume_times,
            request.max_reconsume_times,
            group_config.retry_max_times,
        )
        if to_dlq:
            dlq = self.topics.ensure_dlq_topic(group)
            if dlq is None or not is_writeable(dlq.perm):
                raise BrokerError(
                    ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
                )
            log.info("retry message of %s reached max reconsume times, into %s", group, topic)
        return topic, to_dlq

    def _delay_level(self, properties: str) -> int:
        if not _has_key(properties, props.DELAY):
            return 0
        raw = props.decode_properties(properties).get(props.DELAY, "")
        try:
            level = int(raw)
        except ValueError:
            return 0
        return min(level, len(self.delay_levels_ms)) if level > 0 else 0

    @staticmethod
    def _is_transactional(properties: str, sys_flag: int) -> bool:
        if sys_flag & sysflag.TRANSACTION_MASK == sysflag.TRANSACTION_PREPARED_TYPE:
            return True
        return _has_key(properties, props.TRAN_MSG) and (
            props.decode_properties(properties).get(props.TRAN_MSG) == "true"
        )

    def _stored_properties(self, properties: str) -> str:
        if _has_key(properties, props.CLUSTER):
            return properties
        return _append_property(properties, props.CLUSTER, self.config.cluster_name)

    async def send(self, request: SendRequest) -> SendResult:
        """Store one message (SEND_MESSAGE / SEND_MESSAGE_V2)."""
        config = self._send_topic(request)
        queue_id = self._queue_for_send(request, config)
        self._check_body(request.body)
        if self._is_transactional(request.properties, request.sys_flag):
            raise BrokerError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_name}] sending transaction message is forbidden:"
                " transactional messages are not supported yet",
            )
        topic = request.topic
        to_dlq = False
        if retry.is_retry_topic(topic):
            topic, to_dlq = self._route_retry(request)
            if to_dlq:
                queue_id = retry.DLQ_QUEUE_ID
        sys_flag = request.sys_flag
        if config.topic_filter_type == MULTI_TAG:
            sys_flag |= sysflag.MULTI_TAGS
        message = MessageToStore(
            topic=topic,
            queue_id=queue_id,
            body=request.body,
            properties=self._stored_properties(request.properties),
            flag=request.flag,
            sys_flag=sys_flag,
            born_timestamp=request.born_timestamp,
            born_host=request.born_host,
            born_port=request.born_port,
            reconsume_times=request.reconsume_times,
        )
        level = 0 if to_dlq else self._delay_level(request.properties)
        if level > 0 and self.scheduler is not None:
            message = self.scheduler.schedule(message, level)
        result = await self.store.put_message(message)
        return self._send_result(result, topic, queue_id, len(request.body))

    def _send_result(self, result: PutResult, topic: str, queue_id: int, size: int) -> SendResult:
        if result.status is PutStatus.PUT_OK:
            self.stats.record_put(topic, 1, size)
            return SendResult(ResponseCode.SUCCESS, result.msg_id, queue_id, result.queue_offset)
        if result.status is PutStatus.FLUSH_DISK_TIMEOUT:
            self.stats.record_put(topic, 1, size)
            return SendResult(
                ResponseCode.FLUSH_DISK_TIMEOUT,
                result.msg_id,
                queue_id,
                result.queue_offset,
                result.remark or "flush to disk timed out",
            )
        raise _put_failure(result)

    async def send_batch(self, request: SendRequest) -> SendResult:
        """Store a batch (SEND_BATCH_MESSAGE): all or nothing, consecutive offsets."""
        if retry.is_retry_topic(request.topic):
            raise BrokerError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"batch request does not support retry group {request.topic}",
            )
        config = self._send_topic(request)
        queue_id = self._queue_for_send(request, config)
        self._check_body(request.body, "the batch body")
        try:
            messages = decode_batch(request.body, request.topic)
        except ProtocolError as exc:
            raise BrokerError(
                ResponseCode.MESSAGE_ILLEGAL, f"malformed batch body: {exc}"
            ) from None
        if not messages:
            raise BrokerError(ResponseCode.MESSAGE_ILLEGAL, "the batch is empty")
        to_store = []
        for position, message in enumerate(messages):
            raw = props.encode_properties(message.properties)
            if message.properties.get(props.TRAN_MSG) == "true":
                raise BrokerError(
                    ResponseCode.MESSAGE_ILLEGAL,
                    f"message {position} of the batch is transactional; batches cannot be",
                )
            if message.properties.get(props.DELAY, "0") not in ("", "0"):
                raise BrokerError(
                    ResponseCode.MESSAGE_ILLEGAL,
                    f"message {position} of the batch has a delay level; batches cannot",
                )
            to_store.append(
                MessageToStore(
                    topic=request.topic,
                    queue_id=queue_id,
                    body=message.body,
                    properties=self._stored_properties(raw),
                    flag=message.flag,
                    sys_flag=request.sys_flag & ~sysflag.TRANSACTION_MASK,
                    born_timestamp=request.born_timestamp,
                    born_host=request.born_host,
                    born_port=request.born_port,
                )
            )
        batch = await self.store.put_messages(to_store)
        if not batch.results:
            raise _put_failure(PutResult(batch.status, remark=batch.remark))
        first = batch.results[0]
        if batch.status not in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT):
            raise _put_failure(first)
        self.stats.record_put(request.topic, len(batch.results), len(request.body))
        msg_ids = ",".join(r.msg_id for r in batch.results)
        code = (
            ResponseCode.SUCCESS
            if batch.status is PutStatus.PUT_OK
            else ResponseCode.FLUSH_DISK_TIMEOUT
        )
        return SendResult(code, msg_ids, queue_id, first.queue_offset, batch.remark or None)

    async def put_restored(self, message: MessageToStore) -> PutResult:
        """Where the delay scheduler re-stores due messages (stats included)."""
        result = await self.store.put_message(message)
        if result.ok:
            self.stats.record_put(message.topic, 1, len(message.body))
        return result

    # -- pull ------------------------------------------------------------------------------

    def _pull_filter(self, request: PullRequest) -> MessageFilter | None:
        """PullMessageProcessor's checks; the filter to read with (None: all)."""
        group_config = self.groups.find(request.group)
        if group_config is None:
            raise BrokerError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{request.group}] does not exist",
            )
        if not group_config.consume_enable:
            raise BrokerError(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {request.group}"
            )
        config = self.topics.get(request.topic)
        if config is None:
            raise BrokerError(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{request.topic}] not exist, apply first please!",
            )
        if not is_readable(config.perm):
            raise BrokerError(
                ResponseCode.NO_PERMISSION,
                f"the topic[{request.topic}] pulling message is forbidden",
            )
        if not 0 <= request.queue_id < config.read_queue_nums:
            raise BrokerError(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{request.queue_id}] is illegal, topic:[{request.topic}] "
                f"topicConfig.readQueueNums:[{config.read_queue_nums}] "
                f"consumer:[{request.client_address}]",
            )
        if sysflag.pull_has_subscription(request.sys_flag):
            expression = request.subscription
            expression_type = request.expression_type or EXPRESSION_TAG
        else:
            expression, expression_type = self._registered_subscription(request, group_config)
        if expression_type.upper() != EXPRESSION_TAG:
            if self.sql_filter_factory is None:
                raise BrokerError(
                    ResponseCode.SYSTEM_ERROR,
                    f"The broker does not support consumer to filter message by {expression_type}",
                )
            try:
                return self.sql_filter_factory(expression or "")
            except ValueError as exc:
                raise BrokerError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc)) from None
        return _tag_filter(expression)

    def _registered_subscription(
        self, request: PullRequest, group_config: SubscriptionGroupConfig
    ) -> tuple[str, str]:
        info = self.consumers.get(request.group)
        if info is None:
            raise BrokerError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's group info not exist, group {request.group}",
            )
        if not group_config.consume_broadcast_enable and info.message_model == BROADCASTING:
            raise BrokerError(
                ResponseCode.NO_PERMISSION,
                f"the consumer group[{request.group}] can not consume by broadcast way",
            )
        subscription = info.subscriptions.get(request.topic)
        if subscription is None:
            raise BrokerError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's subscription not exist, topic {request.topic}",
            )
        if subscription.sub_version < request.sub_version:
            raise BrokerError(
                ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
            )
        return subscription.sub_string, subscription.expression_type

    def _read(self, request: PullRequest, message_filter: MessageFilter | None) -> PullResult:
        max_nums = max(1, min(request.max_msg_nums, MAX_PULL_BATCH))
        get: GetResult = self.store.get_messages(
            request.group,
            request.topic,
            request.queue_id,
            request.queue_offset,
            max_nums,
            message_filter,
            request.max_msg_bytes,
        )
        code = pull_code(get.status, request.queue_offset)
        result = PullResult(code, get.next_begin_offset, get.min_offset, get.max_offset)
        if code == ResponseCode.SUCCESS:
            result.body = get.body()
            result.message_count = get.message_count
            self.stats.record_get(request.topic, request.group, get.message_count, len(result.body))
        return result

    async def pull(self, request: PullRequest) -> PullResult:
        """PULL_MESSAGE: read, commit the carried offset, hold when nothing is new."""
        message_filter = self._pull_filter(request)
        result = self._read(request, message_filter)
        if sysflag.pull_has_commit_offset(request.sys_flag):
            self.offsets.commit(
                request.group, request.topic, request.queue_id, request.commit_offset
            )
        suspend = sysflag.pull_has_suspend(request.sys_flag) and request.suspend_timeout_ms > 0
        if result.code != ResponseCode.PULL_NOT_FOUND or not suspend:
            return result
        matches = message_filter.matches_tags_code if message_filter is not None else None
        held = self.long_polling.hold(
            request.topic,
            request.queue_id,
            request.queue_offset,
            request.suspend_timeout_ms / 1000,
            matches,
        )
        if held is None:
            return result
        await self.long_polling.wait(held)
        return self._read(request, self._pull_filter(request))

    # -- consumer offsets --------------------------------------------------------------

    def query_consumer_offset(
        self, group: str, topic: str, queue_id: int, set_zero_if_not_found: bool | None = None
    ) -> int:
        """The committed offset. For none: 0 while the queue still starts at
        offset 0 (Java's rule, so a new group reads from the beginning), else
        QUERY_NOT_FOUND.

        Two refinements over Java 4.9.7: `set_zero_if_not_found=False` (5.x)
        asks for QUERY_NOT_FOUND, and so does a group whose consumers declared
        CONSUME_FROM_TIMESTAMP in their heartbeat: the client then searches the
        offset by its timestamp instead of starting at 0, which is what it
        asked for (with Java a new group would read everything)."""
        offset = self.offsets.query(group, topic, queue_id)
        if offset >= 0:
            return offset
        info = self.consumers.get(group)
        from_timestamp = info is not None and info.consume_from_where == CONSUME_FROM_TIMESTAMP
        if (
            set_zero_if_not_found is not False
            and not from_timestamp
            and self.store.min_offset(topic, queue_id) <= 0
        ):
            return 0
        raise BrokerError(
            ResponseCode.QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )

    def update_consumer_offset(self, group: str, topic: str, queue_id: int, offset: int) -> bool:
        return self.offsets.commit(group, topic, queue_id, offset)

    def max_offset(self, topic: str, queue_id: int) -> int:
        return self.store.max_offset(topic, queue_id)

    def min_offset(self, topic: str, queue_id: int) -> int:
        return self.store.min_offset(topic, queue_id)

    def search_offset(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First offset stored at/after the time, else the max offset (doc §2.3)."""
        return self.store.offset_by_time(topic, queue_id, timestamp_ms)

    def earliest_store_time(self, topic: str, queue_id: int) -> int:
        return self.store.store_time(topic, queue_id, self.store.min_offset(topic, queue_id))

    # -- clients ---------------------------------------------------------------------------

    def heartbeat(
        self,
        data: HeartbeatData,
        connection: ClientConnection,
        *,
        language: str = "JAVA",
        version: int = 0,
    ) -> None:
        """HEART_BEAT: register every consumer and producer group of the client;
        each consumer group gets its retry topic."""
        for consumer in data.consumers:
            group_config = self.groups.find(consumer.group_name)
            notify = True
            if group_config is not None:
                notify = group_config.notify_consumer_ids_changed_enable
                if group_config.retry_queue_nums > 0:
                    self.topics.ensure_retry_topic(
                        consumer.group_name, group_config.retry_queue_nums
                    )
            self.consumers.register(
                consumer,
                data.client_id,
                connection,
                language=language,
                version=version,
                notify=notify,
            )
        for group in data.producer_groups:
            self.producers.register(
                group, data.client_id, connection, language=language, version=version
            )

    def unregister_client(
        self, client_id: str, producer_group: str | None, consumer_group: str | None
    ) -> None:
        if producer_group:
            self.producers.unregister(producer_group, client_id)
        if consumer_group:
            group_config = self.groups.get(consumer_group)
            notify = group_config is None or group_config.notify_consumer_ids_changed_enable
            self.consumers.unregister(consumer_group, client_id, notify=notify)

    def connection_closed(self, connection: ClientConnection) -> None:
        for client_id in self.consumers.client_ids_on(connection):
            self.locks.drop_client(client_id)
        self.consumers.connection_closed(connection)
        self.producers.connection_closed(connection)

    def scan_expired_clients(self) -> int:
        """Drop clients silent past the expiry and close their connections."""
        expired = self.consumers.scan_expired() + self.producers.scan_expired()
        for channel in expired:
            connection = channel.connection
            if self.consumers.client_ids_on(connection) or self.producers.uses(connection):
                continue
            if not connection.closed:
                log.info("closing the connection of expired client %s", channel.client_id)
                connection.close()
        return len(expired)

    def consumer_ids(self, group: str) -> list[str]:
        ids = self.consumers.client_ids(group)
        if not ids:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return ids

    def _group_changed(self, group: str, channels: list[ClientChannel]) -> None:
        for listener in self.group_change_listeners:
            try:
                listener(group, channels)
            except Exception:
                log.exception("group change listener failed for %s", group)

    # -- retry -------------------------------------------------------------------------------

    async def consumer_send_back(
        self,
        offset: int,
        group: str,
        delay_level: int,
        max_reconsume_times: int | None = None,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK: re-store the record at `offset` into the
        group's retry topic with a delay, or into its DLQ (protocol doc §6.7)."""
        group_config = self.groups.find(group)
        if group_config is None:
            raise BrokerError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        if group_config.retry_queue_nums <= 0:
            return
        retry_config = self.topics.ensure_retry_topic(group, group_config.retry_queue_nums)
        if retry_config is None:
            raise BrokerError(
                ResponseCode.SYSTEM_ERROR, f"topic[{retry.retry_topic(group)}] not exist"
            )
        if not is_writeable(retry_config.perm):
            raise BrokerError(
                ResponseCode.NO_PERMISSION,
                f"the topic[{retry_config.topic_name}] sending message is forbidden",
            )
        raw = self.store.read_by_physical_offset(offset)
        if raw is None:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
        try:
            record, _ = decode_record(raw)
        except ProtocolError as exc:
            raise BrokerError(
                ResponseCode.SYSTEM_ERROR, f"the record at offset {offset} is unreadable: {exc}"
            ) from None
        limit = group_config.retry_max_times if max_reconsume_times is None else max_reconsume_times
        message, level = retry.build_send_back(record, group, delay_level, limit)
        if level == 0:
            dlq = self.topics.ensure_dlq_topic(group)
            if dlq is None or not is_writeable(dlq.perm):
                raise BrokerError(
                    ResponseCode.NO_PERMISSION,
                    f"the topic[{retry.dlq_topic(group)}] sending message is forbidden",
                )
            log.info("message at %d of group %s moved to %s", offset, group, message.topic)
        else:
            level = min(level, len(self.delay_levels_ms))
            if self.scheduler is not None:
                message = self.scheduler.schedule(message, level)
        message.properties = self._stored_properties(message.properties)
        result = await self.store.put_message(message)
        if result.status not in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT):
            raise _put_failure(result)
        self.stats.record_put(message.topic, 1, len(message.body))

    # -- orderly locks -------------------------------------------------------------------

    def lock_batch(
        self, group: str, client_id: str, queues: Iterable[MessageQueueKey]
    ) -> set[MessageQueueKey]:
        return self.locks.lock_batch(group, set(queues), client_id)

    def unlock_batch(self, group: str, client_id: str, queues: Iterable[MessageQueueKey]) -> None:
        self.locks.unlock_batch(group, set(queues), client_id)

    # -- queries -------------------------------------------------------------------------------

    def query_message(
        self,
        topic: str,
        key: str,
        max_num: int,
        begin_ms: int,
        end_ms: int,
        *,
        unique_key: bool = False,
    ) -> QueryResult:
        """QUERY_MESSAGE: records whose KEYS (or UNIQ_KEY) hold `key`."""
        if unique_key:
            result = self.store.query_by_unique_key(topic, key)
        else:
            limit = max(1, min(max_num, DEFAULT_QUERY_MAX_NUM))
            result = self.store.query_by_key(topic, key, limit, begin_ms, end_ms)
        if not result.buffers:
            raise BrokerError(
                ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct"
            )
        return result

    def view_message(self, physical_offset: int) -> bytes:
        """VIEW_MESSAGE_BY_ID: the record at a commit-log offset."""
        record = None
        if physical_offset >= 0:
            record = self.store.read_by_physical_offset(physical_offset)
        if record is None:
            raise BrokerError(
                ResponseCode.SYSTEM_ERROR,
                f"can not find message by the offset, {physical_offset}",
            )
        return bytes(record)

    # -- admin: topics and groups -----------------------------------------------------------

    def create_topic(self, config: TopicConfig) -> TopicConfig:
        if config.topic_name == self.config.cluster_name:
            raise BrokerError(
                ResponseCode.SYSTEM_ERROR,
                f"the topic[{config.topic_name}] is conflict with system reserved words.",
            )
        try:
            return self.topics.update(config)
        except TopicError as exc:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, str(exc)) from None

    def delete_topic(self, topic: str) -> None:
        """DELETE_TOPIC_IN_BROKER: config, offsets and consume queues (the
        commitlog keeps the records until retention)."""
        try:
            known = self.topics.delete(topic)
        except TopicError as exc:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        self.offsets.remove_topic(topic)
        self.stats.forget_topic(topic)
        self.store.delete_topics([topic])
        if not known:
            log.info("delete of unknown topic %s: cleaned its leftovers", topic)

    def update_group(self, config: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        try:
            return self.groups.update(config)
        except GroupError as exc:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, str(exc)) from None

    def delete_group(self, group: str, clean_offset: bool = False) -> None:
        try:
            self.groups.delete(group)
        except GroupError as exc:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        self.locks.drop_group(group)
        if clean_offset:
            self.offsets.remove_group(group)

    def topic_stats(self, topic: str) -> dict[str, Any]:
        """GET_TOPIC_STATS_INFO: TopicStatsTable {"offsetTable": {mq: TopicOffset}}."""
        config = self.topics.get(topic)
        if config is None:
            raise BrokerError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        table: dict[str, Any] = {}
        for queue_id in range(config.write_queue_nums):
            max_offset = max(self.store.max_offset(topic, queue_id), 0)
            last = 0
            if max_offset > 0:
                last = max(self.store.store_time(topic, queue_id, max_offset - 1), 0)
            table[message_queue_key(topic, self.config.broker_name, queue_id)] = {
                "minOffset": max(self.store.min_offset(topic, queue_id), 0),
                "maxOffset": max_offset,
                "lastUpdateTimestamp": last,
            }
        return {"offsetTable": table}

    def consume_stats(self, group: str, topic: str | None = None) -> dict[str, Any]:
        """GET_CONSUME_STATS: ConsumeStats {"offsetTable": {mq: OffsetWrapper}, "consumeTps"}."""
        names = [topic] if topic else sorted(self.offsets.topics_of_group(group))
        info = self.consumers.get(group)
        table: dict[str, Any] = {}
        tps = 0.0
        for name in names:
            config = self.topics.get(name)
            if config is None:
                continue
            if info is not None and info.subscriptions and name not in info.subscriptions:
                continue
            for queue_id in range(config.write_queue_nums):
                consumer_offset = max(self.offsets.query(group, name, queue_id), 0)
                last = 0
                if consumer_offset > 0:
                    last = max(self.store.store_time(name, queue_id, consumer_offset - 1), 0)
                table[message_queue_key(name, self.config.broker_name, queue_id)] = {
                    "brokerOffset": max(self.store.max_offset(name, queue_id), 0),
                    "consumerOffset": consumer_offset,
                    "pullOffset": consumer_offset,
                    "lastTimestamp": last,
                }
            tps += self.stats.get_tps(name, group)
        return {"offsetTable": table, "consumeTps": round(tps, 4)}

    def consumer_connection(self, group: str) -> dict[str, Any]:
        """GET_CONSUMER_CONNECTION_LIST: ConsumerConnection."""
        info = self.consumers.get(group)
        if info is None or not info.channels:
            raise BrokerError(
                ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online"
            )
        return {
            "connectionSet": [_connection_json(ch) for ch in info.channels.values()],
            "subscriptionTable": {t: s.to_json() for t, s in sorted(info.subscriptions.items())},
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "consumeFromWhere": info.consume_from_where,
        }

    def producer_connection(self, group: str) -> dict[str, Any]:
        """GET_PRODUCER_CONNECTION_LIST: ProducerConnection."""
        members = self.producers.members(group)
        if not members:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        return {"connectionSet": [_connection_json(ch) for ch in members]}

    def groups_consuming(self, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO: groups online for the topic or with offsets on it."""
        return sorted(
            set(self.consumers.groups_subscribing(topic)) | self.offsets.groups_of_topic(topic)
        )

    def reset_offset(
        self,
        group: str,
        topic: str,
        timestamp_ms: int,
        *,
        force: bool = True,
        queue_id: int = -1,
        offset: int = -1,
    ) -> dict[int, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET: move the group's offsets of `topic`
        to the first message stored at/after `timestamp_ms` (-1: the end), or
        one queue to `offset`. The new offsets are committed here (Java only
        tells online consumers; committing also resets offline groups)."""
        config = self.topics.get(topic)
        if config is None:
            raise BrokerError(
                ResponseCode.TOPIC_NOT_EXIST,
                f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}",
            )
        if queue_id >= 0 and offset is not None and offset >= 0:
            if queue_id >= config.read_queue_nums:
                raise BrokerError(
                    ResponseCode.SYSTEM_ERROR, f"queueId[{queue_id}] is illegal for {topic}"
                )
            targets = {queue_id: min(offset, self.store.max_offset(topic, queue_id))}
        else:
            targets = {}
            for qid in range(config.read_queue_nums):
                if timestamp_ms < 0:
                    targets[qid] = self.store.max_offset(topic, qid)
                else:
                    targets[qid] = self.store.offset_by_time(topic, qid, timestamp_ms)
        planned = plan_reset(self.offsets.query_all(group, topic), targets, force)
        self.offsets.assign(group, topic, planned)
        log.info("offsets of %s on %s reset to %s", group, topic, planned)
        return planned

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the KVTable's table (all values are strings)."""
        now_ms = self.clock.now_ms()
        commitlog = getattr(self.store, "commitlog", None)
        info = {
            "brokerVersionDesc": VERSION_DESC,
            "brokerVersion": "407",
            "brokerName": self.config.broker_name,
            "brokerAddr": self.address,
            "clusterName": self.config.cluster_name,
            "msgPutTotalTodayNow": str(self.stats.all_puts.total),
            "msgGetTotalTodayNow": str(self.stats.all_gets.total),
            "putTps": f"{self.stats.put_tps():.2f}",
            "getTransferedTps": f"{self.stats.get_tps():.2f}",
            "bootTimestamp": str(self.boot_ms),
            "runtime": _uptime(now_ms - self.boot_ms),
            "earliestMessageTimeStamp": str(self.store.earliest_message_time()),
            "topicCount": str(len(self.topics)),
            "consumerGroupCount": str(len(self.consumers.groups())),
            "producerGroupCount": str(len(self.producers.groups())),
            "heldPullCount": str(self.long_polling.held_count),
            "delayLevels": self.config.delay_levels,
        }
        if commitlog is not None:
            info["commitLogMinOffset"] = str(getattr(commitlog, "min_offset", 0))
            info["commitLogMaxOffset"] = str(getattr(commitlog, "max_offset", 0))
        return info

    def schedule_topic_offsets(self) -> dict[int, int]:
        """Max offset of each delay level's queue (for diagnostics)."""
        return {
            level: self.store.max_offset(SCHEDULE_TOPIC, level - 1)
            for level in range(1, len(self.delay_levels_ms) + 1)
        }


def _connection_json(channel: ClientChannel) -> dict[str, Any]:
    return {
        "clientId": channel.client_id,
        "clientAddr": channel.address,
        "language": channel.language,
        "version": channel.version,
    }


def _uptime(ms: int) -> str:
    seconds = max(ms, 0) // 1000
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, seconds = divmod(rest, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]"
