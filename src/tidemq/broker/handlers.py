"""Broker request handlers: remoting command in, BrokerService call, response out.

One small function per request code; headers are decoded with
`decode_header` (a missing or malformed field is a ValueError, which the
transport answers SYSTEM_ERROR with the field named in the remark), the
service's refusals (`BrokerError`) become their response code and remark.
Bodies are compact standard JSON; maps keyed by MessageQueue use the key
text of `service.message_queue_key`.

=====  =================================  =====================================================
code   request                            answer
=====  =================================  =====================================================
10     SEND_MESSAGE                       msgId/queueId/queueOffset (batch when header says so)
310    SEND_MESSAGE_V2                    same, one-letter header keys
320    SEND_BATCH_MESSAGE                 msgId = comma-joined ids, queueOffset of the first
11     PULL_MESSAGE                       0/19/20/21 + suggestWhichBrokerId, nextBeginOffset,
                                          minOffset, maxOffset; body = stored records
12     QUERY_MESSAGE                      records; indexLastUpdateTimestamp/Phyoffset; with
                                          tidemqBelowOffset (a paging cursor, a tidemq
                                          extension) only records before that commit-log
                                          offset, and the field echoed to say so
14     QUERY_CONSUMER_OFFSET              offset, or QUERY_NOT_FOUND
15     UPDATE_CONSUMER_OFFSET             SUCCESS (negative offsets ignored)
17     UPDATE_AND_CREATE_TOPIC            SUCCESS
21     GET_ALL_TOPIC_CONFIG               TopicConfigSerializeWrapper
26     GET_BROKER_CONFIG                  Java properties text (key=value lines)
28     GET_BROKER_RUNTIME_INFO            KVTable {"table": {...}}
29     SEARCH_OFFSET_BY_TIMESTAMP         offset
30     GET_MAX_OFFSET                     offset
31     GET_MIN_OFFSET                     offset
32     GET_EARLIEST_MSG_STORETIME         timestamp
33     VIEW_MESSAGE_BY_ID                 the record
34     HEART_BEAT                         SUCCESS
35     UNREGISTER_CLIENT                  SUCCESS
36     CONSUMER_SEND_MSG_BACK             SUCCESS
38     GET_CONSUMER_LIST_BY_GROUP         {"consumerIdList": [...]}
41     LOCK_BATCH_MQ                      {"lockOKMQSet": [...]}
42     UNLOCK_BATCH_MQ                    SUCCESS
43     GET_ALL_CONSUMER_OFFSET            {"offsetTable": {"topic@group": {...}}}
200    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP SUCCESS
201    GET_ALL_SUBSCRIPTIONGROUP_CONFIG   {"subscriptionGroupTable": ..., "dataVersion": ...}
202    GET_TOPIC_STATS_INFO               TopicStatsTable {"offsetTable": {mq: TopicOffset}}
203    GET_CONSUMER_CONNECTION_LIST       ConsumerConnection
204    GET_PRODUCER_CONNECTION_LIST       ProducerConnection
207    DELETE_SUBSCRIPTIONGROUP           SUCCESS
208    GET_CONSUME_STATS                  ConsumeStats {"offsetTable": {...}, "consumeTps": x}
215    DELETE_TOPIC_IN_BROKER             SUCCESS
222    INVOKE_BROKER_TO_RESET_OFFSET      ResetOffsetBody {"offsetTable": {mq: offset}}
300    QUERY_TOPIC_CONSUME_BY_WHO         GroupList {"groupList": [...]}
351    GET_TOPIC_CONFIG                   {"topicConfig": {...}}
352    GET_SUBSCRIPTIONGROUP_CONFIG       the SubscriptionGroupConfig
=====  =================================  =====================================================

Pushed to clients (oneway): NOTIFY_CONSUMER_IDS_CHANGED (40, extFields
consumerGroup) to a consumer group's members when its membership or
subscriptions change, and RESET_CONSUMER_CLIENT_OFFSET (220) to online
members after a reset (Java's Broker2Client).
"""

from __future__ import annotations

import functools
import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from tidemq.broker.consumers import ClientChannel
from tidemq.broker.groups import SubscriptionGroupConfig
from tidemq.broker.message_types import parse_attributes
from tidemq.broker.pop.handlers import PopHandlers
from tidemq.broker.service import (
    BrokerError,
    BrokerService,
    MessageQueueKey,
    PullRequest,
    SendRequest,
    message_queue_key,
)
from tidemq.broker.topics import TopicConfig
from tidemq.common.names import validate_group_name, validate_topic_name
from tidemq.protocol.admin_headers import (
    ConsumerGroupRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    ProducerGroupRequestHeader,
    ResetOffsetRequestHeader,
    TopicRequestHeader,
)
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.headers import (
    QUERY_BELOW_OFFSET,
    ConsumerSendMsgBackRequestHeader,
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    EndTransactionRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    RecallMessageRequestHeader,
    RecallMessageResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    SendMessageRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
    decode_header,
    decode_send_message_header,
    encode_header,
)
from tidemq.protocol.heartbeat import parse_heartbeat
from tidemq.protocol.name_fields import refuse_bad_names
from tidemq.transport import Connection, Handler
from tidemq.transport.errors import RemotingError

__all__ = ["HANDLED_CODES", "BrokerHandlers", "born_address", "encode_json"]

log = logging.getLogger(__name__)

UNIQUE_KEY_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
MSG_REGION = "DefaultRegion"


def encode_json(document: object) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def _json_body(request: RemotingCommand, what: str) -> Any:
    try:
        return json.loads(request.body.decode("utf-8")) if request.body else None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{what} body is not valid JSON: {exc}") from None


@functools.lru_cache(maxsize=1024)
def born_address(remote: tuple[str, int]) -> tuple[bytes, int]:
    """A peer address as record fields: packed IP (IPv4-mapped IPv6 -> IPv4) and port."""
    host, port = remote[0], remote[1]
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return b"\x7f\x00\x00\x01", port
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.packed, port


def _ok(
    request: RemotingCommand, ext_fields: dict[str, str] | None = None, body: bytes = b""
) -> RemotingCommand:
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, ext_fields, body)


# -- the table ---------------------------------------------------------------------

_METHODS: dict[int, str] = {
    RequestCode.SEND_MESSAGE: "send_message",
    RequestCode.SEND_MESSAGE_V2: "send_message",
    RequestCode.SEND_BATCH_MESSAGE: "send_message",
    RequestCode.PULL_MESSAGE: "pull_message",
    RequestCode.QUERY_MESSAGE: "query_message",
    RequestCode.QUERY_CONSUMER_OFFSET: "query_consumer_offset",
    RequestCode.UPDATE_CONSUMER_OFFSET: "update_consumer_offset",
    RequestCode.UPDATE_AND_CREATE_TOPIC: "update_and_create_topic",
    RequestCode.GET_ALL_TOPIC_CONFIG: "get_all_topic_config",
    RequestCode.GET_BROKER_RUNTIME_INFO: "get_broker_runtime_info",
    RequestCode.GET_BROKER_CONFIG: "get_broker_config",
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: "search_offset_by_timestamp",
    RequestCode.GET_MAX_OFFSET: "get_max_offset",
    RequestCode.GET_MIN_OFFSET: "get_min_offset",
    RequestCode.GET_EARLIEST_MSG_STORETIME: "get_earliest_msg_storetime",
    RequestCode.VIEW_MESSAGE_BY_ID: "view_message_by_id",
    RequestCode.HEART_BEAT: "heart_beat",
    RequestCode.UNREGISTER_CLIENT: "unregister_client",
    RequestCode.CONSUMER_SEND_MSG_BACK: "consumer_send_msg_back",
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: "get_consumer_list_by_group",
    RequestCode.LOCK_BATCH_MQ: "lock_batch_mq",
    RequestCode.UNLOCK_BATCH_MQ: "unlock_batch_mq",
    RequestCode.GET_ALL_CONSUMER_OFFSET: "get_all_consumer_offset",
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: "update_and_create_group",
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: "get_all_group_config",
    RequestCode.GET_TOPIC_STATS_INFO: "get_topic_stats_info",
    RequestCode.GET_CONSUMER_CONNECTION_LIST: "get_consumer_connection_list",
    RequestCode.GET_PRODUCER_CONNECTION_LIST: "get_producer_connection_list",
    RequestCode.DELETE_SUBSCRIPTIONGROUP: "delete_subscription_group",
    RequestCode.GET_CONSUME_STATS: "get_consume_stats",
    RequestCode.DELETE_TOPIC_IN_BROKER: "delete_topic_in_broker",
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: "reset_offset",
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: "query_topic_consume_by_who",
    RequestCode.GET_TOPIC_CONFIG: "get_topic_config",
    RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: "get_subscription_group_config",
    RequestCode.END_TRANSACTION: "end_transaction",
    RequestCode.TIDEMQ_SEND_HALF_BATCH: "send_message",
    RequestCode.TIDEMQ_END_TRANSACTIONS: "end_transactions",
    RequestCode.RECALL_MESSAGE: "recall_message",
    RequestCode.POP_MESSAGE: "pop_message",
    RequestCode.ACK_MESSAGE: "ack_message",
    RequestCode.BATCH_ACK_MESSAGE: "batch_ack_message",
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: "change_invisible_time",
}
HANDLED_CODES = frozenset(int(code) for code in _METHODS)
"""Every request code the broker answers (the rest: REQUEST_CODE_NOT_SUPPORTED)."""

_Method = Callable[[RemotingCommand, Connection], Awaitable[RemotingCommand | None]]


class BrokerHandlers(PopHandlers):
    """The broker's request-code table over one BrokerService."""

    def __init__(self, service: BrokerService) -> None:
        self.service = service
        service.group_change_listeners.append(self._notify_consumer_ids_changed)

    def table(self) -> dict[int, Handler]:
        """Request code -> handler, for RemotingServer."""
        return {int(code): self._guarded(getattr(self, name)) for code, name in _METHODS.items()}

    @staticmethod
    def _guarded(method: _Method) -> Handler:
        async def handle(
            request: RemotingCommand, connection: Connection
        ) -> RemotingCommand | None:
            refusal = refuse_bad_names(request)
            if refusal is not None:
                return refusal
            try:
                return await method(request, connection)
            except BrokerError as exc:
                return RemotingCommand.response_to(request, exc.code, exc.remark)

        return handle

    # -- send ----------------------------------------------------------------------------

    async def send_message(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header: SendMessageRequestHeader = decode_send_message_header(
            request.code, request.ext_fields
        )
        born_host, born_port = born_address(connection.remote)
        send = SendRequest(
            producer_group=header.producer_group,
            topic=header.topic,
            queue_id=header.queue_id,
            body=request.body,
            properties=header.properties or "",
            flag=header.flag,
            sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=born_host,
            born_port=born_port,
            reconsume_times=header.reconsume_times or 0,
            max_reconsume_times=header.max_reconsume_times,
            default_topic=header.default_topic,
            default_topic_queue_nums=header.default_topic_queue_nums,
            unit_mode=header.unit_mode,
            batch=header.batch,
        )
        if request.code == RequestCode.TIDEMQ_SEND_HALF_BATCH:
            result = await self.service.send_half_batch(send)
        elif request.code == RequestCode.SEND_BATCH_MESSAGE or header.batch:
            result = await self.service.send_batch(send)
        else:
            result = await self.service.send(send)
        # SendMessageResponseHeader written directly: the generic encoder is a
        # measurable share of a single-message send.
        ext = {
            "msgId": result.msg_id,
            "queueId": str(result.queue_id),
            "queueOffset": str(result.queue_offset),
            "MSG_REGION": MSG_REGION,
            "TRACE_ON": "true",
        }
        if result.transaction_id is not None:
            ext["transactionId"] = result.transaction_id
        if result.recall_handle is not None:
            ext["recallHandle"] = result.recall_handle
        return RemotingCommand.response_to(request, result.code, result.remark, ext)

    # -- transactions and recall ------------------------------------------------------------

    async def end_transaction(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand | None:
        """Java producers send END_TRANSACTION oneway: answer only when asked to."""
        header = decode_header(EndTransactionRequestHeader, request.ext_fields)
        try:
            await self.service.end_transaction(header)
        except BrokerError as exc:
            if request.is_oneway:
                log.warning("END_TRANSACTION from %s refused: %s", connection.remote, exc.remark)
                return None
            raise
        if request.is_oneway:
            return None
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def end_transactions(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        """TIDEMQ_END_TRANSACTIONS (a tidemq extension): header `producerGroup`,
        body JSON ``{"items": [[commitLogOffset, tranStateTableOffset, commit], ...]}``;
        answers `ended` and `resolvedBefore`."""
        group = str(request.ext_fields.get("producerGroup") or "")
        if not group:
            raise BrokerError(ResponseCode.MESSAGE_ILLEGAL, "the producerGroup field is missing")
        try:
            document = json.loads(request.body or b"")
            items = [(int(clo), int(qo), bool(commit)) for clo, qo, commit in document["items"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise BrokerError(
                ResponseCode.MESSAGE_ILLEGAL,
                f'the body must be {{"items": [[commitLogOffset, tranStateTableOffset, '
                f"commit], ...]}} ({exc})",
            ) from None
        ended, before = await self.service.end_transactions(group, items)
        return RemotingCommand.response_to(
            request,
            ResponseCode.SUCCESS,
            None,
            {"ended": str(ended), "resolvedBefore": str(before)},
        )

    async def recall_message(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(RecallMessageRequestHeader, request.ext_fields)
        msg_id = await self.service.recall_message(
            header.topic, header.recall_handle, header.producer_group
        )
        ext = encode_header(RecallMessageResponseHeader(msg_id=msg_id))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, ext)

    # -- pull and offsets ---------------------------------------------------------------

    async def pull_message(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(PullMessageRequestHeader, request.ext_fields)
        host, port = connection.remote[0], connection.remote[1]
        result = await self.service.pull(
            PullRequest(
                group=header.consumer_group,
                topic=header.topic,
                queue_id=header.queue_id,
                queue_offset=header.queue_offset,
                max_msg_nums=header.max_msg_nums,
                sys_flag=header.sys_flag,
                commit_offset=header.commit_offset,
                suspend_timeout_ms=header.suspend_timeout_millis,
                subscription=header.subscription,
                sub_version=header.sub_version,
                expression_type=header.expression_type,
                max_msg_bytes=header.max_msg_bytes,
                client_address=f"{host}:{port}",
            )
        )
        ext = encode_header(
            PullMessageResponseHeader(
                suggest_which_broker_id=result.suggest_which_broker_id,
                next_begin_offset=result.next_begin_offset,
                min_offset=result.min_offset,
                max_offset=result.max_offset,
            )
        )
        return RemotingCommand.response_to(request, result.code, result.remark, ext, result.body)

    async def query_consumer_offset(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(QueryConsumerOffsetRequestHeader, request.ext_fields)
        offset = self.service.query_consumer_offset(
            header.consumer_group, header.topic, header.queue_id, header.set_zero_if_not_found
        )
        return _ok(request, encode_header(QueryConsumerOffsetResponseHeader(offset=offset)))

    async def update_consumer_offset(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(UpdateConsumerOffsetRequestHeader, request.ext_fields)
        self.service.update_consumer_offset(
            header.consumer_group, header.topic, header.queue_id, header.commit_offset
        )
        return _ok(request)

    async def get_max_offset(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(GetMaxOffsetRequestHeader, request.ext_fields)
        offset = self.service.max_offset(header.topic, header.queue_id)
        return _ok(request, encode_header(GetMaxOffsetResponseHeader(offset=offset)))

    async def get_min_offset(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(GetMinOffsetRequestHeader, request.ext_fields)
        offset = self.service.min_offset(header.topic, header.queue_id)
        return _ok(request, encode_header(GetMinOffsetResponseHeader(offset=offset)))

    async def search_offset_by_timestamp(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(SearchOffsetRequestHeader, request.ext_fields)
        offset = self.service.search_offset(header.topic, header.queue_id, header.timestamp)
        return _ok(request, encode_header(SearchOffsetResponseHeader(offset=offset)))

    async def get_earliest_msg_storetime(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(GetEarliestMsgStoretimeRequestHeader, request.ext_fields)
        timestamp = self.service.earliest_store_time(header.topic, header.queue_id)
        return _ok(
            request, encode_header(GetEarliestMsgStoretimeResponseHeader(timestamp=timestamp))
        )

    async def get_all_consumer_offset(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        table = {
            key: {str(q): o for q, o in sorted(queues.items())}
            for key, queues in sorted(self.service.offsets.all_offsets().items())
        }
        return _ok(request, body=encode_json({"offsetTable": table}))

    # -- messages ----------------------------------------------------------------------------

    async def query_message(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(QueryMessageRequestHeader, request.ext_fields)
        unique = request.ext_fields.get(UNIQUE_KEY_QUERY_FLAG, "").lower() == "true"
        below = request.ext_fields.get(QUERY_BELOW_OFFSET)
        try:
            below_offset = int(below) if below is not None and not unique else None
        except ValueError:
            raise BrokerError(
                ResponseCode.INVALID_PARAMETER, f"{QUERY_BELOW_OFFSET} is not a number: {below}"
            ) from None
        result = self.service.query_message(
            header.topic,
            header.key,
            header.max_num,
            header.begin_timestamp,
            header.end_timestamp,
            unique_key=unique,
            below_offset=below_offset,
        )
        ext = encode_header(
            QueryMessageResponseHeader(
                index_last_update_timestamp=result.index_last_update_timestamp,
                index_last_update_phyoffset=result.index_last_update_phy_offset,
            )
        )
        if below_offset is not None:
            ext[QUERY_BELOW_OFFSET] = str(below_offset)
        return _ok(request, ext, b"".join(result.buffers))

    async def view_message_by_id(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(ViewMessageRequestHeader, request.ext_fields)
        return _ok(request, body=self.service.view_message(header.offset))

    # -- clients -----------------------------------------------------------------------------

    async def heart_beat(self, request: RemotingCommand, connection: Connection) -> RemotingCommand:
        data = parse_heartbeat(request.body)
        self.service.heartbeat(data, connection, language=request.language, version=request.version)
        return _ok(request)

    async def unregister_client(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(UnregisterClientRequestHeader, request.ext_fields)
        self.service.unregister_client(
            header.client_id, header.producer_group, header.consumer_group
        )
        return _ok(request)

    async def get_consumer_list_by_group(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(GetConsumerListByGroupRequestHeader, request.ext_fields)
        ids = self.service.consumer_ids(header.consumer_group)
        return _ok(request, body=encode_json({"consumerIdList": ids}))

    async def consumer_send_msg_back(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(ConsumerSendMsgBackRequestHeader, request.ext_fields)
        await self.service.consumer_send_back(
            header.offset, header.group, header.delay_level, header.max_reconsume_times
        )
        return _ok(request)

    def _notify_consumer_ids_changed(self, group: str, channels: list[ClientChannel]) -> None:
        command = RemotingCommand.request(
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, oneway=True
        )
        for channel in channels:
            try:
                channel.connection.send_oneway(command)
            except (RemotingError, ProtocolError) as exc:
                log.debug("notify %s of %s failed: %s", channel.client_id, group, exc)

    # -- orderly locks -------------------------------------------------------------------

    @staticmethod
    def _lock_body(request: RemotingCommand) -> tuple[str, str, set[MessageQueueKey]]:
        document = _json_body(request, "lock batch")
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

    async def lock_batch_mq(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        group, client_id, queues = self._lock_body(request)
        locked = self.service.lock_batch(group, client_id, queues)
        body = {
            "lockOKMQSet": [
                {"topic": t, "brokerName": b, "queueId": q} for t, b, q in sorted(locked)
            ]
        }
        return _ok(request, body=encode_json(body))

    async def unlock_batch_mq(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        group, client_id, queues = self._lock_body(request)
        self.service.unlock_batch(group, client_id, queues)
        return _ok(request)

    # -- admin: topics ---------------------------------------------------------------------

    async def update_and_create_topic(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(CreateTopicRequestHeader, request.ext_fields)
        existing = self.service.topics.get(header.topic)
        try:
            attributes = parse_attributes(
                header.attributes, existing.attributes if existing is not None else {}
            )
        except ValueError as exc:
            raise BrokerError(ResponseCode.INVALID_PARAMETER, str(exc)) from None
        self.service.create_topic(
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
        return _ok(request)

    async def get_all_topic_config(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        return _ok(request, body=encode_json(self.service.topics.serialize()))

    async def get_topic_config(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(TopicRequestHeader, request.ext_fields)
        config = self.service.topics.get(header.topic)
        if config is None:
            raise BrokerError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        return _ok(request, body=encode_json({"topicConfig": config.to_json()}))

    async def delete_topic_in_broker(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(DeleteTopicRequestHeader, request.ext_fields)
        self.service.delete_topic(header.topic)
        return _ok(request)

    async def get_topic_stats_info(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(TopicRequestHeader, request.ext_fields)
        return _ok(request, body=encode_json(self.service.topic_stats(header.topic)))

    async def query_topic_consume_by_who(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(TopicRequestHeader, request.ext_fields)
        groups = self.service.groups_consuming(header.topic)
        return _ok(request, body=encode_json({"groupList": groups}))

    # -- admin: groups -------------------------------------------------------------------------

    async def update_and_create_group(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        config = SubscriptionGroupConfig.from_json(_json_body(request, "subscription group"))
        self.service.update_group(config)
        return _ok(request)

    async def get_all_group_config(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        return _ok(request, body=encode_json(self.service.groups.serialize()))

    async def get_subscription_group_config(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(GetSubscriptionGroupConfigRequestHeader, request.ext_fields)
        config = self.service.groups.get(header.group)
        if config is None:
            raise BrokerError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.group}] does not exist",
            )
        return _ok(request, body=encode_json(config.to_json()))

    async def delete_subscription_group(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(DeleteSubscriptionGroupRequestHeader, request.ext_fields)
        self.service.delete_group(header.group_name, header.clean_offset)
        return _ok(request)

    async def get_consumer_connection_list(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(ConsumerGroupRequestHeader, request.ext_fields)
        return _ok(
            request, body=encode_json(self.service.consumer_connection(header.consumer_group))
        )

    async def get_producer_connection_list(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(ProducerGroupRequestHeader, request.ext_fields)
        return _ok(
            request, body=encode_json(self.service.producer_connection(header.producer_group))
        )

    async def get_consume_stats(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(GetConsumeStatsRequestHeader, request.ext_fields)
        stats = self.service.consume_stats(header.consumer_group, header.topic or None)
        return _ok(request, body=encode_json(stats))

    async def reset_offset(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(ResetOffsetRequestHeader, request.ext_fields)
        offsets = self.service.reset_offset(
            header.group,
            header.topic,
            header.timestamp,
            force=header.is_force,
            queue_id=header.queue_id,
            offset=header.offset if header.offset is not None else -1,
        )
        broker = self.service.config.broker_name
        body = encode_json(
            {
                "offsetTable": {
                    message_queue_key(header.topic, broker, queue_id): offset
                    for queue_id, offset in sorted(offsets.items())
                }
            }
        )
        self._push_reset(header, body)
        return _ok(request, body=body)

    def _push_reset(self, header: ResetOffsetRequestHeader, body: bytes) -> None:
        info = self.service.consumers.get(header.group)
        if info is None:
            return
        ext = encode_header(
            ResetOffsetRequestHeader(
                topic=header.topic,
                group=header.group,
                timestamp=header.timestamp,
                is_force=header.is_force,
            )
        )
        command = RemotingCommand.request(
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, body, oneway=True
        )
        for channel in info.channels.values():
            try:
                channel.connection.send_oneway(command)
            except (RemotingError, ProtocolError) as exc:
                log.debug("reset push to %s failed: %s", channel.client_id, exc)

    # -- runtime -------------------------------------------------------------------------------

    async def get_broker_runtime_info(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        return _ok(request, body=encode_json({"table": self.service.runtime_info()}))

    async def get_broker_config(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        # Java answers MixAll.properties2String: "key=value" lines (AdminBrokerProcessor).
        lines = (f"{key}={value}\n" for key, value in self.service.broker_config().items())
        return _ok(request, body="".join(lines).encode("utf-8"))
