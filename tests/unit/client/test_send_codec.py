"""The producer's send codec: checks before the network, compression, unique
ids, the request header and the answer read back as a SendResult."""

from __future__ import annotations

import json
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.client._send import (
    NOT_ALLOWED_SEND_TOPICS,
    SendCodec,
    make_message,
    route_from_template,
    send_result,
    topic_problem,
)
from tidemq.client.errors import ClientError
from tidemq.client.model import BrokerData, QueueData, SendStatus, TopicRoute
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.clock import ManualClock
from tidemq.common.message import Message, MessageQueue
from tidemq.common.message_id import UniqueIdGenerator, parse_unique_id
from tidemq.protocol import RemotingCommand, RequestCode, ResponseCode
from tidemq.protocol.headers import (
    SendMessageRequestHeaderV2,
    decode_send_message_header,
    encode_header,
)
from tidemq.record.codec import decode_batch

MQ = MessageQueue("T", "broker-a", 2)


def codec(**options: int) -> SendCodec:
    ids = UniqueIdGenerator(ManualClock(), ip=bytes([10, 0, 0, 1]), pid=7, salt=1)
    return SendCodec("PG", ids.next_id, **options)


def illegal(excinfo: pytest.ExceptionInfo[ClientError]) -> str:
    assert excinfo.value.code == ResponseCode.MESSAGE_ILLEGAL
    return excinfo.value.message


# -- topic and message checks ----------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "reason"),
    [
        ("", "blank"),
        ("   ", "blank"),
        ("a" * 128, "128 characters long"),
        ("bad topic", "illegal characters"),
        ("topic/1", "illegal characters"),
        ("tópico", "illegal characters"),
        ("SCHEDULE_TOPIC_XXXX", "forbidden"),
        ("RMQ_SYS_TRANS_HALF_TOPIC", "forbidden"),
        ("TBW102", "forbidden"),
    ],
)
def test_invalid_topics_are_refused_before_any_request(topic: str, reason: str) -> None:
    with pytest.raises(ClientError) as excinfo:
        codec().prepare(Message(topic, b"x"))
    assert reason in illegal(excinfo)


@pytest.mark.parametrize("topic", ["a" * 127, "Topic_1-x", "%RETRY%group", "a|b%c"])
def test_valid_topics_pass(topic: str) -> None:
    assert topic_problem(topic) is None
    assert codec().prepare(Message(topic, b"x")).topic == topic


def test_every_not_allowed_topic_is_refused() -> None:
    for topic in NOT_ALLOWED_SEND_TOPICS:
        assert topic_problem(topic) is not None


def test_empty_body_is_illegal() -> None:
    with pytest.raises(ClientError) as excinfo:
        codec().prepare(Message("T", b""))
    assert "body is empty" in illegal(excinfo)


def test_size_limit_counts_body_and_properties() -> None:
    small = codec(max_message_size=1000)
    message = Message("T", b"x" * 900, properties={"p": "v" * 100})
    with pytest.raises(ClientError) as excinfo:
        small.prepare(message)
    text = illegal(excinfo)
    assert "more than the maximum of 1000 bytes" in text
    assert "body 900" in text
    assert small.prepare(Message("T", b"x" * 900)).body == b"x" * 900


def test_default_limit_is_four_mib() -> None:
    with pytest.raises(ClientError) as excinfo:
        codec().prepare(Message("T", b"x" * (4 * 1024 * 1024)))
    assert "4194304" in illegal(excinfo)


def test_properties_longer_than_a_short_are_illegal() -> None:
    with pytest.raises(ClientError) as excinfo:
        codec().prepare(Message("T", b"x", properties={"big": "v" * 40000}))
    assert "properties take" in illegal(excinfo)


@pytest.mark.parametrize("value", ["a\x01b", "a\x02b"])
def test_separator_characters_in_properties_are_illegal(value: str) -> None:
    with pytest.raises(ClientError) as excinfo:
        codec().prepare(Message("T", b"x", properties={"k": value}))
    assert "character" in illegal(excinfo)


def test_non_message_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        codec().prepare(b"body")  # type: ignore[arg-type]


# -- make_message ----------------------------------------------------------------------------


def test_make_message_sets_tags_keys_delay_and_user_properties() -> None:
    message = make_message(
        "T", "héllo", tags="TagA", keys=["k1", "k2"], properties={"u": "1"}, delay_level=3, flag=5
    )
    assert message.body == "héllo".encode()
    assert message.tags == "TagA"
    assert message.keys == ["k1", "k2"]
    assert message.delay_level == 3
    assert message.flag == 5
    assert message.properties["u"] == "1"


@pytest.mark.parametrize("name", ["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "WAIT", "REAL_TOPIC"])
def test_make_message_refuses_reserved_property_names(name: str) -> None:
    with pytest.raises(ValueError, match=f"property {name} is reserved"):
        make_message("T", b"x", properties={name: "v"})


@pytest.mark.parametrize("properties", [{"": "v"}, {"k": ""}, {"k\x01": "v"}, {"k": "v\x02"}])
def test_make_message_refuses_blank_or_separator_properties(properties: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        make_message("T", b"x", properties=properties)


# -- single-message encoding --------------------------------------------------------------


def test_header_matches_the_typed_header_encoding() -> None:
    message = Message("T", b"body", flag=3, properties={"TAGS": "A"})
    prepared = codec().prepare(message)
    command = prepared.request(queue_id=2, born_ms=1_700_000_000_123)
    expected = encode_header(
        SendMessageRequestHeaderV2(
            producer_group="PG",
            topic="T",
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=2,
            sys_flag=0,
            born_timestamp=1_700_000_000_123,
            flag=3,
            properties=props.encode_properties(message.properties),
            reconsume_times=0,
            unit_mode=False,
            batch=False,
        )
    )
    assert command.code == RequestCode.SEND_MESSAGE_V2
    assert command.ext_fields == expected
    assert command.body == b"body"
    decoded = decode_send_message_header(command.code, command.ext_fields)
    assert decoded.queue_id == 2 and decoded.topic == "T" and not decoded.batch


def test_each_attempt_gets_its_own_fields() -> None:
    prepared = codec().prepare(Message("T", b"x"))
    first = prepared.request(0, 1)
    second = prepared.request(3, 2)
    assert (first.ext_fields["e"], first.ext_fields["g"]) == ("0", "1")
    assert (second.ext_fields["e"], second.ext_fields["g"]) == ("3", "2")
    assert "e" not in prepared.fields


def test_unique_id_is_set_once_and_kept() -> None:
    send_codec = codec()
    message = Message("T", b"x")
    first = send_codec.prepare(message)
    assert message.unique_key == first.msg_id
    parse_unique_id(first.msg_id)  # a well-formed RocketMQ unique id
    again = send_codec.prepare(message)
    assert again.msg_id == first.msg_id
    mine = Message("T", b"x", properties={props.UNIQ_KEY: "MY-ID"})
    assert send_codec.prepare(mine).msg_id == "MY-ID"


def test_unique_ids_are_distinct() -> None:
    send_codec = codec()
    ids = {send_codec.prepare(Message("T", b"x")).msg_id for _ in range(5000)}
    assert len(ids) == 5000


def test_bodies_from_the_threshold_on_are_zlib_compressed() -> None:
    body = b"abc" * 2000
    message = Message("T", body)
    prepared = codec(compress_over_bytes=len(body)).prepare(message)
    assert int(prepared.fields["f"]) & sysflag.COMPRESSED
    assert sysflag.compression_type(int(prepared.fields["f"])) == sysflag.COMPRESSION_ZLIB
    assert zlib.decompress(prepared.body) == body
    assert len(prepared.body) < len(body)
    assert message.body == body  # the caller's message is untouched


def test_bodies_below_the_threshold_are_sent_as_they_are() -> None:
    body = b"x" * 4095
    prepared = codec().prepare(Message("T", body))
    assert prepared.fields["f"] == "0"
    assert prepared.body == body


def test_retry_topic_sends_carry_the_reconsume_counters() -> None:
    message = Message(
        "%RETRY%G",
        b"x",
        properties={props.RECONSUME_TIME: "2", props.MAX_RECONSUME_TIMES: "16"},
    )
    fields = codec().prepare(message).request(0, 1).ext_fields
    assert fields["j"] == "2"
    assert fields["l"] == "16"


@given(
    body=st.binary(min_size=1, max_size=9000),
    user=st.dictionaries(
        st.text(alphabet="abcxyz_", min_size=1, max_size=8),
        st.text(min_size=1, max_size=20).filter(lambda v: "\x01" not in v and "\x02" not in v),
        max_size=4,
    ),
)
def test_body_and_properties_survive_encoding(body: bytes, user: dict[str, str]) -> None:
    message = Message("T", body, properties=dict(user))
    prepared = codec().prepare(message)
    sent_body = prepared.body
    if int(prepared.fields["f"]) & sysflag.COMPRESSED:
        sent_body = zlib.decompress(sent_body)
    assert sent_body == body
    decoded = props.decode_properties(prepared.fields["i"])
    assert decoded == {**user, props.UNIQ_KEY: prepared.msg_id}


# -- batches -----------------------------------------------------------------------------------


def test_batch_body_decodes_to_the_messages_and_ids_are_joined() -> None:
    messages = [Message("T", b"m%d" % i, flag=i, properties={"TAGS": "A"}) for i in range(3)]
    prepared = codec().prepare_batch(messages)
    assert prepared.code == RequestCode.SEND_BATCH_MESSAGE
    assert prepared.count == 3
    ids = prepared.msg_id.split(",")
    assert ids == [m.unique_key for m in messages]
    assert len(set(ids)) == 3
    decoded = decode_batch(prepared.body, "T")
    assert [m.body for m in decoded] == [b"m0", b"m1", b"m2"]
    assert [m.flag for m in decoded] == [0, 1, 2]
    assert [m.properties for m in decoded] == [m.properties for m in messages]
    header = decode_send_message_header(prepared.code, prepared.request(1, 5).ext_fields)
    assert header.batch and header.sys_flag == 0 and header.queue_id == 1


def test_batches_are_never_compressed() -> None:
    body = b"z" * 10000
    prepared = codec().prepare_batch([Message("T", body), Message("T", body)])
    assert prepared.fields["f"] == "0"
    assert [m.body for m in decode_batch(prepared.body, "T")] == [body, body]


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        ([Message("T", b"a"), Message("U", b"b")], "same topic"),
        ([Message("T", b"a"), Message("T", b"b", properties={"DELAY": "2"})], "delay level"),
        ([Message("%RETRY%G", b"a")], "retry topic"),
        ([Message("T", b"a"), Message("T", b"")], "empty body"),
        ([Message("T", b"a"), Message("T", b"b", properties={"WAIT": "false"})], "WAIT"),
        ([Message("bad topic", b"a")], "illegal characters"),
        ([], "non-empty"),
    ],
)
def test_bad_batches_are_refused(messages: list[Message], reason: str) -> None:
    with pytest.raises(ClientError) as excinfo:
        codec().prepare_batch(messages)
    assert reason in illegal(excinfo)


def test_oversized_batch_is_refused() -> None:
    with pytest.raises(ClientError) as excinfo:
        codec(max_message_size=1000).prepare_batch([Message("T", b"x" * 600)] * 2)
    assert "split it" in illegal(excinfo)


# -- answers -----------------------------------------------------------------------------------


def answer(code: int, remark: str | None = None, **fields: str) -> RemotingCommand:
    return RemotingCommand(code=code, remark=remark, ext_fields=dict(fields), flag=1)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ResponseCode.SUCCESS, SendStatus.SEND_OK),
        (ResponseCode.FLUSH_DISK_TIMEOUT, SendStatus.FLUSH_DISK_TIMEOUT),
        (ResponseCode.FLUSH_SLAVE_TIMEOUT, SendStatus.FLUSH_SLAVE_TIMEOUT),
        (ResponseCode.SLAVE_NOT_AVAILABLE, SendStatus.SLAVE_NOT_AVAILABLE),
    ],
)
def test_stored_answers_become_send_results(code: int, status: SendStatus) -> None:
    prepared = codec().prepare(Message("T", b"x"))
    result = send_result(
        answer(code, msgId="7F0000010000271100000000000000C0", queueId="2", queueOffset="41"),
        prepared,
        MQ,
    )
    assert result.status is status
    # Still the string it was before SendStatus existed, however it is used.
    assert result.status == status.name and f"{result.status}" == status.name
    assert json.dumps(result.status) == f'"{status.name}"'
    assert f"status=SendStatus.{status.name}," in repr(result)
    assert result.msg_id == prepared.msg_id
    assert result.offset_msg_id == "7F0000010000271100000000000000C0"
    assert (result.topic, result.broker_name, result.queue_id, result.queue_offset) == (
        "T",
        "broker-a",
        2,
        41,
    )


@pytest.mark.parametrize(
    ("code", "name"),
    [
        (ResponseCode.SYSTEM_BUSY, "SYSTEM_BUSY"),
        (ResponseCode.NO_PERMISSION, "NO_PERMISSION"),
        (ResponseCode.TOPIC_NOT_EXIST, "TOPIC_NOT_EXIST"),
        (ResponseCode.MESSAGE_ILLEGAL, "MESSAGE_ILLEGAL"),
    ],
)
def test_refusals_become_client_errors_with_code_and_remark(code: int, name: str) -> None:
    prepared = codec().prepare(Message("T", b"x"))
    with pytest.raises(ClientError) as excinfo:
        send_result(answer(code, "the broker says no\nat line 2"), prepared, MQ)
    assert excinfo.value.code == code
    text = excinfo.value.message
    assert "topic T" in text and "broker-a" in text
    assert "the broker says no" in text and "line 2" not in text
    assert name in text


def test_malformed_answer_is_a_system_error() -> None:
    prepared = codec().prepare(Message("T", b"x"))
    with pytest.raises(ClientError) as excinfo:
        send_result(answer(ResponseCode.SUCCESS, msgId="X", queueId="zero"), prepared, MQ)
    assert excinfo.value.code == ResponseCode.SYSTEM_ERROR


# -- template routes ---------------------------------------------------------------------------


def test_template_route_keeps_inheritable_queues_capped_at_the_default_count() -> None:
    brokers = (
        BrokerData("c", "broker-a", {0: "h:1"}),
        BrokerData("c", "broker-b", {0: "h:2"}),
    )
    template = TopicRoute(
        "TBW102",
        (QueueData("broker-a", 8, 8, 7), QueueData("broker-b", 8, 8, 6)),
        brokers,
    )
    route = route_from_template("New", template, 4)
    assert route.topic == "New"
    assert route.queue_datas == (QueueData("broker-a", 4, 4, 6),)
    assert [q.queue_id for q in route.write_queues()] == [0, 1, 2, 3]
    assert route.broker_datas == brokers
