"""Recognising a peer that speaks another protocol from its first bytes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidemq.protocol import RemotingCommand, SerializeType
from tidemq.protocol.sniff import SNIFF_BYTES, foreign_protocol

# What a grpcio server sent to a remoting request (captured from tidemq serve's gRPC
# port): SETTINGS (24-byte payload), then WINDOW_UPDATE.
GRPC_SERVER_OPENING = bytes.fromhex(
    "000018040000000000000400400000000500400000000600004000fe0300000001000004080000000000003f0001"
)


def test_http2_servers_and_clients() -> None:
    assert foreign_protocol(GRPC_SERVER_OPENING) == "HTTP/2"
    assert foreign_protocol(GRPC_SERVER_OPENING[:9]) == "HTTP/2"
    assert foreign_protocol(bytes.fromhex("000000040100000000")) == "HTTP/2"  # empty SETTINGS ACK
    assert foreign_protocol(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") == "HTTP/2"


def test_http1_and_tls() -> None:
    assert foreign_protocol(b"HTTP/1.1 400 Bad Request\r\n") == "HTTP/1.x"
    assert foreign_protocol(b"GET / HTTP/1.1\r\n") == "HTTP/1.x"
    assert foreign_protocol(bytes([21, 3, 3, 0, 2, 2, 40])) == "TLS"  # alert
    assert foreign_protocol(bytes([22, 3, 1, 0, 200])) == "TLS"  # handshake


def test_too_few_bytes_say_nothing_yet() -> None:
    assert foreign_protocol(b"") is None
    assert foreign_protocol(GRPC_SERVER_OPENING[:8]) is None


def test_a_settings_lookalike_with_another_type_or_stream_is_not_http2() -> None:
    assert foreign_protocol(bytes.fromhex("000018010000000001")) is None  # HEADERS
    assert foreign_protocol(bytes.fromhex("000018040000000001")) is None  # stream 1
    assert foreign_protocol(bytes.fromhex("000019040000000000")) is None  # not 6k bytes


@given(
    code=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(0, 2**31 - 1),
    fields=st.dictionaries(
        st.text("abcXYZ_", min_size=1, max_size=8), st.text(max_size=16), max_size=4
    ),
    body=st.binary(max_size=64),
    binary_header=st.booleans(),
    response=st.booleans(),
)
def test_no_remoting_frame_reads_as_another_protocol(
    code: int,
    opaque: int,
    fields: dict[str, str],
    body: bytes,
    binary_header: bool,
    response: bool,
) -> None:
    command = RemotingCommand.request(code, fields, body)
    command.opaque = opaque
    if response:
        command.flag |= 1
    if binary_header:
        command.serialize_type = SerializeType.ROCKETMQ
    frame = command.encode()
    for size in range(1, SNIFF_BYTES + 1):
        assert foreign_protocol(frame[:size]) is None
