"""The HA stream's codec: transfers and reports, whole, split anyhow, and refused when bad."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.ha import (
    REPORT_SIZE,
    TRANSFER_HEADER_SIZE,
    ReportDecoder,
    Transfer,
    TransferDecoder,
    encode_report,
    encode_transfer_header,
)

offsets = st.integers(min_value=0, max_value=2**63 - 1)
bodies = st.binary(max_size=300)


def encode(transfers: list[Transfer]) -> bytes:
    return b"".join(encode_transfer_header(t.offset, len(t.body)) + t.body for t in transfers)


def test_layouts_are_rocketmqs() -> None:
    """DefaultHAConnection: physicOffset int64 + bodySize int32; DefaultHAClient: int64."""
    assert TRANSFER_HEADER_SIZE == 12 and REPORT_SIZE == 8
    assert encode_transfer_header(0x0102030405060708, 0x0A0B0C0D) == bytes.fromhex(
        "01020304050607080a0b0c0d"
    )
    assert encode_report(1234) == struct.pack(">q", 1234)


def test_a_heartbeat_is_a_transfer_without_a_body() -> None:
    (beat,) = TransferDecoder().feed(encode_transfer_header(4096, 0))
    assert beat == Transfer(4096, b"")
    assert beat.heartbeat and beat.end == 4096


@given(st.lists(st.tuples(offsets, bodies), max_size=12), st.data())
def test_transfers_survive_any_split(items: list[tuple[int, bytes]], data: st.DataObject) -> None:
    transfers = [Transfer(offset, body) for offset, body in items]
    stream = encode(transfers) + encode_transfer_header(7, 5)[:7]  # a partial header trails
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    decoder = TransferDecoder()
    got: list[Transfer] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        got += decoder.feed(stream[start:cut])
        start = cut
    assert got == transfers
    assert decoder.buffered == 7


def test_one_byte_at_a_time() -> None:
    transfers = [Transfer(0, b"abc"), Transfer(3, b""), Transfer(3, b"defgh")]
    decoder = TransferDecoder()
    got = [t for byte in encode(transfers) for t in decoder.feed(bytes([byte]))]
    assert got == transfers
    assert decoder.buffered == 0


@pytest.mark.parametrize(
    ("offset", "size"), [(-1, 0), (0, -1), (0, 1025)], ids=["offset", "size", "too-big"]
)
def test_a_bad_header_fails_the_stream_before_its_body(offset: int, size: int) -> None:
    decoder = TransferDecoder(max_body=1024)
    with pytest.raises(ProtocolError):
        decoder.feed(struct.pack(">qi", offset, size))
    with pytest.raises(ProtocolError, match="failed earlier"):
        decoder.feed(encode_transfer_header(0, 0))


@given(st.binary(max_size=200))
def test_garbage_parses_or_raises_protocol_error(garbage: bytes) -> None:
    decoder = TransferDecoder(max_body=64)
    try:
        for transfer in decoder.feed(garbage):
            assert len(transfer.body) <= 64
    except ProtocolError:
        pass


def test_the_encoders_refuse_negative_numbers() -> None:
    with pytest.raises(ProtocolError):
        encode_report(-1)
    with pytest.raises(ProtocolError):
        encode_transfer_header(-5, 0)


@given(st.lists(offsets, min_size=1, max_size=10), st.data())
def test_reports_give_the_last_complete_one(reports: list[int], data: st.DataObject) -> None:
    """As Java's ReadSocketService: the last whole 8 bytes of what arrived count."""
    stream = b"".join(encode_report(r) for r in reports)
    cut = data.draw(st.integers(0, len(stream)))
    decoder = ReportDecoder()
    first = decoder.feed(stream[:cut])
    whole_in_first = cut // REPORT_SIZE
    assert first == (reports[whole_in_first - 1] if whole_in_first else None)
    assert decoder.feed(stream[cut:]) == (reports[-1] if len(reports) > whole_in_first else None)


def test_a_negative_report_is_refused() -> None:
    with pytest.raises(ProtocolError):
        ReportDecoder().feed(struct.pack(">q", -2))


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_a_hello_round_trips(replica_id: int) -> None:
    from tidemq.protocol.ha import decode_hello, encode_hello

    assert decode_hello(encode_hello(replica_id)) == replica_id


def test_a_report_is_not_a_hello() -> None:
    from tidemq.protocol.ha import decode_hello, encode_report

    with pytest.raises(ProtocolError, match="did not say which replica"):
        decode_hello(encode_report(5) + b"\0\0\0\0")
