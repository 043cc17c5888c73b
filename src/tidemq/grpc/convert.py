"""apache.rocketmq.v2 messages <-> tidemq's records: pure functions, no I/O.

The gRPC front door is a translation: a v2 `Message` becomes the same
properties a remoting producer would send (TAGS, KEYS, UNIQ_KEY, the message
group as `__SHARDINGKEY`, the delivery time as TIMER_DELIVER_MS, TRAN_MSG and
PGROUP for a half message), so every broker rule applies once; a stored
record becomes a delivered `Message` with what the official clients need
(body encoding IDENTITY, an MD5 digest, a receipt handle, delivery attempt
>= 1). Broker refusals map to v2 `Code`s here, and where the Java proxy has
a text for a refusal, the status carries that text: clients match on it.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from rocketmq.grpc_protocol import definition_pb2 as pb

from tidemq.broker.groups import SYSTEM_GROUP_PREFIX
from tidemq.broker.pop.api import ReceiptHandleError
from tidemq.broker.requests import BrokerError
from tidemq.broker.topics import is_system_topic
from tidemq.common import properties as props
from tidemq.common.message import MessageExt
from tidemq.common.message_id import decode_offset_message_id
from tidemq.common.names import ALLOWED, GROUP_MAX_LENGTH, TOPIC_MAX_LENGTH
from tidemq.protocol.codes import ResponseCode
from tidemq.timer import TIMER_SOURCE_OFFSET

Code = pb.Code
MessageType = pb.MessageType

SYSTEM_KEYS = props.SYSTEM_KEYS | {TIMER_SOURCE_OFFSET}
"""Property names that are not user properties: RocketMQ's
`MessageConst.STRING_HASH_SET` exactly (the proxy refuses them in a sent
message's user_properties, SendMessageActivity.java:207-210, and leaves them
out of a delivered one's, GrpcConverter.java:108-119), plus tidemq's own
timer bookkeeping, which a RocketMQ broker never stores."""

FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
"""FAQUrl.DEFAULT_FAQ_URL, which RocketMQ appends to its client exceptions' texts."""

_LEGAL_NAME = re.compile(ALLOWED)
_SHOWN = 255
"""A refused name is shown up to this long (Java shows it whole)."""


class ConvertError(Exception):
    """A request the v2 rules refuse before the broker sees it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status(code: int = Code.OK, message: str | None = None) -> pb.Status:
    """A v2 status; the text defaults to the code's name, as the proxy's
    ResponseBuilder.buildStatus(code, code.name()) does."""
    return pb.Status(code=code, message=Code.Name(code) if message is None else message)


def topic_not_found(topic: str) -> ConvertError:
    """TOPIC_NOT_FOUND with the proxy's text for a topic without a route: the
    message of its MQClientException(TOPIC_NOT_EXIST = 17, ...)
    (TopicRouteService.java:207-213, MQClientException.java:33-38,
    FAQUrl.java:62-75; ResponseBuilder.java:75-77 answers it whole)."""
    return ConvertError(
        Code.TOPIC_NOT_FOUND,
        f"CODE: 17  DESC: No topic route info in name server for the topic: {topic}\n"
        f"For more information, please visit the url, {FAQ_URL}",
    )


def millis_of(timestamp: Timestamp) -> int:
    return timestamp.seconds * 1000 + timestamp.nanos // 1_000_000


def timestamp_of(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def duration_ms(duration: Duration) -> int:
    return duration.seconds * 1000 + duration.nanos // 1_000_000


def duration_of(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


# -- send ------------------------------------------------------------------------------


def message_type_of(message: pb.Message) -> int:
    """The type the client declared, or the one its fields imply."""
    system = message.system_properties
    if system.message_type:
        return int(system.message_type)
    if system.HasField("message_group"):
        return MessageType.FIFO
    if system.HasField("delivery_timestamp"):
        return MessageType.DELAY
    return MessageType.NORMAL


def send_properties(message: pb.Message, producer_group: str) -> dict[str, str]:
    """The remoting properties of a v2 message (what the broker stores)."""
    system = message.system_properties
    properties = dict(message.user_properties)
    for key in properties:
        if key in SYSTEM_KEYS:
            raise ConvertError(
                Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}"
            )
    if system.HasField("tag") and system.tag:
        properties[props.TAGS] = system.tag
    if system.keys:
        properties[props.KEYS] = props.KEY_SEPARATOR.join(system.keys)
    if system.trace_context:  # an OpenTelemetry traceparent, kept for the consumer (as the proxy)
        properties[props.TRACE_CONTEXT] = system.trace_context
    if not system.message_id.strip():
        raise ConvertError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    properties[props.UNIQ_KEY] = system.message_id
    kind = message_type_of(message)
    if kind == MessageType.FIFO:
        if not system.message_group:
            raise ConvertError(Code.ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a message group")
        properties[props.SHARDING_KEY] = system.message_group
    elif system.HasField("message_group"):
        raise ConvertError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"a message group is only allowed on FIFO messages, not {MessageType.Name(kind)}",
        )
    if kind == MessageType.DELAY:
        if not system.HasField("delivery_timestamp"):
            raise ConvertError(
                Code.ILLEGAL_DELIVERY_TIME, "a DELAY message needs a delivery timestamp"
            )
        properties[props.TIMER_DELIVER_MS] = str(millis_of(system.delivery_timestamp))
    elif system.HasField("delivery_timestamp"):
        raise ConvertError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"a delivery timestamp is only allowed on DELAY messages, not {MessageType.Name(kind)}",
        )
    if kind == MessageType.TRANSACTION:
        properties[props.TRAN_MSG] = "true"
        properties[props.PGROUP] = producer_group
    if kind not in (
        MessageType.NORMAL,
        MessageType.FIFO,
        MessageType.DELAY,
        MessageType.TRANSACTION,
    ):
        raise ConvertError(
            Code.UNSUPPORTED, f"message type {MessageType.Name(kind)} is not supported"
        )
    return properties


def decode_legacy_transaction_id(text: str) -> tuple[int, int, str]:
    """(commit-log offset, queue offset, message id) of a transaction id in
    the private form tidemq answered before it answered the UNIQ_KEY
    (base64url of "<offset msg id> <queue offset> <message id>"), so that a
    transaction begun before an upgrade can still be ended after it.
    ConvertError for anything else (a UNIQ_KEY among them)."""
    try:
        padded = text + "=" * (-len(text) % 4)
        offset_msg_id, queue_offset, message_id = (
            base64.urlsafe_b64decode(padded.encode()).decode().split(" ")
        )
        _, _, commit_log_offset = decode_offset_message_id(offset_msg_id)
        return commit_log_offset, int(queue_offset), message_id
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConvertError(
            Code.INVALID_TRANSACTION_ID, f"transaction id {text!r} is invalid: {exc}"
        ) from None


# -- deliver ---------------------------------------------------------------------------


def delivered_type(record: MessageExt) -> int:
    properties = record.properties
    if properties.get(props.SHARDING_KEY):
        return MessageType.FIFO
    if properties.get(props.TIMER_DELIVER_MS) or properties.get("__STARTDELIVERTIME"):
        return MessageType.DELAY
    if properties.get(props.TRAN_MSG) == "true":
        return MessageType.TRANSACTION
    return MessageType.NORMAL


def delivered_message(
    record: MessageExt,
    topic: str,
    *,
    receipt_handle: str | None = None,
    delivery_attempt: int = 1,
    invisible_ms: int | None = None,
) -> pb.Message:
    """A stored record as the official clients expect a delivered message."""
    properties = record.properties
    system = pb.SystemProperties(
        message_id=properties.get(props.UNIQ_KEY) or record.msg_id,
        body_encoding=pb.Encoding.IDENTITY,
        body_digest=pb.Digest(
            type=pb.DigestType.MD5, checksum=hashlib.md5(record.body).hexdigest().upper()
        ),
        message_type=delivered_type(record),
        born_timestamp=timestamp_of(record.born_timestamp),
        born_host=record.born_host.rsplit(":", 1)[0],
        store_timestamp=timestamp_of(record.store_timestamp),
        store_host=record.store_host,
        queue_id=record.queue_id,
        queue_offset=record.queue_offset,
        delivery_attempt=max(1, delivery_attempt),
    )
    tags = properties.get(props.TAGS)
    if tags:
        system.tag = tags
    system.keys.extend(record.keys)
    group = properties.get(props.SHARDING_KEY)
    if group:
        system.message_group = group
    trace_context = properties.get(props.TRACE_CONTEXT)
    if trace_context:
        system.trace_context = trace_context
    deliver_ms = properties.get(props.TIMER_DELIVER_MS)
    if deliver_ms and deliver_ms.isdigit():
        system.delivery_timestamp.CopyFrom(timestamp_of(int(deliver_ms)))
    if receipt_handle is not None:
        system.receipt_handle = receipt_handle
    if invisible_ms is not None:
        system.invisible_duration.CopyFrom(duration_of(invisible_ms))
    return pb.Message(
        topic=pb.Resource(name=topic),
        user_properties=user_properties(properties),
        system_properties=system,
        body=record.body,
    )


def user_properties(properties: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in properties.items() if k not in SYSTEM_KEYS}


# -- errors ----------------------------------------------------------------------------

_BY_RESPONSE_CODE = {
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: Code.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.NO_PERMISSION: Code.FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    ResponseCode.INVALID_PARAMETER: Code.BAD_REQUEST,
    ResponseCode.ILLEGAL_OPERATION: Code.NOT_FOUND,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
}


def code_for(error: BrokerError, context: str = "") -> int:
    """The v2 code of a broker refusal; `context` ("send", "delay", "receive",
    "invisible", "end") picks the precise code where one response code means
    several things."""
    if isinstance(error, ReceiptHandleError):
        return int(Code.INVALID_RECEIPT_HANDLE)
    if type(error).__name__ == "MessageTypeMismatch":
        return int(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)
    remark = error.remark.lower()
    if error.code == ResponseCode.MESSAGE_ILLEGAL:
        if "timer" in remark or "deliver" in remark:
            return int(Code.ILLEGAL_DELIVERY_TIME)
        if "body" in remark and ("maximum" in remark or "large" in remark):
            return int(Code.MESSAGE_BODY_TOO_LARGE)
        if "type" in remark:
            return int(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)
    if error.code == ResponseCode.INVALID_PARAMETER and context == "invisible":
        return int(Code.ILLEGAL_INVISIBLE_TIME)
    if context == "end" and error.code != ResponseCode.SYSTEM_ERROR:
        return int(Code.INVALID_TRANSACTION_ID)
    return int(_BY_RESPONSE_CODE.get(ResponseCode(error.code), Code.INTERNAL_SERVER_ERROR))


def _resources(message: Any) -> Iterator[tuple[str, str]]:
    """("topic" or "group", name) for every Resource the request sets, at any depth."""
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None or descriptor.message_type.GetOptions().map_entry:
            continue
        values = value if descriptor.is_repeated else (value,)
        for item in values:
            if descriptor.message_type.name == "Resource":
                if descriptor.name in ("topic", "group"):
                    yield descriptor.name, item.name
            else:
                yield from _resources(item)


def _shown(name: str) -> str:
    return name if len(name) <= _SHOWN else name[:_SHOWN] + "..."


def topic_problem(topic: str) -> str | None:
    """Why the proxy refuses `topic`, in its words (Validators.checkTopic,
    Validators.java:95-110, and GrpcValidator.validateTopic,
    GrpcValidator.java:54-63), or None."""
    if not topic.strip():
        return "The specified topic is blank"
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}."
    if _LEGAL_NAME.fullmatch(topic) is None:
        return (
            f"The specified topic[{_shown(topic)}] contains illegal characters, "
            f"allowing only {ALLOWED}"
        )
    if is_system_topic(topic):
        return "cannot access system topic"
    return None


def group_problem(group: str) -> str | None:
    """Why the proxy refuses consumer group `group`, in its words
    (Validators.checkGroup, Validators.java:50-64, and
    GrpcValidator.validateConsumerGroup, GrpcValidator.java:69-78), or None."""
    if not group.strip():
        return "the specified group is blank"
    if len(group) > GROUP_MAX_LENGTH:
        return (
            f"the specified group[{_shown(group)}] is longer than group max length: "
            f"{GROUP_MAX_LENGTH}."
        )
    if _LEGAL_NAME.fullmatch(group) is None:
        return (
            f"the specified group[{_shown(group)}] contains illegal characters, "
            f"allowing only {ALLOWED}"
        )
    if group.startswith(SYSTEM_GROUP_PREFIX):
        return "cannot use system consumer group"
    return None


def name_problem(request: Any) -> tuple[int, str] | None:
    """ILLEGAL_TOPIC / ILLEGAL_CONSUMER_GROUP and the reason for a request that
    names a topic or group the proxy refuses (its GrpcValidator)."""
    for kind, name in _resources(request):
        if kind == "topic":
            problem = topic_problem(name)
            if problem is not None:
                return Code.ILLEGAL_TOPIC, problem
        else:
            problem = group_problem(name)
            if problem is not None:
                return Code.ILLEGAL_CONSUMER_GROUP, problem
    return None
