"""Typed headers: ali-ons coercions, V1 <-> V2, clear errors, and round trips."""

from __future__ import annotations

import dataclasses
import json
import types
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.protocol import (
    CommandDecoder,
    Frame,
    HeaderError,
    ProtocolError,
    RemotingCommand,
    RequestCode,
    SerializeType,
    decode_command,
    decode_header,
    decode_send_message_header,
    encode_header,
)
from tidemq.protocol import headers as headers_module
from tidemq.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    CreateTopicRequestHeader,
    GetMaxOffsetRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)

# Captured from ali-ons 3.12.0 (protocol doc section 5.1): numbers and a boolean, not strings.
ALI_ONS_SEND_V2_HEADER = (
    '{"code":310,"language":"JAVA","opaque":7,"flag":0,"version":121,"extFields":'
    '{"a":"PG_test","b":"TopicTest","c":"TBW102","d":4,"e":3,"f":0,"g":1795321024607,"h":0,'
    '"i":"TAGS\\u0001TagA\\u0002KEYS\\u0001k1 k2\\u0002","j":0,"k":false}}'
)

EXPECTED_V1 = SendMessageRequestHeader(
    producer_group="PG_test",
    topic="TopicTest",
    default_topic="TBW102",
    default_topic_queue_nums=4,
    queue_id=3,
    sys_flag=0,
    born_timestamp=1795321024607,
    flag=0,
    properties="TAGS\x01TagA\x02KEYS\x01k1 k2\x02",
    reconsume_times=0,
    unit_mode=False,
)


def test_ali_ons_send_v2_header_end_to_end() -> None:
    command = decode_command(Frame(0, ALI_ONS_SEND_V2_HEADER.encode(), b"hello A"))
    header = decode_header(SendMessageRequestHeaderV2, command.ext_fields)
    assert header.to_v1() == EXPECTED_V1
    assert decode_send_message_header(command.code, command.ext_fields) == EXPECTED_V1


def test_raw_json_values_are_accepted_directly() -> None:
    ext_fields = json.loads(ALI_ONS_SEND_V2_HEADER)["extFields"]
    assert decode_header(SendMessageRequestHeaderV2, ext_fields).to_v1() == EXPECTED_V1


def test_v2_uses_one_letter_keys_and_v1_long_names() -> None:
    v2 = SendMessageRequestHeaderV2.from_v1(
        dataclasses.replace(EXPECTED_V1, max_reconsume_times=3, batch=True, broker_name="b-a")
    )
    assert encode_header(v2) == {
        "a": "PG_test",
        "b": "TopicTest",
        "c": "TBW102",
        "d": "4",
        "e": "3",
        "f": "0",
        "g": "1795321024607",
        "h": "0",
        "i": "TAGS\x01TagA\x02KEYS\x01k1 k2\x02",
        "j": "0",
        "k": "false",
        "l": "3",
        "m": "true",
        "n": "b-a",
    }
    assert encode_header(v2.to_v1()) == {
        "producerGroup": "PG_test",
        "topic": "TopicTest",
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "3",
        "sysFlag": "0",
        "bornTimestamp": "1795321024607",
        "flag": "0",
        "properties": "TAGS\x01TagA\x02KEYS\x01k1 k2\x02",
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "true",
        "maxReconsumeTimes": "3",
        "bname": "b-a",
    }
    assert v2.to_v1().to_v2() == v2


@pytest.mark.parametrize(
    ("code", "ext_fields"),
    [
        (RequestCode.SEND_MESSAGE, encode_header(EXPECTED_V1)),
        (RequestCode.SEND_MESSAGE_V2, encode_header(EXPECTED_V1.to_v2())),
        (RequestCode.SEND_BATCH_MESSAGE, encode_header(EXPECTED_V1.to_v2())),
    ],
)
def test_decode_send_message_header_by_request_code(code: int, ext_fields: dict[str, str]) -> None:
    assert decode_send_message_header(code, ext_fields) == EXPECTED_V1


def test_missing_required_field_names_it() -> None:
    ext_fields = json.loads(ALI_ONS_SEND_V2_HEADER)["extFields"]
    del ext_fields["b"]
    with pytest.raises(HeaderError, match=r"'b' \(topic\) is missing") as caught:
        decode_header(SendMessageRequestHeaderV2, ext_fields)
    assert isinstance(caught.value, ProtocolError)
    assert caught.value.field == "'b' (topic)"
    assert "SendMessageRequestHeaderV2" in str(caught.value)


def test_missing_required_field_with_camel_case_name() -> None:
    with pytest.raises(HeaderError, match="'consumerGroup' is missing"):
        decode_header(UpdateConsumerOffsetRequestHeader, {"topic": "T", "queueId": "0"})


def test_explicit_null_counts_as_missing() -> None:
    with pytest.raises(HeaderError, match="'topic' is missing"):
        decode_header(GetMaxOffsetRequestHeader, {"topic": None, "queueId": "1"})


def test_optional_fields_may_be_absent_and_take_defaults() -> None:
    header = decode_header(GetMaxOffsetRequestHeader, {"topic": "T", "queueId": "1", "x": "?"})
    assert header == GetMaxOffsetRequestHeader(topic="T", queue_id=1, committed=True)
    pull = decode_header(
        PullMessageRequestHeader,
        {
            "consumerGroup": "CG_test",
            "topic": "TopicTest",
            "queueId": 0,
            "queueOffset": 0,
            "maxMsgNums": 32,
            "sysFlag": 6,
            "commitOffset": 0,
            "suspendTimeoutMillis": 15000,
            "subscription": "TagA || TagC",
            "subVersion": 1795321020603,
        },
    )
    assert pull.expression_type is None
    assert pull.broker_name is None
    assert pull.sub_version == 1795321020603


def test_explicit_wire_names() -> None:
    header = UnregisterClientRequestHeader(client_id="192.0.2.2@21555", consumer_group="CG")
    assert encode_header(header) == {"clientID": "192.0.2.2@21555", "consumerGroup": "CG"}
    pull_fields = {"proxyFrowardClientId": "c", "bname": "broker-a"}
    assert set(pull_fields) <= {
        item.metadata.get("tidemq.wire_name")
        for item in dataclasses.fields(PullMessageRequestHeader)
    }


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("12", 12), ("-1", -1), ("+5", 5), (12, 12), ("0", 0), ("007", 7), (-(2**31), -(2**31))],
)
def test_int_coercion(raw: object, expected: int) -> None:
    header = decode_header(GetMaxOffsetRequestHeader, {"topic": "T", "queueId": raw})
    assert header.queue_id == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "abc",
        "1.5",
        "12.0",
        " 12",
        "12 ",
        "1e3",
        "0x10",
        "\u0663",
        True,
        1.0,
        "2147483648",
        2**31,
    ],
)
def test_bad_int_values_raise_header_error(raw: object) -> None:
    with pytest.raises(HeaderError, match="'queueId'"):
        decode_header(GetMaxOffsetRequestHeader, {"topic": "T", "queueId": raw})


def test_int64_fields_take_the_long_range() -> None:
    fields = {"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": str(2**63 - 1)}
    assert decode_header(UpdateConsumerOffsetRequestHeader, fields).commit_offset == 2**63 - 1
    with pytest.raises(HeaderError, match="out of range"):
        decode_header(UpdateConsumerOffsetRequestHeader, {**fields, "commitOffset": str(2**63)})
    with pytest.raises(HeaderError):
        decode_header(UpdateConsumerOffsetRequestHeader, {**fields, "commitOffset": "9" * 5000})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("True", True),
        ("1", True),
        (True, True),
        (1, True),
        ("false", False),
        ("FALSE", False),
        ("0", False),
        (False, False),
        (0, False),
    ],
)
def test_bool_coercion(raw: object, expected: bool) -> None:
    fields = {"offset": "383", "group": "CG_test", "delayLevel": "0", "unitMode": raw}
    assert decode_header(ConsumerSendMsgBackRequestHeader, fields).unit_mode is expected


@pytest.mark.parametrize("raw", ["yes", "", "2", 2, "t", 1.0])
def test_bad_bool_values_raise_header_error(raw: object) -> None:
    fields = {"offset": "383", "group": "CG_test", "delayLevel": "0", "unitMode": raw}
    with pytest.raises(HeaderError, match="'unitMode' must be true or false"):
        decode_header(ConsumerSendMsgBackRequestHeader, fields)


def test_str_fields_stringify_anything() -> None:
    fields = {"offset": 1, "group": 42, "delayLevel": 0, "originMsgId": True, "originTopic": 1.5}
    header = decode_header(ConsumerSendMsgBackRequestHeader, fields)
    assert header.group == "42"
    assert header.origin_msg_id == "true"
    assert header.origin_topic == "1.5"


def test_ali_ons_send_back_header() -> None:
    ext_fields = {
        "offset": 383,
        "group": "CG_test",
        "delayLevel": 0,
        "originMsgId": "7F000001000051AF000000000000017F",
        "originTopic": "TopicTest",
        "unitMode": False,
        "maxReconsumeTimes": 2,
    }
    assert decode_header(ConsumerSendMsgBackRequestHeader, ext_fields) == (
        ConsumerSendMsgBackRequestHeader(
            offset=383,
            group="CG_test",
            delay_level=0,
            origin_msg_id="7F000001000051AF000000000000017F",
            origin_topic="TopicTest",
            unit_mode=False,
            max_reconsume_times=2,
        )
    )


def test_encode_header_leaves_out_none_and_writes_booleans_as_words() -> None:
    header = CreateTopicRequestHeader(
        topic="T",
        default_topic="TBW102",
        read_queue_nums=8,
        write_queue_nums=8,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    assert encode_header(header) == {
        "topic": "T",
        "defaultTopic": "TBW102",
        "readQueueNums": "8",
        "writeQueueNums": "8",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "order": "false",
        "force": "false",
    }


@pytest.mark.parametrize(
    "header",
    [
        GetMaxOffsetRequestHeader(topic="T", queue_id=2**31),
        GetMaxOffsetRequestHeader(topic="T", queue_id="1"),  # type: ignore[arg-type]
        GetMaxOffsetRequestHeader(topic="T", queue_id=True),
        GetMaxOffsetRequestHeader(topic=1, queue_id=1),  # type: ignore[arg-type]
        GetMaxOffsetRequestHeader(topic="T", queue_id=1, committed="yes"),  # type: ignore[arg-type]
    ],
)
def test_encode_header_refuses_values_of_the_wrong_kind(header: GetMaxOffsetRequestHeader) -> None:
    with pytest.raises(HeaderError):
        encode_header(header)


def test_non_dataclass_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        encode_header(object())


# --- round trips over every header class --------------------------------------------

HEADER_CLASSES = sorted(
    (
        value
        for name, value in vars(headers_module).items()
        if "Header" in name and dataclasses.is_dataclass(value) and isinstance(value, type)
    ),
    key=lambda cls: cls.__name__,
)


def field_strategy(hint: Any) -> st.SearchStrategy[Any]:
    if get_origin(hint) in (Union, types.UnionType):
        (inner,) = (arg for arg in get_args(hint) if arg is not type(None))
        return st.none() | field_strategy(inner)
    if get_origin(hint) is Annotated:
        _, limits = get_args(hint)
        return st.integers(min_value=limits.low, max_value=limits.high)
    if hint is bool:
        return st.booleans()
    if hint is str:
        return st.text(max_size=20)
    raise AssertionError(f"unexpected header field type {hint!r}")


def header_strategy(cls: type[Any]) -> st.SearchStrategy[Any]:
    hints = get_type_hints(cls, include_extras=True)
    return st.builds(
        cls, **{item.name: field_strategy(hints[item.name]) for item in dataclasses.fields(cls)}
    )


def test_every_header_class_is_covered() -> None:
    assert len(HEADER_CLASSES) >= 30
    assert SendMessageRequestHeaderV2 in HEADER_CLASSES


@settings(max_examples=200, deadline=None)
@given(data=st.data(), serialize_type=st.sampled_from(list(SerializeType)))
def test_round_trip_through_a_whole_command(
    data: st.DataObject, serialize_type: SerializeType
) -> None:
    cls = data.draw(st.sampled_from(HEADER_CLASSES))
    header = data.draw(header_strategy(cls))
    request = RemotingCommand.request(310, encode_header(header), serialize_type=serialize_type)
    [decoded] = CommandDecoder().feed(request.encode())
    assert decode_header(cls, decoded.ext_fields) == header


@settings(max_examples=100, deadline=None)
@given(header=header_strategy(SendMessageRequestHeader))
def test_v1_v2_conversion_round_trip(header: SendMessageRequestHeader) -> None:
    v2 = header.to_v2()
    assert decode_header(SendMessageRequestHeaderV2, encode_header(v2)).to_v1() == header
    assert decode_send_message_header(310, encode_header(v2)) == header
    assert decode_send_message_header(10, encode_header(header)) == header
