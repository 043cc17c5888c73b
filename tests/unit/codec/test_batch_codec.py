"""SEND_BATCH_MESSAGE bodies (Java MessageDecoder.encodeMessages/decodeMessages)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.common.message import Message
from tidemq.protocol.errors import ProtocolError
from tidemq.record.codec import decode_batch, encode_batch


def i16(v: int) -> bytes:
    return v.to_bytes(2, "big", signed=True)


def i32(v: int) -> bytes:
    return v.to_bytes(4, "big", signed=True)


def entry(flag: int, body: bytes, raw_props: bytes) -> bytes:
    total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(raw_props)
    return b"".join(
        [
            i32(total),  # TOTALSIZE
            i32(0),  # MAGICCODE: Java writes 0
            i32(0),  # BODYCRC: Java writes 0
            i32(flag),  # FLAG
            i32(len(body)) + body,  # BODYLENGTH + BODY
            i16(len(raw_props)) + raw_props,  # PROPERTIESLENGTH + PROPERTIES
        ]
    )


GOLDEN = entry(0, b"hello", b"TAGS\x01TagA\x02") + entry(7, b"", b"")


def test_golden_batch_body() -> None:
    messages = [
        Message("T", b"hello", properties={"TAGS": "TagA"}),
        Message("T", b"", flag=7),
    ]
    assert encode_batch(messages) == GOLDEN
    assert len(GOLDEN) == (22 + 5 + 10) + 22


def test_decode_golden_batch_body() -> None:
    messages = decode_batch(GOLDEN, "TopicTest")
    assert messages == [
        Message("TopicTest", b"hello", 0, {"TAGS": "TagA"}),
        Message("TopicTest", b"", 7, {}),
    ]


def test_empty_batch() -> None:
    assert encode_batch([]) == b""
    assert decode_batch(b"", "T") == []


def test_magic_and_crc_are_ignored_when_decoding() -> None:
    other = bytearray(GOLDEN)
    other[4:12] = b"\xff" * 8
    assert decode_batch(bytes(other), "T") == decode_batch(GOLDEN, "T")


@pytest.mark.parametrize(
    "bad",
    [
        GOLDEN[:-1],  # truncated properties
        GOLDEN[:10],  # truncated head
        GOLDEN + b"\x00",  # trailing byte too short to be an entry
        i32(99) + GOLDEN[4:],  # TOTALSIZE disagrees with the lengths
        GOLDEN[:16] + i32(-1) + GOLDEN[20:],  # negative body length
        GOLDEN[:16] + i32(1000) + GOLDEN[20:],  # body overruns
        entry(0, b"x", b"")[:25] + i16(-2),  # negative properties length
        entry(0, b"", b"K\x01\xff\x02"),  # properties not UTF-8
    ],
)
def test_malformed_batch_raises_protocol_error(bad: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_batch(bad, "T")


def test_oversized_properties_are_refused_when_encoding() -> None:
    with pytest.raises(ValueError):
        encode_batch([Message("T", b"", properties={"K": "v" * 40000})])


_safe_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"),
    max_size=12,
)
_messages = st.builds(
    Message,
    topic=st.just("Topic"),
    body=st.binary(max_size=200),
    flag=st.integers(-(2**31), 2**31 - 1),
    properties=st.dictionaries(_safe_text.filter(bool), _safe_text, max_size=5),
)


@settings(max_examples=150)
@given(st.lists(_messages, max_size=6))
def test_batch_round_trip(messages: list[Message]) -> None:
    assert decode_batch(encode_batch(messages), "Topic") == messages
    assert decode_batch(memoryview(encode_batch(messages)), "Topic") == messages


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_raise_protocol_error(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_batch(data, "T")


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, len(GOLDEN) - 1), st.integers(0, 255)), max_size=4))
def test_mutated_batches_decode_or_raise_protocol_error(edits: list[tuple[int, int]]) -> None:
    data = bytearray(GOLDEN)
    for position, value in edits:
        data[position] = value
    with contextlib.suppress(ProtocolError):
        decode_batch(bytes(data), "T")
