"""BrokerService: the state one broker's processors share, and its housekeeping.

It owns the tables (topics, subscription groups, consumer offsets), the
clients (consumers, producers, orderly queue locks), the held pulls (long
polling) and the rate counters over one store; it hands arrivals to long
polling, and the server calls it to drop closed connections and expired
clients. What a request does lives in the processors
(tidemq.broker.processors), each built with only the parts of this state it
uses (tidemq.broker.assembly puts them together); nothing is added here
after construction.

The request and result records live in requests.py and the rate counters in
stats.py; their public names are re-exported here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from tidemq.broker.config import BrokerConfig
from tidemq.broker.consumers import (
    ChangeListener,
    ClientConnection,
    ConsumerManager,
    ProducerManager,
)
from tidemq.broker.groups import SubscriptionGroupManager
from tidemq.broker.locks import QueueLockManager
from tidemq.broker.long_polling import LongPollingService
from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.broker.permission import BrokerPermission
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
from tidemq.broker.stats import STATS_WINDOW_S, BrokerStats, RateCounter
from tidemq.broker.topics import TopicConfigManager
from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.common.message import MAX_MESSAGE_SIZE
from tidemq.common.message_id import host_text
from tidemq.store.api import DispatchRequest, MessageStore
from tidemq.store.config import parse_delay_levels

__all__ = [
    "MASTER_ID",
    "STATS_WINDOW_S",
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


class BrokerService:
    """The broker's shared state over one store. Use from the event loop thread."""

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
        on_topics_change: Callable[[], None] | None = None,
        on_group_change: ChangeListener | None = None,
    ) -> None:
        """`on_topics_change`: after a change the name servers should hear of;
        `on_group_change(group, members)`: a consumer group's members or
        subscriptions changed (the broker tells them: NOTIFY_CONSUMER_IDS_CHANGED)."""
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
            trace_topic=config.msg_trace_topic_name if config.trace_topic_enable else None,
            schedule_queue_nums=len(self.delay_levels_ms),
            clock=clock,
            on_change=on_topics_change,
        )
        self.groups = groups or SubscriptionGroupManager(
            config.config_dir, auto_create=config.auto_create_subscription_group, clock=clock
        )
        self.offsets = offsets or ConsumerOffsetManager(config.config_dir)
        self.consumers = ConsumerManager(
            clock=clock, expiry_s=config.client_expiry_s, on_change=on_group_change
        )
        self.producers = ProducerManager(clock=clock, expiry_s=config.client_expiry_s)
        self.long_polling = LongPollingService(
            clock=clock, wake_on_arrival=config.long_polling_enable
        )
        self.locks = QueueLockManager(clock, config.queue_lock_expiry_s)
        self.permission = BrokerPermission(
            config.broker_permission, config.advertised_host, on_topics_change
        )
        """brokerPermission now (UPDATE_BROKER_CONFIG changes it)."""
        self.stats = BrokerStats(clock, detailed=config.metrics_counting)
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

    # -- clients ---------------------------------------------------------------------

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
