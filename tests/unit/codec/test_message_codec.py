"""The stored-message record: golden bytes, round trips, fuzzing."""

from __future__ import annotations

import contextlib
import ipaddress
import zlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemq.common import sysflag
from tidemq.common.properties import decode_properties, encode_properties_bytes
from tidemq.protocol.errors import ProtocolError
from tidemq.record.codec import (
    BLANK_MAGIC,
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_V1,
    MESSAGE_MAGIC_V2,
    RecordHeader,
    decode_record,
    decode_record_columns,
    decode_records,
    encode_record,
    patch_offsets,
    peek_header,
    peek_properties,
    peek_topic_and_properties,
    record_size,
)


def i8(v: int) -> bytes:
    return v.to_bytes(1, "big", signed=True)


def i16(v: int) -> bytes:
    return v.to_bytes(2, "big", signed=True)


def i32(v: int) -> bytes:
    return v.to_bytes(4, "big", signed=True)


def i64(v: int) -> bytes:
    return v.to_bytes(8, "big", signed=True)


# -- golden records -----------------------------------------------------------

FIXTURE_BODY = b'{"room":"1","msg":"1"}'
FIXTURE_CRC = 1438513404  # java.util.zip.CRC32 of FIXTURE_BODY & 0x7FFFFFFF
BORN_IP = bytes([10, 62, 60, 82])
STORE_IP = bytes([10, 218, 145, 166])

# ali-ons test/fixtures/message.bin, first 132 bytes: a record a Java broker wrote.
ALI_ONS_MESSAGE_BIN = bytes.fromhex(
    "00000084daa320a755bdf8fc000000000000000000000000000001140000006500e59f3e"
    "000000000000014fefa25a930a3e3c520000d3390000014fefa25ad50ada91a6000029cc"
    "000000000000000000000000000000167b22726f6f6d223a2231222c226d7367223a2231"
    "227d09546f70696354657374000a54414753015461674102"
)

FIXTURE_FIELDS: dict[str, Any] = dict(
    topic=b"TopicTest",
    queue_id=0,
    flag=0,
    queue_offset=276,
    physical_offset=0x6500E59F3E,
    sys_flag=0,
    born_timestamp=1442834438803,
    born_host=BORN_IP,
    born_port=54073,
    store_timestamp=1442834438869,
    store_host=STORE_IP,
    store_port=10700,
    reconsume_times=0,
    prepared_transaction_offset=0,
    body=FIXTURE_BODY,
    properties=b"TAGS\x01TagA\x02",
)


def golden_ipv4_record() -> bytes:
    """Field by field, following the layout table (IPv4, v1)."""
    return b"".join(
        [
            i32(132),  # 0 TOTALSIZE = 91 + 22 + 9 + 10
            bytes.fromhex("DAA320A7"),  # 4 MAGICCODE v1
            i32(FIXTURE_CRC),  # 8 BODYCRC
            i32(0),  # 12 QUEUEID
            i32(0),  # 16 FLAG
            i64(276),  # 20 QUEUEOFFSET
            i64(0x6500E59F3E),  # 28 PHYSICALOFFSET
            i32(0),  # 36 SYSFLAG
            i64(1442834438803),  # 40 BORNTIMESTAMP
            BORN_IP + i32(54073),  # 48 BORNHOST
            i64(1442834438869),  # 56 STORETIMESTAMP
            STORE_IP + i32(10700),  # 64 STOREHOST
            i32(0),  # 72 RECONSUMETIMES
            i64(0),  # 76 PREPARED TRANSACTION OFFSET
            i32(22) + FIXTURE_BODY,  # 84 BODYLENGTH + 88 BODY
            i8(9) + b"TopicTest",  # 110 TOPICLENGTH + TOPIC
            i16(10) + b"TAGS\x01TagA\x02",  # 120 PROPERTIESLENGTH + PROPERTIES
        ]
    )


def test_golden_ipv4_record_matches_the_ali_ons_fixture() -> None:
    golden = golden_ipv4_record()
    assert len(golden) == 132 == record_size(22, 9, 10)
    assert golden == ALI_ONS_MESSAGE_BIN
    assert encode_record(**FIXTURE_FIELDS) == golden


def test_decode_the_golden_ipv4_record() -> None:
    message, size = decode_record(ALI_ONS_MESSAGE_BIN, verify_crc=True)
    assert size == 132
    assert message.msg_id == "0ADA91A6000029CC0000006500E59F3E"
    assert message.topic == "TopicTest"
    assert message.body == FIXTURE_BODY
    assert message.properties == {"TAGS": "TagA"}
    assert message.tags == "TagA"
    assert message.queue_offset == 276
    assert message.commit_log_offset == 0x6500E59F3E
    assert message.born_host == "10.62.60.82:54073"
    assert message.store_host == "10.218.145.166:10700"
    assert message.born_timestamp == 1442834438803
    assert message.store_timestamp == 1442834438869
    assert message.store_size == 132
    assert message.body_crc == FIXTURE_CRC
    assert (message.queue_id, message.flag, message.sys_flag) == (0, 0, 0)
    assert (message.reconsume_times, message.prepared_transaction_offset) == (0, 0)


V6_BORN = ipaddress.IPv6Address("2001:db8::1").packed
V6_STORE = ipaddress.IPv6Address("fe80::2").packed


def test_golden_ipv6_record() -> None:
    body, topic, raw_props = b"hi", b"T6", b"K\x01v\x02"
    expected = b"".join(
        [
            i32(91 + 24 + 2 + 2 + 4),  # two IPv6 hosts add 12 bytes each
            i32(MESSAGE_MAGIC_V1),
            i32(zlib.crc32(body) & 0x7FFFFFFF),
            i32(3),
            i32(-1),
            i64(5),
            i64(1000),
            i32(sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6 | sysflag.MULTI_TAGS),  # 36
            i64(11),  # 40 BORNTIMESTAMP
            V6_BORN + i32(1234),  # 48 BORNHOST 16 + 4
            i64(12),  # 68 STORETIMESTAMP
            V6_STORE + i32(10911),  # 76 STOREHOST 16 + 4
            i32(2),  # 96 RECONSUMETIMES
            i64(77),  # 100 PREPARED TRANSACTION OFFSET
            i32(2) + body,  # 108 BODYLENGTH, 112 BODY
            i8(2) + topic,
            i16(4) + raw_props,
        ]
    )
    encoded = encode_record(
        topic=topic,
        queue_id=3,
        flag=-1,
        queue_offset=5,
        physical_offset=1000,
        sys_flag=sysflag.MULTI_TAGS,  # V6 bits come from the host lengths
        born_timestamp=11,
        born_host=V6_BORN,
        born_port=1234,
        store_timestamp=12,
        store_host=V6_STORE,
        store_port=10911,
        reconsume_times=2,
        prepared_transaction_offset=77,
        body=body,
        properties=raw_props,
    )
    assert encoded == expected
    assert len(encoded) == record_size(2, 2, 4, born_v6=True, store_v6=True)
    message, size = decode_record(encoded)
    assert size == len(expected)
    assert message.born_host == "[2001:db8::1]:1234"
    assert message.store_host == "[fe80::2]:10911"
    assert message.msg_id == V6_STORE.hex().upper() + "00002A9F" + "00000000000003E8"
    assert peek_header(encoded).store_timestamp == 12


def test_golden_v2_record_for_a_long_topic() -> None:
    topic = b"t" * 200
    expected = b"".join(
        [
            i32(92 + 0 + 200 + 0),
            bytes.fromhex("DAA320AB"),  # MAGICCODE v2
            i32(0),  # CRC of an empty body
            i32(1),
            i32(0),
            i64(0),
            i64(0),
            i32(0),
            i64(0),
            bytes(4) + i32(0),
            i64(0),
            bytes(4) + i32(0),
            i32(0),
            i64(0),
            i32(0),  # empty body
            i16(200) + topic,  # 2-byte TOPICLENGTH
            i16(0),  # no properties
        ]
    )
    encoded = encode_record(
        topic=topic,
        queue_id=1,
        flag=0,
        queue_offset=0,
        physical_offset=0,
        sys_flag=0,
        born_timestamp=0,
        born_host=bytes(4),
        born_port=0,
        store_timestamp=0,
        store_host=bytes(4),
        store_port=0,
        reconsume_times=0,
        prepared_transaction_offset=0,
        body=b"",
        properties=b"",
    )
    assert encoded == expected
    assert len(encoded) == record_size(0, 200, 0, v2=True)
    message, _ = decode_record(encoded)
    assert message.topic == "t" * 200
    assert message.body == b""
    assert peek_header(encoded).magic == MESSAGE_MAGIC_V2


def test_magic_constants() -> None:
    assert int.from_bytes(bytes.fromhex("DAA320A7"), "big", signed=True) == MESSAGE_MAGIC_V1
    assert int.from_bytes(bytes.fromhex("DAA320AB"), "big", signed=True) == MESSAGE_MAGIC_V2
    assert int.from_bytes(bytes.fromhex("CBD43194"), "big", signed=True) == BLANK_MAGIC
    assert END_FILE_MIN_BLANK_LENGTH == 8


def test_topic_of_127_bytes_still_uses_v1() -> None:
    encoded = encode_record(**{**FIXTURE_FIELDS, "topic": b"a" * 127})
    assert peek_header(encoded).magic == MESSAGE_MAGIC_V1
    assert len(encoded) == record_size(22, 127, 10)


def test_v6_bits_are_cleared_for_ipv4_hosts() -> None:
    flags = sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6 | sysflag.COMPRESSED
    encoded = encode_record(**{**FIXTURE_FIELDS, "sys_flag": flags})
    assert peek_header(encoded).sys_flag == sysflag.COMPRESSED
    mixed = encode_record(**{**FIXTURE_FIELDS, "born_host": V6_BORN})
    assert peek_header(mixed).sys_flag == sysflag.BORNHOST_V6
    assert decode_record(mixed)[0].store_host == "10.218.145.166:10700"


@pytest.mark.parametrize(
    "change",
    [
        {"properties": b"x" * 32768},
        {"topic": b"x" * 32768},
        {"born_host": b"\x01\x02\x03"},
        {"store_host": b""},
        {"queue_id": 2**31},
        {"queue_offset": 2**63},
        {"body_crc": -(2**31) - 1},
    ],
)
def test_encoder_rejects_out_of_range_fields(change: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        encode_record(**{**FIXTURE_FIELDS, **change})


def test_given_body_crc_is_written_as_is() -> None:
    encoded = encode_record(**FIXTURE_FIELDS, body_crc=7)
    assert peek_header(encoded).body_crc == 7
    with pytest.raises(ProtocolError, match="CRC"):
        decode_record(encoded, verify_crc=True)
    assert decode_record(encoded)[0].body_crc == 7


# -- peeks and patches --------------------------------------------------------


def test_peek_header() -> None:
    assert peek_header(b"junk" + ALI_ONS_MESSAGE_BIN, 4) == RecordHeader(
        total_size=132,
        magic=MESSAGE_MAGIC_V1,
        body_crc=FIXTURE_CRC,
        queue_id=0,
        queue_offset=276,
        physical_offset=0x6500E59F3E,
        sys_flag=0,
        store_timestamp=1442834438869,
    )
    with pytest.raises(ProtocolError):
        peek_header(ALI_ONS_MESSAGE_BIN[:60])
    with pytest.raises(ProtocolError):
        peek_header(ALI_ONS_MESSAGE_BIN, -1)


def test_peek_header_does_not_judge_the_magic() -> None:
    blank = i32(64) + i32(BLANK_MAGIC) + bytes(56)
    header = peek_header(blank)
    assert (header.total_size, header.magic) == (64, BLANK_MAGIC)


def test_peek_topic_and_properties() -> None:
    view = memoryview(b"xx" + ALI_ONS_MESSAGE_BIN + b"tail")
    assert peek_topic_and_properties(view, 2) == ("TopicTest", "TAGS\x01TagA\x02")
    with pytest.raises(ProtocolError):
        peek_topic_and_properties(ALI_ONS_MESSAGE_BIN[:131])
    assert peek_properties(view, 2) == "TAGS\x01TagA\x02"
    for cut in (0, 20, 131, len(ALI_ONS_MESSAGE_BIN) - 1):
        with pytest.raises(ProtocolError):
            peek_properties(ALI_ONS_MESSAGE_BIN[:cut])


def test_patch_offsets_in_place() -> None:
    buf = bytearray(b"pad" + ALI_ONS_MESSAGE_BIN)
    patch_offsets(buf, 3, 9, 0x1234)
    message, _ = decode_record(buf, 3, verify_crc=True)
    assert (message.queue_offset, message.commit_log_offset) == (9, 0x1234)
    assert message.msg_id.endswith("0000000000001234")


# -- runs, trailing data, truncation ------------------------------------------


def _record(queue_offset: int, body: bytes, physical: int) -> bytes:
    fields = {**FIXTURE_FIELDS, "queue_offset": queue_offset, "body": body}
    return encode_record(**{**fields, "physical_offset": physical})


def test_decode_a_run_of_records_back_to_back() -> None:
    records, physical = [], 1000
    for i in range(5):
        record = _record(i, b"body-%d" % i * i, physical)
        records.append(record)
        physical += len(record)
    run = b"".join(records)
    messages = decode_records(run, verify_crc=True)
    assert [m.queue_offset for m in messages] == [0, 1, 2, 3, 4]
    assert [m.body for m in messages] == [b"body-%d" % i * i for i in range(5)]
    assert [m.commit_log_offset for m in messages[1:]] == [
        m.commit_log_offset + m.store_size for m in messages[:-1]
    ]
    assert decode_records(memoryview(run)) == messages
    assert decode_records(b"") == []


def test_trailing_garbage_is_left_alone_by_decode_record() -> None:
    message, size = decode_record(ALI_ONS_MESSAGE_BIN + b"\xff" * 50)
    assert size == 132
    assert message.body == FIXTURE_BODY
    with pytest.raises(ProtocolError):
        decode_records(ALI_ONS_MESSAGE_BIN + b"\xff" * 50)


def test_every_truncation_raises_protocol_error() -> None:
    for cut in range(len(ALI_ONS_MESSAGE_BIN)):
        with pytest.raises(ProtocolError):
            decode_record(ALI_ONS_MESSAGE_BIN[:cut])


def _with(record: bytes, position: int, value: bytes) -> bytes:
    return record[:position] + value + record[position + len(value) :]


@pytest.mark.parametrize(
    ("position", "value", "reason"),
    [
        (0, i32(1000), "overruns"),  # TOTALSIZE beyond the buffer
        (0, i32(133), "TOTALSIZE"),
        (0, i32(131), "TOTALSIZE"),  # TOTALSIZE disagrees with the lengths
        (4, i32(0x12345678), "magic"),
        (4, i32(BLANK_MAGIC), "magic"),
        (84, i32(-1), "negative body"),
        (84, i32(23), "TOTALSIZE|overruns"),
        (110, i8(-1), "negative topic"),
        (120, i16(-10), "negative properties"),
        (111, b"\xff", "topic is not UTF-8"),
        (122, b"\xc3", "properties is not UTF-8"),
        (36, i32(sysflag.STOREHOST_V6), "TOTALSIZE|overruns|negative"),
    ],
)
def test_malformed_records_raise_protocol_error(position: int, value: bytes, reason: str) -> None:
    bad = _with(ALI_ONS_MESSAGE_BIN, position, value)
    with pytest.raises(ProtocolError, match=reason):
        decode_record(bad + bytes(64))


# -- compression ----------------------------------------------------------------


def test_zlib_body_is_inflated_on_request() -> None:
    plain = b"Hello MetaQ !!!" * 50
    packed = zlib.compress(plain)
    fields = {**FIXTURE_FIELDS, "body": packed, "sys_flag": sysflag.COMPRESSED}
    encoded = encode_record(**fields)
    stored, _ = decode_record(encoded, verify_crc=True)
    assert stored.body == packed
    assert stored.sys_flag == sysflag.COMPRESSED
    assert stored.body_crc == zlib.crc32(packed) & 0x7FFFFFFF  # CRC of the stored bytes
    inflated, _ = decode_record(encoded, verify_crc=True, decompress=True)
    assert inflated.body == plain
    assert inflated.sys_flag == 0


def test_explicit_zlib_type_is_inflated_and_lz4_left_alone() -> None:
    plain = b"abc" * 10
    zlib_flags = sysflag.COMPRESSED | sysflag.COMPRESSION_ZLIB_TYPE
    zlib_record = encode_record(
        **{**FIXTURE_FIELDS, "body": zlib.compress(plain), "sys_flag": zlib_flags}
    )
    message, _ = decode_record(zlib_record, decompress=True)
    assert (message.body, message.sys_flag) == (plain, sysflag.COMPRESSION_ZLIB_TYPE)
    lz4_flags = sysflag.COMPRESSED | sysflag.COMPRESSION_LZ4_TYPE
    lz4_record = encode_record(
        **{**FIXTURE_FIELDS, "body": b"\x04\x22opaque", "sys_flag": lz4_flags}
    )
    message, _ = decode_record(lz4_record, decompress=True)
    assert (message.body, message.sys_flag) == (b"\x04\x22opaque", lz4_flags)


@pytest.mark.parametrize("body", [b"not zlib at all", zlib.compress(b"x" * 100)[:-3]])
def test_bad_compressed_body_raises_protocol_error(body: bytes) -> None:
    fields = {**FIXTURE_FIELDS, "body": body, "sys_flag": sysflag.COMPRESSED}
    encoded = encode_record(**fields)
    assert decode_record(encoded)[0].body == body
    with pytest.raises(ProtocolError):
        decode_record(encoded, decompress=True)


# -- sysflag helpers --------------------------------------------------------------


def test_sysflag_values_and_helpers() -> None:
    assert (sysflag.COMPRESSED, sysflag.MULTI_TAGS) == (1, 2)
    assert (sysflag.TRANSACTION_PREPARED_TYPE, sysflag.TRANSACTION_COMMIT_TYPE) == (4, 8)
    assert sysflag.TRANSACTION_ROLLBACK_TYPE == 12
    assert (sysflag.BORNHOST_V6, sysflag.STOREHOST_V6) == (16, 32)
    assert (sysflag.NEED_UNWRAP, sysflag.INNER_BATCH) == (64, 128)
    assert (sysflag.COMPRESSION_LZ4_TYPE, sysflag.COMPRESSION_ZSTD_TYPE) == (0x100, 0x200)
    assert sysflag.COMPRESSION_ZLIB_TYPE == 0x300
    flag = sysflag.COMPRESSED | sysflag.TRANSACTION_PREPARED_TYPE
    assert sysflag.transaction_value(flag) == sysflag.TRANSACTION_PREPARED_TYPE
    committed = sysflag.reset_transaction_value(flag, sysflag.TRANSACTION_COMMIT_TYPE)
    assert committed == sysflag.COMPRESSED | sysflag.TRANSACTION_COMMIT_TYPE
    assert sysflag.clear_compressed(committed) == sysflag.TRANSACTION_COMMIT_TYPE
    assert sysflag.compression_type(sysflag.COMPRESSED) == sysflag.COMPRESSION_ZLIB
    assert sysflag.compression_type(0x201) == sysflag.COMPRESSION_ZSTD
    assert sysflag.compression_type(0x200) == sysflag.COMPRESSION_NONE


def test_pull_sysflag() -> None:
    flag = sysflag.build_pull_sys_flag(commit_offset=True, suspend=True, subscription=True)
    assert flag == 7
    assert sysflag.pull_has_suspend(flag) and sysflag.pull_has_subscription(flag)
    assert not sysflag.pull_has_class_filter(flag) and not sysflag.pull_has_lite_pull(flag)
    assert sysflag.pull_clear_commit_offset(flag) == 6
    assert not sysflag.pull_has_commit_offset(sysflag.pull_clear_commit_offset(flag))
    assert sysflag.pull_clear_suspend(flag) == 5
    assert sysflag.build_pull_sys_flag(class_filter=True, lite_pull=True) == 8 | 16


# -- properties: round trips and fuzzing --------------------------------------------

_safe_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"),
    max_size=12,
)
_hosts = st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16))
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def record_fields(draw: st.DrawFn) -> dict[str, Any]:
    topic = draw(st.text(alphabet="abcdefgXYZ%_-|0123", min_size=1, max_size=200))
    return {
        "topic": topic.encode(),
        "queue_id": draw(_i32),
        "flag": draw(_i32),
        "queue_offset": draw(_i64),
        "physical_offset": draw(_i64),
        "sys_flag": draw(_i32) & ~sysflag.COMPRESSED,
        "born_timestamp": draw(_i64),
        "born_host": draw(_hosts),
        "born_port": draw(st.integers(0, 65535)),
        "store_timestamp": draw(_i64),
        "store_host": draw(_hosts),
        "store_port": draw(st.integers(0, 65535)),
        "reconsume_times": draw(_i32),
        "prepared_transaction_offset": draw(_i64),
        "body": draw(st.binary(max_size=300)),
        "properties": encode_properties_bytes(
            draw(st.dictionaries(_safe_text.filter(bool), _safe_text, max_size=5))
        ),
    }


def _host_of(address: str) -> bytes:
    host = address.rsplit(":", 1)[0].strip("[]")
    return ipaddress.ip_address(host).packed


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(record_fields())
def test_record_round_trip(fields: dict[str, Any]) -> None:
    encoded = encode_record(**fields)
    born_v6 = len(fields["born_host"]) == 16
    store_v6 = len(fields["store_host"]) == 16
    topic, body, raw_props = fields["topic"], fields["body"], fields["properties"]
    assert len(encoded) == record_size(
        len(body), len(topic), len(raw_props), born_v6, store_v6, v2=len(topic) > 127
    )
    message, size = decode_record(encoded, verify_crc=True)
    assert size == len(encoded) == message.store_size
    assert message.topic.encode() == topic
    assert message.body == body
    assert message.properties == decode_properties(raw_props.decode())
    assert message.queue_id == fields["queue_id"]
    assert message.flag == fields["flag"]
    assert message.queue_offset == fields["queue_offset"]
    assert message.commit_log_offset == fields["physical_offset"]
    assert message.born_timestamp == fields["born_timestamp"]
    assert message.store_timestamp == fields["store_timestamp"]
    assert message.reconsume_times == fields["reconsume_times"]
    assert message.prepared_transaction_offset == fields["prepared_transaction_offset"]
    assert _host_of(message.born_host) == fields["born_host"]
    assert _host_of(message.store_host) == fields["store_host"]
    assert message.born_host.endswith(f":{fields['born_port']}")
    v6_bits = (sysflag.BORNHOST_V6 if born_v6 else 0) | (sysflag.STOREHOST_V6 if store_v6 else 0)
    not_v6 = ~(sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6)
    assert message.sys_flag == (fields["sys_flag"] & not_v6) | v6_bits
    assert message.msg_id.startswith(fields["store_host"].hex().upper())
    header = peek_header(encoded)
    assert (header.total_size, header.store_timestamp) == (size, fields["store_timestamp"])
    assert peek_topic_and_properties(encoded) == (message.topic, raw_props.decode())
    assert peek_properties(encoded) == raw_props.decode()


@settings(max_examples=300)
@given(st.binary(max_size=400), st.booleans())
def test_random_bytes_decode_or_raise_protocol_error(data: bytes, decompress: bool) -> None:
    for decoder in (
        lambda: decode_record(data, verify_crc=True, decompress=decompress),
        lambda: decode_records(data, decompress=decompress),
        lambda: peek_header(data),
        lambda: peek_topic_and_properties(data),
        lambda: peek_properties(data),
    ):
        with contextlib.suppress(ProtocolError):
            decoder()


@settings(max_examples=300)
@given(
    st.lists(st.tuples(st.integers(0, 131), st.integers(0, 255)), min_size=1, max_size=4),
    st.integers(0, 140),
    st.booleans(),
)
def test_mutated_records_decode_or_raise_protocol_error(
    edits: list[tuple[int, int]], cut: int, decompress: bool
) -> None:
    data = bytearray(ALI_ONS_MESSAGE_BIN + ALI_ONS_MESSAGE_BIN)
    for position, value in edits:
        data[position] = value
    for buf in (bytes(data), bytes(data[:cut]), memoryview(data)):
        with contextlib.suppress(ProtocolError):
            decode_records(buf, verify_crc=False, decompress=decompress)
        with contextlib.suppress(ProtocolError):
            _, properties = peek_topic_and_properties(buf)
            assert peek_properties(buf) == properties  # same answer when both read it
        with contextlib.suppress(ProtocolError):
            peek_properties(buf)


@given(
    st.lists(
        st.tuples(
            st.binary(max_size=300),
            st.booleans(),  # zlib-compressed
            st.sampled_from([BORN_IP, bytes(range(16))]),  # IPv4 or IPv6 store host
            st.sampled_from([b"T", b"L" * 200]),  # v1 or v2 topic
            st.dictionaries(
                st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a"]), st.text("xyz09", min_size=1)
            ),
        ),
        max_size=8,
    )
)
def test_record_columns_match_decode_records(records: list[Any]) -> None:
    """The columnar decoder reads every run as decode_records does, field by field."""
    run, physical = [], 100
    for index, (body, packed, store_ip, topic, properties) in enumerate(records):
        stored = zlib.compress(body) if packed else body
        raw_props = "".join(f"{k}\x01{v}\x02" for k, v in properties.items()).encode()
        record = encode_record(
            **{
                **FIXTURE_FIELDS,
                "topic": topic,
                "queue_offset": index,
                "physical_offset": physical,
                "sys_flag": sysflag.COMPRESSED if packed else 0,
                "store_host": store_ip,
                "reconsume_times": index % 3,
                "body": stored,
                "properties": raw_props,
            }
        )
        run.append(record)
        physical += len(record)
    data = b"".join(run)
    messages = decode_records(data, decompress=True)
    columns = decode_record_columns(data)
    assert len(columns) == len(messages)
    assert columns.body == [m.body for m in messages]
    assert columns.topic == [m.topic for m in messages]
    assert columns.queue_offset == [m.queue_offset for m in messages]
    assert columns.queue_id == [m.queue_id for m in messages]
    assert columns.born_timestamp == [m.born_timestamp for m in messages]
    assert columns.store_timestamp == [m.store_timestamp for m in messages]
    assert columns.reconsume_times == [m.reconsume_times for m in messages]
    assert columns.offset_msg_id == [m.msg_id for m in messages]
    assert [decode_properties(p) for p in columns.properties] == [m.properties for m in messages]


def test_record_columns_refuse_what_decode_records_refuses() -> None:
    for cut in range(1, len(ALI_ONS_MESSAGE_BIN)):
        with pytest.raises(ProtocolError):
            decode_record_columns(ALI_ONS_MESSAGE_BIN[:cut])
    assert len(decode_record_columns(b"")) == 0
