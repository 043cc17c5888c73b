"""The broker's remoting dispatch table: the union of the processors' handlers.

Each request code is served by one processor (tidemq.broker.processors):
one small method per code decodes the header with `decode_header` (a
missing or malformed field is a ValueError, which the transport answers
SYSTEM_ERROR with the field named in the remark) and encodes the answer.
Here, in one place for every code, a request naming a bad topic or group is
refused (`refuse_bad_names`) and a refusal (`BrokerError`) becomes its
response code and remark. Bodies are compact standard JSON; maps keyed by
MessageQueue use the key text of `tidemq.broker.requests.message_queue_key`.

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
25     UPDATE_BROKER_CONFIG               SUCCESS (brokerPermission only, until restart)
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
37     END_TRANSACTION                    SUCCESS, or nothing when sent oneway
38     GET_CONSUMER_LIST_BY_GROUP         {"consumerIdList": [...]}
41     LOCK_BATCH_MQ                      {"lockOKMQSet": [...]}
42     UNLOCK_BATCH_MQ                    SUCCESS
43     GET_ALL_CONSUMER_OFFSET            {"offsetTable": {"topic@group": {...}}}
60     GET_TIMER_CHECK_POINT              Java's 56-byte TimerCheckpoint (broker.timer_progress)
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
307    GET_CONSUMER_RUNNING_INFO          the client's own answer (asked over its connection)
309    CONSUME_MESSAGE_DIRECTLY           the client's ConsumeMessageDirectlyResult (likewise)
351    GET_TOPIC_CONFIG                   {"topicConfig": {...}}
352    GET_SUBSCRIPTIONGROUP_CONFIG       the SubscriptionGroupConfig
=====  =================================  =====================================================

Also served: RECALL_MESSAGE (msgId of the recalled timer message), the POP
codes (tidemq.broker.processors.pop), and two tidemq extensions,
TIDEMQ_SEND_HALF_BATCH (a batch of transactional halves in one append) and
TIDEMQ_END_TRANSACTIONS (many ENDs in one append: `ended`, `resolvedBefore`).

Pushed to clients (oneway, Java's Broker2Client; tidemq.broker.remoting):
NOTIFY_CONSUMER_IDS_CHANGED (40, extFields consumerGroup) to a consumer
group's members when its membership or subscriptions change, and
RESET_CONSUMER_CLIENT_OFFSET (220) to online members after a reset.
"""

from __future__ import annotations

from collections.abc import Iterable

from tidemq.broker.remoting import Processor, RequestHandler, born_address, encode_json
from tidemq.broker.requests import BrokerError
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.name_fields import refuse_bad_names
from tidemq.transport import Connection, Handler

__all__ = ["HANDLED_CODES", "born_address", "dispatch_table", "encode_json"]

HANDLED_CODES = frozenset(
    int(code)
    for code in (
        # send
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.TIDEMQ_SEND_HALF_BATCH,
        RequestCode.CONSUMER_SEND_MSG_BACK,
        RequestCode.RECALL_MESSAGE,
        # pull and offsets
        RequestCode.PULL_MESSAGE,
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.GET_MAX_OFFSET,
        RequestCode.GET_MIN_OFFSET,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        RequestCode.GET_EARLIEST_MSG_STORETIME,
        RequestCode.QUERY_MESSAGE,
        RequestCode.VIEW_MESSAGE_BY_ID,
        # clients and locks
        RequestCode.HEART_BEAT,
        RequestCode.UNREGISTER_CLIENT,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP,
        RequestCode.LOCK_BATCH_MQ,
        RequestCode.UNLOCK_BATCH_MQ,
        # admin
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.GET_ALL_TOPIC_CONFIG,
        RequestCode.GET_TOPIC_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.GET_TOPIC_STATS_INFO,
        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        RequestCode.GET_CONSUMER_CONNECTION_LIST,
        RequestCode.GET_PRODUCER_CONNECTION_LIST,
        RequestCode.GET_CONSUME_STATS,
        RequestCode.GET_ALL_CONSUMER_OFFSET,
        RequestCode.GET_ALL_DELAY_OFFSET,
        RequestCode.GET_TIMER_CHECK_POINT,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        RequestCode.GET_BROKER_RUNTIME_INFO,
        RequestCode.GET_BROKER_CONFIG,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        # pop
        RequestCode.POP_MESSAGE,
        RequestCode.ACK_MESSAGE,
        RequestCode.BATCH_ACK_MESSAGE,
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
        # transactions
        RequestCode.END_TRANSACTION,
        RequestCode.TIDEMQ_END_TRANSACTIONS,
    )
)
"""Every request code the broker answers (the rest: REQUEST_CODE_NOT_SUPPORTED).
Known before the processors exist (the server answers SYSTEM_BUSY for them
while starting); `dispatch_table` checks the processors serve exactly these."""


def dispatch_table(processors: Iterable[Processor]) -> dict[int, Handler]:
    """Request code -> handler for RemotingServer: every processor's handlers,
    each behind the name guard and the BrokerError answer. ValueError when two
    processors claim a code or the codes are not HANDLED_CODES."""
    table: dict[int, Handler] = {}
    for processor in processors:
        for code, handler in processor.handlers().items():
            if int(code) in table:
                raise ValueError(f"request code {code} is served by two processors")
            table[int(code)] = _guarded(handler)
    if table.keys() != HANDLED_CODES:
        missing = sorted(HANDLED_CODES - table.keys())
        extra = sorted(table.keys() - HANDLED_CODES)
        raise ValueError(f"processors do not serve HANDLED_CODES: missing {missing}, extra {extra}")
    return table


def _guarded(handler: RequestHandler) -> Handler:
    async def handle(request: RemotingCommand, connection: Connection) -> RemotingCommand | None:
        refusal = refuse_bad_names(request)
        if refusal is not None:
            return refusal
        try:
            return await handler(request, connection)
        except BrokerError as exc:
            return RemotingCommand.response_to(request, exc.code, exc.remark)

    return handle
