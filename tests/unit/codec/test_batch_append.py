"""The compiled batch append (`tidemq.record._append`) against its pure-Python
reference (`tidemq.record.batch_append.encode_batch_records`): the same result
byte for byte, or both None, for generated and for mangled batch bodies; and
the reference against the general path (one encode_record per message)."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemq.common import properties as props
from tidemq.common.hashing import java_string_hash_uncached
from tidemq.common.message import Message
from tidemq.record import batch_append
from tidemq.record.codec import decode_records, encode_batch
from tidemq.record.native import DISABLED_BY_ENV, compiled

COMPILED = compiled("_append")
needs_compiled = pytest.mark.skipif(COMPILED is None, reason="compiled core switched off")

ASCII_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=0, max_size=12
)
KEYS = st.sampled_from(
    [
        "TAGS",
        "KEYS",
        "UNIQ_KEY",
        "a",
        "b",
        "WAIT",
        "CLUSTER",
        "DELAY",
        "TRAN_MSG",
        "TIMER_DELAY_MS",
        "MSG_REGION",
        "TRACE_ON",
    ]
)
STAMP = b"MSG_REGION\x01DefaultRegion\x02TRACE_ON\x01true\x02"
STAMPS = st.sampled_from(
    [STAMP, b"", b"MSG_REGION\x01eu-1\x02TRACE_ON\x01false\x02", "MSG_REGION\x01é\x02".encode()]
)


@st.composite
def property_strings(draw: st.DrawFn) -> bytes:
    """Mostly well-formed strings, sometimes odd ones (no trailing separator,
    empty keys, non-ASCII, a value holding \\x01)."""
    pairs = draw(st.lists(st.tuples(KEYS | ASCII_TEXT, ASCII_TEXT), max_size=6))
    raw = "".join(f"{k}\x01{v}\x02" for k, v in pairs)
    twist = draw(st.integers(0, 9))
    if twist == 1 and raw:
        raw = raw[:-1]
    elif twist == 2:
        raw += "\x01x\x02"
    elif twist == 3:
        raw += "k\x01v\x01w\x02"
    elif twist == 4:
        raw += "é\x01ü\x02"
    return raw.encode()


@st.composite
def batch_bodies(draw: st.DrawFn) -> bytes:
    parts = []
    for _ in range(draw(st.integers(0, 6))):
        body = draw(st.binary(max_size=300))
        raw = draw(property_strings())
        flag = draw(st.integers(-(2**31), 2**31 - 1))
        head = struct.pack(">iiiii", 22 + len(body) + len(raw), 0, 0, flag, len(body))
        parts += [head, body, struct.pack(">h", len(raw)), raw]
    return b"".join(parts)


HOSTS = st.sampled_from([b"\x7f\x00\x00\x01", b"\x0a\x01\x02\x03", bytes(range(16))])


@st.composite
def arguments(draw: st.DrawFn) -> tuple[object, ...]:
    topic = draw(st.sampled_from([b"T", b"BenchTopic", b"x" * 127, b"x" * 128, "tö".encode()]))
    return (
        draw(batch_bodies()),
        topic,
        draw(st.integers(0, 1000)),
        draw(st.integers(0, 2**40)),
        draw(st.integers(0, 2**40)),
        draw(st.integers(0, 2**31 - 1)),
        draw(st.integers(0, 2**45)),
        draw(HOSTS),
        draw(st.integers(0, 65535)),
        draw(st.integers(0, 2**45)),
        draw(HOSTS),
        draw(st.integers(0, 65535)),
        draw(st.sampled_from([b"CLUSTER\x01DefaultCluster\x02", b"", "CLUSTER\x01ü\x02".encode()])),
        draw(STAMPS),
    )


def _same(args: tuple[object, ...]) -> object:
    reference = batch_append.encode_batch_records(*args)  # type: ignore[arg-type]
    assert COMPILED is not None
    fast = COMPILED.encode_batch_records(*args)
    if reference is None:
        assert fast is None
    else:
        assert fast is not None
        assert tuple(fast) == tuple(reference)
    return reference


@needs_compiled
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arguments())
def test_compiled_equals_reference(args: tuple[object, ...]) -> None:
    _same(args)


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(arguments(), st.data())
def test_mangled_bodies_decline_alike(args: tuple[object, ...], data: st.DataObject) -> None:
    """Truncated, flipped and garbage bodies: equal results or None from both, no crash."""
    body = bytearray(args[0])  # type: ignore[arg-type]
    action = data.draw(st.integers(0, 3))
    if body and action == 0:
        del body[data.draw(st.integers(0, len(body) - 1)) :]
    elif body and action == 1:
        at = data.draw(st.integers(0, len(body) - 1))
        body[at] = data.draw(st.integers(0, 255))
    elif action == 2:
        body += data.draw(st.binary(max_size=40))
    else:
        body = bytearray(data.draw(st.binary(max_size=200)))
    _same((bytes(body), *args[1:]))


def test_random_bytes_never_crash_either() -> None:
    rng = random.Random(16)
    for _ in range(3000):
        body = rng.randbytes(rng.randrange(0, 120))
        args = (body, b"T", 0, 0, 0, 0, 0, b"\x7f\x00\x00\x01", 1, 0, b"\x7f\x00\x00\x01", 2, b"")
        reference = batch_append.encode_batch_records(*args)
        if COMPILED is not None:
            compiled_result = COMPILED.encode_batch_records(*args)
            assert (compiled_result is None) == (reference is None)


def test_the_selected_encoder_is_the_compiled_one_unless_switched_off() -> None:
    if DISABLED_BY_ENV:
        assert batch_append.implementation() == "python"
    else:
        assert batch_append.implementation() == "compiled", "the compiled core was not built"


def test_reference_matches_the_record_codec() -> None:
    """What the reference encodes decodes back to the messages sent, with the
    broker's CLUSTER property, consecutive offsets, and entries that point at them."""
    messages = [
        Message(
            "Orders",
            f"body-{i}".encode(),
            flag=i,
            properties={
                props.TAGS: "TagA" if i % 2 else "TagB",
                props.KEYS: f"k{i} shared k{i}",
                props.UNIQ_KEY: f"U{i:04d}",
            },
        )
        for i in range(5)
    ]
    encoded = batch_append.encode_batch_records(
        encode_batch(messages),
        b"Orders",
        3,
        10,
        4096,
        0,
        111,
        b"\x7f\x00\x00\x01",
        5000,
        222,
        b"\x0a\x00\x00\x01",
        10911,
        b"CLUSTER\x01C1\x02",
        b"MSG_REGION\x01eu-1\x02TRACE_ON\x01false\x02",
    )
    assert encoded is not None
    records, cq, index, ids, count, tags = encoded
    decoded = decode_records(records)
    assert all(m.properties["MSG_REGION"] == "eu-1" for m in decoded)
    assert all(m.properties["TRACE_ON"] == "false" for m in decoded)
    assert count == len(decoded) == 5
    offsets = [m.commit_log_offset for m in decoded]
    assert [m.queue_offset for m in decoded] == list(range(10, 15))
    assert offsets[0] == 4096
    assert [m.body for m in decoded] == [m.body for m in messages]
    assert all(m.properties["CLUSTER"] == "C1" and m.queue_id == 3 for m in decoded)
    assert ids.split(",") == [m.msg_id for m in decoded]
    cq_entries = list(struct.iter_unpack(">qiq", cq))
    assert [(o, s) for o, s, _ in cq_entries] == [
        (m.commit_log_offset, m.store_size) for m in decoded
    ]
    assert cq_entries[0][2] == java_string_hash_uncached("TagB")
    assert tags == {java_string_hash_uncached("TagB"): 14, java_string_hash_uncached("TagA"): 13}
    index_entries = list(struct.iter_unpack(">qi", index))
    assert len(index_entries) == 5 * 3  # unique key + two distinct keys each
    assert [o for o, _ in index_entries[:3]] == [4096] * 3


@pytest.mark.parametrize("key", ["DELAY", "TRAN_MSG", "TIMER_DELIVER_MS", "__STARTDELIVERTIME"])
def test_keys_the_broker_acts_on_divert_to_the_general_path(key: str) -> None:
    body = encode_batch([Message("T", b"x", properties={key: "1"})])
    args = (body, b"T", 0, 0, 0, 0, 0, b"\x7f\x00\x00\x01", 1, 0, b"\x7f\x00\x00\x01", 2, b"")
    assert batch_append.encode_batch_records(*args) is None
    if COMPILED is not None:
        assert COMPILED.encode_batch_records(*args) is None


@pytest.mark.parametrize("key", ["MSG_REGION", "TRACE_ON"])
def test_a_stamped_key_the_client_set_goes_to_the_general_path(key: str) -> None:
    """The general path replaces it (Java's put); the encoders only append."""
    body = encode_batch([Message("T", b"x", properties={key: "client"})])
    head = (body, b"T", 0, 0, 0, 0, 0, b"\x7f\x00\x00\x01", 1, 0, b"\x7f\x00\x00\x01", 2, b"")
    encoders = [batch_append.encode_batch_records]
    if COMPILED is not None:
        encoders.append(COMPILED.encode_batch_records)
    for encode in encoders:
        assert encode(*head, STAMP) is None
        unstamped = encode(*head)  # nothing to replace without a stamp
        assert unstamped is not None
        [message] = decode_records(unstamped[0])
        assert message.properties[key] == "client"


def test_every_record_ends_with_the_stamp() -> None:
    messages = [Message("T", b"x", properties={"a": str(i)}) for i in range(3)]
    messages.append(Message("T", b"y", properties={props.CLUSTER: "Own"}))
    args = (encode_batch(messages), b"T", 0, 0, 0, 0, 0, b"\x7f\x00\x00\x01", 1, 0)
    encoded = batch_append.encode_batch_records(
        *args, b"\x7f\x00\x00\x01", 2, b"CLUSTER\x01C\x02", STAMP
    )
    assert encoded is not None
    for record in decode_records(encoded[0]):
        assert record.properties["MSG_REGION"] == "DefaultRegion"
        assert record.properties["TRACE_ON"] == "true"
    raw_tails = [r for r in encoded[0].split(b"\x02MSG_REGION")[1:]]
    assert len(raw_tails) == 4  # once per record, after its own items and the cluster


@pytest.mark.parametrize(
    "raw",
    [
        "XDELAY\x011\x02",  # a key ending in a diverting key: found as a substring
        "a\x01v\x02preTRACE_ON\x01x\x02",
        "XMSG_REGION\x01x\x02TAGS\x01t\x02",
        "a\x01MSG_REGION\x02",  # a value, not followed by \x01: not the key
        "ACLUSTER\x01own\x02",
        "TAGS\x01CLUSTER\x02",
    ],
)
def test_keys_are_found_as_substrings_by_both(raw: str) -> None:
    """The compiled one-pass key search finds what `key in raw` finds."""
    properties = raw.encode()
    body = b"".join(
        [
            struct.pack(">iiiii", 22 + 1 + len(properties), 0, 0, 0, 1),
            b"x",
            struct.pack(">h", len(properties)),
            properties,
        ]
    )
    host = b"\x7f\x00\x00\x01"
    args = (body, b"T", 0, 0, 0, 0, 0, host, 1, 0, host, 2, b"CLUSTER\x01C\x02", STAMP)
    if COMPILED is not None:
        _same(args)
    decline = "DELAY\x01" in raw or "TRACE_ON\x01" in raw or "MSG_REGION\x01" in raw
    assert (batch_append.encode_batch_records(*args) is None) == decline
