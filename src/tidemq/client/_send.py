"""The producer's send codec (sans-IO): message checks, compression, unique
ids, the SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE request and the answer read
back as a SendResult.

Checks follow Java's `Validators.checkMessage` and `DefaultMQProducer.batch`
and happen before anything touches the network, so a bad message costs no
round trip and names its problem (ClientError MESSAGE_ILLEGAL). Compression
and header layout follow `DefaultMQProducerImpl.sendKernelImpl`: zlib level 5
for a single body of at least `compress_over_bytes`, never for batches.

The header of one send is a constant part (group, topic, template topic...)
computed once per topic and the per-message part (queue, born time, flags,
properties) filled in per attempt, so the hot path is a dict merge, not a
dataclass round trip; tests pin it to `encode_header` of the typed header.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tidemq.client._send_frame import SendCommand
from tidemq.client.errors import ClientError
from tidemq.client.model import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    QueueData,
    SendResult,
    SendStatus,
    TopicRoute,
)
from tidemq.client.timing import DeliverAfter, DeliverAt, timer_properties
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.message import MAX_MESSAGE_SIZE, Message, MessageQueue
from tidemq.common.names import is_retry_topic
from tidemq.protocol import RemotingCommand, RequestCode, ResponseCode
from tidemq.protocol.codes import response_code_name
from tidemq.protocol.headers import SendMessageRequestHeaderV2, encode_header
from tidemq.record.codec import MAX_PROPERTIES_LENGTH
from tidemq.record.records import batch_unique_ids, encode_batch

__all__ = [
    "COMPRESS_LEVEL",
    "DEFAULT_COMPRESS_OVER_BYTES",
    "DEFAULT_PRODUCER_GROUP",
    "DEFAULT_TOPIC",
    "DEFAULT_TOPIC_QUEUE_NUMS",
    "NOT_ALLOWED_SEND_TOPICS",
    "RETRY_ON_CODES",
    "PreparedSend",
    "SendCodec",
    "check_topic",
    "make_message",
    "route_from_template",
    "send_error",
    "send_result",
    "topic_problem",
]

DEFAULT_TOPIC = "TBW102"
"""AUTO_CREATE_TOPIC_KEY_TOPIC: the template route of topics a broker creates on first send."""
DEFAULT_TOPIC_QUEUE_NUMS = 4
DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
DEFAULT_COMPRESS_OVER_BYTES = 4096
COMPRESS_LEVEL = 5
"""Java's default `rocketmq.message.compressLevel`."""
TOPIC_MAX_LENGTH = 127

NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        "SCHEDULE_TOPIC_XXXX",
        "SCHEDULE_TOPIC_XXXX_V2",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        DEFAULT_TOPIC,
    }
)
"""Topics a user message may not go to (TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET,
plus the TBW102 template itself, which only exists to be copied)."""

RETRY_ON_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)
"""Broker answers a sync send retries on another broker (Java `retryResponseCodes`)."""

_STATUS_BY_CODE: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
"""The answers that mean stored (Java MQClientAPIImpl.processSendResponse)."""
_VALID_TOPIC = re.compile(r"[%|a-zA-Z0-9_-]+")
_SEPARATORS = (props.NAME_VALUE_SEPARATOR, props.PROPERTY_SEPARATOR)


# -- checks -----------------------------------------------------------------------


def topic_problem(topic: object) -> str | None:
    """Why `topic` cannot take a user message, or None (TopicValidator rules)."""
    if not isinstance(topic, str) or not topic.strip():
        return "the topic is blank"
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"the topic is {len(topic)} characters long, more than {TOPIC_MAX_LENGTH}"
    if _VALID_TOPIC.fullmatch(topic) is None:
        shown = topic if len(topic) <= 64 else topic[:61] + "..."
        return f"the topic {shown!r} contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if topic in NOT_ALLOWED_SEND_TOPICS:
        return f"sending to the system topic {topic} is forbidden"
    return None


def check_topic(topic: object) -> str:
    """`topic` if a user message may be sent to it, else ClientError MESSAGE_ILLEGAL."""
    problem = topic_problem(topic)
    if problem is not None:
        raise ClientError(f"invalid message: {problem}", ResponseCode.MESSAGE_ILLEGAL)
    assert isinstance(topic, str)
    return topic


def _illegal(topic: str, problem: str) -> ClientError:
    return ClientError(
        f"invalid message for topic {topic}: {problem}", ResponseCode.MESSAGE_ILLEGAL
    )


def make_message(
    topic: str,
    body: bytes | bytearray | str,
    *,
    tags: str | None = None,
    keys: str | Sequence[str] | None = None,
    properties: Mapping[str, str] | None = None,
    delay_level: int = 0,
    flag: int = 0,
    deliver_at: DeliverAt | None = None,
    deliver_after: DeliverAfter | None = None,
) -> Message:
    """A Message with user properties checked as Java's `putUserProperty` does:
    reserved names (TAGS, KEYS, UNIQ_KEY, ...) and separator characters are
    refused with ValueError. A str body is encoded as UTF-8.

    `deliver_at` (aware datetime or epoch ms) or `deliver_after` (timedelta or
    seconds) make it a timer message (see `tidemq.client.timing`); not with a
    delay level."""
    message = Message(topic, body.encode() if isinstance(body, str) else bytes(body), flag=flag)
    if not (properties or tags or keys or delay_level) and deliver_at is deliver_after is None:
        return message  # the common case: a body and nothing else to check
    for key, value in (properties or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(f"property {key!r}: names and values must be str")
        if key in props.SYSTEM_KEYS:
            raise ValueError(f"property {key} is reserved by RocketMQ; choose another name")
        if not key.strip() or not value:
            raise ValueError(f"property {key!r}: name and value must not be blank")
        if any(sep in key or sep in value for sep in _SEPARATORS):
            raise ValueError(f"property {key!r} contains a \\x01 or \\x02 separator character")
        message.properties[key] = value
    if tags:
        message.tags = tags
    if keys:
        message.keys = keys
    if delay_level:
        if not isinstance(delay_level, int) or delay_level < 0:
            raise ValueError(f"delay level must be a non-negative int, got {delay_level!r}")
        message.delay_level = delay_level
    timer = timer_properties(deliver_at, deliver_after)
    if timer and delay_level:
        raise ValueError("a message has a delay level or a delivery time, not both")
    message.properties.update(timer)
    return message


# -- prepared sends ---------------------------------------------------------------


@dataclass(slots=True)
class PreparedSend:
    """One checked, encoded send: what goes on the wire except queue and born time."""

    topic: str
    code: int
    """RequestCode.SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE."""
    body: bytes
    msg_id: str
    """UNIQ_KEY of the message; for a batch every message's, joined by ","."""
    fields: dict[str, str]
    """Header fields except "e" (queue id) and "g" (born timestamp)."""
    count: int = 1

    def request(self, queue_id: int, born_ms: int) -> RemotingCommand:
        """The request for one attempt at `queue_id`."""
        fields = self.fields.copy()
        fields["e"] = str(queue_id)
        fields["g"] = str(born_ms)
        return SendCommand(code=self.code, ext_fields=fields, body=self.body)


class SendCodec:
    """Checks and encodes the messages of one producer group.

    `unique_id` makes UNIQ_KEY values (a `UniqueIdGenerator.next_id`); a
    message that already has one keeps it (so a re-sent Message keeps its id,
    as in Java, where the id is set on the caller's message).
    """

    def __init__(
        self,
        group: str,
        unique_id: Callable[[], str],
        *,
        compress_over_bytes: int = DEFAULT_COMPRESS_OVER_BYTES,
        max_message_size: int = MAX_MESSAGE_SIZE,
        default_topic: str = DEFAULT_TOPIC,
        default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
    ) -> None:
        if compress_over_bytes < 0:
            raise ValueError("compress_over_bytes must not be negative")
        if max_message_size <= 0:
            raise ValueError("max_message_size must be positive")
        self.group = group
        self.compress_over_bytes = compress_over_bytes
        self.max_message_size = max_message_size
        self.default_topic = default_topic
        self.default_topic_queue_nums = default_topic_queue_nums
        self._unique_id = unique_id
        self._templates: dict[tuple[str, bool], dict[str, str]] = {}

    # -- header templates ---------------------------------------------------------

    def _template(self, topic: str, batch: bool) -> dict[str, str]:
        """The per-topic constant header fields (checked topic: cached)."""
        key = (topic, batch)
        template = self._templates.get(key)
        if template is None:
            check_topic(topic)
            template = encode_header(
                SendMessageRequestHeaderV2(
                    producer_group=self.group,
                    topic=topic,
                    default_topic=self.default_topic,
                    default_topic_queue_nums=self.default_topic_queue_nums,
                    queue_id=0,
                    sys_flag=0,
                    born_timestamp=0,
                    flag=0,
                    reconsume_times=0,
                    unit_mode=False,
                    batch=batch,
                )
            )
            for per_message in ("e", "f", "g", "h"):
                del template[per_message]
            if len(self._templates) > 4096:
                self._templates.clear()
            self._templates[key] = template
        return template

    # -- single messages ----------------------------------------------------------

    def prepare(self, message: Message) -> PreparedSend:
        """Check `message`, give it a UNIQ_KEY if it has none, encode it for sending."""
        if not isinstance(message, Message):
            raise TypeError(f"send takes a tidemq Message, not {type(message).__name__}")
        topic = message.topic
        fields = self._template(topic, False).copy()
        body = message.body
        if not isinstance(body, bytes | bytearray | memoryview):
            raise _illegal(topic, f"the body must be bytes, not {type(body).__name__}")
        body_size = len(body)
        if not body_size:
            raise _illegal(topic, "the message body is empty")
        properties = message.properties
        unique_id = properties.get(props.UNIQ_KEY)
        if not unique_id:
            unique_id = properties[props.UNIQ_KEY] = self._unique_id()
        encoded = props.encode_properties(properties)
        count = len(properties)
        if (
            encoded.count(props.NAME_VALUE_SEPARATOR) != count
            or encoded.count(props.PROPERTY_SEPARATOR) != count
        ):
            raise _separator_problem(topic)
        size = len(encoded)  # its bytes, when ASCII: then one comparison checks both limits
        if not (
            size <= MAX_PROPERTIES_LENGTH
            and body_size + size <= self.max_message_size
            and encoded.isascii()
        ):
            self._check_size(topic, body_size, encoded)
        sys_flag = 0
        if body_size >= self.compress_over_bytes:
            body = zlib.compress(body, COMPRESS_LEVEL)
            sys_flag = sysflag.COMPRESSED
        elif type(body) is not bytes:
            body = bytes(body)
        if properties.get(props.TRAN_MSG) == "true":
            sys_flag |= sysflag.TRANSACTION_PREPARED_TYPE  # a half message (Java sendKernelImpl)
        if is_retry_topic(topic):
            _retry_fields(fields, properties)
        flag = message.flag
        fields["f"] = "0" if sys_flag == 0 else str(sys_flag)
        fields["h"] = "0" if flag == 0 else str(flag)
        fields["i"] = encoded
        return PreparedSend(topic, RequestCode.SEND_MESSAGE_V2, body, unique_id, fields)

    def _check_size(self, topic: str, body_size: int, encoded_properties: str) -> None:
        props_size = len(encoded_properties)
        if not encoded_properties.isascii():
            props_size = len(encoded_properties.encode())
        if props_size > MAX_PROPERTIES_LENGTH:
            raise _illegal(
                topic,
                f"its properties take {props_size} bytes, more than {MAX_PROPERTIES_LENGTH}",
            )
        if body_size + props_size > self.max_message_size:
            raise _illegal(
                topic,
                f"the message is {body_size + props_size} bytes (body {body_size}, properties "
                f"{props_size}), more than the maximum of {self.max_message_size} bytes",
            )

    def check_batchable(self, message: Message) -> None:
        """The checks of `prepare` that a message held for an automatic batch must
        pass on its own, so one bad message fails alone, not its whole batch (Java
        runs Validators.checkMessage before the accumulator)."""
        if not isinstance(message, Message):
            raise TypeError(f"send takes a tidemq Message, not {type(message).__name__}")
        topic = message.topic
        self._template(topic, True)  # checks the topic
        body = message.body
        if not isinstance(body, bytes | bytearray | memoryview):
            raise _illegal(topic, f"the body must be bytes, not {type(body).__name__}")
        if not body:
            raise _illegal(topic, "the message body is empty")
        encoded = props.encode_properties(message.properties)
        count = len(message.properties)
        if (
            encoded.count(props.NAME_VALUE_SEPARATOR) != count
            or encoded.count(props.PROPERTY_SEPARATOR) != count
        ):
            raise _separator_problem(topic)
        self._check_size(topic, len(body), encoded)

    # -- batches --------------------------------------------------------------------

    def prepare_batch(self, messages: Sequence[Message]) -> PreparedSend:
        """Check a batch (one topic, no delay, no retry topic, one WAIT setting)
        and encode it as a SEND_BATCH_MESSAGE; bodies are never compressed."""
        if isinstance(messages, Message) or not messages:
            raise ClientError(
                "a batch needs a non-empty sequence of messages", ResponseCode.MESSAGE_ILLEGAL
            )
        first = messages[0]
        if not isinstance(first, Message):
            raise TypeError(f"send_batch takes tidemq Messages, not {type(first).__name__}")
        topic = first.topic
        fields = self._template(topic, True).copy()
        if is_retry_topic(topic):
            raise _illegal(topic, "a batch cannot go to a retry topic")
        wait = first.wait_store_msg_ok
        ids = batch_unique_ids(messages, topic, wait, self._unique_id)
        if ids is None:  # a message fails a check (or the compiled loop leaves it to this one)
            ids = self._checked_batch_ids(messages, topic, wait)
        try:
            body = encode_batch(messages)
        except (ValueError, TypeError) as exc:
            raise _illegal(topic, f"cannot encode the batch: {exc}") from None
        if len(body) > self.max_message_size:
            raise _illegal(
                topic,
                f"the batch is {len(body)} bytes, more than the maximum of "
                f"{self.max_message_size} bytes; split it",
            )
        batch_props = {props.WAIT: "true" if wait else "false"}
        fields["f"] = "0"
        fields["h"] = "0"
        fields["i"] = props.encode_properties(batch_props)
        return PreparedSend(
            topic, RequestCode.SEND_BATCH_MESSAGE, body, ",".join(ids), fields, len(ids)
        )

    def _checked_batch_ids(self, messages: Sequence[Message], topic: str, wait: bool) -> list[str]:
        """The batch checks one message at a time, raising the first problem;
        else the UNIQ_KEY of every message (made where missing), as
        `batch_unique_ids` gives them."""
        ids: list[str] = []
        for index, message in enumerate(messages):
            if not isinstance(message, Message):
                raise TypeError(f"send_batch takes tidemq Messages, not {type(message).__name__}")
            if message.topic != topic:
                raise _illegal(
                    topic,
                    f"message {index} of the batch is for topic {message.topic!r}; "
                    "all messages of a batch must have the same topic",
                )
            if message.properties.get(props.DELAY, "0") not in ("", "0"):
                raise _illegal(topic, f"message {index} has a delay level; batches cannot")
            if message.wait_store_msg_ok != wait:
                raise _illegal(topic, "the messages of a batch must share one WAIT setting")
            if not message.body:
                raise _illegal(topic, f"message {index} of the batch has an empty body")
            unique_id = message.properties.get(props.UNIQ_KEY)
            if not unique_id:
                unique_id = message.properties[props.UNIQ_KEY] = self._unique_id()
            ids.append(unique_id)
        return ids


def _separator_problem(topic: str) -> ClientError:
    """One \\x01 and one \\x02 per property is expected, else a name or value holds
    a separator and the broker would read different properties than were set."""
    return _illegal(topic, "a property name or value contains a \\x01 or \\x02 character")


def _retry_fields(fields: dict[str, str], properties: Mapping[str, str]) -> None:
    """A send to a retry topic carries the reconsume counters in the header (as Java)."""
    reconsume = properties.get(props.RECONSUME_TIME)
    if reconsume and reconsume.lstrip("-").isdigit():
        fields["j"] = reconsume
    max_times = properties.get(props.MAX_RECONSUME_TIMES)
    if max_times and max_times.lstrip("-").isdigit():
        fields["l"] = max_times


# -- answers ------------------------------------------------------------------------


def send_error(response: RemotingCommand, topic: str, broker_name: str) -> ClientError:
    """The ClientError of a refused send: the broker's code and remark, readably."""
    remark = (response.remark or "").strip().splitlines()
    reason = remark[0] if remark else "no reason given"
    return ClientError(
        f"send to topic {topic} failed on broker {broker_name}: {reason} "
        f"({response_code_name(response.code)})",
        response.code,
    )


def send_result(
    response: RemotingCommand, prepared: PreparedSend, queue: MessageQueue
) -> SendResult:
    """The SendResult of an answer, or the ClientError it stands for."""
    status = _STATUS_BY_CODE.get(response.code)
    if status is None:
        raise send_error(response, prepared.topic, queue.broker_name)
    fields = response.ext_fields
    try:
        offset_msg_id = str(fields["msgId"])
        queue_id = int(fields["queueId"])
        queue_offset = int(fields["queueOffset"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ClientError(
            f"malformed send answer from broker {queue.broker_name}: missing or bad {exc}",
            ResponseCode.SYSTEM_ERROR,
        ) from None
    transaction_id = fields.get("transactionId")
    recall_handle = fields.get("recallHandle")
    region = fields.get(props.MSG_REGION)
    return SendResult(  # positional: the hot path of every send
        status,
        prepared.msg_id,
        offset_msg_id,
        prepared.topic,
        queue.broker_name,
        queue_id,
        queue_offset,
        None if transaction_id is None else _optional_text(transaction_id),
        None if recall_handle is None else _optional_text(recall_handle),
        None if region is None else _optional_text(region),
        fields.get(props.TRACE_ON) != "false",  # Java: !"false".equals(traceOn)
    )


def _optional_text(value: object) -> str | None:
    return None if value in (None, "") else str(value)


# -- routes -------------------------------------------------------------------------


def route_from_template(topic: str, template: TopicRoute, queue_nums: int) -> TopicRoute:
    """The route a producer uses for a topic the name server does not know yet:
    the inheritable queues of the TBW102 template, at most `queue_nums` per
    broker (Java's `updateTopicRouteInfoFromNameServer(topic, true, producer)`).
    Sending there makes such a broker create the topic."""
    return TopicRoute(
        topic,
        tuple(
            QueueData(
                q.broker_name,
                min(queue_nums, q.read_queue_nums),
                min(queue_nums, q.write_queue_nums),
                q.perm & (PERM_READ | PERM_WRITE),
            )
            for q in template.queue_datas
            if q.perm & PERM_INHERIT
        ),
        template.broker_datas,
    )
