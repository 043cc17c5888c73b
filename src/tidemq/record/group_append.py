"""The store's append of a group of single messages (the writes group commit
gathered), in one call: records, consumequeue entries, index entries and a
result per message, without Python work per message in the store.

`encode_group_records` is the pure-Python reference; `tidemq.record._append`
holds its compiled twin (same arguments, the same result byte for byte: the
property tests in tests/unit/codec/test_group_append.py hold them to it).
`encode` is whichever runs (see `tidemq.record.native`).

Each message is an object with the fields of `store.api.MessageToStore`
(this layer does not import the store). The result, for messages laid back
to back from `physical_offset`:

- `records`: the commitlog records (v1 layout), queue offsets taken from
  `queue_offsets` (each queue continues where it is);
- `results`: `make_result(ok, physical offset, size, queue offset, store
  timestamp, offset message id)` per message, in order;
- `queues`: per queue, in order of first appearance, `(topic, queue id,
  first queue offset, consumequeue entries (20 bytes each), {tags code: last
  queue offset}) `;
- `index_entries`: 12 bytes per index entry (int64 offset, int32 key hash),
  as `batch_append` packs them;
- `index_bound`: the index room the store's general path would reserve for
  these messages (one per unique key, one per key), so that index files
  roll at the same moment.

None means "take the general path", which stores, refuses or raises with
every check: a message whose queue the store does not know yet, a field out
of its range or of the wrong type, a body over `max_body`, a property string
that is not plain well-formed ASCII, a topic that needs the v2 layout, a
transaction half or rollback (no consumequeue entry), a tags code the store
computes by its own rule (`rule_topics`, with no tags code given), too many
keys, or records that do not fit `room` (the general path rolls the file).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

from tidemq.common import properties as props
from tidemq.common.hashing import java_string_hash_uncached
from tidemq.record.codec import MAX_PROPERTIES_LENGTH, MAX_V1_TOPIC_LENGTH, encode_record
from tidemq.record.native import compiled
from tidemq.record.property_text import (
    CQ_ENTRY,
    INDEX_ENTRY,
    index_hashes,
    last_value,
    plain_well_formed,
)

__all__ = ["GroupRecords", "encode", "encode_group_records", "implementation"]

R = TypeVar("R")

QueuePart = tuple[str, int, int, bytes, dict[int, int]]
GroupRecords = tuple[bytes, tuple[Any, ...], list[QueuePart], bytes, int]

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_TRANSACTION_MASK = 0x3 << 2
_CONSUMABLE = (0, 0x2 << 2)
"""Transaction types with a consumequeue entry: none, and commit."""
_INDEX_KEYS = (props.UNIQ_KEY, props.KEYS)


def _int_in(value: object, bounds: tuple[int, int]) -> bool:
    return isinstance(value, int) and bounds[0] <= value <= bounds[1]


def encode_group_records(
    messages: Sequence[Any],
    physical_offset: int,
    room: int,
    store_timestamp: int,
    store_host: bytes,
    store_port: int,
    queue_offsets: Mapping[tuple[str, int], int],
    max_body: int,
    rule_topics: Collection[str],
    make_result: Callable[[Any, int, int, int, int, str], R],
    ok: object,
) -> GroupRecords | None:
    """See the module docstring (the reference the compiled twin follows)."""
    if not messages or len(store_host) not in (4, 16):
        return None
    records: list[bytes] = []
    results: list[R] = []
    parts: dict[tuple[str, int], tuple[int, list[bytes], dict[int, int]]] = {}
    index: list[bytes] = []
    index_bound = 0
    next_offsets: dict[tuple[str, int], int] = {}
    prefix = (store_host + (store_port & 0xFFFFFFFF).to_bytes(4, "big")).hex().upper()
    offset = physical_offset
    for message in messages:
        topic = message.topic
        queue_id = message.queue_id
        body = message.body
        raw = message.properties
        flag = message.flag
        sys_flag = message.sys_flag
        born_timestamp = message.born_timestamp
        born_host = message.born_host
        born_port = message.born_port
        reconsume_times = message.reconsume_times
        prepared = message.prepared_transaction_offset
        tags_code = message.tags_code
        if not (
            type(topic) is str
            and topic.isascii()
            and 0 < len(topic) <= MAX_V1_TOPIC_LENGTH
            and _int_in(queue_id, _INT32)
            and type(raw) is str
            and raw.isascii()
            and len(raw) <= MAX_PROPERTIES_LENGTH
            and plain_well_formed(raw)
            and _int_in(flag, _INT32)
            and _int_in(sys_flag, _INT32)
            and sys_flag & _TRANSACTION_MASK in _CONSUMABLE
            and _int_in(born_timestamp, _INT64)
            and isinstance(born_host, bytes)
            and len(born_host) in (4, 16)
            and _int_in(born_port, _INT32)
            and _int_in(reconsume_times, _INT32)
            and _int_in(prepared, _INT64)
            and (tags_code is None or _int_in(tags_code, _INT64))
        ):
            return None
        try:
            view = memoryview(body)
        except TypeError:
            return None
        if not view.c_contiguous or view.nbytes > max_body:
            return None
        key = (topic, queue_id)
        queue_offset = next_offsets.get(key)
        if queue_offset is None:
            known = queue_offsets.get(key)
            if known is None or not _int_in(known, _INT64):
                return None
            queue_offset = known
        if tags_code is None:
            if topic in rule_topics:
                return None
            tag_value = last_value(raw, props.TAGS)
            tags_code = java_string_hash_uncached(tag_value) if tag_value else 0
        named = {k: value for k in _INDEX_KEYS if (value := last_value(raw, k)) is not None}
        hashes = index_hashes(topic, named)
        if hashes is None:
            return None
        data = view.cast("B") if view.format != "B" else view
        record = encode_record(
            topic.encode("ascii"),
            queue_id,
            flag,
            queue_offset,
            offset,
            sys_flag,
            born_timestamp,
            born_host,
            born_port,
            store_timestamp,
            store_host,
            store_port,
            reconsume_times,
            prepared,
            data.tobytes(),
            raw.encode("ascii"),
            zlib.crc32(data) & 0x7FFFFFFF,
        )
        size = len(record)
        if offset + size - physical_offset > room:
            return None
        records.append(record)
        next_offsets[key] = queue_offset + 1
        part = parts.get(key)
        if part is None:
            part = parts[key] = (queue_offset, [], {})
        part[1].append(CQ_ENTRY.pack(offset, size, tags_code))
        part[2][tags_code] = queue_offset
        index.extend(INDEX_ENTRY.pack(offset, key_hash) for key_hash in hashes)
        unique_key = named.get(props.UNIQ_KEY)
        keys = named.get(props.KEYS)
        index_bound += (1 if unique_key else 0) + (keys.count(" ") + 1 if keys else 0)
        results.append(
            make_result(ok, offset, size, queue_offset, store_timestamp, f"{prefix}{offset:016X}")
        )
        offset += size
    queues = [
        (topic, queue_id, first, b"".join(entries), tags)
        for (topic, queue_id), (first, entries, tags) in parts.items()
    ]
    return b"".join(records), tuple(results), queues, b"".join(index), index_bound


_Encoder = Callable[
    [
        Sequence[Any],
        int,
        int,
        int,
        bytes,
        int,
        Mapping[tuple[str, int], int],
        int,
        Collection[str],
        Callable[[Any, int, int, int, int, str], Any],
        object,
    ],
    "GroupRecords | None",
]
_compiled = compiled("_append")
encode: _Encoder = encode_group_records if _compiled is None else _compiled.encode_group_records


def implementation() -> str:
    return "python" if _compiled is None else "compiled"
