"""The compiled group append (`tidemq.record._append.encode_group_records`)
against its pure-Python reference (`tidemq.record.group_append`): the same
result byte for byte (records, results, queue parts, index entries, index
bound), or both None, for generated groups of messages, including fields of
the wrong type or out of range; and the reference against the record codec."""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemq.common import properties as props
from tidemq.common.hashing import java_string_hash_uncached
from tidemq.record import group_append
from tidemq.record.codec import decode_records
from tidemq.record.native import DISABLED_BY_ENV, compiled

COMPILED = compiled("_append")
needs_compiled = pytest.mark.skipif(COMPILED is None, reason="compiled core switched off")

RULE_TOPICS = ("SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer")
OK = "OK"


@dataclass(slots=True)
class Message:
    """The fields of store.api.MessageToStore (this layer does not import the store)."""

    topic: Any
    queue_id: Any
    body: Any
    properties: Any = ""
    flag: Any = 0
    sys_flag: Any = 0
    born_timestamp: Any = 0
    born_host: Any = b"\x7f\x00\x00\x01"
    born_port: Any = 0
    reconsume_times: Any = 0
    prepared_transaction_offset: Any = 0
    tags_code: Any = None


def result(*fields: object) -> tuple[object, ...]:
    return fields


ASCII_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=0, max_size=10
)
KEYS = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a", "CLUSTER", "DELAY"])
TOPICS = st.sampled_from(["T", "Orders", "x" * 127, "x" * 128, "tö", "", *RULE_TOPICS])
HOSTS = st.sampled_from([b"\x7f\x00\x00\x01", bytes(range(16)), b"\x01\x02"])
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def property_strings(draw: st.DrawFn, clean: bool = False) -> str:
    """Mostly well-formed strings, sometimes odd ones (never when `clean`)."""
    pairs = draw(st.lists(st.tuples(KEYS | ASCII_TEXT, ASCII_TEXT), max_size=5))
    raw = "".join(f"{k}\x01{v}\x02" for k, v in pairs)
    twist = 0 if clean else draw(st.integers(0, 12))
    if twist == 1 and raw:
        raw = raw[:-1]
    elif twist == 2:
        raw += "\x01x\x02"
    elif twist == 3:
        raw += "k\x01v\x01w\x02"
    elif twist == 4:
        raw += "é\x01ü\x02"
    elif twist == 5:
        raw += "KEYS\x01" + " ".join(f"k{i}" for i in range(draw(st.integers(60, 70)))) + "\x02"
    return raw


def odd(draw: st.DrawFn, clean: bool, usual: st.SearchStrategy[Any], *others: Any) -> Any:
    """Usually `usual`, now and then (never when `clean`) a value of the wrong
    type or range."""
    if not clean and draw(st.integers(0, 40)) == 0:
        return draw(st.sampled_from([None, "1", 1.5, 2**70, -(2**70), True, *others]))
    return draw(usual)


@st.composite
def messages(draw: st.DrawFn, clean: bool = False) -> Message:
    """A message; a `clean` one has every field in range (the fast path may
    still decline it for its topic, host, size or flags)."""
    topics = st.sampled_from(["T", "Orders"])
    return Message(
        topic=odd(draw, clean, topics if clean else topics | TOPICS, b"T"),
        queue_id=odd(draw, clean, st.integers(0, 2 if clean else 3), -1),
        body=odd(
            draw,
            clean,
            st.binary(max_size=300) | st.binary(max_size=30).map(bytearray),
            memoryview(b"abcd")[::2],
            "text",
        ),
        properties=odd(draw, clean, property_strings(clean), b"TAGS\x01a\x02"),
        flag=odd(draw, clean, INT32),
        sys_flag=odd(
            draw,
            clean,
            st.sampled_from([0, 0x8, 0x30, 0x100])
            if clean
            else st.sampled_from([0, 0x8, 0x4, 0xC]) | INT32,
        ),
        born_timestamp=odd(draw, clean, INT64),
        born_host=odd(draw, clean, HOSTS if not clean else HOSTS.filter(lambda h: len(h) > 2)),
        born_port=odd(draw, clean, st.integers(0, 65535)),
        reconsume_times=odd(draw, clean, st.integers(0, 16)),
        prepared_transaction_offset=odd(draw, clean, st.integers(0, 2**40)),
        tags_code=draw(st.sampled_from([None, None, None, 0, 7, -(2**40), 2**62])),
    )


@st.composite
def arguments(draw: st.DrawFn) -> tuple[Any, ...]:
    clean = draw(st.booleans())
    group = draw(st.lists(messages(clean), min_size=0, max_size=8))
    queue_offsets = {
        (topic, queue_id): draw(st.integers(0, 2**40))
        for topic in ("T", "Orders", "x" * 127, "x" * 128, *RULE_TOPICS)
        for queue_id in range(3)
    }
    return (
        group,
        draw(st.integers(0, 2**40)),
        draw(st.sampled_from([2**30, 2**30, 1500, 400])),
        draw(st.integers(0, 2**45)),
        draw(HOSTS.filter(lambda h: len(h) > 2) if clean else HOSTS),
        draw(st.integers(0, 65535)),
        queue_offsets,
        draw(st.sampled_from([64 * 1024, 64 * 1024, 100])),
        RULE_TOPICS,
        result,
        OK,
    )


def _same(args: tuple[Any, ...]) -> object:
    reference = group_append.encode_group_records(*args)
    assert COMPILED is not None
    fast = COMPILED.encode_group_records(*args)
    if reference is None:
        assert fast is None
    else:
        assert fast is not None
        assert tuple(fast) == tuple(reference)
    return reference


@needs_compiled
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arguments())
def test_compiled_equals_reference(args: tuple[Any, ...]) -> None:
    _same(args)


@needs_compiled
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages(), min_size=1, max_size=6))
def test_well_formed_groups_are_taken_alike(group: list[Message]) -> None:
    """Groups the fast path takes (known queues, plain fields): both encode them."""
    for message in group:
        message.topic, message.queue_id = "Orders", 1
        message.body = bytes(message.body) if isinstance(message.body, bytes) else b"x"
    args = (group, 0, 2**30, 5, b"\x7f\x00\x00\x01", 1, {("Orders", 1): 3}, 2**20, (), result, OK)
    _same(args)


def test_random_objects_never_crash_either() -> None:
    """Messages whose fields are random objects: None or equal results, no crash."""
    rng = random.Random(16)
    pool: list[Any] = [None, 0, -1, 2**64, "T", "é", b"", b"\x00" * 4, 1.0, object(), [], {}]
    for _ in range(2000):
        message = Message(
            rng.choice(["T", *pool]),
            rng.choice([0, *pool]),
            rng.choice([b"x", *pool]),
            rng.choice(["", "TAGS\x01a\x02", *pool]),
            *(rng.choice([0, *pool]) for _ in range(8)),
        )
        args = ([message], 0, 2**20, 0, b"\x7f\x00\x00\x01", 2, {("T", 0): 0}, 99, (), result, OK)
        reference = group_append.encode_group_records(*args)
        if COMPILED is not None:
            assert COMPILED.encode_group_records(*args) == reference


def test_not_a_sequence_is_refused_alike() -> None:
    args = (7, 0, 2**20, 0, b"\x7f\x00\x00\x01", 2, {}, 99, (), result, OK)
    with pytest.raises(TypeError):
        group_append.encode_group_records(*args)  # type: ignore[arg-type]
    if COMPILED is not None:
        with pytest.raises(TypeError):
            COMPILED.encode_group_records(*args)


def test_the_selected_encoder_is_the_compiled_one_unless_switched_off() -> None:
    if DISABLED_BY_ENV:
        assert group_append.implementation() == "python"
    else:
        assert group_append.implementation() == "compiled", "the compiled core was not built"


def test_reference_matches_the_record_codec() -> None:
    """What the reference encodes decodes back to the messages, with queue
    offsets continuing each queue, entries that point at the records and a
    result per message in call order."""
    group = [
        Message(
            "Orders",
            i % 2,
            f"body-{i}".encode(),
            props.encode_properties(
                {
                    props.TAGS: f"Tag{i % 3}",
                    props.KEYS: f"k{i} shared k{i}",
                    props.UNIQ_KEY: f"U{i}",
                }
            ),
            flag=i,
            reconsume_times=i,
            born_host=bytes(range(16)) if i == 3 else b"\x7f\x00\x00\x01",
        )
        for i in range(5)
    ]
    encoded = group_append.encode_group_records(
        group,
        4096,
        2**20,
        222,
        b"\x0a\x00\x00\x01",
        10911,
        {("Orders", 0): 10, ("Orders", 1): 20},
        1024,
        RULE_TOPICS,
        result,
        OK,
    )
    assert encoded is not None
    records, results, queues, index, bound = encoded
    decoded = decode_records(records)
    assert [m.body for m in decoded] == [m.body for m in group]
    assert [m.queue_offset for m in decoded] == [10, 20, 11, 21, 12]
    assert [m.reconsume_times for m in decoded] == list(range(5))
    assert [r[1] for r in results] == [m.commit_log_offset for m in decoded]
    assert [r[5] for r in results] == [m.msg_id for m in decoded]
    assert results[0] == (OK, 4096, decoded[0].store_size, 10, 222, decoded[0].msg_id)
    assert [(q[0], q[1], q[2]) for q in queues] == [("Orders", 0, 10), ("Orders", 1, 20)]
    entries = list(struct.iter_unpack(">qiq", queues[0][3]))
    assert [(o, s) for o, s, _ in entries] == [
        (m.commit_log_offset, m.store_size) for m in decoded[0::2]
    ]
    assert entries[1][2] == java_string_hash_uncached("Tag2")
    assert queues[1][4] == {
        java_string_hash_uncached("Tag1"): 20,
        java_string_hash_uncached("Tag0"): 21,
    }
    assert len(index) == 12 * 5 * 3  # unique key + two distinct keys each
    assert bound == 5 * 4  # the general path's count: one per unique key, one per key


def test_declines() -> None:
    """Each reason to leave a group to the general path."""
    queues = {("T", 0): 0, ("SCHEDULE_TOPIC_XXXX", 0): 0}

    def run(message: Message, room: int = 2**20) -> object:
        args = ([message], 0, room, 0, b"\x7f\x00\x00\x01", 2, queues, 64, RULE_TOPICS, result, OK)
        reference = group_append.encode_group_records(*args)
        if COMPILED is not None:
            assert COMPILED.encode_group_records(*args) == reference
        return reference

    assert run(Message("T", 0, b"x")) is not None
    assert run(Message("U", 0, b"x")) is None  # a queue the store does not know yet
    assert run(Message("T", 0, b"x" * 65)) is None  # over the largest body
    assert run(Message("T", 0, b"x", "TAGS\x01a")) is None  # not well formed
    assert run(Message("T", 0, b"x", sys_flag=0x4)) is None  # a transaction half
    assert run(Message("SCHEDULE_TOPIC_XXXX", 0, b"x")) is None  # the store's own tag rule
    assert run(Message("SCHEDULE_TOPIC_XXXX", 0, b"x", tags_code=5)) is not None
    assert run(Message("T", 0, b"x"), room=90) is None  # the file ends first


def test_an_error_building_a_result_is_raised_by_both() -> None:
    """The result builder's exception propagates (nothing half-built is returned)."""

    def failing(*fields: object) -> object:
        raise RuntimeError("no result")

    group = [Message("T", 0, b"x"), Message("T", 0, b"y")]
    args = (group, 0, 2**20, 0, b"\x7f\x00\x00\x01", 2, {("T", 0): 0}, 99, (), failing, OK)
    with pytest.raises(RuntimeError, match="no result"):
        group_append.encode_group_records(*args)
    if COMPILED is not None:
        with pytest.raises(RuntimeError, match="no result"):
            COMPILED.encode_group_records(*args)
