"""BrokerService: what a broker does, whatever protocol asked.

The remoting handlers (handlers.py) and, later, the gRPC servicer translate
requests into calls here and results back into responses; every semantic
rule lives once, in this class. Refusals raise `BrokerError(code, remark)`
with a RocketMQ response code and a remark a person can read; normal
outcomes (including the PULL_* codes) are returned.

The class is assembled from parts: sending.py (send, batches, send-back) and
admin.py (topics, groups, statistics) are mixed in; the request and result
records live in requests.py and the rate counters in stats.py. Their public
names are re-exported here, so `tidemq.broker.service` stays the one import.

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
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tidemq.broker.admin import VERSION_DESC, BrokerAdmin
from tidemq.broker.config import BrokerConfig
from tidemq.broker.consumers import (
    ClientChannel,
    ClientConnection,
    ConsumerManager,
    ProducerManager,
)
from tidemq.broker.groups import SubscriptionGroupConfig, SubscriptionGroupManager
from tidemq.broker.hooks import TimerHooks, TransactionHooks
from tidemq.broker.locks import QueueLockManager
from tidemq.broker.long_polling import LongPollingService, hold_time_s
from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.broker.pop.api import PopHooks
from tidemq.broker.requests import (
    MASTER_ID,
    BrokerError,
    MessageQueueKey,
    PullRequest,
    PullResult,
    SendRequest,
    SendResult,
    message_queue_key,
    pull_code,
)
from tidemq.broker.sending import BrokerSender
from tidemq.broker.stats import STATS_WINDOW_S, BrokerStats, RateCounter
from tidemq.broker.topics import TopicConfig, TopicConfigManager, is_readable
from tidemq.common import sysflag
from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.common.message import MAX_MESSAGE_SIZE
from tidemq.common.message_id import host_text
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.headers import EndTransactionRequestHeader
from tidemq.protocol.heartbeat import (
    BROADCASTING,
    CONSUME_FROM_TIMESTAMP,
    EXPRESSION_TAG,
    HeartbeatData,
)
from tidemq.store.api import DispatchRequest, GetResult, MessageFilter, MessageStore, QueryResult
from tidemq.store.config import parse_delay_levels
from tidemq.store.filters import TagFilter

__all__ = [
    "DEFAULT_QUERY_MAX_NUM",
    "MASTER_ID",
    "MAX_PULL_BATCH",
    "STATS_WINDOW_S",
    "VERSION_DESC",
    "BrokerError",
    "BrokerService",
    "BrokerStats",
    "MessageQueueKey",
    "PullRequest",
    "PullResult",
    "RateCounter",
    "SendRequest",
    "SendResult",
    "message_queue_key",
    "pull_code",
]

log = logging.getLogger(__name__)

DEFAULT_QUERY_MAX_NUM = 32
"""Records a unique-key QUERY_MESSAGE answers (Java's defaultQueryMaxNum)."""
MAX_MSGS_NUM_BATCH = 64
"""Records a key QUERY_MESSAGE answers at most (Java's maxMsgsNumBatch, IndexService)."""
MAX_PULL_BATCH = 1024


@functools.lru_cache(maxsize=1024)
def _tag_filter(expression: str | None) -> TagFilter | None:
    """The (shared, immutable) filter of a tag expression; None matches everything."""
    tag_filter = TagFilter.from_expression(expression)
    return None if tag_filter.matches_everything else tag_filter


class BrokerService(BrokerAdmin, BrokerSender):
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
        self.long_polling = LongPollingService(
            clock=clock, wake_on_arrival=config.long_polling_enable
        )
        self.locks = QueueLockManager(clock, config.queue_lock_expiry_s)
        self.stats = BrokerStats(clock)
        self.scheduler: Any = None
        """The DelayScheduler (set by the app): `schedule(message, level)`."""
        self.timers: TimerHooks | None = None
        """Timer messages (set by the app); None refuses nothing but parks nothing."""
        self.transactions: TransactionHooks | None = None
        """Transactional messages (set by the app); None refuses half messages."""
        self.pop: PopHooks | None = None
        """POP consumption (set by the app); None refuses pops."""
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

    # -- pull ------------------------------------------------------------------------------

    def readable(self, group: str, topic: str) -> tuple[SubscriptionGroupConfig, TopicConfig]:
        """The configs of a group that may consume and a topic that may be read
        (PullMessageProcessor's checks, shared by pull and pop)."""
        group_config = self.groups.find(group)
        if group_config is None:
            raise BrokerError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist",
            )
        if not group_config.consume_enable:
            raise BrokerError(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}"
            )
        config = self.topics.get(topic)
        if config is None:
            raise BrokerError(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not is_readable(config.perm):
            raise BrokerError(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden"
            )
        return group_config, config

    def message_filter(self, expression: str | None, expression_type: str) -> MessageFilter | None:
        """The filter of a TAG or SQL92 subscription (None: everything)."""
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

    def _pull_filter(self, request: PullRequest) -> MessageFilter | None:
        """PullMessageProcessor's checks; the filter to read with (None: all)."""
        group_config, config = self.readable(request.group, request.topic)
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
        return self.message_filter(expression, expression_type)

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
        if result.code != ResponseCode.PULL_NOT_FOUND:
            return result
        hold_s = hold_time_s(
            suspend_flag=sysflag.pull_has_suspend(request.sys_flag),
            client_suspend_ms=request.suspend_timeout_ms,
            long_polling_enable=self.config.long_polling_enable,
            short_polling_time_ms=self.config.short_polling_time_ms,
        )
        if hold_s is None:
            return result
        matches = message_filter.matches_tags_code if message_filter is not None else None
        held = self.long_polling.hold(
            request.topic, request.queue_id, request.queue_offset, hold_s, matches
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
        # Orderly queue locks stay: a connection can drop for a moment while
        # its consumer keeps consuming, so a lock ends only by expiry or by
        # its owner's unlock (Java's RebalanceLockManager is never told of a
        # closed channel either).
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

    # -- orderly locks -------------------------------------------------------------------

    def lock_batch(
        self, group: str, client_id: str, queues: Iterable[MessageQueueKey]
    ) -> set[MessageQueueKey]:
        return self.locks.lock_batch(group, set(queues), client_id)

    def unlock_batch(self, group: str, client_id: str, queues: Iterable[MessageQueueKey]) -> None:
        self.locks.unlock_batch(group, set(queues), client_id)

    # -- transactions and timers -----------------------------------------------------------

    async def end_transaction(self, header: EndTransactionRequestHeader) -> None:
        """END_TRANSACTION (a oneway request from Java producers)."""
        if self.transactions is None:
            raise BrokerError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_name}] transactions are disabled",
            )
        await self.transactions.end(header)

    def locate_half(self, key: str) -> tuple[int, int] | None:
        """Where the half message of transaction `key` (its UNIQ_KEY) lies:
        (commit-log offset, half-queue offset), or None."""
        if self.transactions is None:
            raise BrokerError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_name}] transactions are disabled",
            )
        return self.transactions.locate(key)

    async def end_transactions(
        self, producer_group: str, items: Sequence[tuple[int, int, bool]]
    ) -> tuple[int, int]:
        """TIDEMQ_END_TRANSACTIONS: many ENDs in one append (see BrokerTransactions.end_many)."""
        if self.transactions is None:
            raise BrokerError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_name}] transactions are disabled",
            )
        return await self.transactions.end_many(producer_group, items)

    async def recall_message(self, topic: str, handle: str, producer_group: str | None) -> str:
        """RECALL_MESSAGE: cancel a timer message before it is due; its msg id."""
        if self.timers is None:
            raise BrokerError(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
        if self.topics.get(topic) is None:
            raise BrokerError(
                ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{topic}] not exist"
            )
        return await self.timers.recall(topic, handle, producer_group)

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
        below_offset: int | None = None,
    ) -> QueryResult:
        """QUERY_MESSAGE: records whose KEYS (or UNIQ_KEY) hold `key`, newest
        first; `below_offset` (tidemq's paging cursor) keeps only records
        before that commit-log offset."""
        if unique_key:
            result = self.store.query_by_unique_key(topic, key)
        else:
            limit = max(1, min(max_num, MAX_MSGS_NUM_BATCH))
            result = self.store.query_by_key(
                topic, key, limit, begin_ms, end_ms, below_offset=below_offset
            )
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
