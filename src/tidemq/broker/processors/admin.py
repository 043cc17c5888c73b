"""AdminProcessor: topics, subscription groups, statistics, configuration, offset resets.

Codes: UPDATE_AND_CREATE_TOPIC, GET_ALL_TOPIC_CONFIG, GET_TOPIC_CONFIG,
DELETE_TOPIC_IN_BROKER, GET_TOPIC_STATS_INFO, QUERY_TOPIC_CONSUME_BY_WHO,
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
GET_SUBSCRIPTIONGROUP_CONFIG, DELETE_SUBSCRIPTIONGROUP,
GET_CONSUMER_CONNECTION_LIST, GET_PRODUCER_CONNECTION_LIST, GET_CONSUME_STATS,
GET_ALL_CONSUMER_OFFSET, INVOKE_BROKER_TO_RESET_OFFSET, GET_BROKER_RUNTIME_INFO,
GET_BROKER_CONFIG.

Java reference (rocketmq-all 4.9.7): AdminBrokerProcessor (admin bodies).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tidemq.broker.config import BrokerConfig
from tidemq.broker.consumers import (
    AskableConnection,
    ClientChannel,
    ConsumerManager,
    ProducerManager,
)
from tidemq.broker.groups import GroupError, SubscriptionGroupConfig, SubscriptionGroupManager
from tidemq.broker.locks import QueueLockManager
from tidemq.broker.long_polling import LongPollingService
from tidemq.broker.message_types import parse_attributes
from tidemq.broker.offsets import ConsumerOffsetManager, plan_reset
from tidemq.broker.permission import BrokerPermission, parse_permission
from tidemq.broker.remoting import (
    RequestHandler,
    encode_json,
    json_body,
    ok,
    push_reset_offset,
)
from tidemq.broker.requests import BrokerError, message_queue_key
from tidemq.broker.stats import BrokerStats
from tidemq.broker.timer_progress import encode_progress, read_progress
from tidemq.broker.timers import TIMER_DIRECTORY
from tidemq.broker.topics import TopicConfig, TopicConfigManager, TopicError
from tidemq.common.clock import Clock
from tidemq.common.message_id import decode_offset_message_id
from tidemq.common.names import validate_topic_name
from tidemq.ha.config import BrokerRole
from tidemq.protocol.admin_headers import (
    ConsumeMessageDirectlyRequestHeader,
    ConsumerGroupRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    ProducerGroupRequestHeader,
    ResetOffsetRequestHeader,
    TopicRequestHeader,
)
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    decode_header,
)
from tidemq.protocol.java_properties import java_properties_text, parse_java_properties
from tidemq.store.api import MessageStore
from tidemq.timer.checkpoint import TimerCheckpointError
from tidemq.transport import Connection, RemotingError, RemotingTimeoutError

__all__ = ["VERSION_DESC", "AdminProcessor", "StoreInfo"]

log = logging.getLogger(__name__)

VERSION_DESC = "tidemq 0.1.0"

StoreInfo = Callable[[], dict[str, str]]
"""The store's own part of GET_BROKER_RUNTIME_INFO (commit log bounds, disk
use, retention counters: what a file store knows)."""


CALL_CLIENT_TIMEOUT_S = 10.0
"""How long a request forwarded to a client may take (Broker2Client.callClient)."""
RUNTIME_SETTINGS = frozenset({"brokerPermission"})
"""The keys UPDATE_BROKER_CONFIG may change while the broker runs."""


SLAVE_ADMIN_REMARK = (
    "Can't modify topic or subscription group from slave broker, "
    "please execute it from master broker."
)
"""RocketMQ's words (AdminBrokerProcessor.validateSlave), answered SYSTEM_ERROR."""


class AdminProcessor:
    """Admin requests over the broker's tables, offsets, clients and store."""

    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        clock: Clock,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        consumers: ConsumerManager,
        producers: ProducerManager,
        locks: QueueLockManager,
        stats: BrokerStats,
        long_polling: LongPollingService,
        *,
        address: str,
        boot_ms: int,
        store_info: StoreInfo | None = None,
        delay_offsets: Callable[[], str] | None = None,
        permission: BrokerPermission | None = None,
    ) -> None:
        self.config = config
        self.permission = permission
        """brokerPermission, the one setting UPDATE_BROKER_CONFIG changes (None: none)."""
        self.delay_offsets = delay_offsets
        """The delay scheduler's progress, as delayOffset.json holds it (None: no scheduler)."""
        self.store = store
        self.clock = clock
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.consumers = consumers
        self.producers = producers
        self.locks = locks
        self.stats = stats
        self.long_polling = long_polling
        self.address = address
        """ "host:port" of the broker (brokerAddr, listenPort)."""
        self.boot_ms = boot_ms
        self.store_info = store_info

    def _refuse_on_slave(self) -> None:
        """Topics and groups change on the master; a slave copies them
        (AdminBrokerProcessor.validateSlave)."""
        if self.config.broker_role is BrokerRole.SLAVE:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, SLAVE_ADMIN_REMARK)

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.handle_update_and_create_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.handle_get_all_topic_config,
            RequestCode.GET_TOPIC_CONFIG: self.handle_get_topic_config,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.handle_delete_topic_in_broker,
            RequestCode.GET_TOPIC_STATS_INFO: self.handle_get_topic_stats_info,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.handle_query_topic_consume_by_who,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.handle_update_and_create_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.handle_get_all_group_config,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: self.handle_get_subscription_group_config,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.handle_delete_subscription_group,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.handle_get_consumer_connection_list,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.handle_get_producer_connection_list,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.handle_get_consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.handle_consume_message_directly,
            RequestCode.GET_CONSUME_STATS: self.handle_get_consume_stats,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.handle_get_all_consumer_offset,
            RequestCode.GET_ALL_DELAY_OFFSET: self.handle_get_all_delay_offset,
            RequestCode.GET_TIMER_CHECK_POINT: self.handle_get_timer_check_point,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.handle_reset_offset,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.handle_get_broker_runtime_info,
            RequestCode.GET_BROKER_CONFIG: self.handle_get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.handle_update_broker_config,
        }

    # -- remoting: topics ----------------------------------------------------------------

    async def handle_update_and_create_topic(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        self._refuse_on_slave()
        header = decode_header(CreateTopicRequestHeader, request.ext_fields)
        existing = self.topics.get(header.topic)
        try:
            attributes = parse_attributes(
                header.attributes, existing.attributes if existing is not None else {}
            )
        except ValueError as exc:
            raise BrokerError(ResponseCode.INVALID_PARAMETER, str(exc)) from None
        self.create_topic(
            TopicConfig(
                topic_name=header.topic,
                read_queue_nums=header.read_queue_nums,
                write_queue_nums=header.write_queue_nums,
                perm=header.perm,
                topic_filter_type=header.topic_filter_type,
                topic_sys_flag=header.topic_sys_flag or 0,
                order=header.order,
                attributes=attributes,
            )
        )
        return ok(request)

    async def handle_get_all_topic_config(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        return ok(request, body=encode_json(self.topics.serialize()))

    async def handle_get_topic_config(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(TopicRequestHeader, request.ext_fields)
        config = self.topics.get(header.topic)
        if config is None:
            raise BrokerError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        return ok(request, body=encode_json({"topicConfig": config.to_json()}))

    async def handle_delete_topic_in_broker(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        self._refuse_on_slave()
        header = decode_header(DeleteTopicRequestHeader, request.ext_fields)
        self.delete_topic(header.topic)
        return ok(request)

    async def handle_get_topic_stats_info(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(TopicRequestHeader, request.ext_fields)
        return ok(request, body=encode_json(self.topic_stats(header.topic)))

    async def handle_query_topic_consume_by_who(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(TopicRequestHeader, request.ext_fields)
        return ok(request, body=encode_json({"groupList": self.groups_consuming(header.topic)}))

    # -- remoting: groups ----------------------------------------------------------------

    async def handle_update_and_create_group(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        self._refuse_on_slave()
        config = SubscriptionGroupConfig.from_json(json_body(request, "subscription group"))
        self.update_group(config)
        return ok(request)

    async def handle_get_all_group_config(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        return ok(request, body=encode_json(self.groups.serialize()))

    async def handle_get_subscription_group_config(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(GetSubscriptionGroupConfigRequestHeader, request.ext_fields)
        config = self.groups.get(header.group)
        if config is None:
            raise BrokerError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.group}] does not exist",
            )
        return ok(request, body=encode_json(config.to_json()))

    async def handle_delete_subscription_group(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        self._refuse_on_slave()
        header = decode_header(DeleteSubscriptionGroupRequestHeader, request.ext_fields)
        self.delete_group(header.group_name, header.clean_offset)
        return ok(request)

    # -- remoting: clients, statistics, offsets ------------------------------------------

    async def handle_get_consumer_connection_list(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(ConsumerGroupRequestHeader, request.ext_fields)
        return ok(request, body=encode_json(self.consumer_connection(header.consumer_group)))

    async def handle_get_producer_connection_list(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(ProducerGroupRequestHeader, request.ext_fields)
        return ok(request, body=encode_json(self.producer_connection(header.producer_group)))

    async def handle_get_consumer_running_info(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO: asked of the client itself (`_call_client`)."""
        header = decode_header(GetConsumerRunningInfoRequestHeader, request.ext_fields)
        forwarded = RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO, dict(request.ext_fields), request.body
        )
        return await self._call_client(request, forwarded, header.consumer_group, header.client_id)

    async def handle_consume_message_directly(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY: the stored message (by its offset message id) goes
        to the client, which runs its listener over it and says how that went
        (AdminBrokerProcessor.consumeMessageDirectly)."""
        header = decode_header(ConsumeMessageDirectlyRequestHeader, request.ext_fields)
        try:
            _, _, offset = decode_offset_message_id(header.msg_id or "")
        except ValueError:
            raise BrokerError(
                ResponseCode.INVALID_PARAMETER,
                f"msgId {header.msg_id!r} is not an offset message id",
            ) from None
        record = self.store.read_by_physical_offset(offset)
        if record is None:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, f"no message {header.msg_id} here")
        fields = {**request.ext_fields, "brokerName": self.config.broker_name}
        forwarded = RemotingCommand.request(
            RequestCode.CONSUME_MESSAGE_DIRECTLY, fields, bytes(record)
        )
        return await self._call_client(
            request, forwarded, header.consumer_group, header.client_id or ""
        )

    async def _call_client(
        self, request: RemotingCommand, forwarded: RemotingCommand, group: str, client_id: str
    ) -> RemotingCommand:
        """`forwarded` to the client over its own connection, and its answer passed
        back as the answer to `request` (AdminBrokerProcessor.callConsumer)."""
        info = self.consumers.get(group)
        channel = info.channels.get(client_id) if info is not None else None
        if channel is None:
            raise BrokerError(
                ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
            )
        connection_to_client = channel.connection
        if not isinstance(connection_to_client, AskableConnection):  # a gRPC client
            raise BrokerError(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{group}> <{client_id}> cannot be asked (not a remoting client)",
            )
        try:
            answer = await connection_to_client.request(
                forwarded, CALL_CLIENT_TIMEOUT_S, owned=True
            )
        except RemotingTimeoutError as exc:
            raise BrokerError(
                ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {exc}"
            ) from None
        except RemotingError as exc:
            raise BrokerError(
                ResponseCode.SYSTEM_ERROR,
                f"invoke consumer <{group}> <{client_id}> Exception: {exc}",
            ) from None
        return RemotingCommand.response_to(request, answer.code, answer.remark, body=answer.body)

    async def handle_get_consume_stats(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(GetConsumeStatsRequestHeader, request.ext_fields)
        stats = self.consume_stats(header.consumer_group, header.topic or None)
        return ok(request, body=encode_json(stats))

    async def handle_get_all_consumer_offset(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        table = {
            key: {str(q): o for q, o in sorted(queues.items())}
            for key, queues in sorted(self.offsets.all_offsets().items())
        }
        return ok(request, body=encode_json({"offsetTable": table}))

    async def handle_get_all_delay_offset(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        """The delay progress a slave copies (AdminBrokerProcessor.getAllDelayOffset)."""
        if self.delay_offsets is None:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, "No delay offset in this broker")
        return ok(request, body=self.delay_offsets().encode())

    async def handle_get_timer_check_point(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        """The timer progress a slave copies (AdminBrokerProcessor.getTimerCheckPoint)."""
        try:
            progress = read_progress(self.config.store_dir / TIMER_DIRECTORY)
        except (TimerCheckpointError, OSError) as exc:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        return ok(request, body=encode_progress(progress))

    async def handle_reset_offset(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(ResetOffsetRequestHeader, request.ext_fields)
        offsets = self.reset_offset(
            header.group,
            header.topic,
            header.timestamp,
            force=header.is_force,
            queue_id=header.queue_id,
            offset=header.offset if header.offset is not None else -1,
        )
        broker = self.config.broker_name
        body = encode_json(
            {
                "offsetTable": {
                    message_queue_key(header.topic, broker, queue_id): offset
                    for queue_id, offset in sorted(offsets.items())
                }
            }
        )
        info = self.consumers.get(header.group)
        if info is not None:
            push_reset_offset(info.channels.values(), header, body)
        return ok(request, body=body)

    # -- remoting: runtime ---------------------------------------------------------------

    async def handle_get_broker_runtime_info(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        return ok(request, body=encode_json({"table": self.runtime_info()}))

    async def handle_get_broker_config(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        # Java answers MixAll.properties2String: "key=value" lines (AdminBrokerProcessor).
        return ok(request, body=java_properties_text(self.broker_config()).encode("utf-8"))

    async def handle_update_broker_config(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        """UPDATE_BROKER_CONFIG: a properties body ("key=value" lines). Only
        brokerPermission changes while the broker runs (it registers again at once,
        as Java's updateBrokerConfig does); any other key refuses the whole request."""
        changes = parse_java_properties(request.body.decode("utf-8", errors="replace"))
        if not changes:
            raise BrokerError(
                ResponseCode.INVALID_PARAMETER, "no setting given: send key=value lines"
            )
        unknown = sorted(set(changes) - RUNTIME_SETTINGS)
        if unknown or self.permission is None:
            raise BrokerError(
                ResponseCode.INVALID_PARAMETER,
                f"cannot change {', '.join(unknown) or 'brokerPermission'} while the broker "
                f"runs (changeable: {', '.join(sorted(RUNTIME_SETTINGS))}); set it in the "
                "broker's config and restart",
            )
        try:
            value = parse_permission(changes["brokerPermission"])
        except (KeyError, ValueError) as exc:
            raise BrokerError(ResponseCode.INVALID_PARAMETER, str(exc).strip("'")) from None
        before = self.permission.value
        self.permission.set(value)
        log.info(
            "brokerPermission %d -> %d, asked by %s (until restart)",
            before,
            value,
            connection.remote[0],
        )
        return ok(request)

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
        if self.store_info is not None:  # commit log bounds, disk use, retention counters
            info.update(self.store_info())
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
            "brokerRole": config.broker_role.value,
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
            "brokerPermission": str(
                self.permission.value if self.permission is not None else config.broker_permission
            ),
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
