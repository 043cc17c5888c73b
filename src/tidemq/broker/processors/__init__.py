"""The broker's request processors: one class per family of request codes.

Each processor is built with only the collaborators it uses and names its
handler of each code in `handlers()`; the remoting dispatch table
(tidemq.broker.handlers) is their union, and the gRPC endpoint calls the
same processors, so both protocols run the same checks. No processor module
imports another one.

=========  ============================================================================
module     request codes
=========  ============================================================================
send       SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE, TIDEMQ_SEND_HALF_BATCH,
           CONSUMER_SEND_MSG_BACK, RECALL_MESSAGE
pull       PULL_MESSAGE, QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET, GET_MAX_OFFSET,
           GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST_MSG_STORETIME,
           QUERY_MESSAGE, VIEW_MESSAGE_BY_ID
client     HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, LOCK_BATCH_MQ,
           UNLOCK_BATCH_MQ
admin      topics, subscription groups, connections, statistics, consumer offsets
           (GET_ALL_CONSUMER_OFFSET), INVOKE_BROKER_TO_RESET_OFFSET, runtime info, config
pop        POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME
transaction  END_TRANSACTION, TIDEMQ_END_TRANSACTIONS
=========  ============================================================================

The answers per code are in tidemq.broker.handlers.
"""
