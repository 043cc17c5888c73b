"""The performance shortcuts give exactly what the plain code paths give.

Each shortcut (raw batch split, prefix-cached Java hash, cached host text in
record decoding, stored batch properties, rate counter trimming) is checked
against the straightforward computation on generated inputs.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.broker.processors.send import _well_formed_properties
from tidemq.broker.stats import RateCounter
from tidemq.common import properties as props
from tidemq.common.hashing import java_string_hash_shared_prefix, java_string_hash_uncached
from tidemq.common.message import Message
from tidemq.protocol.errors import ProtocolError
from tidemq.record.codec import (
    decode_batch,
    decode_record,
    encode_batch,
    encode_record,
    split_batch,
)
from tidemq.store.index import index_key_hash, unique_key_hash

property_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"),
    max_size=12,
)
property_maps = st.dictionaries(property_text.filter(bool), property_text, max_size=5)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=64), st.integers(0, 2**31 - 1), property_maps)))
def test_split_batch_matches_decode_batch(entries: list[tuple[bytes, int, dict[str, str]]]) -> None:
    body = encode_batch([Message("T", b, f, p) for b, f, p in entries])
    split = split_batch(body)
    decoded = decode_batch(body, "T")
    assert [(e.body, e.flag, props.decode_properties(e.properties)) for e in split] == [
        (m.body, m.flag, m.properties) for m in decoded
    ]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_split_batch_refuses_exactly_what_decode_batch_refuses(body: bytes) -> None:
    outcomes = []
    for decode in (lambda: split_batch(body), lambda: decode_batch(body, "T")):
        try:
            outcomes.append(len(decode()))
        except ProtocolError:
            outcomes.append(-1)
    assert outcomes[0] == outcomes[1]


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=60))
def test_shared_prefix_hash_equals_java_hash(text: str) -> None:
    assert java_string_hash_shared_prefix(text) == java_string_hash_uncached(text)


def test_shared_prefix_hash_on_unique_ids_of_one_producer() -> None:
    prefix = "7F00000145A2B3C4D5E6"  # ip + pid + salt: the same for every id
    for counter in range(0, 70_000, 997):
        key = f"{prefix}{counter * 7919:08X}{counter & 0xFFFF:04X}"
        assert unique_key_hash("BenchTopic", key) == index_key_hash("BenchTopic", key)
    # A non-ASCII topic takes the plain path and still agrees.
    assert unique_key_hash("Tópico", prefix + "0" * 12) == index_key_hash(
        "Tópico", prefix + "0" * 12
    )


raw_property_strings = st.text(alphabet=st.sampled_from("ab\x01\x02"), max_size=16)


@settings(max_examples=500, deadline=None)
@given(raw_property_strings)
def test_stored_batch_properties_read_back_like_the_sent_ones(raw: str) -> None:
    stored = _well_formed_properties(raw)
    assert props.decode_properties(stored) == props.decode_properties(raw)
    # Either kept as sent, or the canonical encoding of what decoding reads.
    assert stored in (raw, props.encode_properties(props.decode_properties(raw)))
    if stored:
        assert stored.endswith(props.PROPERTY_SEPARATOR)


def test_well_formed_properties_kept_byte_for_byte() -> None:
    raw = props.encode_properties({"TAGS": "TagA", "UNIQ_KEY": "X", "KEYS": "k1 k2"})
    assert _well_formed_properties(raw) is raw
    assert _well_formed_properties("TAGS\x01A") == "TAGS\x01A\x02"
    assert _well_formed_properties("\x01A\x02TAGS\x01B\x02") == "TAGS\x01B\x02"


def test_decode_record_host_texts_and_message_ids() -> None:
    records = [
        encode_record(b"T", 0, 0, 0, physical, 0, 1, born, port, 2, store, 10911, 0, 0, b"x", b"")
        for physical, born, port, store in [
            (0, b"\x7f\x00\x00\x01", 1000, b"\x0a\x00\x00\x02"),
            (77, b"\xc0\xa8\x01\x05", 1077, b"\x0a\x00\x00\x02"),
            (0xABCDEF, b"\x7f\x00\x00\x01", 1000, b"\x0a\x00\x00\x03"),
        ]
    ]
    decoded = [decode_record(r)[0] for r in records * 2]  # second round from the cache
    assert [m.born_host for m in decoded[:3]] == [
        "127.0.0.1:1000",
        "192.168.1.5:1077",
        "127.0.0.1:1000",
    ]
    assert [m.store_host for m in decoded[:3]] == [
        "10.0.0.2:10911",
        "10.0.0.2:10911",
        "10.0.0.3:10911",
    ]
    assert decoded[2].msg_id == "0A00000300002A9F0000000000ABCDEF"
    assert [m.msg_id for m in decoded[:3]] == [m.msg_id for m in decoded[3:]]


def test_rate_counter_trims_when_a_new_second_starts() -> None:
    counter = RateCounter(window_s=3)
    for second in range(10):
        for _ in range(second + 1):
            counter.add(1, second + 0.5)
    assert counter.total == sum(range(1, 11))
    assert counter.in_window(9.5) == 8 + 9 + 10
