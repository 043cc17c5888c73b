"""Offset message ids and client unique ids (UNIQ_KEY)."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.common.clock import ManualClock, SystemClock
from tidemq.common.message_id import (
    UniqueIdGenerator,
    decode_offset_message_id,
    nearly_time_from_id,
    offset_message_id,
    offset_message_id_address,
    parse_unique_id,
)

# -- offset message ids ---------------------------------------------------------


def test_offset_id_of_the_ali_ons_fixture() -> None:
    msg_id = offset_message_id(bytes([10, 218, 145, 166]), 10700, 0x6500E59F3E)
    assert msg_id == "0ADA91A6000029CC0000006500E59F3E"
    assert decode_offset_message_id(msg_id) == ("10.218.145.166", 10700, 0x6500E59F3E)


def test_offset_id_observed_for_a_local_broker() -> None:
    assert offset_message_id(bytes([127, 0, 0, 1]), 20911, 0) == (
        "7F000001000051AF0000000000000000"
    )


def test_ipv6_offset_id_is_56_hex_chars() -> None:
    host = ipaddress.IPv6Address("fe80::1").packed
    msg_id = offset_message_id(host, 10911, 12345)
    assert msg_id == "FE800000000000000000000000000001" + "00002A9F" + "0000000000003039"
    assert decode_offset_message_id(msg_id) == ("fe80::1", 10911, 12345)


def test_lower_case_ids_decode() -> None:
    assert decode_offset_message_id("0ada91a6000029cc0000006500e59f3e")[1] == 10700


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "0ADA91A6000029CC0000006500E59F3",  # 31 chars
        "0ADA91A6000029CC0000006500E59F3E00",  # 34 chars
        "0ADA91A6000029CC0000006500E59F3G",  # not hex
        "0ADA91A6 00029CC0000006500E59F3E",  # fromhex would skip the space
        "\u0660ADA91A6000029CC0000006500E59F3E",  # a non-ASCII digit
    ],
)
def test_malformed_offset_ids_raise_value_error(bad: str) -> None:
    with pytest.raises(ValueError):
        decode_offset_message_id(bad)


def test_offset_id_rejects_bad_hosts_and_ranges() -> None:
    with pytest.raises(ValueError):
        offset_message_id(b"\x01\x02\x03", 1, 0)
    with pytest.raises(ValueError):
        offset_message_id(b"\x01\x02\x03\x04", 2**31, 0)
    with pytest.raises(ValueError):
        offset_message_id(b"\x01\x02\x03\x04", 1, 2**63)


@settings(max_examples=100)
@given(
    st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16)),
    st.integers(0, 65535),
    st.integers(0, 2**63 - 1),
)
def test_offset_id_round_trip(host: bytes, port: int, offset: int) -> None:
    msg_id = offset_message_id(host, port, offset)
    assert len(msg_id) == (32 if len(host) == 4 else 56)
    assert msg_id == msg_id.upper()
    text, got_port, got_offset = decode_offset_message_id(msg_id)
    assert ipaddress.ip_address(text).packed == host
    assert (got_port, got_offset) == (port, offset)


# -- unique ids -------------------------------------------------------------------

START_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z
NOVEMBER_2023_MS = int(datetime(2023, 11, 1, tzinfo=UTC).timestamp() * 1000)


def test_unique_id_layout() -> None:
    gen = UniqueIdGenerator(
        ManualClock(START_MS), bytes([192, 168, 0, 7]), 0x1_2345, salt=0xCAFEBABE
    )
    uid = gen.next_id()
    span = START_MS - NOVEMBER_2023_MS
    assert uid == "C0A80007" + "2345" + "CAFEBABE" + f"{span:08X}" + "0000"
    assert parse_unique_id(uid) == ("192.168.0.7", 0x2345, 0xCAFEBABE, span, 0)
    assert gen.next_id().endswith(f"{span:08X}0001")
    assert gen.prefix == "C0A800072345CAFEBABE"


def test_ipv6_unique_id_is_56_hex_chars() -> None:
    host = ipaddress.IPv6Address("2001:db8::5").packed
    uid = UniqueIdGenerator(ManualClock(START_MS), host, 1, salt=2)()
    assert len(uid) == 56
    assert parse_unique_id(uid).ip == "2001:db8::5"


def test_unique_id_without_ip_uses_the_low_bytes_of_the_time() -> None:
    uid = UniqueIdGenerator(ManualClock(START_MS), salt=0).next_id()
    assert uid[:8] == f"{START_MS & 0xFFFFFFFF:08X}"


def test_100k_ids_in_a_tight_loop_are_distinct() -> None:
    gen = UniqueIdGenerator(SystemClock(), bytes([10, 0, 0, 1]), 4242)
    ids = [gen.next_id() for _ in range(100_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(uid) == 32 for uid in ids)
    int(ids[-1], 16)
    assert ids[-1] == ids[-1].upper()


def test_ids_stay_distinct_when_the_clock_stands_still() -> None:
    gen = UniqueIdGenerator(ManualClock(START_MS), bytes([10, 0, 0, 1]), 1, salt=1)
    ids = [gen.next_id() for _ in range(100_000)]  # more than the 16-bit counter holds
    assert len(set(ids)) == len(ids)
    spans = {parse_unique_id(uid).month_span_ms for uid in ids}
    assert min(spans) == START_MS - NOVEMBER_2023_MS
    assert max(spans) == min(spans) + 1  # borrowed one millisecond for the overflow


def test_time_part_moves_with_a_manual_clock() -> None:
    clock = ManualClock(START_MS)
    gen = UniqueIdGenerator(clock, bytes([10, 0, 0, 1]), 1, salt=1)
    first = parse_unique_id(gen.next_id()).month_span_ms
    clock.advance(1.5)
    second = parse_unique_id(gen.next_id()).month_span_ms
    assert second - first == 1500


def test_time_part_restarts_in_a_new_month() -> None:
    december = int(datetime(2023, 12, 1, tzinfo=UTC).timestamp() * 1000)
    clock = ManualClock(december - 1)
    gen = UniqueIdGenerator(clock, bytes([10, 0, 0, 1]), 1, salt=1)
    before = parse_unique_id(gen.next_id()).month_span_ms
    clock.advance(0.002)
    after = parse_unique_id(gen.next_id()).month_span_ms
    assert before == december - 1 - NOVEMBER_2023_MS
    assert after == 1


def test_nearly_time_from_id() -> None:
    clock = ManualClock(START_MS)
    uid = UniqueIdGenerator(clock, bytes([10, 0, 0, 1]), 1, salt=1).next_id()
    assert nearly_time_from_id(uid, START_MS + 60_000) == START_MS
    # read back in the next month, the id still lands in November
    december_5 = int(datetime(2023, 12, 5, tzinfo=UTC).timestamp() * 1000)
    assert nearly_time_from_id(uid, december_5) == START_MS
    # read on January 10th, a span of ~14 days lands in December (Java's ambiguity)
    january_10 = int(datetime(2024, 1, 10, tzinfo=UTC).timestamp() * 1000)
    december_same_span = int(datetime(2023, 12, 1, tzinfo=UTC).timestamp() * 1000) + (
        START_MS - NOVEMBER_2023_MS
    )
    assert nearly_time_from_id(uid, january_10) == december_same_span
    january_20 = int(datetime(2024, 1, 20, tzinfo=UTC).timestamp() * 1000)
    january_1 = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1000)
    assert nearly_time_from_id(uid, january_20) == january_1 + (START_MS - NOVEMBER_2023_MS)


@pytest.mark.parametrize("bad", ["", "ABC", "Z" * 32, "0" * 40])
def test_malformed_unique_ids_raise_value_error(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_unique_id(bad)


# -- telling the two apart ------------------------------------------------------


def test_an_offset_id_names_its_broker() -> None:
    assert offset_message_id_address("0ADA91A6000029CC0000006500E59F3E") == "10.218.145.166:10700"
    v6 = offset_message_id(ipaddress.IPv6Address("::1").packed, 10911, 42)
    assert offset_message_id_address(v6) == "[::1]:10911"


@given(pid=st.integers(1, 0xFFFF), salt=st.integers(0, 2**32 - 1))
def test_a_unique_id_is_not_read_as_an_offset_id(pid: int, salt: int) -> None:
    ids = UniqueIdGenerator(ManualClock(1_700_000_000_000), bytes([10, 0, 0, 1]), pid, salt=salt)
    assert offset_message_id_address(ids.next_id()) is None


def test_ids_that_are_neither_name_no_broker() -> None:
    for text in ("", "xyz", "0102FC000000014C160B17AA9500000000", "0" * 31):
        assert offset_message_id_address(text) is None
