"""SendProcessor: SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE,
TIDEMQ_SEND_HALF_BATCH, CONSUMER_SEND_MSG_BACK, RECALL_MESSAGE.

The send rules (topic checks and auto-creation, retry topics and the DLQ,
message types, delay levels, timer parking, transactional halves) for both
protocols: the remoting handlers below decode a request into a SendRequest,
the gRPC endpoint builds one from its message, and both call `send`.

Java references (rocketmq-all 4.9.7): SendMessageProcessor and
AbstractSendMessageProcessor.msgCheck (send, retry/DLQ, auto-create);
RecallMessageProcessor (5.x).
"""

from __future__ import annotations

import logging
import random
import re
from typing import cast

from tidemq.broker import retry
from tidemq.broker.config import BrokerConfig
from tidemq.broker.groups import SubscriptionGroupManager
from tidemq.broker.hooks import DelayHooks, TimerHooks, TransactionHooks
from tidemq.broker.message_types import check_message_type
from tidemq.broker.permission import BrokerPermission
from tidemq.broker.remoting import RequestHandler, born_address, ok
from tidemq.broker.requests import BrokerError, SendRequest, SendResult
from tidemq.broker.stats import DELAY, FIFO, NORMAL, TRANSACTION, BrokerStats
from tidemq.broker.topics import (
    MULTI_TAG,
    TRANS_HALF_TOPIC,
    TopicConfig,
    TopicConfigManager,
    is_not_allowed_send_topic,
    is_writeable,
)
from tidemq.broker.transactions import HalfBatch
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.message import MAX_MESSAGE_SIZE
from tidemq.common.names import (
    dlq_topic_of,
    is_retry_topic,
    retry_topic_of,
    validate_topic_name,
)
from tidemq.ha.config import BrokerRole
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import (
    DEFAULT_LANGUAGE,
    DEFAULT_VERSION,
    RESPONSE_FLAG,
    RemotingCommand,
)
from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    RecallMessageRequestHeader,
    RecallMessageResponseHeader,
    SendMessageRequestHeader,
    decode_header,
    decode_send_message_header,
    encode_header,
)
from tidemq.record.codec import BatchEntry, decode_record
from tidemq.record.records import split_batch
from tidemq.store.api import BatchToStore, MessageStore, MessageToStore, PutResult, PutStatus
from tidemq.store.config import parse_delay_levels
from tidemq.timer.parking import TIMER_PROPERTIES
from tidemq.transport import Connection

__all__ = ["SendProcessor"]

log = logging.getLogger(__name__)

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


_STORED_CODES: dict[PutStatus, int] = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}
"""The answers for a stored message, by how durable it is (Java's
SendMessageProcessor.handlePutMessageResult: sendOK with these codes)."""

SLAVE_SEND_REMARK = (
    "service not available now: broker {name} (broker id {id}) is a SLAVE, "
    "messages are put to its master"
)
"""RocketMQ answers a send to a slave SERVICE_NOT_AVAILABLE ("... messages are
put to the slave ..."): its store refuses puts on a SLAVE."""


def _put_failure(result: PutResult) -> BrokerError:
    code, text = _PUT_ERRORS.get(result.status, (ResponseCode.SYSTEM_ERROR, "store failure"))
    return BrokerError(code, result.remark or text)


def _append_property(properties: str, key: str, value: str) -> str:
    if properties and not properties.endswith(props.PROPERTY_SEPARATOR):
        properties += props.PROPERTY_SEPARATOR
    return f"{properties}{key}{props.NAME_VALUE_SEPARATOR}{value}{props.PROPERTY_SEPARATOR}"


def send_stamp(region_id: str, trace_on: bool) -> str:
    """The properties the broker puts on every message stored from a send:
    MSG_REGION (its region) and TRACE_ON (whether clients trace it), as
    apache/rocketmq AbstractSendMessageProcessor.buildMsgContext puts
    brokerConfig.regionId and String.valueOf(brokerConfig.traceOn) into the
    request's properties (SendMessageProcessor.processRequest calls it for
    single and batch sends alike)."""
    trace = "true" if trace_on else "false"
    return (
        f"{props.MSG_REGION}{props.NAME_VALUE_SEPARATOR}{region_id}{props.PROPERTY_SEPARATOR}"
        f"{props.TRACE_ON}{props.NAME_VALUE_SEPARATOR}{trace}{props.PROPERTY_SEPARATOR}"
    )


_UNSTAMPED = {props.MSG_REGION: None, props.TRACE_ON: None}


def stamped(properties: str, stamp: str) -> str:
    """`properties` with `stamp` appended, any MSG_REGION / TRACE_ON the
    client set dropped first (Java's put replaces them)."""
    if _has_key(properties, props.MSG_REGION) or _has_key(properties, props.TRACE_ON):
        properties = props.edit_properties(properties, _UNSTAMPED)
    elif properties and not properties.endswith(props.PROPERTY_SEPARATOR):
        properties += props.PROPERTY_SEPARATOR
    return properties + stamp


def _has_key(properties: str, key: str) -> bool:
    """Cheap pre-check before decoding a property string."""
    return (key + props.NAME_VALUE_SEPARATOR) in properties


def _has_timer_property(properties: str) -> bool:
    return any(_has_key(properties, key) for key in TIMER_PROPERTIES)


_ACTED_ON = re.compile(
    "(?:"
    + "|".join(re.escape(key) for key in (props.TRAN_MSG, props.DELAY, *TIMER_PROPERTIES))
    + ")"
    + re.escape(props.NAME_VALUE_SEPARATOR)
)
"""Any property key the send acts on (a transaction, a delay level, a delivery
time), as `_has_key` finds it: one search tells a plain send, the usual case,
from one that needs the checks key by key."""

_BORN_ADDRESS = "tidemq.send.born_address"
"""A connection's attribute: its peer as record fields (`born_address`)."""

_VALID_TOPICS_LIMIT = 4096
"""Topic names found valid that a processor remembers (then it starts over)."""


def _message_type(properties: str, delayed: bool) -> str:
    """RocketMQ's message_type label of a single send that is not transactional
    (BrokerMetricsManager.getMessageType: a sharding key makes it fifo before a
    delivery time makes it delay); `delayed`: it has a delay or timer key."""
    if _has_key(properties, props.SHARDING_KEY):
        return FIFO
    return DELAY if delayed else NORMAL


def _property(properties: str, key: str) -> str | None:
    if not _has_key(properties, key):
        return None
    return props.decode_properties(properties).get(key)


def waits_for_store(properties: str) -> bool:
    """Whether the sender of a message (or batch) with these properties waits
    for it to be durable: its WAIT property as Java's `isWaitStoreMsgOK`
    reads it (the batch's header properties, for a batch)."""
    return props.wait_store_msg_ok(_property(properties, props.WAIT))


def _well_formed_properties(raw: str) -> str:
    """`raw` as stored: kept as sent when every item is `key\\x01value\\x02`,
    otherwise normalized the way decoding reads it (odd items dropped)."""
    if not raw:
        return raw
    if (
        raw.endswith(props.PROPERTY_SEPARATOR)
        and raw.count(props.NAME_VALUE_SEPARATOR) == raw.count(props.PROPERTY_SEPARATOR)
        and not raw.startswith(props.NAME_VALUE_SEPARATOR)
        and "\x02\x01" not in raw
    ):
        return raw
    return props.encode_properties(props.decode_properties(raw))


class SendProcessor:
    """Sending, send-back and recall (see the module docstring)."""

    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        stats: BrokerStats,
        *,
        scheduler: DelayHooks | None,
        timers: TimerHooks | None,
        transactions: TransactionHooks | None,
        max_message_size: int = MAX_MESSAGE_SIZE,
        permission: BrokerPermission | None = None,
    ) -> None:
        self.config = config
        self.permission = permission
        """brokerPermission: sends to ordered topics are refused without the write bit."""
        self.store = store
        self.topics = topics
        self.groups = groups
        self.stats = stats
        self.scheduler = scheduler
        """Delay levels; None stores a message with a delay level at once."""
        self.timers = timers
        """Timer messages; None refuses nothing but parks nothing."""
        self.transactions = transactions
        """Transactional messages; None refuses half messages."""
        self.max_message_size = max_message_size
        self.delay_levels_ms = parse_delay_levels(config.delay_levels)
        self._valid_topics: set[str] = set()
        """Topic names `validate_topic_name` accepted (a busy broker sees few)."""
        self._slave = config.broker_role is BrokerRole.SLAVE
        self._stamp = send_stamp(config.region_id, config.trace_on)
        self._stamp_bytes = self._stamp.encode()
        self._trace_on = "true" if config.trace_on else "false"

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.SEND_MESSAGE: self.handle_send_message,
            RequestCode.SEND_MESSAGE_V2: self.handle_send_message,
            RequestCode.SEND_BATCH_MESSAGE: self.handle_send_message,
            RequestCode.TIDEMQ_SEND_HALF_BATCH: self.handle_send_message,
            RequestCode.CONSUMER_SEND_MSG_BACK: self.handle_consumer_send_msg_back,
            RequestCode.RECALL_MESSAGE: self.handle_recall_message,
        }

    # -- remoting ------------------------------------------------------------------------

    async def handle_send_message(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header: SendMessageRequestHeader = decode_send_message_header(
            request.code, request.ext_fields
        )
        born = connection.attributes.get(_BORN_ADDRESS)
        if born is None:  # once per connection: not a cache lookup per send
            born = connection.attributes[_BORN_ADDRESS] = born_address(connection.remote)
        born_host, born_port = cast(tuple[bytes, int], born)
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
            result = await self.send_half_batch(send)
        elif request.code == RequestCode.SEND_BATCH_MESSAGE or header.batch:
            result = await self.send_batch(send)
        else:
            result = await self.send(send)
        # SendMessageResponseHeader written directly: the generic encoder is a
        # measurable share of a single-message send.
        ext = {
            "msgId": result.msg_id,
            "queueId": str(result.queue_id),
            "queueOffset": str(result.queue_offset),
            "MSG_REGION": self.config.region_id,
            "TRACE_ON": self._trace_on,
        }
        if result.transaction_id is not None:
            ext["transactionId"] = result.transaction_id
        if result.recall_handle is not None:
            ext["recallHandle"] = result.recall_handle
        # What `response_to` builds, without its defensive copy of `ext`.
        return RemotingCommand(
            result.code,
            DEFAULT_LANGUAGE,
            DEFAULT_VERSION,
            request.opaque,
            RESPONSE_FLAG,
            result.remark,
            ext,
            b"",
            request.serialize_type,
        )

    async def handle_consumer_send_msg_back(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(ConsumerSendMsgBackRequestHeader, request.ext_fields)
        await self.consumer_send_back(
            header.offset, header.group, header.delay_level, header.max_reconsume_times
        )
        return ok(request)

    async def handle_recall_message(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(RecallMessageRequestHeader, request.ext_fields)
        msg_id = await self.recall_message(
            header.topic, header.recall_handle, header.producer_group
        )
        ext = encode_header(RecallMessageResponseHeader(msg_id=msg_id))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, ext)

    # -- send ------------------------------------------------------------------------------

    def _refuse_on_slave(self) -> None:
        """A slave takes no sends: checked first, before the topic tables
        (which a slave copies from its master) can answer anything else."""
        if self._slave:
            raise BrokerError(
                ResponseCode.SERVICE_NOT_AVAILABLE,
                SLAVE_SEND_REMARK.format(name=self.config.broker_name, id=self.config.broker_id),
            )

    def _send_topic(self, request: SendRequest) -> TopicConfig:
        """msgCheck: topic name, permission, existence (auto-creation)."""
        if self._slave:
            self._refuse_on_slave()
        topic = request.topic
        if topic not in self._valid_topics:
            problem = validate_topic_name(topic)
            if problem is not None:
                raise BrokerError(ResponseCode.MESSAGE_ILLEGAL, problem)
            if len(self._valid_topics) >= _VALID_TOPICS_LIMIT:
                self._valid_topics.clear()
            self._valid_topics.add(topic)
        if is_not_allowed_send_topic(topic):
            raise BrokerError(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        config = self.topics.get(topic)
        if config is None:
            config = self.topics.create_in_send(
                topic, request.default_topic, request.default_topic_queue_nums
            )
            if config is None and is_retry_topic(topic):
                config = self.topics.ensure_retry_topic(retry.group_of(topic) or "")
            if config is None:
                raise BrokerError(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please!",
                )
        if config.order and self.permission is not None:  # ordered topics only, as Java
            self.permission.check_ordered_send(config.order)
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

    def _with_cluster(self, properties: str) -> str:
        if _has_key(properties, props.CLUSTER):
            return properties
        return _append_property(properties, props.CLUSTER, self.config.cluster_name)

    def _stored_properties(self, properties: str) -> str:
        """A sent message's properties as stored: the broker's CLUSTER when it
        has none, then the send stamp (`send_stamp`). The batch encoders
        (record.batch_append, record.transaction_records) build the same text."""
        return stamped(self._with_cluster(properties), self._stamp)

    async def send(self, request: SendRequest) -> SendResult:
        """Store one message (SEND_MESSAGE / SEND_MESSAGE_V2)."""
        config = self._send_topic(request)
        queue_id = self._queue_for_send(request, config)
        self._check_body(request.body)
        if config.attributes:
            check_message_type(
                config.topic_name, config.attributes, props.decode_properties(request.properties)
            )
        acted_on = _ACTED_ON.search(request.properties) is not None
        transactional = (
            request.sys_flag & sysflag.TRANSACTION_MASK == sysflag.TRANSACTION_PREPARED_TYPE
            or (acted_on and self._is_transactional(request.properties, request.sys_flag))
        )
        if transactional and self.transactions is None:
            raise BrokerError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_name}] sending transaction message is forbidden",
            )
        topic = request.topic
        to_dlq = False
        if is_retry_topic(topic):
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
        wait = waits_for_store(request.properties)
        if transactional and self.transactions is not None:
            message = self.transactions.prepare(message, request.producer_group)
            message.wait_store = wait
            result = await self.store.put_message(message)
            sent = self._send_result(
                result, message.topic, queue_id, len(request.body), TRANSACTION
            )
            self.transactions.halves_stored(topic)
            sent.transaction_id = _property(request.properties, props.UNIQ_KEY)
            return sent
        level = 0 if to_dlq or not acted_on else self._delay_level(request.properties)
        timers = self.timers
        parked = None
        if level > 0 and self.scheduler is not None:
            message = self.scheduler.schedule(message, level)
        elif (
            acted_on
            and not to_dlq
            and timers is not None
            and _has_timer_property(request.properties)
        ):
            parked = timers.park(message)
            if parked is not None:
                message = parked[0]
        message.wait_store = wait
        result = await self.store.put_message(message)
        kind = _message_type(
            request.properties,
            acted_on
            and (
                _has_key(request.properties, props.DELAY) or _has_timer_property(request.properties)
            ),
        )
        sent = self._send_result(result, message.topic, queue_id, len(request.body), kind)
        if to_dlq:  # stored (_send_result raises otherwise)
            self.stats.record_dead_letter(
                retry.group_of(request.topic) or "",
                _property(request.properties, props.RETRY_TOPIC) or request.topic,
            )
        if parked is not None and timers is not None:
            timers.parked_stored(topic)
            sent.recall_handle = timers.recall_handle(topic, message, parked[1])
        return sent

    def _send_result(
        self, result: PutResult, topic: str, queue_id: int, size: int, kind: str = NORMAL
    ) -> SendResult:
        """The answer to a single send; a stored one counts as a put of `topic`
        (where it was stored) of message type `kind`."""
        if result.status is PutStatus.PUT_OK:
            self.stats.record_put(topic, 1, size, kind)
            return SendResult(ResponseCode.SUCCESS, result.msg_id, queue_id, result.queue_offset)
        code = _STORED_CODES.get(result.status)
        if code is not None:
            self.stats.record_put(topic, 1, size, kind)
            return SendResult(
                code, result.msg_id, queue_id, result.queue_offset, result.remark or None
            )
        raise _put_failure(result)

    def _batch_entries(self, request: SendRequest) -> tuple[TopicConfig, int, list[BatchEntry]]:
        """The topic, queue and entries of a batch request, checked (not a retry
        topic, a well-formed, non-empty body)."""
        if is_retry_topic(request.topic):
            raise BrokerError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"batch request does not support retry group {request.topic}",
            )
        config = self._send_topic(request)
        queue_id = self._queue_for_send(request, config)
        self._check_body(request.body, "the batch body")
        try:
            entries = split_batch(request.body)
        except ProtocolError as exc:
            raise BrokerError(
                ResponseCode.MESSAGE_ILLEGAL, f"malformed batch body: {exc}"
            ) from None
        if not entries:
            raise BrokerError(ResponseCode.MESSAGE_ILLEGAL, "the batch is empty")
        return config, queue_id, entries

    async def send_batch(self, request: SendRequest) -> SendResult:
        """Store a batch (SEND_BATCH_MESSAGE): all or nothing, consecutive offsets."""
        stored = await self._send_batch_body(request)
        if stored is not None:
            return stored
        config, queue_id, entries = self._batch_entries(request)
        if sysflag.transaction_value(request.sys_flag) == sysflag.TRANSACTION_PREPARED_TYPE:
            raise BrokerError(
                ResponseCode.MESSAGE_ILLEGAL,
                "a batch cannot be transactional: send each transactional message on its own",
            )
        to_store = []
        topic = request.topic
        sys_flag = request.sys_flag & ~sysflag.TRANSACTION_MASK
        born_timestamp, born_host, born_port = (
            request.born_timestamp,
            request.born_host,
            request.born_port,
        )
        stored_properties = self._stored_properties
        wait = waits_for_store(request.properties)
        for position, entry in enumerate(entries):
            raw = _well_formed_properties(entry.properties)
            if config.attributes:
                check_message_type(
                    config.topic_name, config.attributes, props.decode_properties(raw)
                )
            if _has_key(raw, props.TRAN_MSG) or _has_key(raw, props.DELAY):
                parsed = props.decode_properties(raw)
                if parsed.get(props.TRAN_MSG) == "true":
                    raise BrokerError(
                        ResponseCode.MESSAGE_ILLEGAL,
                        f"message {position} of the batch is transactional; batches cannot be",
                    )
                if parsed.get(props.DELAY, "0") not in ("", "0"):
                    raise BrokerError(
                        ResponseCode.MESSAGE_ILLEGAL,
                        f"message {position} of the batch has a delay level; batches cannot",
                    )
            if _has_timer_property(raw):
                raise BrokerError(
                    ResponseCode.MESSAGE_ILLEGAL,
                    f"message {position} of the batch has a delivery time; batches cannot",
                )
            to_store.append(
                MessageToStore(
                    topic,
                    queue_id,
                    entry.body,
                    stored_properties(raw),
                    entry.flag,
                    sys_flag,
                    born_timestamp,
                    born_host,
                    born_port,
                    wait_store=wait,
                )
            )
        batch = await self.store.put_messages(to_store)
        if not batch.results:
            raise _put_failure(PutResult(batch.status, remark=batch.remark))
        first = batch.results[0]
        if batch.status not in _STORED_CODES:
            raise _put_failure(first)
        self.stats.record_put(request.topic, len(batch.results), len(request.body))
        msg_ids = ",".join(r.msg_id for r in batch.results)
        code = _STORED_CODES[batch.status]
        return SendResult(code, msg_ids, queue_id, first.queue_offset, batch.remark or None)

    async def _send_batch_body(self, request: SendRequest) -> SendResult | None:
        """The common batch in one store call from its body (no object per
        message); None when it needs the general path (a retry topic, a
        transactional flag, message-type attributes on the topic, or whatever
        the store's batch encoder declines: see `tidemq.record.batch_append`)."""
        if is_retry_topic(request.topic) or (
            sysflag.transaction_value(request.sys_flag) == sysflag.TRANSACTION_PREPARED_TYPE
        ):
            return None
        config = self._send_topic(request)
        if config.attributes:
            return None
        queue_id = self._queue_for_send(request, config)
        self._check_body(request.body, "the batch body")
        cluster = self.config.cluster_name
        result = await self.store.put_batch(
            BatchToStore(
                request.topic,
                queue_id,
                request.body,
                request.sys_flag & ~sysflag.TRANSACTION_MASK,
                request.born_timestamp,
                request.born_host,
                request.born_port,
                f"{props.CLUSTER}\x01{cluster}\x02".encode(),
                self._stamp_bytes,
                waits_for_store(request.properties),
            )
        )
        if result is None:
            return None
        if result.status not in _STORED_CODES:
            raise _put_failure(PutResult(result.status, remark=result.remark))
        self.stats.record_put(request.topic, result.count, len(request.body))
        code = _STORED_CODES[result.status]
        return SendResult(
            code, result.msg_ids, queue_id, result.queue_offset, result.remark or None
        )

    async def send_half_batch(self, request: SendRequest) -> SendResult:
        """Store every message of a batch body as a transactional half, in one
        append (TIDEMQ_SEND_HALF_BATCH, a tidemq extension: RocketMQ refuses
        transactional batches). The halves wait in the half queue with
        consecutive offsets, as if sent one by one; `msg_id` joins their
        offset message ids, `queue_offset` is the first one's half-queue offset."""
        if self.transactions is None:
            raise BrokerError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_name}] sending transaction message is forbidden",
            )
        stored = await self._send_half_batch_body(request)
        if stored is not None:
            return stored
        config, queue_id, entries = self._batch_entries(request)
        sys_flag = request.sys_flag & ~sysflag.TRANSACTION_MASK
        halves = []
        for entry in entries:
            raw = _well_formed_properties(entry.properties)
            if config.attributes:
                check_message_type(
                    config.topic_name, config.attributes, props.decode_properties(raw)
                )
            message = MessageToStore(
                request.topic,
                queue_id,
                entry.body,
                self._stored_properties(raw),
                entry.flag,
                sys_flag,
                request.born_timestamp,
                request.born_host,
                request.born_port,
            )
            halves.append(self.transactions.prepare(message, request.producer_group))
        batch = await self.store.put_messages(halves)
        if not batch.results:
            raise _put_failure(PutResult(batch.status, remark=batch.remark))
        if batch.status not in _STORED_CODES:
            raise _put_failure(batch.results[0])
        self.stats.record_put(TRANS_HALF_TOPIC, len(batch.results), len(request.body), TRANSACTION)
        self.transactions.halves_stored(request.topic, len(batch.results))
        code = _STORED_CODES[batch.status]
        msg_ids = ",".join(r.msg_id for r in batch.results)
        return SendResult(
            code, msg_ids, queue_id, batch.results[0].queue_offset, batch.remark or None
        )

    async def _send_half_batch_body(self, request: SendRequest) -> SendResult | None:
        """The half batch in one store call from its body (`HalfBatch`: the
        same records as `send_half_batch` stores through one MessageToStore
        per half); None when it needs that path: a retry topic, message-type
        attributes on the topic, or whatever the encoder declines."""
        if is_retry_topic(request.topic):
            return None
        config = self._send_topic(request)
        if config.attributes:
            return None
        queue_id = self._queue_for_send(request, config)
        self._check_body(request.body, "the batch body")
        halves = HalfBatch(request, queue_id, self.config.cluster_name, self._stamp_bytes)
        result = await self.store.put_run(halves)
        if result is None:
            return None
        if result.status not in _STORED_CODES:
            raise _put_failure(PutResult(result.status, remark=result.remark))
        self.stats.record_put(TRANS_HALF_TOPIC, result.count, len(request.body), TRANSACTION)
        if self.transactions is not None:
            self.transactions.halves_stored(request.topic, result.count)
        code = _STORED_CODES[result.status]
        return SendResult(
            code, halves.msg_ids, queue_id, halves.first_queue_offset, result.remark or None
        )

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
        self._refuse_on_slave()
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
                ResponseCode.SYSTEM_ERROR, f"topic[{retry_topic_of(group)}] not exist"
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
                    f"the topic[{dlq_topic_of(group)}] sending message is forbidden",
                )
            log.info("message at %d of group %s moved to %s", offset, group, message.topic)
        else:
            level = min(level, len(self.delay_levels_ms))
            if self.scheduler is not None:
                message = self.scheduler.schedule(message, level)
        # A copy of a stored message keeps its MSG_REGION / TRACE_ON: Java's
        # consumerSendMsgBack copies the properties and is not stamped
        # (processRequest returns before buildMsgContext for it).
        message.properties = self._with_cluster(message.properties)
        result = await self.store.put_message(message)
        if result.status not in _STORED_CODES:
            raise _put_failure(result)
        self.stats.record_put(message.topic, 1, len(message.body))
        if level == 0:
            origin = record.properties.get(props.RETRY_TOPIC) or record.topic
            self.stats.record_dead_letter(group, origin)

    # -- recall --------------------------------------------------------------------------

    async def recall_message(self, topic: str, handle: str, producer_group: str | None) -> str:
        """RECALL_MESSAGE: cancel a timer message before it is due; its msg id."""
        if self.timers is None:
            raise BrokerError(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
        if self.topics.get(topic) is None:
            raise BrokerError(
                ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{topic}] not exist"
            )
        return await self.timers.recall(topic, handle, producer_group)
