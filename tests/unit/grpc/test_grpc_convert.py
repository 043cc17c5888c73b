"""The v2 <-> tidemq translation: properties of each message type, the
transaction id codec (round trip, forgeries refused), delivered messages
carrying what the official clients need, settings replies, code mapping."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rocketmq.grpc_protocol import definition_pb2 as pb

from tidemq.broker.message_types import MessageTypeMismatch, TopicMessageType
from tidemq.broker.pop.api import ReceiptHandleError
from tidemq.broker.requests import BrokerError
from tidemq.common import properties as props
from tidemq.common.message import MessageExt
from tidemq.common.message_id import offset_message_id
from tidemq.grpc.convert import (
    ConvertError,
    code_for,
    decode_transaction_id,
    delivered_message,
    encode_transaction_id,
    send_properties,
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


@given(
    st.integers(0, 2**62), st.integers(0, 2**62), st.from_regex(r"[0-9A-F]{1,34}", fullmatch=True)
)
def test_transaction_id_round_trip(commit_log: int, queue_offset: int, message_id: str) -> None:
    offset_id = offset_message_id(b"\x7f\x00\x00\x01", 10911, commit_log)
    text = encode_transaction_id(offset_id, queue_offset, message_id)
    assert decode_transaction_id(text) == (commit_log, queue_offset, message_id)


@given(st.text(max_size=60))
def test_forged_transaction_ids_are_refused(text: str) -> None:
    try:
        decode_transaction_id(text)
    except ConvertError as exc:
        assert exc.code == Code.INVALID_TRANSACTION_ID


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
    assert dict(message.user_properties) == {"x": "1"}
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
