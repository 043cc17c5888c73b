"""Fuzzing the command decoder: garbage decodes or raises ProtocolError, nothing else."""

from __future__ import annotations

import json
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.protocol import (
    CommandDecoder,
    Frame,
    ProtocolError,
    RemotingCommand,
    SerializeType,
    decode_command,
)

FUZZ = settings(max_examples=300, deadline=1000)
FUZZ_SLOW_STRATEGY = settings(max_examples=150, deadline=1000)


def feed_all(data: bytes, chunk: int) -> None:
    """Feed ``data`` in chunks; the only acceptable failure is ProtocolError."""
    decoder = CommandDecoder()
    try:
        for start in range(0, len(data), chunk):
            for command in decoder.feed(data[start : start + chunk]):
                assert isinstance(command, RemotingCommand)
    except ProtocolError:
        return


def decode_header_only(serialize_type: int, header: bytes) -> None:
    try:
        decode_command(Frame(serialize_type, header, b""))
    except ProtocolError:
        return


valid_commands = st.builds(
    RemotingCommand,
    code=st.integers(-100, 400),
    opaque=st.integers(0, 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.none() | st.text(min_size=1, max_size=20),
    ext_fields=st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=5),
    body=st.binary(max_size=32),
    serialize_type=st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]),
)


@st.composite
def mutated_streams(draw: st.DrawFn) -> bytes:
    """Valid frames, then one of: flipped bytes, truncation, rewritten length fields."""
    frames = [
        command.encode() for command in draw(st.lists(valid_commands, min_size=1, max_size=3))
    ]
    data = bytearray(b"".join(frames))
    for _ in range(draw(st.integers(1, 4))):
        mutation = draw(
            st.sampled_from(["flip", "truncate", "total", "header", "insert", "delete"])
        )
        if not data:
            break
        position = draw(st.integers(0, len(data) - 1))
        if mutation == "flip":
            data[position] ^= draw(st.integers(1, 255))
        elif mutation == "truncate":
            del data[position:]
        elif mutation == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif mutation == "delete":
            del data[position : position + draw(st.integers(1, 8))]
        elif len(data) >= 8:
            offset = 0 if mutation == "total" else 4
            value = draw(st.integers(-(2**31), 2**31 - 1) | st.integers(-8, 300))
            data[offset : offset + 4] = struct.pack(">i", value)
    return bytes(data)


@FUZZ
@given(data=st.binary(max_size=4000), chunk=st.integers(1, 512))
def test_random_bytes(data: bytes, chunk: int) -> None:
    feed_all(data, chunk)


@FUZZ_SLOW_STRATEGY
@given(data=mutated_streams(), chunk=st.integers(1, 64))
def test_mutated_valid_frames(data: bytes, chunk: int) -> None:
    feed_all(data, chunk)


@FUZZ
@given(header=st.binary(max_size=600), serialize_type=st.sampled_from([0, 1]))
def test_random_headers(header: bytes, serialize_type: int) -> None:
    decode_header_only(serialize_type, header)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)
header_like = st.fixed_dictionaries(
    {},
    optional={
        "code": json_values,
        "language": json_values,
        "version": json_values,
        "opaque": json_values,
        "flag": json_values,
        "remark": json_values,
        "extFields": json_values | st.dictionaries(st.text(max_size=8), json_values, max_size=5),
        "serializeTypeCurrentRPC": json_values,
    },
)


@FUZZ_SLOW_STRATEGY
@given(document=header_like | json_values)
def test_json_documents_of_any_shape(document: object) -> None:
    decode_header_only(0, json.dumps(document).encode())


@FUZZ_SLOW_STRATEGY
@given(
    document=header_like,
    cut=st.integers(0, 400),
    garbage=st.binary(max_size=4),
)
def test_damaged_json_text(document: object, cut: int, garbage: bytes) -> None:
    text = json.dumps(document).encode()
    decode_header_only(0, text[:cut] + garbage + text[cut:])
    decode_header_only(0, text[:cut])


@FUZZ
@given(
    prefix=st.binary(max_size=21),
    lengths=st.lists(st.integers(-(2**31), 2**31 - 1) | st.integers(-4, 40), max_size=6),
    tail=st.binary(max_size=60),
)
def test_binary_headers_with_arbitrary_length_fields(
    prefix: bytes, lengths: list[int], tail: bytes
) -> None:
    header = prefix + b"".join(struct.pack(">i", value) for value in lengths) + tail
    decode_header_only(1, header)


@st.composite
def length(draw: st.DrawFn, actual: int, fmt: str) -> bytes:
    """A length field that is usually right and sometimes anything at all."""
    bits = 16 if fmt == ">h" else 32
    value = draw(
        st.just(actual)
        | st.integers(actual - 3, actual + 3)
        | st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    )
    value = max(-(2 ** (bits - 1)), min(2 ** (bits - 1) - 1, value))
    return struct.pack(fmt, value)


@st.composite
def structured_binary_headers(draw: st.DrawFn) -> bytes:
    remark = draw(st.binary(max_size=12))
    entries = []
    for key, value in draw(st.lists(st.tuples(st.binary(max_size=6), st.binary(max_size=9)))):
        entries.append(draw(length(len(key), ">h")) + key + draw(length(len(value), ">i")) + value)
    ext = b"".join(entries) + draw(st.binary(max_size=3))
    return (
        draw(st.binary(min_size=13, max_size=13))
        + draw(length(len(remark), ">i"))
        + remark
        + draw(length(len(ext), ">i"))
        + ext
    )


@FUZZ_SLOW_STRATEGY
@given(header=structured_binary_headers())
def test_structured_binary_headers(header: bytes) -> None:
    decode_header_only(1, header)
