"""The admin side of BrokerService: topics, groups, statistics, offsets reset.

Java reference (rocketmq-all 4.9.7): AdminBrokerProcessor (admin bodies).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from tidemq.broker.config import BrokerConfig
from tidemq.broker.consumers import ClientChannel, ConsumerManager, ProducerManager
from tidemq.broker.groups import GroupError, SubscriptionGroupConfig, SubscriptionGroupManager
from tidemq.broker.locks import QueueLockManager
from tidemq.broker.long_polling import LongPollingService
from tidemq.broker.offsets import ConsumerOffsetManager, plan_reset
from tidemq.broker.requests import BrokerError, message_queue_key
from tidemq.broker.stats import BrokerStats
from tidemq.broker.topics import TopicConfig, TopicConfigManager, TopicError
from tidemq.common.clock import Clock
from tidemq.common.names import validate_topic_name
from tidemq.protocol.codes import ResponseCode
from tidemq.store.api import MessageStore
from tidemq.store.config import SCHEDULE_TOPIC

log = logging.getLogger(__name__)

VERSION_DESC = "tidemq 0.1.0"


class BrokerAdmin:
    """Admin requests, mixed into BrokerService (which sets the state)."""

    config: BrokerConfig
    store: MessageStore
    clock: Clock
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    consumers: ConsumerManager
    producers: ProducerManager
    long_polling: LongPollingService
    locks: QueueLockManager
    stats: BrokerStats
    delay_levels_ms: tuple[int, ...]
    boot_ms: int

    if TYPE_CHECKING:

        @property
        def address(self) -> str: ...

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
        problem = validate_topic_name(topic)
        if problem is not None:
            raise BrokerError(ResponseCode.INVALID_PARAMETER, problem)
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
        store_info = getattr(self.store, "runtime_info", None)
        if callable(store_info):  # disk use and retention counters (the file store)
            info.update(store_info())
        return info

    def broker_config(self) -> dict[str, str]:
        """GET_BROKER_CONFIG: the broker's identity, addresses and main settings
        under Java's property names (BrokerConfig, NettyServerConfig,
        MessageStoreConfig), so a caller can tell which broker it reached and
        where its name servers are."""
        config = self.config
        return {
            "brokerName": config.broker_name,
            "brokerClusterName": config.cluster_name,
            "brokerId": str(config.broker_id),
            "brokerIP1": config.advertised_host,
            "listenPort": self.address.rpartition(":")[2],
            "namesrvAddr": ";".join(config.namesrv_addrs),
            "autoCreateTopicEnable": _java_bool(config.auto_create_topic),
            "autoCreateSubscriptionGroup": _java_bool(config.auto_create_subscription_group),
            "defaultTopicQueueNums": str(config.default_topic_queue_nums),
            "enablePropertyFilter": _java_bool(config.enable_property_filter),
            "flushDiskType": f"{config.flush_mode.value.upper()}_FLUSH",
            "messageDelayLevel": config.delay_levels,
            "storePathRootDir": str(config.store_dir),
            "brokerVersionDesc": VERSION_DESC,
        }

    def schedule_topic_offsets(self) -> dict[int, int]:
        """Max offset of each delay level's queue (for diagnostics)."""
        return {
            level: self.store.max_offset(SCHEDULE_TOPIC, level - 1)
            for level in range(1, len(self.delay_levels_ms) + 1)
        }


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


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
