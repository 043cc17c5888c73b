"""The fast Arrow path for pulled records gives the same batch as the general
decoder, declines what it does not handle, and filters by range and tag."""

from __future__ import annotations

import zlib

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.common import sysflag
from tidemq.record.codec import decode_record_columns, encode_record
from tidemq.spark.arrow_records import fast_batch
from tidemq.spark.columns import records_to_batch

STORE_IP = bytes([10, 0, 0, 7])


def record(
    index: int,
    body: bytes,
    properties: dict[str, str],
    *,
    topic: bytes = b"T",
    store_ip: bytes = STORE_IP,
    compressed: bool = False,
) -> bytes:
    raw_props = "".join(f"{k}\x01{v}\x02" for k, v in properties.items()).encode()
    return encode_record(
        topic=topic,
        queue_id=3,
        flag=0,
        queue_offset=100 + index,
        physical_offset=5000 + 1000 * index,
        sys_flag=sysflag.COMPRESSED if compressed else 0,
        born_timestamp=1_700_000_000_000 + index,
        born_host=bytes([127, 0, 0, 1]),
        born_port=4000,
        store_timestamp=1_700_000_000_500 + index,
        store_host=store_ip,
        store_port=10911,
        reconsume_times=index % 4,
        prepared_transaction_offset=0,
        body=zlib.compress(body) if compressed else body,
        properties=raw_props,
    )


def general(buf: bytes, start: int, end: int, tags: frozenset[str] | None) -> pa.RecordBatch:
    return records_to_batch("broker-a", decode_record_columns(buf), start, end, tags)


properties = st.dictionaries(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a", "région"]),
    st.text("xyzé 09", min_size=1, max_size=8),
)


@settings(max_examples=200, deadline=None)  # the machine is shared with the benchmark
@given(
    st.lists(st.tuples(st.binary(max_size=200), properties), min_size=1, max_size=12),
    st.integers(95, 115),
    st.integers(95, 115),
    st.one_of(st.none(), st.frozensets(st.text("xyz", min_size=1, max_size=2), max_size=3)),
)
def test_fast_path_equals_the_general_decoder(
    records: list[tuple[bytes, dict[str, str]]],
    start: int,
    end: int,
    tags: frozenset[str] | None,
) -> None:
    buf = b"".join(record(i, body, props) for i, (body, props) in enumerate(records))
    fast = fast_batch("broker-a", buf, start, end, tags)
    assert fast is not None
    expected = general(buf, start, end, tags)
    assert fast.schema == expected.schema
    assert fast.to_pylist() == expected.to_pylist()


def test_uncommon_records_are_declined() -> None:
    plain = record(0, b"x", {"TAGS": "a"})
    assert fast_batch("b", plain, 0, 1000, None) is not None
    assert fast_batch("b", record(0, b"x" * 50, {}, compressed=True), 0, 1000, None) is None
    assert fast_batch("b", record(0, b"x", {}, store_ip=bytes(16)), 0, 1000, None) is None
    assert fast_batch("b", record(0, b"x", {}, topic=b"L" * 200), 0, 1000, None) is None
    assert fast_batch("b", plain[:-1], 0, 1000, None) is None  # truncated
    assert fast_batch("b", plain + b"\x00" * 4, 0, 1000, None) is None  # trailing bytes
    bad_utf8 = plain.replace(b"TAGS\x01a", b"TAGS\x01\xff")
    assert fast_batch("b", bad_utf8, 0, 1000, None) is None
    no_separator = plain.replace(b"TAGS\x01a\x02", b"TAGSxa\x02")
    assert fast_batch("b", no_separator, 0, 1000, None) is None


def test_missing_unique_keys_fall_back_to_offset_ids() -> None:
    buf = record(0, b"x", {"UNIQ_KEY": "ABC"}) + record(1, b"y", {})
    batch = fast_batch("b", buf, 0, 1000, None)
    assert batch is not None
    ids = batch.column("msg_id").to_pylist()
    assert ids[0] == "ABC"
    assert ids[1] == general(buf, 0, 1000, None).column("msg_id").to_pylist()[1]
    assert ids[1] == f"0A0000070000{10911:04X}{6000:016X}"
