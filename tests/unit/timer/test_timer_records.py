"""read_parked agrees with the full record decoder."""

from __future__ import annotations

import pytest

from tidemq.protocol.errors import ProtocolError
from tidemq.record.codec import decode_record, encode_record
from tidemq.timer.records import read_parked


@pytest.mark.parametrize(
    ("topic", "born", "store"),
    [
        (b"T", b"\x0a\x00\x00\x01", b"\x7f\x00\x00\x01"),
        (b"T" * 200, b"\x00" * 15 + b"\x01", b"\x7f\x00\x00\x01"),  # v2 magic, IPv6 born
        (b"Topic", b"\x0a\x00\x00\x02", b"\x00" * 15 + b"\x02"),  # IPv6 store
    ],
)
def test_read_parked_matches_decode_record(topic: bytes, born: bytes, store: bytes) -> None:
    raw = encode_record(
        topic, 0, 7, 3, 1234, 0x8, 1_700_000_000_001, born, 4321,
        1_700_000_000_002, store, 10911, 2, 0, b"\x00body\xff", b"a\x01b\x02REAL_TOPIC\x01X\x02",
    )  # fmt: skip
    parked = read_parked(raw)
    full, _ = decode_record(raw)
    assert parked.body == full.body == b"\x00body\xff"
    assert (parked.flag, parked.sys_flag, parked.reconsume_times) == (7, full.sys_flag, 2)
    assert parked.born_timestamp == full.born_timestamp
    assert parked.store_timestamp == full.store_timestamp
    assert (parked.born_host, parked.born_port) == (born, 4321)
    assert parked.properties == "a\x01b\x02REAL_TOPIC\x01X\x02"
    with pytest.raises(ProtocolError):
        read_parked(raw[:-1])
    with pytest.raises(ProtocolError):
        read_parked(raw + b"\x00")
