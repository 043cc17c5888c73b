"""Transactional records without a Python object per message: a batch of
halves as one run of records in the half topic, and the committed messages
and op records of many ENDs as one run.

`encode_half_records` and `encode_end_records` are the pure-Python
reference; `tidemq.record._transactions` is their compiled twin (same
arguments, the same results byte for byte: tests/unit/codec/
test_transaction_records.py holds them to it). `encode_halves` and
`encode_ends` are whichever runs (see `tidemq.record.native`).

Both follow the broker's general path exactly, and answer None wherever
they would have to think: a property string that is not plain ASCII, a key
the broker refuses or acts on, a half that is missing or does not match its
END, a run that does not fit the room it is given. The caller then takes the
general path (one MessageToStore per message), which stores or refuses with
every check and remark.

Halves (`encode_half_records`, for TIDEMQ_SEND_HALF_BATCH): each entry of a
batch body becomes what `BrokerTransactions.prepare` makes of the stored
message: in the half topic, queue 0, sysflag without the transaction bits;
properties as sent, CLUSTER added where there is none, the broker's send
stamp (MSG_REGION, TRACE_ON) appended, then the items REAL_TOPIC, REAL_QID,
PGROUP (when there is none, or an empty one) and __transactionId__
(= UNIQ_KEY) replaced at the end (`edit_properties`). A message without
UNIQ_KEY needs an id made, one that holds a stamped key needs it replaced:
general path.

Ends (`encode_end_records`, for TIDEMQ_END_TRANSACTIONS): each item
(commit-log offset, half-queue offset, commit?) names a half, read from the
log where it lies; in item order, a commit stores its committed message
(`transaction_halves.committed_message`: real topic and queue, the commit
sysflag, the half's body, flag, born time and host, reconsume times and
property string as stored), then every item its op record (`op_record`:
the op topic, queue 0, body the half's queue offset, TAGS "d" and KEYS its
transaction key, born at the half's store time on the broker's address).
The caller checks the returned keys against what is resolved already.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from tidemq.common import properties as props
from tidemq.common.errors import ProtocolError
from tidemq.common.hashing import java_string_hash_uncached
from tidemq.common.properties import decode_properties, edit_properties, encode_properties
from tidemq.record.codec import MAX_PROPERTIES_LENGTH, MESSAGE_MAGIC_V1, encode_record, split_batch
from tidemq.record.native import compiled
from tidemq.record.property_text import (
    CLUSTER_KEY,
    CQ_ENTRY,
    INDEX_ENTRY,
    holds_stamped_key,
    index_hashes,
    plain_well_formed,
)

__all__ = [
    "EndRecords",
    "HalfRecords",
    "QueueRun",
    "encode_end_records",
    "encode_ends",
    "encode_half_records",
    "encode_halves",
    "implementation",
]

_HALF_DIVERTING_KEYS = tuple(
    key + props.NAME_VALUE_SEPARATOR
    for key in (
        props.DELAY,
        props.TIMER_DELAY_SEC,
        props.TIMER_DELAY_MS,
        props.TIMER_DELIVER_MS,
        props.START_DELIVER_TIME,
    )
)
_MAX_V1_TOPIC = 127
_TRANSACTION_MASK = 0x0C
_TRANSACTION_COMMIT = 0x08
_BORNHOST_V6 = 0x10
_STOREHOST_V6 = 0x20
_TOPIC_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-%|")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")


class HalfRecords(NamedTuple):
    """A half batch's run: as `batch_append.BatchRecords`, in the half topic's queue 0."""

    records: bytes
    cq_entries: bytes
    index_entries: bytes
    msg_ids: str
    messages: int
    tags: dict[int, int]
    index_bound: int
    """The index entries the store's general path reserves room for (see `_index_bound`)."""


class QueueRun(NamedTuple):
    """The part of an END run in one queue: its consumequeue entries from
    `first_queue_offset`, the last queue offset of each tags code, and how
    many committed messages (and body bytes) it holds."""

    topic: str
    queue_id: int
    first_queue_offset: int
    cq_entries: bytes
    tags: dict[int, int]
    committed: int
    committed_bytes: int


class EndRecords(NamedTuple):
    """An END run: the records, each queue's part (in order of first use),
    the index entries, each item's transaction key, and the op queue offset
    of the first item (the others follow one by one)."""

    records: bytes
    queues: list[QueueRun]
    index_entries: bytes
    keys: list[str]
    op_first_offset: int
    index_bound: int


def _plain_value(value: bytes) -> bool:
    return value.isascii() and b"\x01" not in value and b"\x02" not in value


def _index_bound(parsed: Mapping[str, str]) -> int:
    """room.index_entries_bound of one record: its unique key and each of
    its keys, repeats counted (the store reserves room for that many)."""
    keys = parsed.get(props.KEYS, "")
    return (1 if parsed.get(props.UNIQ_KEY) else 0) + (keys.count(" ") + 1 if keys else 0)


def _tags_code(parsed: Mapping[str, str]) -> int:
    value = parsed.get(props.TAGS)
    return java_string_hash_uncached(value) if value else 0


def _id_prefix(store_host: bytes, store_port: int) -> str:
    return (store_host + (store_port & 0xFFFFFFFF).to_bytes(4, "big")).hex().upper()


def encode_half_records(
    body: bytes | bytearray | memoryview,
    half_topic: bytes,
    real_topic: bytes,
    real_queue_id: int,
    producer_group: bytes,
    first_queue_offset: int,
    physical_offset: int,
    room: int,
    max_body_size: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    born_port: int,
    store_timestamp: int,
    store_host: bytes,
    store_port: int,
    cluster_property: bytes,
    stamp_properties: bytes = b"",
) -> HalfRecords | tuple[bytes, bytes, bytes, str, int, dict[int, int], int] | None:
    """See the module docstring (the reference the compiled twin follows)."""
    cluster = cluster_property.decode("latin-1")
    stamp = stamp_properties.decode("latin-1")
    if (
        not half_topic
        or len(half_topic) > _MAX_V1_TOPIC
        or not half_topic.isascii()
        or len(born_host) not in (4, 16)
        or len(store_host) not in (4, 16)
        or len(cluster) > MAX_PROPERTIES_LENGTH
        or not plain_well_formed(cluster)
        or len(stamp) > MAX_PROPERTIES_LENGTH
        or not plain_well_formed(stamp)
        or not real_topic
        or not _plain_value(real_topic)
        or not _plain_value(producer_group)
        or real_queue_id < 0
    ):
        return None
    try:
        entries = split_batch(body)
    except ProtocolError:
        return None
    if not entries:
        return None
    topic_text = real_topic.decode("ascii")
    group = producer_group.decode("ascii")
    stored: list[str] = []
    total = 0
    fixed = 88 + len(born_host) - 4 + len(store_host) - 4
    for entry in entries:
        raw = entry.properties
        if (
            not plain_well_formed(raw)
            or len(entry.body) > max_body_size
            or any(key in raw for key in _HALF_DIVERTING_KEYS)
            or holds_stamped_key(raw, stamp)
        ):
            return None
        properties = (raw if CLUSTER_KEY in raw else raw + cluster) + stamp
        parsed = decode_properties(properties)
        key = parsed.get(props.UNIQ_KEY)
        if not key:
            return None  # the general path makes one
        updates = {props.REAL_TOPIC: topic_text, props.REAL_QID: str(real_queue_id)}
        if not parsed.get(props.PGROUP):
            updates[props.PGROUP] = group
        updates[props.TRANSACTION_ID] = key
        edited = edit_properties(properties, updates)
        if len(edited) > MAX_PROPERTIES_LENGTH:
            return None
        stored.append(edited)
        total += fixed + len(entry.body) + 1 + len(half_topic) + 2 + len(edited)
        if total > room:
            return None
    half_text = half_topic.decode("ascii")
    sys_flag &= ~_TRANSACTION_MASK
    prefix = _id_prefix(store_host, store_port)
    records: list[bytes] = []
    cq: list[bytes] = []
    index: list[bytes] = []
    ids: list[str] = []
    tags: dict[int, int] = {}
    bound = 0
    offset = physical_offset
    for position, (entry, properties) in enumerate(zip(entries, stored, strict=True)):
        queue_offset = first_queue_offset + position
        record = encode_record(
            half_topic,
            0,
            entry.flag,
            queue_offset,
            offset,
            sys_flag,
            born_timestamp,
            born_host,
            born_port,
            store_timestamp,
            store_host,
            store_port,
            0,
            0,
            entry.body,
            properties.encode("ascii"),
        )
        size = len(record)
        records.append(record)
        parsed = decode_properties(properties)
        tags_code = _tags_code(parsed)
        bound += _index_bound(parsed)
        cq.append(CQ_ENTRY.pack(offset, size, tags_code))
        tags[tags_code] = queue_offset
        hashes = index_hashes(half_text, parsed)
        if hashes is None:
            return None
        index.extend(INDEX_ENTRY.pack(offset, key_hash) for key_hash in hashes)
        ids.append(f"{prefix}{offset:016X}")
        offset += size
    return HalfRecords(
        b"".join(records), b"".join(cq), b"".join(index), ",".join(ids), len(entries), tags, bound
    )


class _Half(NamedTuple):
    """A half as an END finds it: the record and the fields the run needs."""

    record: memoryview
    born_len: int
    store_len: int
    body: bytes
    properties: str
    parsed: dict[str, str]
    key: str


def _read_half(
    log_files: Sequence[tuple[int, memoryview | bytes]],
    offset: int,
    queue_offset: int,
    half_topic: bytes,
    group: str,
) -> _Half | None:
    """The half at `offset` of the written log, checked as decode_half and
    the END's checks do; None when anything differs (the general path then
    answers with Java's remark)."""
    for start, view in reversed(log_files):
        if start <= offset < start + len(view):
            break
    else:
        return None
    pos = offset - start
    written = len(view)
    if pos + 88 > written:
        return None
    size, magic = struct.unpack_from(">ii", view, pos)
    if magic != MESSAGE_MAGIC_V1 or size < 88 or size > written - pos:
        return None
    record = memoryview(view)[pos : pos + size]
    flags = _I32.unpack_from(record, 36)[0]
    born_len = 16 if flags & _BORNHOST_V6 else 4
    store_len = 16 if flags & _STOREHOST_V6 else 4
    fixed = 80 + born_len + store_len
    if size < fixed:
        return None
    body_len = _I32.unpack_from(record, fixed - 4)[0]
    if body_len < 0 or body_len > size - fixed - 1:
        return None
    topic_pos = fixed + body_len
    topic_len = struct.unpack_from(">b", record, topic_pos)[0]
    if topic_len < 0:
        return None
    props_pos = topic_pos + 1 + topic_len
    if props_pos + 2 > size:
        return None
    props_len = _I16.unpack_from(record, props_pos)[0]
    if props_len < 0 or props_pos + 2 + props_len != size:
        return None
    if bytes(record[topic_pos + 1 : props_pos]) != half_topic:
        return None
    if _I64.unpack_from(record, 28)[0] != offset or _I64.unpack_from(record, 20)[0] != queue_offset:
        return None
    raw = bytes(record[props_pos + 2 : size])
    if not raw.isascii():
        return None
    properties = raw.decode("ascii")
    parsed = decode_properties(properties)
    key = parsed.get(props.UNIQ_KEY)
    if parsed.get(props.PGROUP) != group or not key:
        return None
    if _I32.unpack_from(record, 48 + born_len)[0] < 0:
        return None  # a born port the general path cannot parse
    body = bytes(record[fixed:topic_pos])
    return _Half(record, born_len, store_len, body, properties, parsed, key)


def _plain_topic(topic: str | None, special: tuple[bytes, ...]) -> bool:
    if not topic or len(topic) > _MAX_V1_TOPIC:
        return False
    raw = topic.encode("ascii")
    return _TOPIC_CHARS.issuperset(raw) and raw not in special


def _real_queue_id(raw: str | None) -> int | None:
    if raw is None or not 0 < len(raw) <= 9 or not raw.isascii() or not raw.isdigit():
        return None
    return int(raw)


class _Queue:
    __slots__ = ("committed", "committed_bytes", "cq", "first", "next", "tags")

    def __init__(self, first: int) -> None:
        self.first = self.next = first
        self.cq: list[bytes] = []
        self.tags: dict[int, int] = {}
        self.committed = 0
        self.committed_bytes = 0


def encode_end_records(
    log_files: Sequence[tuple[int, memoryview | bytes]],
    items: Sequence[tuple[int, int, bool]],
    producer_group: bytes,
    half_topic: bytes,
    op_topic: bytes,
    special_topics: tuple[bytes, ...],
    physical_offset: int,
    room: int,
    max_body_size: int,
    store_timestamp: int,
    store_host: bytes,
    store_port: int,
    op_born_host: bytes,
    op_born_port: int,
    queue_offsets: Mapping[tuple[str, int], int],
) -> EndRecords | tuple[bytes, list[QueueRun], bytes, list[str], int, int] | None:
    """See the module docstring (the reference the compiled twin follows).
    `log_files`: (log offset, written bytes) of each commitlog file;
    `special_topics`: topics whose consumequeue tag slot the store fills
    otherwise than with the TAGS hash; `queue_offsets`: each queue's next
    offset (absent: 0)."""
    if not all(isinstance(topic, bytes) for topic in special_topics):
        raise TypeError("special topics must be bytes")
    if (
        len(store_host) not in (4, 16)
        or len(op_born_host) not in (4, 16)
        or not half_topic
        or not op_topic
        or len(op_topic) > _MAX_V1_TOPIC
        or not _plain_value(op_topic)
        or not items
    ):
        return None
    try:
        group = producer_group.decode("utf-8")
    except UnicodeDecodeError:
        return None
    queues: dict[tuple[str, int], _Queue] = {}

    def queue(topic: str, queue_id: int) -> _Queue:
        found = queues.get((topic, queue_id))
        if found is None:
            found = queues[(topic, queue_id)] = _Queue(queue_offsets.get((topic, queue_id), 0))
        return found

    op_text = op_topic.decode("ascii")
    plans: list[tuple[_Half, tuple[str, int] | None, int]] = []
    total = 0
    for item in items:
        entry: object = item  # checked as the compiled twin checks it
        if not isinstance(entry, tuple) or len(entry) != 3:
            return None
        offset, half_queue_offset, commit = entry
        if not isinstance(offset, int) or not isinstance(half_queue_offset, int):
            return None
        if not (-(2**63) <= offset < 2**63 and -(2**63) <= half_queue_offset < 2**63):
            return None
        half = _read_half(log_files, offset, half_queue_offset, half_topic, group)
        if half is None or len(half.body) > max_body_size:
            return None
        real: tuple[str, int] | None = None
        if commit:
            topic = half.parsed.get(props.REAL_TOPIC)
            queue_id = _real_queue_id(half.parsed.get(props.REAL_QID))
            if topic is None or not _plain_topic(topic, special_topics) or queue_id is None:
                return None
            real = (topic, queue_id)
            queue(topic, queue_id)
            total += 80 + half.born_len + len(store_host) + len(half.body) + 1 + len(topic)
            total += 2 + len(half.properties)
        queue(op_text, 0)
        op_properties_len = 12 + len(half.key) + 1
        if op_properties_len > MAX_PROPERTIES_LENGTH:
            return None
        body_len = len(str(half_queue_offset))
        total += 80 + len(op_born_host) + len(store_host) + body_len + 1 + len(op_topic) + 2
        total += op_properties_len
        if total > room:
            return None
        plans.append((half, real, half_queue_offset))
    records: list[bytes] = []
    index: list[bytes] = []
    keys: list[str] = []
    bound = 0
    offset = physical_offset
    for half, real, half_queue_offset in plans:
        keys.append(half.key)
        record = half.record
        if real is not None:
            topic, queue_id = real
            target = queues[real]
            born_port_at = 48 + half.born_len
            reconsume_at = born_port_at + 4 + 8 + half.store_len + 4
            sys_flag = (_I32.unpack_from(record, 36)[0] & ~_TRANSACTION_MASK) | _TRANSACTION_COMMIT
            committed = encode_record(
                topic.encode("ascii"),
                queue_id,
                _I32.unpack_from(record, 16)[0],
                target.next,
                offset,
                sys_flag,
                _I64.unpack_from(record, 40)[0],
                bytes(record[48:born_port_at]),
                _I32.unpack_from(record, born_port_at)[0],
                store_timestamp,
                store_host,
                store_port,
                _I32.unpack_from(record, reconsume_at)[0],
                0,
                half.body,
                half.properties.encode("ascii"),
            )
            hashes = index_hashes(topic, half.parsed)
            if hashes is None:
                return None
            tags_code = _tags_code(half.parsed)
            bound += _index_bound(half.parsed)
            target.cq.append(CQ_ENTRY.pack(offset, len(committed), tags_code))
            target.tags[tags_code] = target.next
            target.next += 1
            target.committed += 1
            target.committed_bytes += len(half.body)
            index.extend(INDEX_ENTRY.pack(offset, key_hash) for key_hash in hashes)
            records.append(committed)
            offset += len(committed)
        op_queue = queues[(op_text, 0)]
        op_properties = encode_properties({props.TAGS: "d", props.KEYS: half.key})
        op = encode_record(
            op_topic,
            0,
            0,
            op_queue.next,
            offset,
            0,
            _I64.unpack_from(record, 52 + half.born_len)[0],
            op_born_host,
            op_born_port,
            store_timestamp,
            store_host,
            store_port,
            0,
            0,
            str(half_queue_offset).encode("ascii"),
            op_properties.encode("ascii"),
        )
        op_parsed = decode_properties(op_properties)
        hashes = index_hashes(op_text, op_parsed)
        if hashes is None:
            return None
        tags_code = _tags_code(op_parsed)
        bound += _index_bound(op_parsed)
        op_queue.cq.append(CQ_ENTRY.pack(offset, len(op), tags_code))
        op_queue.tags[tags_code] = op_queue.next
        op_queue.next += 1
        index.extend(INDEX_ENTRY.pack(offset, key_hash) for key_hash in hashes)
        records.append(op)
        offset += len(op)
    runs = [
        QueueRun(
            topic,
            queue_id,
            q.first,
            b"".join(q.cq),
            q.tags,
            q.committed,
            q.committed_bytes,
        )
        for (topic, queue_id), q in queues.items()
    ]
    return EndRecords(
        b"".join(records),
        runs,
        b"".join(index),
        keys,
        queues[(op_text, 0)].first,
        bound,
    )


_HalfEncoder = Callable[..., "tuple[bytes, bytes, bytes, str, int, dict[int, int], int] | None"]
_EndEncoder = Callable[..., "tuple[bytes, list[QueueRun], bytes, list[str], int, int] | None"]
_compiled = compiled("_transactions")
encode_halves: _HalfEncoder = (
    encode_half_records if _compiled is None else _compiled.encode_half_records
)
encode_ends: _EndEncoder = encode_end_records if _compiled is None else _compiled.encode_end_records


def implementation() -> str:
    return "python" if _compiled is None else "compiled"
