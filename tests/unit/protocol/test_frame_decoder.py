"""Frame layer: golden bytes, stream splitting, limits, and a decoder that stays failed."""

from __future__ import annotations

import struct
from array import array
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.protocol import MAX_FRAME_SIZE, Frame, FrameDecoder, ProtocolError, encode_frame
from tidemq.protocol.frame import frame_prefix


def test_encode_frame_golden_json() -> None:
    assert encode_frame(0, b"{}", b"xy") == bytes.fromhex("00000008 00000002") + b"{}xy"


def test_encode_frame_golden_binary_type_in_high_byte() -> None:
    assert encode_frame(1, b"h") == bytes.fromhex("00000005 01000001 68")


def test_encode_frame_accepts_memoryview_parts() -> None:
    body = memoryview(b"..body..")[2:6]
    assert encode_frame(0, bytearray(b"{}"), body) == encode_frame(0, b"{}", b"body")


def test_frame_prefix_matches_encode_frame() -> None:
    assert frame_prefix(1, 3, 5) + b"hdrbody!" == encode_frame(1, b"hdr", b"body!")


@pytest.mark.parametrize(
    ("serialize_type", "header", "body"),
    [
        (2, b"", b""),
        (0, b"x" * (0xFFFFFF + 1), b""),
        (0, b"", b"x" * MAX_FRAME_SIZE),
    ],
    ids=["unknown-type", "header-over-24-bits", "frame-over-max"],
)
def test_encode_frame_refuses_what_no_peer_could_read(
    serialize_type: int, header: bytes, body: bytes
) -> None:
    with pytest.raises(ProtocolError):
        encode_frame(serialize_type, header, body)


def test_decode_whole_frame() -> None:
    frames = FrameDecoder().feed(encode_frame(0, b'{"code":1}', b"payload"))
    assert frames == [Frame(0, b'{"code":1}', b"payload")]


def test_empty_header_and_body() -> None:
    assert FrameDecoder().feed(bytes.fromhex("00000004 00000000")) == [Frame(0, b"", b"")]


def test_stream_fed_one_byte_at_a_time_gives_the_same_frames() -> None:
    expected = [Frame(0, b"{}", b""), Frame(1, b"binary", b"body"), Frame(0, b"h" * 300, b"b" * 70)]
    stream = b"".join(encode_frame(f.serialize_type, f.header, f.body) for f in expected)
    decoder = FrameDecoder()
    got: list[Frame] = []
    for index in range(len(stream)):
        got += decoder.feed(stream[index : index + 1])
    assert got == expected
    assert decoder.buffered == 0


def test_trailing_partial_frame_stays_buffered() -> None:
    first = encode_frame(0, b"{}", b"one")
    second = encode_frame(1, b"hdr", b"two")
    decoder = FrameDecoder()
    assert decoder.feed(first + second[:9]) == [Frame(0, b"{}", b"one")]
    assert decoder.buffered == 9
    assert decoder.feed(second[9:]) == [Frame(1, b"hdr", b"two")]
    assert decoder.buffered == 0


def test_prefix_split_inside_the_length_fields() -> None:
    frame = encode_frame(0, b"{}", b"")
    decoder = FrameDecoder()
    assert decoder.feed(frame[:3]) == []
    assert decoder.feed(frame[3:6]) == []
    assert decoder.buffered == 6
    assert decoder.feed(frame[6:]) == [Frame(0, b"{}", b"")]


def test_feed_accepts_bytearray_and_memoryviews() -> None:
    frame = encode_frame(0, b"{}", b"abcd")
    decoder = FrameDecoder()
    assert decoder.feed(bytearray(frame[:5])) == []
    assert decoder.feed(memoryview(frame)[5:]) == [Frame(0, b"{}", b"abcd")]
    words = array("I")
    words.frombytes(frame + b"\x00" * (-len(frame) % 4))
    assert FrameDecoder().feed(memoryview(words))[0] == Frame(0, b"{}", b"abcd")


def test_feed_does_not_pin_the_callers_bytearray() -> None:
    data = bytearray(encode_frame(0, b"{}", b"x") + b"\x00\x00")
    FrameDecoder().feed(data)
    data.extend(b"more")  # raises BufferError if a memoryview on it were still alive


def test_oversize_declared_length_fails_on_the_first_four_bytes() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match="exceeds"):
        decoder.feed(struct.pack(">i", MAX_FRAME_SIZE + 1))


def test_maximal_declared_length_is_accepted_and_waits() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(struct.pack(">iI", MAX_FRAME_SIZE, 10)) == []
    assert decoder.buffered == 8


def test_custom_max_frame_size() -> None:
    decoder = FrameDecoder(max_frame_size=100)
    with pytest.raises(ProtocolError):
        decoder.feed(encode_frame(0, b"{}", b"x" * 200))


@pytest.mark.parametrize(
    "prefix",
    [
        struct.pack(">iI", -1, 0),
        struct.pack(">iI", -(2**31), 0),
        struct.pack(">iI", 0, 0),
        struct.pack(">iI", 3, 0),
        struct.pack(">iI", 10, 7),  # header 7 > 10 - 4
        struct.pack(">iI", 10, 0x02000000),  # serialize type 2
        struct.pack(">iI", 10, 0xFF000000),  # serialize type 255
    ],
    ids=["minus-one", "int-min", "zero", "below-four", "header-too-long", "type-2", "type-255"],
)
def test_inconsistent_prefix_is_a_protocol_error(prefix: bytes) -> None:
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(prefix + b"\x00" * 16)


def test_decoder_stays_failed_after_an_error() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError):
        decoder.feed(struct.pack(">iI", -5, 0))
    assert decoder.failed
    with pytest.raises(ProtocolError, match="already failed"):
        decoder.feed(encode_frame(0, b"{}"))
    assert decoder.buffered == 0


def test_one_byte_feeding_decodes_the_whole_frame() -> None:
    # 257 KiB one byte at a time: nothing is returned early and the frame comes out whole.
    # (How fast is benchmarks' business, not a wall-clock bound on this shared machine.)
    stream = encode_frame(1, b"h" * 1000, b"b" * (256 * 1024))
    decoder = FrameDecoder()
    frames: list[Frame] = []
    for index in range(len(stream)):
        frames += decoder.feed(stream[index : index + 1])
    assert len(frames) == 1
    assert len(frames[0].body) == 256 * 1024


frames_strategy = st.lists(
    st.builds(
        Frame,
        serialize_type=st.sampled_from([0, 1]),
        header=st.binary(max_size=300),
        body=st.binary(max_size=300),
    ),
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(frames=frames_strategy, cuts=st.lists(st.integers(min_value=0, max_value=4000)))
def test_round_trip_with_any_split(frames: list[Frame], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(f.serialize_type, f.header, f.body) for f in frames)
    points = sorted({0, len(stream), *(cut for cut in cuts if cut < len(stream))})
    decoder = FrameDecoder()
    got: list[Frame] = []
    for start, end in pairwise(points):
        got += decoder.feed(stream[start:end])
    assert got == frames
    assert decoder.buffered == 0


@settings(max_examples=300, deadline=1000)
@given(data=st.binary(max_size=2000), chunk=st.integers(min_value=1, max_value=64))
def test_random_bytes_decode_or_raise_protocol_error(data: bytes, chunk: int) -> None:
    decoder = FrameDecoder()
    try:
        for start in range(0, len(data), chunk):
            decoder.feed(data[start : start + chunk])
    except ProtocolError:
        return
    assert decoder.buffered <= len(data)


@settings(max_examples=150, deadline=None)
@given(frames=frames_strategy, cuts=st.lists(st.integers(min_value=0, max_value=4000)))
def test_pending_frame_size_is_the_whole_size_of_the_frame_held_back(
    frames: list[Frame], cuts: list[int]
) -> None:
    encoded = [encode_frame(f.serialize_type, f.header, f.body) for f in frames]
    starts = {sum(len(e) for e in encoded[:i]): len(encoded[i]) for i in range(len(encoded))}
    stream = b"".join(encoded)
    points = sorted({0, len(stream), *(cut for cut in cuts if cut < len(stream))})
    decoder = FrameDecoder()
    for start, end in pairwise(points):
        decoder.feed(stream[start:end])
        held = decoder.buffered
        expected = 0 if held == 0 else held if held < 4 else starts[end - held]
        assert decoder.pending_frame_size == expected
        assert held <= decoder.pending_frame_size


def test_pending_frame_size_of_a_declared_maximal_frame() -> None:
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">iI", MAX_FRAME_SIZE, 10) + b"x" * 100)
    assert decoder.pending_frame_size == 4 + MAX_FRAME_SIZE
    assert decoder.buffered == 108
