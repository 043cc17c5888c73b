"""ClientProcessor: HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP,
LOCK_BATCH_MQ, UNLOCK_BATCH_MQ.

Java references (rocketmq-all 4.9.7): ClientManageProcessor (heartbeat,
unregister), ConsumerManageProcessor (consumer list), AdminBrokerProcessor
(lockBatchMQ / unlockBatchMQ over RebalanceLockManager).
"""

from __future__ import annotations

from collections.abc import Iterable

from tidemq.broker.consumers import ClientConnection, ConsumerManager, ProducerManager
from tidemq.broker.groups import SubscriptionGroupManager
from tidemq.broker.locks import QueueLockManager
from tidemq.broker.remoting import RequestHandler, encode_json, json_body, ok
from tidemq.broker.requests import BrokerError, MessageQueueKey
from tidemq.broker.topics import TopicConfigManager
from tidemq.common.names import validate_group_name, validate_topic_name
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    GetConsumerListByGroupRequestHeader,
    UnregisterClientRequestHeader,
    decode_header,
)
from tidemq.protocol.heartbeat import HeartbeatData, parse_heartbeat
from tidemq.transport import Connection

__all__ = ["ClientProcessor"]


class ClientProcessor:
    """Client registrations and orderly queue locks."""

    def __init__(
        self,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        consumers: ConsumerManager,
        producers: ProducerManager,
        locks: QueueLockManager,
    ) -> None:
        self.topics = topics
        self.groups = groups
        self.consumers = consumers
        self.producers = producers
        self.locks = locks

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.HEART_BEAT: self.handle_heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.handle_unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.handle_get_consumer_list_by_group,
            RequestCode.LOCK_BATCH_MQ: self.handle_lock_batch_mq,
            RequestCode.UNLOCK_BATCH_MQ: self.handle_unlock_batch_mq,
        }

    # -- remoting ------------------------------------------------------------------------

    async def handle_heart_beat(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        data = parse_heartbeat(request.body)
        self.heartbeat(data, connection, language=request.language, version=request.version)
        return ok(request)

    async def handle_unregister_client(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(UnregisterClientRequestHeader, request.ext_fields)
        self.unregister_client(header.client_id, header.producer_group, header.consumer_group)
        return ok(request)

    async def handle_get_consumer_list_by_group(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(GetConsumerListByGroupRequestHeader, request.ext_fields)
        ids = self.consumer_ids(header.consumer_group)
        return ok(request, body=encode_json({"consumerIdList": ids}))

    async def handle_lock_batch_mq(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        group, client_id, queues = _lock_body(request)
        locked = self.lock_batch(group, client_id, queues)
        body = {
            "lockOKMQSet": [
                {"topic": t, "brokerName": b, "queueId": q} for t, b, q in sorted(locked)
            ]
        }
        return ok(request, body=encode_json(body))

    async def handle_unlock_batch_mq(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        group, client_id, queues = _lock_body(request)
        self.unlock_batch(group, client_id, queues)
        return ok(request)

    # -- clients -------------------------------------------------------------------------

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

    def consumer_ids(self, group: str) -> list[str]:
        ids = self.consumers.client_ids(group)
        if not ids:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return ids

    # -- orderly locks -------------------------------------------------------------------

    def lock_batch(
        self, group: str, client_id: str, queues: Iterable[MessageQueueKey]
    ) -> set[MessageQueueKey]:
        return self.locks.lock_batch(group, set(queues), client_id)

    def unlock_batch(self, group: str, client_id: str, queues: Iterable[MessageQueueKey]) -> None:
        self.locks.unlock_batch(group, set(queues), client_id)


def _lock_body(request: RemotingCommand) -> tuple[str, str, set[MessageQueueKey]]:
    """LOCK/UNLOCK_BATCH_MQ's body: the group, the client and the queues, checked."""
    document = json_body(request, "lock batch")
    if not isinstance(document, dict):
        raise ValueError("lock batch body must be a JSON object")
    group, client_id = document.get("consumerGroup"), document.get("clientId")
    if not isinstance(group, str) or not isinstance(client_id, str):
        raise ValueError("lock batch body needs consumerGroup and clientId strings")
    raw_set = document.get("mqSet") or []
    if not isinstance(raw_set, list):
        raise ValueError("mqSet must be a list")
    queues: set[MessageQueueKey] = set()
    for raw in raw_set:
        if not isinstance(raw, dict):
            raise ValueError("each mqSet entry must be an object")
        try:
            queues.add((str(raw["topic"]), str(raw["brokerName"]), int(raw["queueId"])))
        except (KeyError, TypeError, ValueError):
            raise ValueError("each mqSet entry needs topic, brokerName and queueId") from None
    problem = validate_group_name(group) or next(
        filter(None, (validate_topic_name(topic) for topic, _, _ in queues)), None
    )
    if problem is not None:
        raise BrokerError(ResponseCode.INVALID_PARAMETER, problem)
    return group, client_id, queues
