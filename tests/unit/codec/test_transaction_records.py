"""The compiled transaction records (`tidemq.record._transactions`) against
their pure-Python reference (`tidemq.record.transaction_records`): the same
result byte for byte, or both None, for generated and mangled half batches
and for ENDs over generated and mangled logs; and what the reference builds
read back as the broker's rules say (the store files the general path writes
are compared in tests/unit/store/test_transaction_runs.py)."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.message import Message
from tidemq.record import transaction_records
from tidemq.record.codec import decode_records, encode_batch, encode_record
from tidemq.record.native import DISABLED_BY_ENV, compiled

COMPILED = compiled("_transactions")
needs_compiled = pytest.mark.skipif(COMPILED is None, reason="compiled core switched off")

HALF = b"RMQ_SYS_TRANS_HALF_TOPIC"
OP = b"RMQ_SYS_TRANS_OP_HALF_TOPIC"
SPECIAL = (b"SCHEDULE_TOPIC_XXXX", b"rmq_sys_wheel_timer")
LOCAL = b"\x7f\x00\x00\x01"
ASCII_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=0, max_size=10
)
KEYS = st.sampled_from(
    [
        "TAGS",
        "KEYS",
        "UNIQ_KEY",
        "PGROUP",
        "REAL_TOPIC",
        "REAL_QID",
        "__transactionId__",
        "CLUSTER",
        "TRAN_MSG",
        "DELAY",
        "TIMER_DELAY_MS",
        "MSG_REGION",
        "TRACE_ON",
        "a",
    ]
)
HOSTS = st.sampled_from([LOCAL, b"\x0a\x01\x02\x03", bytes(range(16))])


CLEAN_KEYS = st.sampled_from(["TAGS", "KEYS", "a", "TRAN_MSG", "PGROUP", "CLUSTER", "WAIT"])
CLEAN_TEXT = st.text(alphabet="abcXYZ019 -_", min_size=0, max_size=8)


def mostly(draw: st.DrawFn, clean: bool = False) -> bool:
    """True three times in four, always in a clean example (one the fast paths take)."""
    return clean or draw(st.integers(0, 3)) > 0


@st.composite
def property_strings(
    draw: st.DrawFn, always: dict[str, str] | None = None, clean: bool = False
) -> bytes:
    """Mostly well-formed strings with a UNIQ_KEY, sometimes odd ones."""
    clean = mostly(draw, clean)
    keys, text = (CLEAN_KEYS, CLEAN_TEXT) if clean else (KEYS | ASCII_TEXT, ASCII_TEXT)
    pairs = draw(st.lists(st.tuples(keys, text), max_size=5))
    if clean or draw(st.integers(0, 5)):
        pairs.append(("UNIQ_KEY", draw(st.sampled_from(["U1", "U2", "7F00000100", "k k"]))))
    if clean:  # the given items last, so theirs are the values read
        draw(st.randoms()).shuffle(pairs)
        pairs += list((always or {}).items())
    else:
        pairs += list((always or {}).items())
        draw(st.randoms()).shuffle(pairs)
    raw = "".join(f"{k}\x01{v}\x02" for k, v in pairs)
    twist = 0 if clean else draw(st.integers(0, 6))
    if twist == 1 and raw:
        raw = raw[:-1]
    elif twist == 2:
        raw += "\x01x\x02"
    elif twist == 3:
        raw += "k\x01v\x01w\x02"
    elif twist == 4:
        raw += "é\x01ü\x02"
    elif twist == 5:
        raw = "a\x01\x01b\x02\x02" + raw  # an empty item inside a balanced string
    return raw.encode()


@st.composite
def batch_bodies(draw: st.DrawFn, clean: bool = False) -> bytes:
    parts = []
    for _ in range(draw(st.integers(0 if not mostly(draw, clean) else 1, 6))):
        body = draw(st.binary(max_size=300))
        raw = draw(property_strings(clean=clean))
        flag = draw(st.integers(-(2**31), 2**31 - 1))
        head = struct.pack(">iiiii", 22 + len(body) + len(raw), 0, 0, flag, len(body))
        parts += [head, body, struct.pack(">h", len(raw)), raw]
    return b"".join(parts)


def pick(draw: st.DrawFn, usual: object, others: list[object], clean: bool = False) -> object:
    """`usual` three times in four (always when `clean`), else one of `others`."""
    return usual if mostly(draw, clean) else draw(st.sampled_from(others))


@st.composite
def half_arguments(draw: st.DrawFn) -> tuple[object, ...]:
    clean = draw(st.booleans())
    return (
        draw(batch_bodies(clean)),
        pick(draw, HALF, [b"T", b"x" * 128], clean),
        pick(draw, b"TxTopic", [b"Orders%1", b"", "tö".encode(), b"a\x02b"], clean),
        draw(st.integers(-1, 20)) if not mostly(draw, clean) else 3,
        pick(draw, b"PG_TX", [b"", "gé".encode(), b"g\x01"], clean),
        draw(st.integers(0, 2**40)),
        draw(st.integers(0, 2**40)),
        pick(draw, 2**20, [2000, 300], clean),
        pick(draw, 4 * 1024 * 1024, [100], clean),
        draw(st.integers(0, 2**31 - 1)),
        draw(st.integers(0, 2**45)),
        draw(HOSTS),
        draw(st.integers(0, 65535)),
        draw(st.integers(0, 2**45)),
        draw(HOSTS),
        draw(st.integers(0, 65535)),
        pick(draw, b"CLUSTER\x01DefaultCluster\x02", [b"", "CLUSTER\x01ü\x02".encode()], clean),
        pick(
            draw,
            b"MSG_REGION\x01DefaultRegion\x02TRACE_ON\x01true\x02",
            [b"", b"MSG_REGION\x01eu-1\x02TRACE_ON\x01false\x02", b"TRACE_ON\x01\x01\x02"],
            clean,
        ),
    )


def _same_halves(args: tuple[object, ...]) -> object:
    reference = transaction_records.encode_half_records(*args)  # type: ignore[arg-type]
    assert COMPILED is not None
    fast = COMPILED.encode_half_records(*args)
    if reference is None:
        assert fast is None
    else:
        assert fast is not None
        assert tuple(fast) == tuple(reference)
    return reference


@needs_compiled
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(half_arguments())
def test_compiled_halves_equal_the_reference(args: tuple[object, ...]) -> None:
    _same_halves(args)


@needs_compiled
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(half_arguments(), st.data())
def test_mangled_half_batches_decline_alike(args: tuple[object, ...], data: st.DataObject) -> None:
    body = bytearray(args[0])  # type: ignore[arg-type]
    action = data.draw(st.integers(0, 2))
    if body and action == 0:
        del body[data.draw(st.integers(0, len(body) - 1)) :]
    elif body and action == 1:
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    else:
        body = bytearray(data.draw(st.binary(max_size=200)))
    _same_halves((bytes(body), *args[1:]))


# -- ENDs over a log -------------------------------------------------------------------


@st.composite
def half_properties(draw: st.DrawFn, clean: bool) -> bytes:
    """A stored half's property string: mostly what prepare makes, sometimes
    with what the general path must refuse or read otherwise."""
    table = {
        "REAL_TOPIC": pick(
            draw, "TxTopic", ["Orders", "T.x", "SCHEDULE_TOPIC_XXXX", "", "x" * 128], clean
        ),
        "REAL_QID": pick(draw, "3", ["0", "03", "", "x", "1234567890", "\u0661"], clean),
        "PGROUP": pick(draw, "PG_TX", ["OTHER", ""], clean),
    }
    for key in list(table):
        if not clean and not draw(st.integers(0, 9)):
            del table[key]
    return draw(property_strings(always=table, clean=clean))


@st.composite
def logs(draw: st.DrawFn, clean: bool) -> tuple[list[tuple[int, bytes]], list[tuple[int, int]]]:
    """A log of one or two files holding halves (and a few other records):
    (log files, (offset, queue offset) of each record)."""
    files: list[tuple[int, bytes]] = []
    where: list[tuple[int, int]] = []
    start = draw(st.sampled_from([0, 4096]))
    for _ in range(draw(st.integers(1, 2))):
        chunk = b""
        for _ in range(draw(st.integers(0, 5))):
            raw = draw(half_properties(clean))
            offset = start + len(chunk)
            queue_offset = draw(st.integers(0, 50))
            record = encode_record(
                pick(draw, HALF, [b"Other"], clean),
                0,
                draw(st.integers(-5, 5)),
                queue_offset,
                offset,
                draw(st.sampled_from([0, sysflag.MULTI_TAGS, sysflag.COMPRESSED])),
                draw(st.integers(0, 2**41)),
                draw(HOSTS),
                pick(draw, 40000, [-1], clean),
                draw(st.integers(0, 2**41)),
                draw(HOSTS),
                10911,
                draw(st.integers(0, 3)),
                0,
                draw(st.binary(max_size=200)),
                raw,
            )
            chunk += record
            where.append((offset, queue_offset))
        files.append((start, chunk))
        start += max(len(chunk), 1) + draw(st.sampled_from([0, 100]))
    return files, where


@st.composite
def end_arguments(draw: st.DrawFn) -> tuple[object, ...]:
    clean = draw(st.booleans())
    files, where = draw(logs(clean))
    items: list[object] = []
    for _ in range(draw(st.integers(1 if clean else 0, 6))):
        if where and (clean or draw(st.integers(0, 7))):
            offset, queue_offset = draw(st.sampled_from(where))
            twist = 0 if clean else draw(st.integers(0, 6))
            if twist == 1:
                offset += 1
            elif twist == 2:
                queue_offset += 1
            items.append((offset, queue_offset, draw(st.booleans())))
        else:
            items.append(draw(st.sampled_from([(-1, 0, True), (2**70, 0, True), (0, 0), "x"])))
    return (
        files,
        items,
        pick(draw, b"PG_TX", [b"OTHER", b"\xff"], clean),
        HALF,
        pick(draw, OP, [b"", b"o\x02p"], clean),
        SPECIAL,
        draw(st.integers(0, 2**40)),
        pick(draw, 2**20, [700], clean),
        pick(draw, 4 * 1024 * 1024, [150], clean),
        draw(st.integers(0, 2**45)),
        draw(HOSTS),
        draw(st.integers(0, 65535)),
        draw(HOSTS),
        draw(st.integers(0, 65535)),
        draw(st.sampled_from([{}, {("TxTopic", 3): 17, ("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0): 5}])),
    )


def _same_ends(args: tuple[object, ...]) -> object:
    reference = transaction_records.encode_end_records(*args)  # type: ignore[arg-type]
    assert COMPILED is not None
    fast = COMPILED.encode_end_records(*args)
    if reference is None:
        assert fast is None
    else:
        assert fast is not None
        assert tuple(fast) == tuple(reference)
    return reference


@needs_compiled
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(end_arguments())
def test_compiled_ends_equal_the_reference(args: tuple[object, ...]) -> None:
    _same_ends(args)


@needs_compiled
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(end_arguments(), st.data())
def test_ends_over_a_mangled_log_decline_alike(
    args: tuple[object, ...], data: st.DataObject
) -> None:
    """Flipped and truncated bytes in the log: equal results or None from both, no crash."""
    files = [(start, bytearray(chunk)) for start, chunk in args[0]]  # type: ignore[attr-defined]
    _, chunk = files[data.draw(st.integers(0, len(files) - 1))]
    if chunk:
        if data.draw(st.booleans()):
            for _ in range(data.draw(st.integers(1, 4))):
                chunk[data.draw(st.integers(0, len(chunk) - 1))] = data.draw(st.integers(0, 255))
        else:
            del chunk[data.draw(st.integers(0, len(chunk) - 1)) :]
    _same_ends(([(s, bytes(c)) for s, c in files], *args[1:]))


def test_random_bytes_never_crash_either() -> None:
    rng = random.Random(16)
    for _ in range(2000):
        log = rng.randbytes(rng.randrange(0, 400))
        if rng.random() < 0.5 and len(log) > 8:  # a plausible head: sized, v1 magic
            log = struct.pack(">ii", len(log), -626843481) + log[8:]
        items = [(rng.randrange(0, 16), rng.randrange(0, 3), rng.random() < 0.5)]
        args = (
            [(0, log)],
            items,
            b"PG_TX",
            HALF,
            OP,
            SPECIAL,
            0,
            2**20,
            2**20,
            0,
            LOCAL,
            1,
            LOCAL,
            2,
            {},
        )
        reference = transaction_records.encode_end_records(*args)  # type: ignore[arg-type]
        if COMPILED is not None:
            assert (COMPILED.encode_end_records(*args) is None) == (reference is None)
        body = rng.randbytes(rng.randrange(0, 120))
        half_args = (
            body,
            HALF,
            b"T",
            0,
            b"G",
            0,
            0,
            2**20,
            2**20,
            0,
            0,
            LOCAL,
            1,
            0,
            LOCAL,
            2,
            b"",
        )
        reference_halves = transaction_records.encode_half_records(*half_args)
        if COMPILED is not None:
            assert (COMPILED.encode_half_records(*half_args) is None) == (reference_halves is None)


def test_the_selected_encoders_are_the_compiled_ones_unless_switched_off() -> None:
    if DISABLED_BY_ENV:
        assert transaction_records.implementation() == "python"
    else:
        assert transaction_records.implementation() == "compiled", "the compiled core was not built"


# -- what the reference builds -----------------------------------------------------------


def _halves(count: int) -> tuple[bytes, list[Message]]:
    messages = [
        Message(
            "TxTopic",
            f"body-{i}".encode(),
            flag=i,
            properties={
                props.TAGS: "TagA",
                props.KEYS: f"k{i}",
                props.UNIQ_KEY: f"U{i:04d}",
                props.TRAN_MSG: "true",
                **({props.PGROUP: "PG_TX"} if i % 2 else {}),
            },
        )
        for i in range(count)
    ]
    encoded = transaction_records.encode_half_records(
        encode_batch(messages),
        HALF,
        b"TxTopic",
        3,
        b"PG_TX",
        10,
        4096,
        2**20,
        2**20,
        sysflag.TRANSACTION_PREPARED_TYPE,
        111,
        LOCAL,
        5000,
        222,
        LOCAL,
        10911,
        b"CLUSTER\x01C1\x02",
    )
    assert encoded is not None
    return encoded[0], messages


def test_halves_are_what_prepare_makes() -> None:
    records, messages = _halves(4)
    decoded = decode_records(records)
    assert [m.topic for m in decoded] == ["RMQ_SYS_TRANS_HALF_TOPIC"] * 4
    assert [m.queue_offset for m in decoded] == [10, 11, 12, 13]
    for half, sent in zip(decoded, messages, strict=True):
        assert half.body == sent.body
        assert sysflag.transaction_value(half.sys_flag) == sysflag.TRANSACTION_NOT_TYPE
        assert half.properties[props.REAL_TOPIC] == "TxTopic"
        assert half.properties[props.REAL_QID] == "3"
        assert half.properties[props.PGROUP] == "PG_TX"
        assert half.properties[props.TRANSACTION_ID] == sent.properties[props.UNIQ_KEY]
        assert half.properties[props.CLUSTER] == "C1"


def test_ends_commit_and_roll_back_in_item_order() -> None:
    records, _ = _halves(3)
    halves = decode_records(records)
    items = [(h.commit_log_offset, h.queue_offset, i != 1) for i, h in enumerate(halves)]
    ended = transaction_records.encode_end_records(
        [(4096, records)],
        items,
        b"PG_TX",
        HALF,
        OP,
        SPECIAL,
        9000,
        2**20,
        2**20,
        333,
        LOCAL,
        10911,
        LOCAL,
        10911,
        {("TxTopic", 3): 7},
    )
    assert ended is not None
    out = decode_records(ended.records)
    assert [(m.topic, m.queue_offset) for m in out] == [
        ("TxTopic", 7),
        (OP.decode(), 0),
        (OP.decode(), 1),
        ("TxTopic", 8),
        (OP.decode(), 2),
    ]
    committed = out[0]
    assert committed.body == b"body-0" and committed.queue_id == 3
    assert sysflag.transaction_value(committed.sys_flag) == sysflag.TRANSACTION_COMMIT_TYPE
    assert committed.properties == halves[0].properties
    assert committed.born_timestamp == halves[0].born_timestamp
    assert committed.store_timestamp == 333
    assert [m.body for m in out if m.topic == OP.decode()] == [b"10", b"11", b"12"]
    assert out[2].properties == {props.TAGS: "d", props.KEYS: "U0001"}
    assert out[2].born_timestamp == halves[1].store_timestamp
    assert ended.keys == ["U0000", "U0001", "U0002"]
    assert ended.op_first_offset == 0
    (real, op) = ended.queues
    assert (real.topic, real.queue_id, real.first_queue_offset, real.committed) == (
        "TxTopic",
        3,
        7,
        2,
    )
    assert real.committed_bytes == len(b"body-0") + len(b"body-2")
    assert (op.topic, op.first_queue_offset, op.committed) == (OP.decode(), 0, 0)
    assert len(real.cq_entries) == 40 and len(op.cq_entries) == 60


def test_an_end_that_does_not_match_its_half_declines() -> None:
    records, _ = _halves(1)
    (half,) = decode_records(records)
    good = (half.commit_log_offset, half.queue_offset, True)
    base = ([(4096, records)], [good], b"PG_TX", HALF, OP, SPECIAL, 9000, 2**20, 2**20, 1)
    tail = (LOCAL, 10911, LOCAL, 10911, {})
    assert transaction_records.encode_end_records(*base, *tail) is not None  # type: ignore[arg-type]
    for items, group in [
        ([(good[0] + 1, good[1], True)], b"PG_TX"),
        ([(good[0], good[1] + 1, True)], b"PG_TX"),
        ([good], b"OTHER"),
    ]:
        args = (base[0], items, group, *base[3:], *tail)
        assert transaction_records.encode_end_records(*args) is None  # type: ignore[arg-type]
        if COMPILED is not None:
            assert COMPILED.encode_end_records(*args) is None
