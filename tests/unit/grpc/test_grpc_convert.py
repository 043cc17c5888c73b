"""The v2 <-> tidemq translation: properties of each message type, RocketMQ's
system property names (refused on send, hidden on delivery), the legacy
transaction id decoder (old ids still read, UNIQ_KEYs and forgeries refused),
delivered messages carrying what the official clients need, settings
replies, code mapping, the proxy's texts for refused names and unknown
topics."""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from tidemq.broker.message_types import MessageTypeMismatch, TopicMessageType
from tidemq.broker.pop.api import ReceiptHandleError
from tidemq.broker.requests import BrokerError
from tidemq.common import properties as props
from tidemq.common.message import MessageExt
from tidemq.common.message_id import offset_message_id
from tidemq.grpc.convert import (
    SYSTEM_KEYS,
    ConvertError,
    code_for,
    decode_legacy_transaction_id,
    delivered_message,
    name_problem,
    send_properties,
    status,
    topic_not_found,
)
from tidemq.grpc.telemetry import RETRY_BACKOFF_S, settings_reply
from tidemq.protocol.codes import ResponseCode

Code = pb.Code
MT = pb.MessageType
CONFLICT = Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
HEX_IDS = st.from_regex(r"[0-9A-F]{1,34}", fullmatch=True)


def v2(**system: object) -> pb.Message:
    return pb.Message(
        topic=pb.Resource(name="T"),
        body=b"b",
        user_properties={"color": "red"},
        system_properties=pb.SystemProperties(message_id="01AA", **system),
    )


def test_send_properties_per_type() -> None:
    normal = send_properties(v2(message_type=MT.NORMAL, tag="A", keys=["k1", "k2"]), "T")
    assert normal == {"color": "red", "TAGS": "A", "KEYS": "k1 k2", "UNIQ_KEY": "01AA"}
    fifo = send_properties(v2(message_type=MT.FIFO, message_group="g"), "T")
    assert fifo[props.SHARDING_KEY] == "g"
    delay = send_properties(
        v2(message_type=MT.DELAY, delivery_timestamp={"seconds": 5, "nanos": 7_000_000}), "T"
    )
    assert delay[props.TIMER_DELIVER_MS] == "5007"
    tx = send_properties(v2(message_type=MT.TRANSACTION), "T")
    assert (tx[props.TRAN_MSG], tx[props.PGROUP]) == ("true", "T")


@pytest.mark.parametrize(
    ("system", "code"),
    [
        (
            {"message_type": MT.NORMAL, "message_group": "g"},
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
        ),
        ({"message_type": MT.FIFO}, Code.ILLEGAL_MESSAGE_GROUP),
        ({"message_type": MT.DELAY}, Code.ILLEGAL_DELIVERY_TIME),
        ({"message_type": MT.LITE}, Code.UNSUPPORTED),
    ],
)
def test_refused_combinations(system: dict[str, object], code: int) -> None:
    with pytest.raises(ConvertError) as refused:
        send_properties(v2(**system), "T")
    assert refused.value.code == code


def legacy_transaction_id(offset_msg_id: str, queue_offset: int, message_id: str) -> str:
    """The private text tidemq answered as a transaction id before it answered the UNIQ_KEY."""
    raw = f"{offset_msg_id} {queue_offset} {message_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@given(st.integers(0, 2**62), st.integers(0, 2**62), HEX_IDS)
def test_legacy_transaction_ids_still_decode(
    commit_log: int, queue_offset: int, message_id: str
) -> None:
    offset_id = offset_message_id(b"\x7f\x00\x00\x01", 10911, commit_log)
    text = legacy_transaction_id(offset_id, queue_offset, message_id)
    assert decode_legacy_transaction_id(text) == (commit_log, queue_offset, message_id)


@given(st.one_of(st.text(max_size=60), st.from_regex(r"[0-9A-F]{32,34}", fullmatch=True)))
def test_uniq_keys_and_forgeries_are_not_legacy_ids(text: str) -> None:
    """A UNIQ_KEY (32 or 34 hex digits) never reads as an old id, so the
    servicer looks it up as the half's key; anything unreadable is refused."""
    try:
        decode_legacy_transaction_id(text)
    except ConvertError as exc:
        assert exc.code == Code.INVALID_TRANSACTION_ID
    else:
        assert len(text) > 40, text


JAVA_STRING_HASH_SET = {
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC",
    "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID",
    "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME",
    "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK", "POP_CK_OFFSET",
    "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO",
    "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME",
    "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS",
    "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL",
    "__BORNHOST", "BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
}  # fmt: skip
"""MessageConst.STRING_HASH_SET, apache/rocketmq common/.../MessageConst.java:108-160."""


def test_system_keys_are_rocketmqs_string_hash_set() -> None:
    assert props.SYSTEM_KEYS == JAVA_STRING_HASH_SET
    # plus tidemq's timer bookkeeping, which RocketMQ never stores
    assert {"TIMER_SOURCE_OFFSET"} == SYSTEM_KEYS - props.SYSTEM_KEYS


def test_delivered_user_properties_keep_what_rocketmq_keeps() -> None:
    kept = {
        "__SHARDINGKEY": "g",
        "__transactionId__": "01CC",
        "TRANSACTION_CHECK_TIMES": "2",
        "__STARTDELIVERTIME": "1700000000000",
        "CHECK_IMMUNITY_TIME_IN_SECONDS": "5",
        "color": "red",
    }
    hidden = {key: "x" for key in SYSTEM_KEYS}
    record = MessageExt(topic="T", body=b"b", properties={**hidden, **kept})
    assert dict(delivered_message(record, "T").user_properties) == kept


@pytest.mark.parametrize("key", sorted(SYSTEM_KEYS))
def test_system_keys_are_refused_as_user_properties(key: str) -> None:
    message = v2(message_type=MT.NORMAL)
    message.user_properties[key] = "v"
    with pytest.raises(ConvertError) as refused:
        send_properties(message, "T")
    assert refused.value.code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    assert refused.value.message == f"property is used by system: {key}"


def test_a_message_needs_an_id() -> None:
    with pytest.raises(ConvertError) as refused:
        send_properties(pb.Message(topic=pb.Resource(name="T"), body=b"b"), "T")
    assert (refused.value.code, refused.value.message) == (
        Code.ILLEGAL_MESSAGE_ID,
        "message id cannot be empty",
    )


def test_texts_of_the_proxy() -> None:
    missing = topic_not_found("TopicTest-not-exists")
    assert missing.code == Code.TOPIC_NOT_FOUND
    assert missing.message == (
        "CODE: 17  DESC: No topic route info in name server for the topic: "
        "TopicTest-not-exists\nFor more information, please visit the url, "
        "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
    )
    assert status(Code.INVALID_RECEIPT_HANDLE).message == "INVALID_RECEIPT_HANDLE"


ILLEGAL = "contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
TOO_LONG = "is longer than group max length: 120."
TOPIC, GROUP = Code.ILLEGAL_TOPIC, Code.ILLEGAL_CONSUMER_GROUP


@pytest.mark.parametrize(
    ("topic", "group", "expected"),
    [
        (" ", "G", (TOPIC, "The specified topic is blank")),
        ("T" * 128, "G", (TOPIC, "The specified topic is longer than topic max length 127.")),
        ("a/b", "G", (TOPIC, f"The specified topic[a/b] {ILLEGAL}")),
        ("TBW102", "G", (TOPIC, "cannot access system topic")),
        ("rmq_sys_wheel_timer", "G", (TOPIC, "cannot access system topic")),
        ("T", " ", (GROUP, "the specified group is blank")),
        ("T", "G" * 121, (GROUP, f"the specified group[{'G' * 121}] {TOO_LONG}")),
        ("T", "g.1", (GROUP, f"the specified group[g.1] {ILLEGAL}")),
        ("T", "CID_RMQ_SYS_TRANS", (GROUP, "cannot use system consumer group")),
        ("%DLQ%G", "G", None),
    ],
)  # fmt: skip
def test_refused_names_in_the_proxys_words(
    topic: str, group: str, expected: tuple[int, str] | None
) -> None:
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic))
    )
    assert name_problem(request) == expected


def test_delivered_message_has_what_the_clients_need() -> None:
    record = MessageExt(
        topic="%RETRY%G_T",
        body=b"payload",
        properties={"TAGS": "A", "KEYS": "k", "UNIQ_KEY": "01BB", "__SHARDINGKEY": "g", "x": "1"},
        store_host="127.0.0.1:10911",
        born_host="10.0.0.1:5000",
    )
    message = delivered_message(record, "T", receipt_handle="h", delivery_attempt=3)
    system = message.system_properties
    assert message.topic.name == "T" and message.body == b"payload"
    assert dict(message.user_properties) == {"__SHARDINGKEY": "g", "x": "1"}  # as RocketMQ
    assert (system.message_id, system.tag, list(system.keys)) == ("01BB", "A", ["k"])
    assert system.body_encoding == pb.Encoding.IDENTITY
    assert system.body_digest.checksum == hashlib.md5(b"payload").hexdigest().upper()
    assert (system.receipt_handle, system.delivery_attempt) == ("h", 3)
    assert (system.message_group, system.message_type) == ("g", MT.FIFO)
    assert system.born_host == "10.0.0.1"


def test_settings_replies() -> None:
    producer = settings_reply(
        pb.Settings(publishing=pb.Publishing()), max_body_size=4096, fifo=False, max_attempts=17
    )
    assert producer.publishing.max_body_size == 4096
    assert producer.backoff_policy.HasField("exponential_backoff")
    python = settings_reply(
        pb.Settings(subscription=pb.Subscription(), user_agent=pb.UA(language=pb.Language.PYTHON)),
        max_body_size=1,
        fifo=True,
        max_attempts=5,
    )
    assert python.subscription.fifo and python.subscription.receive_batch_size == 32
    assert python.subscription.long_polling_timeout.seconds == 20
    assert python.backoff_policy.max_attempts == 5
    assert [d.seconds for d in python.backoff_policy.customized_backoff.next] == list(
        RETRY_BACKOFF_S
    )
    node = settings_reply(
        pb.Settings(subscription=pb.Subscription(), user_agent=pb.UA(language=pb.Language.NODE_JS)),
        max_body_size=1,
        fifo=False,
        max_attempts=5,
    )
    assert node.backoff_policy.HasField("exponential_backoff")


def test_code_mapping() -> None:
    assert code_for(ReceiptHandleError("bad")) == Code.INVALID_RECEIPT_HANDLE
    mismatch = MessageTypeMismatch("T", TopicMessageType.FIFO, TopicMessageType.NORMAL)
    assert code_for(mismatch) == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert code_for(BrokerError(ResponseCode.TOPIC_NOT_EXIST, "x")) == Code.TOPIC_NOT_FOUND
    timer = BrokerError(ResponseCode.MESSAGE_ILLEGAL, "timer message illegal, max delay")
    assert code_for(timer) == Code.ILLEGAL_DELIVERY_TIME
    assert code_for(BrokerError(ResponseCode.SYSTEM_ERROR, "x")) == Code.INTERNAL_SERVER_ERROR


def test_the_trace_context_travels_from_producer_to_consumer() -> None:
    # The proxy keeps SystemProperties.trace_context (an OpenTelemetry traceparent)
    # as the TRACE_CONTEXT property (SendMessageActivity) and hands it back on
    # delivery (GrpcConverter.buildSystemProperties).
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    stored = send_properties(v2(message_type=MT.NORMAL, trace_context=parent), "T")
    assert stored[props.TRACE_CONTEXT] == parent
    assert props.TRACE_CONTEXT not in send_properties(v2(message_type=MT.NORMAL), "T")
    record = MessageExt(topic="T", body=b"b", properties={**stored, "x": "1"})
    assert delivered_message(record, "T").system_properties.trace_context == parent
    assert not delivered_message(
        MessageExt(topic="T", body=b"b"), "T"
    ).system_properties.trace_context
