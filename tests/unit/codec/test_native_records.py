"""The compiled record codecs (`tidemq.record._records`) give exactly what the
pure-Python reference (`tidemq.record.codec`) gives.

Generated records (v1 and v2 magic, IPv4 and IPv6 hosts, odd property
strings, zlib bodies, wrong CRCs, runs of several) decode to equal messages;
random and mutated buffers make both return the same or both raise the same
ProtocolError (the compiled one never crashes or raises anything else); batch
bodies encode byte for byte alike. The compiled-side tests skip when the
module is not in use (TIDEMQ_NO_EXTENSIONS=1), so the file also runs in pure
mode; a missing build fails `test_the_compiled_module_is_in_use`.
"""

from __future__ import annotations

import copy
import itertools
import struct
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemq.client._send import SendCodec
from tidemq.common import sysflag
from tidemq.common.errors import ProtocolError
from tidemq.common.message import Message, MessageExt
from tidemq.record import codec, native, records

COMPILED = records.IMPLEMENTATION == "compiled"
needs_compiled = pytest.mark.skipif(not COMPILED, reason="the compiled module is not in use")

MAGICS = (codec.MESSAGE_MAGIC_V1, codec.MESSAGE_MAGIC_V2)


# -- helpers ----------------------------------------------------------------------------


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", a comparable result) or ("error", type, text)."""
    try:
        return ("ok", comparable(call()))
    except Exception as exc:  # the test compares whatever was raised
        return ("error", (type(exc), str(exc)))


def comparable(result: Any) -> Any:
    """Messages as their fields with properties in dict order (equality of a
    dataclass ignores that order), columns as their lists."""
    if isinstance(result, list):
        return [comparable(item) for item in result]
    if isinstance(result, MessageExt):
        assert type(result) is MessageExt
        fields = [getattr(result, name) for name in result.__slots__]
        fields += [getattr(result, name) for name in Message.__slots__]
        return (fields, list(result.properties.items()))
    if isinstance(result, codec.RecordColumns):
        assert type(result) is codec.RecordColumns
        return [getattr(result, name) for name in result.__slots__]
    if isinstance(result, codec.BatchEntry):
        assert type(result) is codec.BatchEntry
        return tuple(result)
    return result


def assert_same(name: str, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """`codec.<name>` and `records.<name>` on the same arguments: the same outcome."""
    expected = outcome(lambda: getattr(codec, name)(*args, **kwargs))
    got = outcome(lambda: getattr(records, name)(*args, **kwargs))
    assert got == expected
    return got


def raw_record(
    *,
    magic: int = codec.MESSAGE_MAGIC_V1,
    body: bytes = b"body",
    topic: bytes = b"T",
    properties: bytes = b"",
    born_ip: bytes = bytes(4),
    store_ip: bytes = bytes(4),
    sys_flag: int = 0,
    crc: int | None = None,
    numbers: tuple[int, ...] = (0,) * 10,
) -> bytes:
    """A record laid out field by field (any magic with any topic length)."""
    queue_id, flag, queue_offset, physical, born_ts, born_port = numbers[:6]
    store_ts, store_port, reconsume, prepared = numbers[6:]
    v6 = (sysflag.BORNHOST_V6 if len(born_ip) == 16 else 0) | (
        sysflag.STOREHOST_V6 if len(store_ip) == 16 else 0
    )
    sys_flag = (sys_flag & ~(sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6)) | v6
    topic_head = struct.pack(">b" if magic == codec.MESSAGE_MAGIC_V1 else ">h", len(topic))
    tail = b"".join(
        [
            struct.pack(">i", len(body)),
            body,
            topic_head,
            topic,
            struct.pack(">h", len(properties)),
            properties,
        ]
    )
    middle = b"".join(
        [
            struct.pack(">iiqqiq", queue_id, flag, queue_offset, physical, sys_flag, born_ts),
            born_ip,
            struct.pack(">iq", born_port, store_ts),
            store_ip,
            struct.pack(">iiq", store_port, reconsume, prepared),
        ]
    )
    stored_crc = zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc
    size = 12 + len(middle) + len(tail)
    return struct.pack(">iii", size, magic, stored_crc) + middle + tail


# -- strategies -------------------------------------------------------------------------

i32s = st.integers(-(2**31), 2**31 - 1)
i64s = st.integers(-(2**63), 2**63 - 1)
hosts = st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16))
texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
odd_property_text = st.lists(
    st.sampled_from(["\x01", "\x02", "a", "KEY", "é", "日", " ", "0"]), max_size=12
).map("".join)
property_bytes = st.one_of(
    st.dictionaries(
        texts.filter(lambda t: bool(t) and "\x01" not in t and "\x02" not in t),
        texts.filter(lambda t: "\x02" not in t),
        max_size=6,
    ).map(lambda d: "".join(f"{k}\x01{v}\x02" for k, v in d.items()).encode()),
    odd_property_text.map(str.encode),
    st.binary(max_size=12),  # often not UTF-8
)
topic_bytes = st.one_of(
    st.sampled_from([b"", b"TopicA", "tópico-日本".encode()]),
    texts.map(str.encode),
    st.integers(120, 300).map(lambda n: b"t" * n),
    st.binary(max_size=6),
)
compression_bits = st.sampled_from(
    [
        0,
        sysflag.COMPRESSED,
        sysflag.COMPRESSED | sysflag.COMPRESSION_ZLIB_TYPE,
        sysflag.COMPRESSED | sysflag.COMPRESSION_LZ4_TYPE,
        sysflag.COMPRESSION_ZLIB_TYPE,  # type bits without the compressed bit
    ]
)


@st.composite
def records_(draw: st.DrawFn) -> bytes:
    magic = draw(st.sampled_from(MAGICS))
    topic = draw(topic_bytes)
    if magic == codec.MESSAGE_MAGIC_V1 and len(topic) > 127:
        magic = codec.MESSAGE_MAGIC_V2
    body = draw(st.binary(max_size=64))
    bits = draw(compression_bits)
    if bits & sysflag.COMPRESSED and draw(st.booleans()):
        body = zlib.compress(body)  # else a "compressed" body that does not inflate
    crc = draw(st.one_of(st.none(), st.none(), i32s))
    sys_flag = (draw(i32s) & ~0x701 & ~sysflag.COMPRESSED) | bits
    return raw_record(
        magic=magic,
        body=body,
        topic=topic,
        properties=draw(property_bytes),
        born_ip=draw(hosts),
        store_ip=draw(hosts),
        sys_flag=sys_flag,
        crc=crc,
        numbers=(
            draw(i32s),
            draw(i32s),
            draw(i64s),
            draw(i64s),
            draw(i64s),
            draw(i32s),
            draw(i64s),
            draw(i32s),
            draw(i32s),
            draw(i64s),
        ),
    )


runs = st.lists(records_(), min_size=1, max_size=4).map(b"".join)


# -- the compiled module is the one running -------------------------------------------------


def test_the_compiled_module_is_in_use() -> None:
    if native.DISABLED_BY_ENV:
        pytest.skip("TIDEMQ_NO_EXTENSIONS is set")
    assert native.compiled("_records") is not None, "tidemq.record._records was not built"
    assert records.IMPLEMENTATION == "compiled"
    assert records.decode_records is not codec.decode_records


def test_pure_mode_uses_the_reference() -> None:
    if COMPILED:
        pytest.skip("the compiled module is in use")
    assert records.decode_records is codec.decode_records
    assert records.encode_batch is codec.encode_batch
    assert records.batch_unique_ids is records.python_batch_unique_ids


@needs_compiled
def test_configure_refuses_classes_of_another_shape() -> None:
    module = native.compiled("_records")
    assert module is not None

    class Wider(MessageExt):
        __slots__ = ("extra",)

    good: dict[str, Any] = records.compiled_configuration()
    loose = type("Loose", (tuple,), {})  # a tuple subclass with a __dict__
    wrong = [("message_ext", Wider), ("batch_entry", loose), ("message", Wider), ("message", 1)]
    for name, value in wrong:
        with pytest.raises(TypeError):
            module.configure(**{**good, name: value})
    record = raw_record(properties=b"A\x01b\x02")
    assert records.decode_records(record) == codec.decode_records(record)


# -- decoding -----------------------------------------------------------------------------


@needs_compiled
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs, st.booleans(), st.booleans())
def test_decode_records_matches_python(buf: bytes, verify_crc: bool, decompress: bool) -> None:
    assert_same("decode_records", buf, verify_crc=verify_crc, decompress=decompress)


@needs_compiled
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs, st.booleans())
def test_decode_record_columns_matches_python(buf: bytes, decompress: bool) -> None:
    assert_same("decode_record_columns", buf, decompress=decompress)


@needs_compiled
@pytest.mark.parametrize(
    ("raw_props", "utf8"),
    [
        (b"", True),
        (b"A\x01b", True),  # no trailing separator
        (b"A\x01b\x02", True),
        (b"\x01x\x02A\x01\x02", True),  # empty key skipped, empty value kept
        (b"A\x01v\x01w\x02", True),  # value holding \x01
        (b"A\x011\x02B\x012\x02A\x013\x02", True),  # a later pair wins, first place kept
        (b"noseparator\x02\x02\x02", True),
        ("clé\x01très\x02日\x01本\x02".encode(), True),
        (b"A\x01\xff\x02", False),  # not UTF-8 in a value
        (b"\xff\x02A\x01b\x02", False),  # not UTF-8 in a skipped item
        (b"\x01\xff\x02", False),  # not UTF-8 after an empty key
        (b"\xc3\x01x\x02", False),  # not UTF-8 in a key
        (b"A\x01b\x02\xe6\x97", False),  # a truncated sequence at the end
        ("\ud800".encode("utf-8", "surrogatepass"), False),  # an encoded surrogate
    ],
)
def test_property_strings(raw_props: bytes, utf8: bool) -> None:
    record = raw_record(properties=raw_props)
    result = assert_same("decode_records", record)
    assert result[0] == ("ok" if utf8 else "error")
    if not utf8:
        assert result[1] == (ProtocolError, "properties is not UTF-8")


@needs_compiled
def test_message_ids_and_hosts() -> None:
    v6 = bytes.fromhex("20010db8000000000000000000000001")
    record = raw_record(
        born_ip=v6,
        store_ip=bytes([192, 168, 0, 1]),
        numbers=(1, 2, 3, -1, 5, -7, 8, 10911, 0, 0),
    ) + raw_record(born_ip=bytes([10, 0, 0, 1]), store_ip=v6, numbers=(0,) * 10)
    (first, second) = records.decode_records(record)
    assert first.born_host == "[2001:db8::1]:-7"
    assert first.store_host == "192.168.0.1:10911"
    assert first.msg_id == "C0A80001" + "00002A9F" + "F" * 16
    assert second.store_host == "[2001:db8::1]:0"
    assert second.msg_id == v6.hex().upper() + "0" * 8 + "0" * 16
    assert_same("decode_records", record)


@needs_compiled
def test_zlib_bodies_and_crc() -> None:
    body = b"payload " * 100
    packed = zlib.compress(body)
    record = raw_record(body=packed, sys_flag=sysflag.COMPRESSED)
    (message,) = records.decode_records(record, decompress=True, verify_crc=True)
    assert message.body == body and message.sys_flag == 0
    (stored,) = records.decode_records(record)
    assert stored.body == packed and stored.sys_flag == sysflag.COMPRESSED
    lz4 = raw_record(body=packed, sys_flag=sysflag.COMPRESSED | sysflag.COMPRESSION_LZ4_TYPE)
    assert records.decode_records(lz4, decompress=True)[0].body == packed
    bad_crc = raw_record(body=b"abc", crc=5)
    with pytest.raises(ProtocolError, match="CRC mismatch"):
        records.decode_records(bad_crc, verify_crc=True)
    assert records.decode_records(bad_crc)[0].body_crc == 5
    truncated = raw_record(body=packed[:-4], sys_flag=sysflag.COMPRESSED)
    for buf in (record, lz4, bad_crc, truncated):
        for flags in itertools.product((False, True), repeat=2):
            verify, decompress = flags
            assert_same("decode_records", buf, verify_crc=verify, decompress=decompress)
            assert_same("decode_record_columns", buf, decompress=decompress)


@needs_compiled
def test_any_buffer_is_accepted() -> None:
    buf = raw_record(properties=b"A\x01b\x02") + raw_record(
        topic=b"U", magic=codec.MESSAGE_MAGIC_V2
    )
    expected = codec.decode_records(buf)
    for wrapped in (bytearray(buf), memoryview(buf), memoryview(bytearray(buf))[0:]):
        assert records.decode_records(wrapped) == expected
        assert records.decode_record_columns(wrapped) == codec.decode_record_columns(buf)
    padded = b"xx" + buf
    assert records.decode_records(memoryview(padded)[2:]) == expected
    assert records.decode_records(b"") == [] == records.split_batch(b"")
    assert len(records.decode_record_columns(bytearray())) == 0
    # shapes left to the reference: the same answer, errors included
    wide = memoryview(buf[: len(buf) // 4 * 4]).cast("i")
    for odd in (wide, memoryview(buf)[::2], "text", 12, None):
        for name in ("decode_records", "decode_record_columns", "split_batch"):
            assert_same(name, odd)


@needs_compiled
def test_keywords_are_keyword_only() -> None:
    record = raw_record()
    with pytest.raises(TypeError):
        records.decode_records(record, True)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        records.decode_record_columns(record, False)  # type: ignore[call-arg]
    assert records.decode_records(buf=record) == codec.decode_records(record)


# -- fuzzing --------------------------------------------------------------------------------


def fuzz_both(buf: bytes) -> None:
    for flags in itertools.product((False, True), repeat=2):
        verify, decompress = flags
        result = assert_same("decode_records", buf, verify_crc=verify, decompress=decompress)
        assert result[0] == "ok" or result[1][0] is ProtocolError
    result = assert_same("decode_record_columns", buf)
    assert result[0] == "ok" or result[1][0] is ProtocolError
    result = assert_same("split_batch", buf)
    assert result[0] == "ok" or result[1][0] is ProtocolError


@needs_compiled
@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes(buf: bytes) -> None:
    fuzz_both(buf)


@st.composite
def mutated_runs(draw: st.DrawFn) -> bytes:
    buf = bytearray(draw(runs))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["int32", "int16", "byte", "truncate", "extend"]))
        at = draw(st.integers(0, max(0, len(buf) - 1)))
        if kind == "int32":
            value = draw(st.sampled_from([-1, -(2**31), 2**31 - 1, 0, 88, 91, 10**6]) | i32s)
            buf[at : at + 4] = struct.pack(">i", value)[: len(buf[at : at + 4])]
        elif kind == "int16":
            value = draw(st.sampled_from([-1, -32768, 32767, 0, 1, 200]))
            buf[at : at + 2] = struct.pack(">h", value)[: len(buf[at : at + 2])]
        elif kind == "byte" and buf:
            buf[at] = draw(st.integers(0, 255))
        elif kind == "truncate":
            del buf[at:]
        else:
            buf += draw(st.binary(min_size=1, max_size=100))
    return bytes(buf)


@needs_compiled
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_runs())
def test_mutated_records(buf: bytes) -> None:
    fuzz_both(buf)


@needs_compiled
@pytest.mark.parametrize(
    ("position", "value"),
    [
        (0, 2**31 - 1),  # huge TOTALSIZE
        (0, -1),  # negative TOTALSIZE
        (0, 0),
        (4, 0),  # bad magic
        (36, -1),  # every SYSFLAG bit: IPv6 hosts the buffer is too short for
        (84, -5),  # negative body length
        (84, 2**31 - 1),  # body length past the end
    ],
)
def test_flipped_fields(position: int, value: int) -> None:
    buf = bytearray(raw_record(properties=b"A\x01b\x02"))
    buf[position : position + 4] = struct.pack(">i", value)
    fuzz_both(bytes(buf))
    fuzz_both(bytes(buf) + raw_record())


@needs_compiled
def test_flipped_lengths_in_the_tail() -> None:
    base = raw_record(body=b"abc", topic=b"Topic", properties=b"A\x01b\x02")
    topic_len_at = 88 + 3
    for value in (-1, 0, 4, 100, 127):
        buf = bytearray(base)
        buf[topic_len_at] = value & 0xFF
        fuzz_both(bytes(buf))
    props_len_at = topic_len_at + 1 + 5
    for value in (-1, -32768, 0, 3, 5, 32767):
        buf = bytearray(base)
        buf[props_len_at : props_len_at + 2] = struct.pack(">h", value)
        fuzz_both(bytes(buf))
    v2 = raw_record(magic=codec.MESSAGE_MAGIC_V2, topic=b"Topic")
    for value in (-1, -32768, 32767, 6):
        buf = bytearray(v2)
        buf[topic_len_at + 1 : topic_len_at + 3] = struct.pack(">h", value)
        fuzz_both(bytes(buf))


# -- batch bodies ---------------------------------------------------------------------------

property_maps = st.dictionaries(texts, texts, max_size=5)
batch_messages = st.lists(
    st.builds(
        lambda body, flag, properties, ext: (MessageExt if ext else Message)(
            "T", body, flag, properties
        ),
        st.binary(max_size=40),
        i32s,
        property_maps,
        st.booleans(),
    ),
    max_size=6,
)


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(batch_messages)
def test_encode_and_split_batch_match_python(messages: list[Message]) -> None:
    body = codec.encode_batch(messages)
    assert records.encode_batch(messages) == body
    assert records.encode_batch(tuple(messages)) == body
    assert records.encode_batch(iter(messages)) == body  # type: ignore[arg-type]
    assert_same("split_batch", body)
    assert_same("split_batch", bytearray(body))
    assert_same("split_batch", memoryview(body))


class Custom(Message):
    """A subclass: the compiled path leaves it to Python (a subclass could
    override what a slot holds)."""

    __slots__ = ()


@needs_compiled
@pytest.mark.parametrize(
    "message",
    [
        Message("T", b"x", 2**31),  # flag out of range
        Message("T", b"x", -(2**31) - 1),
        Message("T", b"x", True),
        Message("T", b"x", 1.5),  # type: ignore[arg-type]
        Message("T", b"x", 0, {"k": "v" * 40000}),  # properties too long
        Message("T", b"x", 0, {"k": "\ud800"}),  # not encodable
        Message("T", b"x", 0, {"k": 7}),  # type: ignore[dict-item]
        Message("T", bytearray(b"x"), 0),  # type: ignore[arg-type]
        Message("T", memoryview(b"abcd").cast("h"), 0),  # type: ignore[arg-type]
        Message("T", "text", 0),  # type: ignore[arg-type]
        Message("T", b"x", 0, None),  # type: ignore[arg-type]
        "not a message",
    ],
)
def test_encode_batch_odd_messages(message: Any) -> None:
    for messages in ([Message("T", b"first"), message], (message,)):
        assert_same("encode_batch", messages)


@needs_compiled
def test_encode_batch_unset_slots_and_subclasses() -> None:
    unset = Message.__new__(Message)
    custom = Custom("T", b"stored", 0, {"a": "b"})
    for messages in ([unset], [custom], [Message("T")] * 3, []):
        assert_same("encode_batch", messages)


@needs_compiled
@pytest.mark.parametrize(
    ("position", "value"),
    [(0, 0), (0, -1), (0, 2**31 - 1), (16, -1), (16, 2**31 - 1), (16, 1000)],
)
def test_split_batch_flipped_fields(position: int, value: int) -> None:
    body = bytearray(codec.encode_batch([Message("T", b"abc", 1, {"a": "b"})] * 2))
    body[position : position + 4] = struct.pack(">i", value)
    fuzz_both(bytes(body))


# -- batch checks -----------------------------------------------------------------------------

check_properties = st.fixed_dictionaries(
    {},
    optional={
        "DELAY": st.sampled_from(["", "0", "3"]),
        "WAIT": st.sampled_from(["true", "false", "", "TRUE", "False", "no", "tru\u00e9"]),
        "UNIQ_KEY": st.sampled_from(["", "ID-given"]),
        "TAGS": st.just("a"),
    },
)
check_messages = st.lists(
    st.builds(
        Message,
        st.sampled_from(["T", "T", "T", "U"]),
        st.sampled_from([b"", b"x", b"body"]),
        st.just(0),
        check_properties,
    ),
    min_size=1,
    max_size=5,
)


def counter() -> Callable[[], str]:
    numbers = itertools.count()
    return lambda: f"ID-{next(numbers)}"


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(check_messages, st.booleans())
def test_batch_unique_ids_matches_python(messages: list[Message], wait: bool) -> None:
    mine = copy.deepcopy(messages)
    expected = records.python_batch_unique_ids(messages, "T", wait, counter())
    got = records.batch_unique_ids(mine, "T", wait, counter())
    assert got == expected
    assert mine == messages  # the same ids given to the same messages


@needs_compiled
def test_batch_unique_ids_leaves_odd_inputs_to_python() -> None:
    plain = [Message("T", b"x")]
    assert records.batch_unique_ids(plain, "T", True, counter()) == ["ID-0"]
    assert plain[0].properties == {"UNIQ_KEY": "ID-0"}
    for odd in (
        [Custom("T", b"x")],
        [Message("T", bytearray(b"x"))],  # type: ignore[arg-type]
        [Message("T", b"x", 0, {"UNIQ_KEY": 5})],  # type: ignore[dict-item]
        [Message("T", b"x", 0, {"DELAY": 0})],  # type: ignore[dict-item]
        ["not a message"],
    ):
        assert records.batch_unique_ids(odd, "T", True, counter()) is None  # type: ignore[arg-type]
    assert records.batch_unique_ids(iter(plain), "T", True, counter()) is None  # type: ignore[arg-type]

    def failing() -> str:
        raise RuntimeError("no ids today")

    with pytest.raises(RuntimeError, match="no ids today"):
        records.batch_unique_ids([Message("T", b"x")], "T", True, failing)


@settings(max_examples=200, deadline=None)
@given(check_messages)
def test_prepare_batch_equals_the_checked_loop(messages: list[Message]) -> None:
    """Both modes: the fast ids (compiled or Python twin) then, on a failed
    check, the checked loop, leave the messages and raise as that loop alone."""
    first = messages[0]
    fast, plain = copy.deepcopy(messages), copy.deepcopy(messages)
    fast_codec = SendCodec("PG", counter())
    plain_codec = SendCodec("PG", counter())
    got = outcome(lambda: fast_codec.prepare_batch(fast))
    expected = outcome(
        lambda: plain_codec._checked_batch_ids(plain, first.topic, first.wait_store_msg_ok)
    )
    assert fast == plain
    if expected[0] == "ok":
        assert got[0] == "ok"
        assert got[1].msg_id == ",".join(expected[1])
        assert got[1].body == codec.encode_batch(plain)
    else:
        assert got == expected
