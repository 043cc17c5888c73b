"""RemotingCommand: golden frames, JSON leniency, binary layout, streams and round trips."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.protocol import (
    CommandDecoder,
    Frame,
    LanguageCode,
    ProtocolError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    decode_command,
    encode_frame,
)

# ali-ons' own unit test: GET_KV_CONFIG_BY_VALUE (217 in its constants), opaque 1.
ALI_ONS_HEADER = (
    b'{"code":217,"language":"JAVA","opaque":1,"flag":0,"version":121,'
    b'"extFields":{"namespace":"PROJECT_CONFIG","key":"192.168.1.103"}}'
)
ALI_ONS_FRAME = bytes.fromhex("00000085 00000081") + ALI_ONS_HEADER


def json_frame(document: object, body: bytes = b"") -> Frame:
    return Frame(0, json.dumps(document).encode(), body)


def test_golden_ali_ons_frame_decodes() -> None:
    assert len(ALI_ONS_HEADER) == 0x81
    [command] = CommandDecoder().feed(ALI_ONS_FRAME)
    assert command == RemotingCommand(
        code=217,
        language="JAVA",
        version=121,
        opaque=1,
        flag=0,
        remark=None,
        ext_fields={"namespace": "PROJECT_CONFIG", "key": "192.168.1.103"},
        body=b"",
        serialize_type=SerializeType.JSON,
    )
    assert not command.is_response
    assert not command.is_oneway


def test_golden_json_encoding_uses_the_documented_key_order() -> None:
    command = RemotingCommand(
        code=217,
        version=121,
        opaque=1,
        ext_fields={"namespace": "PROJECT_CONFIG", "key": "192.168.1.103"},
    )
    header = (
        b'{"code":217,"language":"JAVA","version":121,"opaque":1,"flag":0,'
        b'"extFields":{"namespace":"PROJECT_CONFIG","key":"192.168.1.103"}}'
    )
    assert command.encode() == bytes.fromhex("00000085 00000081") + header


def test_response_echoes_opaque_sets_the_response_bit_and_omits_no_remark() -> None:
    [request] = CommandDecoder().feed(ALI_ONS_FRAME)
    response = RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=b"ok")
    header = b'{"code":0,"language":"JAVA","version":407,"opaque":1,"flag":1,"extFields":{}}'
    assert (
        response.encode() == struct.pack(">ii", 4 + len(header) + 2, len(header)) + header + b"ok"
    )
    assert response.is_response
    assert not response.is_oneway


def test_response_with_remark_and_fields() -> None:
    request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "T"}, opaque=9)
    response = RemotingCommand.response_to(
        request, ResponseCode.TOPIC_NOT_EXIST, remark="no route", ext_fields={"offset": "0"}
    )
    [decoded] = CommandDecoder().feed(response.encode())
    assert decoded.remark == "no route"
    assert decoded.ext_fields == {"offset": "0"}
    assert decoded.opaque == 9
    assert decoded.flag == 1


def test_response_answers_in_the_request_serialize_type() -> None:
    request = RemotingCommand.request(34, serialize_type=SerializeType.ROCKETMQ, opaque=3)
    response = RemotingCommand.response_to(request, 0)
    assert response.serialize_type == SerializeType.ROCKETMQ
    assert response.encode()[4] == 1


def test_oneway_request_flag() -> None:
    command = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, oneway=True)
    assert command.flag == 2
    assert command.is_oneway
    assert not command.is_response


# --- JSON leniency ----------------------------------------------------------------


def test_json_ext_field_values_are_coerced_to_strings() -> None:
    frame = json_frame(
        {
            "code": 310,
            "flag": 0,
            "opaque": 5,
            "extFields": {"d": 4, "g": 1795321024607, "k": False, "t": True, "s": "x", "x": None},
        }
    )
    command = decode_command(frame)
    assert command.ext_fields == {
        "d": "4",
        "g": "1795321024607",
        "k": "false",
        "t": "true",
        "s": "x",
    }


def test_json_tolerates_java_extras_and_missing_optional_keys() -> None:
    command = decode_command(
        json_frame({"code": 0, "serializeTypeCurrentRPC": "JSON", "extFields": None, "zzz": [1]})
    )
    assert command.language == "JAVA"
    assert command.version == 0
    assert command.opaque == 0
    assert command.flag == 0
    assert command.remark is None
    assert command.ext_fields == {}


def test_json_output_never_writes_serialize_type_or_null_remark() -> None:
    header = json.loads(RemotingCommand(code=1).encode()[8:])
    assert set(header) == {"code", "language", "version", "opaque", "flag", "extFields"}


def test_json_unicode_and_control_characters_round_trip() -> None:
    command = RemotingCommand(
        code=310,
        remark="erreur: café ☕ 😀",
        ext_fields={"i": "TAGS\x01TagA\x02", "ключ": "значение"},
    )
    assert CommandDecoder().feed(command.encode()) == [command]


@pytest.mark.parametrize(
    "header",
    [
        b"not json",
        b"",
        b"[]",
        b'"a string"',
        b"42",
        b"null",
        b"{}",
        b'{"code":null}',
        b'{"code":"217"}',
        b'{"code":true}',
        b'{"code":1.5}',
        b'{"code":2147483648}',
        b'{"code":1,"opaque":-2147483649}',
        b'{"code":1,"language":3}',
        b'{"code":1,"remark":["x"]}',
        b'{"code":1,"extFields":[]}',
        b'{"code":1,"extFields":"a=b"}',
        b'{"code":1,"extFields":{"a":{"b":"c"}}}',
        b'{"code":1,"extFields":{"a":[1]}}',
        b'{"code":NaN}',
        b'{"code":1,"version":Infinity}',
        b'{"code":1,"remark":"\xff\xfe"}',
        b'\xef\xbb\xbf{"code":1}',
        b'{"code":1,"remark":"\\ud800"}',
        b'{"code":1,"extFields":{"\\udfff":"v"}}',
        b'{"code":1,"opaque":' + b"9" * 5000 + b"}",
        b"[" * (1 << 20),
        b'{"code":1,"x":' + b"[" * 100 + b"]" * 100 + b"}",
        b'{"code":1,"x":' + b'{"a":' * 40 + b"1" + b"}" * 40 + b"}",
    ],
    ids=lambda header: repr(header[:40]),
)
def test_bad_json_headers_raise_protocol_error(header: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_command(Frame(0, header, b""))


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    remark = "[" * 100 + "{" * 100
    command = RemotingCommand(code=1, remark=remark, ext_fields={"k": "]]}}" * 50})
    assert CommandDecoder().feed(command.encode()) == [command]


def test_pathological_string_escapes_are_fast() -> None:
    header = b'{"code":1,"remark":"' + b'\\"[' * 300_000 + b'"}'
    with pytest.raises(ProtocolError):
        decode_command(Frame(0, header + b"x", b""))
    command = decode_command(Frame(0, header, b""))
    assert command.remark == '"[' * 300_000


# --- ROCKETMQ binary headers ------------------------------------------------------

# SEND_MESSAGE_V2 (310 = 0x0136), JAVA, version 407 (0x0197), opaque 7, flag 0,
# remark "ok", extFields {"a": "PG"}; body "hello". Built byte by byte from the layout.
GOLDEN_BINARY_HEADER = bytes.fromhex(
    "0136"  # code
    "00"  # language JAVA
    "0197"  # version
    "00000007"  # opaque
    "00000000"  # flag
    "00000002"
    "6f6b"  # remark length, "ok"
    "00000009"  # ext length
    "0001"
    "61"  # key length, "a"
    "00000002"
    "5047"  # value length, "PG"
)
GOLDEN_BINARY_FRAME = bytes.fromhex("00000029 01000020") + GOLDEN_BINARY_HEADER + b"hello"


def test_golden_binary_header_decodes() -> None:
    assert len(GOLDEN_BINARY_HEADER) == 0x20
    [command] = CommandDecoder().feed(GOLDEN_BINARY_FRAME)
    assert command == RemotingCommand(
        code=RequestCode.SEND_MESSAGE_V2,
        language="JAVA",
        version=407,
        opaque=7,
        flag=0,
        remark="ok",
        ext_fields={"a": "PG"},
        body=b"hello",
        serialize_type=SerializeType.ROCKETMQ,
    )


def test_golden_binary_header_encodes() -> None:
    command = RemotingCommand(
        code=310,
        opaque=7,
        remark="ok",
        ext_fields={"a": "PG"},
        body=b"hello",
        serialize_type=SerializeType.ROCKETMQ,
    )
    assert command.encode() == GOLDEN_BINARY_FRAME


def test_binary_signed_fields_and_empty_values() -> None:
    command = RemotingCommand(
        code=-1,
        language="GO",
        version=-2,
        opaque=-(2**31),
        flag=2**31 - 1,
        ext_fields={"": "", "k": ""},
        serialize_type=SerializeType.ROCKETMQ,
    )
    assert CommandDecoder().feed(command.encode()) == [command]


def test_binary_empty_remark_decodes_as_none() -> None:
    command = RemotingCommand(code=1, remark="", serialize_type=SerializeType.ROCKETMQ)
    [decoded] = CommandDecoder().feed(command.encode())
    assert decoded.remark is None


def test_binary_unknown_language_byte_decodes_as_other() -> None:
    header = bytearray(GOLDEN_BINARY_HEADER)
    header[2] = 200
    command = decode_command(Frame(1, bytes(header), b""))
    assert command.language == "OTHER"


def test_binary_unknown_language_name_encodes_as_other() -> None:
    command = RemotingCommand(code=1, language="COBOL", serialize_type=SerializeType.ROCKETMQ)
    assert command.encode()[8 + 2] == LanguageCode.OTHER


def test_binary_cannot_carry_pop_codes() -> None:
    command = RemotingCommand(code=RequestCode.POP_MESSAGE, serialize_type=SerializeType.ROCKETMQ)
    with pytest.raises(ProtocolError, match="code"):
        command.encode()


@pytest.mark.parametrize(
    "header",
    [
        b"",
        GOLDEN_BINARY_HEADER[:20],
        GOLDEN_BINARY_HEADER[:-1],
        GOLDEN_BINARY_HEADER + b"\x00",
        GOLDEN_BINARY_HEADER[:13] + b"\xff\xff\xff\xff" + GOLDEN_BINARY_HEADER[17:],
        GOLDEN_BINARY_HEADER[:13] + b"\x7f\xff\xff\xff" + GOLDEN_BINARY_HEADER[17:],
        GOLDEN_BINARY_HEADER[:19] + b"\x00\x00\x00\x0a" + GOLDEN_BINARY_HEADER[23:],
        GOLDEN_BINARY_HEADER[:19] + b"\xff\xff\xff\xf7" + GOLDEN_BINARY_HEADER[23:],
        GOLDEN_BINARY_HEADER[:23] + b"\xff\xff" + GOLDEN_BINARY_HEADER[25:],
        GOLDEN_BINARY_HEADER[:23] + b"\x00\x09" + GOLDEN_BINARY_HEADER[25:],
        GOLDEN_BINARY_HEADER[:26] + b"\x80\x00\x00\x00" + GOLDEN_BINARY_HEADER[30:],
        GOLDEN_BINARY_HEADER[:25] + b"\xc3" + GOLDEN_BINARY_HEADER[26:],
        GOLDEN_BINARY_HEADER[:17] + b"\xff\xfe" + GOLDEN_BINARY_HEADER[19:],
        GOLDEN_BINARY_HEADER[:19] + b"\x00\x00\x00\x01\x00",
        GOLDEN_BINARY_HEADER[:19] + b"\x00\x00\x00\x05\x00\x00\x00\x00\x00",
    ],
    ids=[
        "empty",
        "fixed-part-truncated",
        "ext-truncated",
        "trailing-byte",
        "remark-length-negative",
        "remark-length-huge",
        "ext-length-too-long",
        "ext-length-negative",
        "key-length-negative",
        "key-length-overruns",
        "value-length-negative",
        "key-invalid-utf8",
        "remark-invalid-utf8",
        "ext-one-stray-byte",
        "ext-entry-without-value-length",
    ],
)
def test_bad_binary_headers_raise_protocol_error(header: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_command(Frame(1, header, b""))


# --- streams ----------------------------------------------------------------------


def test_command_stream_one_byte_at_a_time() -> None:
    commands = [
        RemotingCommand.request(RequestCode.HEART_BEAT, body=b'{"clientID":"x"}', opaque=1),
        RemotingCommand(
            code=310, opaque=2, ext_fields={"a": "g"}, serialize_type=SerializeType.ROCKETMQ
        ),
        RemotingCommand.response_to(
            RemotingCommand(code=11, opaque=3), ResponseCode.PULL_NOT_FOUND
        ),
    ]
    stream = b"".join(command.encode() for command in commands) + ALI_ONS_FRAME[:10]
    decoder = CommandDecoder()
    got: list[RemotingCommand] = []
    for index in range(len(stream)):
        got += decoder.feed(stream[index : index + 1])
    assert got == commands
    assert decoder.buffered == 10
    assert decoder.feed(ALI_ONS_FRAME[10:])[0].code == 217


def test_command_decoder_stays_failed_after_a_bad_header() -> None:
    decoder = CommandDecoder()
    with pytest.raises(ProtocolError):
        decoder.feed(encode_frame(0, b"[]"))
    with pytest.raises(ProtocolError, match="already failed"):
        decoder.feed(ALI_ONS_FRAME)


# --- round trips --------------------------------------------------------------------

int32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
int16 = st.integers(min_value=-(2**15), max_value=2**15 - 1)

json_commands = st.builds(
    RemotingCommand,
    code=int32,
    language=st.text(max_size=10),
    version=int32,
    opaque=int32,
    flag=int32,
    remark=st.none() | st.text(max_size=40),
    ext_fields=st.dictionaries(st.text(max_size=12), st.text(max_size=40), max_size=8),
    body=st.binary(max_size=64),
    serialize_type=st.just(SerializeType.JSON),
)

binary_commands = st.builds(
    RemotingCommand,
    code=int16,
    language=st.sampled_from([member.name for member in LanguageCode]),
    version=int16,
    opaque=int32,
    flag=int32,
    remark=st.none() | st.text(min_size=1, max_size=40),
    ext_fields=st.dictionaries(st.text(max_size=12), st.text(max_size=40), max_size=8),
    body=st.binary(max_size=64),
    serialize_type=st.just(SerializeType.ROCKETMQ),
)


@settings(max_examples=200, deadline=None)
@given(command=json_commands)
def test_json_round_trip(command: RemotingCommand) -> None:
    assert CommandDecoder().feed(command.encode()) == [command]


@settings(max_examples=200, deadline=None)
@given(command=binary_commands)
def test_binary_round_trip(command: RemotingCommand) -> None:
    assert CommandDecoder().feed(command.encode()) == [command]


@settings(max_examples=50, deadline=None)
@given(commands=st.lists(json_commands | binary_commands, max_size=5), chunk=st.integers(1, 50))
def test_mixed_stream_round_trip_in_chunks(commands: list[RemotingCommand], chunk: int) -> None:
    stream = b"".join(command.encode() for command in commands)
    decoder = CommandDecoder()
    got: list[RemotingCommand] = []
    for start in range(0, len(stream), chunk):
        got += decoder.feed(stream[start : start + chunk])
    assert got == commands
