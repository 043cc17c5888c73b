"""The compiled header codecs against their references.

JSON headers: the msgspec decoder and encoder (command.py) must give what the
stdlib ones give: the same RemotingCommand (ext_fields in the same order) or
the same ProtocolError message, and byte-identical encodings. Typed headers:
the generated decode_header/encode_header (headers.py) must give what the
field-table walk gives: the same header or the same HeaderError.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tidemq.protocol import RequestCode, admin_headers, command, headers, pop_headers
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.headers import (
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    decode_header,
    decode_header_reference,
    decode_send_message_header,
    encode_header,
    encode_header_reference,
)

fast_decode = command._decode_json_header_msgspec
reference_decode = command._decode_json_header_stdlib
fast_encode = command._encode_json_header_msgspec
reference_encode = command._encode_json_header_stdlib

PROPERTY = settings(max_examples=400, deadline=None)


def outcome(function: Callable[[Any], Any], argument: Any) -> tuple[Any, ...]:
    """("ok", result) or ("error", exception type, message): comparable across codecs."""
    try:
        result = function(argument)
    except (ProtocolError, TypeError, ValueError) as exc:
        return ("error", type(exc), str(exc))
    if isinstance(result, RemotingCommand):
        return ("ok", result, list(result.ext_fields.items()))
    if isinstance(result, dict):
        return ("ok", result, list(result.items()))
    return ("ok", result)


def assert_same_decoding(header: bytes) -> None:
    assert outcome(fast_decode, header) == outcome(reference_decode, header)


def assert_same_encoding(cmd: RemotingCommand) -> None:
    assert outcome(fast_encode, cmd) == outcome(reference_encode, cmd)


# --- JSON headers: generated documents -------------------------------------------------

any_text = st.text(max_size=12)
# Text the encoders treat specially: DEL, controls, non-ASCII, escapes, surrogates.
tricky_text = st.text(
    alphabet=st.sampled_from(
        [
            "a",
            "Z",
            "0",
            " ",
            '"',
            "\\",
            "/",
            "\x00",
            "\x01",
            "\x1f",
            "\x7f",
            "é",
            "☕",
            "😀",
            "\ud800",
            "\udfff",
            "\u2028",
            "\ufeff",
            "{",
            "[",
            "]",
            "}",
        ]
    ),
    max_size=10,
)
int32s = st.integers(-(2**31), 2**31 - 1)
edge_ints = st.sampled_from(
    [0, -1, 1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63, -(2**64), 10**30]
)
ext_values = (
    any_text
    | tricky_text
    | st.booleans()
    | st.none()
    | st.integers()
    | edge_ints
    | st.floats(allow_nan=False)
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(any_text, any_text, max_size=2)
)
json_scalars = st.none() | st.booleans() | st.integers() | edge_ints | any_text | tricky_text
json_values = st.recursive(
    json_scalars | st.floats(allow_nan=False),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(any_text, children, max_size=3)
    ),
    max_leaves=12,
)
header_documents = st.fixed_dictionaries(
    {},
    optional={
        "code": int32s | json_scalars,
        "language": st.sampled_from(["JAVA", "PYTHON", "", "GO"]) | json_scalars,
        "version": int32s | json_scalars,
        "opaque": int32s | json_scalars,
        "flag": st.integers(0, 3) | json_scalars,
        "remark": any_text | tricky_text | json_scalars,
        "extFields": st.dictionaries(any_text | tricky_text, any_text | tricky_text, max_size=6)
        | st.dictionaries(any_text, ext_values, max_size=4)
        | json_values,
        "serializeTypeCurrentRPC": st.just("JSON") | json_values,
        "unknownKey": json_values,
    },
)


@st.composite
def spelled(draw: st.DrawFn, document: object) -> bytes:
    """``document`` as JSON text, spelled one of several ways a peer might."""
    ascii_only = draw(st.booleans())
    separators = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,", " :\n\t")]))
    text = json.dumps(document, ensure_ascii=ascii_only, separators=separators)
    return text.encode("utf-8", "surrogatepass")


@PROPERTY
@given(data=st.data(), document=header_documents)
@example(data=None, document={"code": 310, "extFields": {"a": "1", "b": "2"}})
def test_generated_headers_decode_alike(data: st.DataObject | None, document: object) -> None:
    header = json.dumps(document).encode() if data is None else data.draw(spelled(document))
    assert_same_decoding(header)


@PROPERTY
@given(document=header_documents, cut=st.integers(0, 300), garbage=st.binary(max_size=4))
def test_damaged_headers_decode_alike(document: object, cut: int, garbage: bytes) -> None:
    text = json.dumps(document).encode()
    assert_same_decoding(text[:cut] + garbage + text[cut:])
    assert_same_decoding(text[:cut])
    assert_same_decoding(text[:cut] + text[cut + len(garbage) :])


@PROPERTY
@given(header=st.binary(max_size=300))
def test_random_bytes_decode_alike(header: bytes) -> None:
    assert_same_decoding(header)


@PROPERTY
@given(
    prefix=st.sampled_from([b'{"code":1,"extFields":{"k":"', b'{"code":1,"remark":"', b'{"']),
    middle=st.binary(max_size=12),
    suffix=st.sampled_from([b'"}}', b'"}', b'":1}', b'"']),
)
def test_raw_bytes_inside_strings_decode_alike(prefix: bytes, middle: bytes, suffix: bytes) -> None:
    assert_same_decoding(prefix + middle + suffix)


DIGIT_LIMIT = sys.get_int_max_str_digits()


@pytest.mark.parametrize(
    "header",
    [
        b'{"code":1,"code":2}',
        b'{"code":"x","code":1}',
        b'{"code":1,"code":"x"}',
        b'{"code":1,"extFields":{"a":"1","b":"2","a":"3"}}',
        b'{"code":1,"extFields":{"a":"x"},"extFields":null}',
        b'{"code":1,"extFields":{"d":4,"k":false,"t":true,"x":null,"f":1.5e300}}',
        b'{"code":1,"language":null,"version":null,"opaque":null,"flag":null,"remark":null}',
        b'{"code":1,"language":"","remark":""}',
        b'{"\\u0063ode":5,"ext\\u0046ields":{"\\u00e9":"\\u00e9"}}',
        b'{"code":1,"remark":"\\ud83d\\ude00"}',
        b'{"code":1,"remark":"\\ud800"}',
        b'{"code":1,"zz":"\\ud800"}',
        b'{"code":1,"zz":"\\udc00\\ud800"}',
        b'{"code":1,"remark":"a\x7fb"}',
        b'{"code":1,"remark":"a\x01b"}',
        b'{"code":1,"remark":"\xed\xa0\x80"}',
        b'{"code":1,"zz":"\xff"}',
        b'{"code":1,"remark":"caf\xc3\xa9"}',
        b'\xef\xbb\xbf{"code":1}',
        b' \t\r\n{"code":1} \t\r\n',
        b'{"code":1}\x0c',
        b'{"code":-0,"flag":-2147483648}',
        b'{"code":1e2}',
        b'{"code":1,"zz":NaN}',
        b'{"code":1,"zz":-Infinity}',
        b'{"code":1,"zz":1e400}',
        b'{"code":1,"zz":' + b"9" * (DIGIT_LIMIT + 1) + b"}",
        b'{"code":1,"zz":"' + b"9" * (DIGIT_LIMIT + 1) + b'"}',
        b'{"code":1,"zz":' + b"[" * 31 + b"]" * 31 + b"}",
        b'{"code":1,"zz":' + b"[" * 32 + b"]" * 32 + b"}",
        b'{"code":1,"serializeTypeCurrentRPC":"JSON"}',
        b'{"code":1,"serializeTypeCurrentRPC":0}',
    ],
    ids=lambda header: repr(header[:40]),
)
def test_edge_cases_decode_alike(header: bytes) -> None:
    assert_same_decoding(header)


# --- JSON headers: encoding -----------------------------------------------------------

commands = st.builds(
    RemotingCommand,
    code=int32s | edge_ints,
    language=st.sampled_from(["JAVA", "PYTHON", "OTHER"]) | any_text | tricky_text,
    version=int32s,
    opaque=int32s | edge_ints,
    flag=st.integers(0, 3) | edge_ints,
    remark=st.none() | any_text | tricky_text,
    ext_fields=st.dictionaries(any_text | tricky_text, any_text | tricky_text, max_size=8),
)


@PROPERTY
@given(cmd=commands)
def test_encodings_are_byte_identical(cmd: RemotingCommand) -> None:
    assert_same_encoding(cmd)


@PROPERTY
@given(cmd=commands)
def test_fast_round_trip_matches_the_reference(cmd: RemotingCommand) -> None:
    try:
        data = fast_encode(cmd)
    except ProtocolError:
        return
    assert_same_decoding(data)


class Colour(str):
    """A str subclass: not plain str, so the fast encoder hands it to the reference."""


@pytest.mark.parametrize(
    "ext_fields",
    [
        {"k": 1},
        {"k": 1.5e16},
        {"k": True},
        {"k": None},
        {1.5e16: "v"},
        {True: "v"},
        {None: "v"},
        {"k": b"bytes"},
        {b"key": "v"},
        {"k": Colour("red")},
        {"k": ["a"]},
        {"k": "\x7f"},
        {"k": "é"},
        {"k": "\ud800"},
    ],
    ids=repr,
)
def test_values_outside_the_contract_encode_alike(ext_fields: dict[Any, Any]) -> None:
    assert_same_encoding(RemotingCommand(code=1, ext_fields=ext_fields))


def test_common_headers_do_not_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    # Ordinary headers (a Java one with serializeTypeCurrentRPC, control
    # characters in properties) never reach the reference: it would still be
    # right, only slower.
    def refuse(*_: object) -> None:
        raise AssertionError("fell back to the reference codec")

    sent = RemotingCommand(
        code=RequestCode.SEND_MESSAGE_V2,
        opaque=7,
        ext_fields={"a": "PG", "b": "T", "i": "UNIQ_KEY\x01ABC\x02TAGS\x01x\x02"},
    )
    answer = RemotingCommand(code=0, flag=1, remark="ok", ext_fields={"queueId": "3"})
    java = b'{"code":310,"extFields":{"a":"PG"},"flag":0,"language":"JAVA","opaque":7,'
    java += b'"serializeTypeCurrentRPC":"JSON","version":453}'
    expected = [reference_encode(sent), reference_encode(answer)]
    monkeypatch.setattr(command, "_decode_json_header_stdlib", refuse)
    monkeypatch.setattr(command, "_encode_json_header_stdlib", refuse)
    assert [fast_encode(sent), fast_encode(answer)] == expected
    assert fast_decode(expected[0]) == sent
    assert fast_decode(expected[1]) == answer
    assert fast_decode(java) == RemotingCommand(
        code=310, opaque=7, version=453, ext_fields={"a": "PG"}
    )


def test_the_configured_codec_is_the_fast_one_unless_switched_off() -> None:
    expected = "stdlib" if command.JSON_HEADER_CODEC == "stdlib" else "msgspec"
    assert command._decode_json_header is (
        reference_decode if expected == "stdlib" else fast_decode
    )
    assert command._encode_json_header is (
        reference_encode if expected == "stdlib" else fast_encode
    )


# --- typed headers ------------------------------------------------------------------------

HEADER_CLASSES = [
    value
    for module in (headers, pop_headers, admin_headers)
    for value in vars(module).values()
    if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__name__[0] != "_"
]

field_texts = st.sampled_from(
    [
        "0",
        "1",
        "-1",
        "+5",
        "007",
        "",
        " 1",
        "1 ",
        "1.0",
        "1e3",
        "true",
        "false",
        "TRUE",
        "False",
        "yes",
        "١٢",
        "²",
        "\uff11\uff12",  # full-width digits
        "999999999",
        "2147483647",
        "2147483648",
        "-2147483648",
        "-2147483649",
        "999999999999999999",
        "9223372036854775807",
        "9223372036854775808",
        "9" * 32,
        "9" * 33,
        "x",
    ]
)
field_values = (
    field_texts
    | any_text
    | st.booleans()
    | st.none()
    | st.integers()
    | edge_ints
    | st.floats(allow_nan=False)
    | st.just(["1"])
)


@st.composite
def ext_fields_for(draw: st.DrawFn, cls: type[Any]) -> dict[str, object]:
    names = [spec.wire_name for spec in headers._field_specs(cls)]
    chosen = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))
    if draw(st.integers(0, 3)):
        chosen = sorted(set(chosen) | set(names[: draw(st.integers(0, len(names)))]))
    fields = {name: draw(field_values) for name in chosen}
    fields.update(draw(st.dictionaries(any_text, any_text, max_size=2)))
    return fields


def decode_outcome(function: Callable[[], Any]) -> tuple[Any, ...]:
    try:
        return ("ok", function())
    except ProtocolError as exc:
        return ("error", type(exc), str(exc), getattr(exc, "field", None))


@PROPERTY
@given(data=st.data(), cls=st.sampled_from(HEADER_CLASSES))
def test_typed_headers_decode_like_the_reference(data: st.DataObject, cls: type[Any]) -> None:
    ext_fields = data.draw(ext_fields_for(cls))
    assert decode_outcome(lambda: decode_header(cls, ext_fields)) == decode_outcome(
        lambda: decode_header_reference(cls, ext_fields)
    )


def send_header_reference(code: int, ext_fields: Mapping[str, object]) -> Any:
    if code == RequestCode.SEND_MESSAGE:
        return decode_header_reference(SendMessageRequestHeader, ext_fields)
    return SendMessageRequestHeader(
        **headers._decode_values(SendMessageRequestHeaderV2, ext_fields)
    )


@PROPERTY
@given(
    data=st.data(),
    code=st.sampled_from(
        [
            RequestCode.SEND_MESSAGE,
            RequestCode.SEND_MESSAGE_V2,
            RequestCode.SEND_BATCH_MESSAGE,
            RequestCode.TIDEMQ_SEND_HALF_BATCH,
        ]
    ),
)
def test_send_headers_decode_like_the_reference(data: st.DataObject, code: int) -> None:
    cls = (
        SendMessageRequestHeader if code == RequestCode.SEND_MESSAGE else SendMessageRequestHeaderV2
    )
    ext_fields = data.draw(ext_fields_for(cls))
    assert decode_outcome(lambda: decode_send_message_header(code, ext_fields)) == decode_outcome(
        lambda: send_header_reference(code, ext_fields)
    )


def test_a_valid_send_header_decodes_to_the_same_frozen_header() -> None:
    ext_fields = {
        "a": "PG",
        "b": "T",
        "c": "TBW102",
        "d": "4",
        "e": "3",
        "f": "0",
        "g": "1795321024607",
        "h": "0",
        "i": "TAGS\x01x\x02",
        "k": "false",
        "m": "true",
    }
    header = decode_send_message_header(RequestCode.SEND_MESSAGE_V2, ext_fields)
    assert header == send_header_reference(RequestCode.SEND_MESSAGE_V2, ext_fields)
    assert header.born_timestamp == 1795321024607
    assert header.batch is True
    assert header.broker_name is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        header.topic = "other"  # type: ignore[misc]
    assert hash(header) == hash(send_header_reference(RequestCode.SEND_MESSAGE_V2, ext_fields))


@st.composite
def header_objects(draw: st.DrawFn) -> object:
    """Header instances with values of the declared kinds and, sometimes, of others."""
    cls = draw(st.sampled_from(HEADER_CLASSES))
    values: dict[str, object] = {}
    for spec in headers._field_specs(cls):
        if spec.parse is headers._parse_int:
            right: st.SearchStrategy[object] = st.integers(spec.low, spec.high) | edge_ints
        elif spec.parse is headers._parse_bool:
            right = st.booleans()
        else:
            right = any_text | tricky_text
        wrong = st.sampled_from([1, True, "1", 1.5, None, b"x"])
        values[spec.attribute] = draw(right | wrong) if draw(st.integers(0, 9)) else draw(wrong)
    return cls(**values)


@PROPERTY
@given(header=header_objects())
def test_typed_headers_encode_like_the_reference(header: object) -> None:
    assert decode_outcome(lambda: list(encode_header(header).items())) == decode_outcome(
        lambda: list(encode_header_reference(header).items())
    )
