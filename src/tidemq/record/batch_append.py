"""The broker's batch append: a SEND_BATCH_MESSAGE body in, everything the
store writes for it out, in one call and without a Python object per message.

`encode_batch_records` is the pure-Python reference; `tidemq.record._append`
is its compiled twin (same arguments, the same result byte for byte: the
property tests in tests/unit/codec/test_batch_append.py hold them to it).
`encode` is whichever runs (see `tidemq.record.native`).

The result, for a batch of `count` messages of one queue:

- `records`: the commitlog records laid back to back from `physical_offset`,
  queue offsets from `first_queue_offset`, the broker's CLUSTER property
  appended to each property string that has none, then `stamp` (the broker's
  MSG_REGION and TRACE_ON) appended to every one (apache/rocketmq 4.8 to
  5.3.3 append a batch's outer properties, these among them, to each message:
  CommitLog.MessageExtEncoder.encode(MessageExtBatch), MessageExtEncoder from 5.1);
- `cq_entries`: the consumequeue entries, 20 bytes each (offset, size, tags code);
- `index_entries`: 12 bytes per index entry (int64 physical offset, int32 key
  hash), a message's unique key first, then each of its keys, without repeats;
- `msg_ids`: the offset message ids joined by commas (the send response);
- `messages`: how many messages the batch holds;
- `tags`: for each tags code in the batch, the last queue offset that has it
  (enough to wake every held pull the batch satisfies).

None means "take the general path": an entry is malformed, or a property
string is not plain well-formed ASCII, or it holds a key the broker must act
on (a delay level, a transaction flag, a delivery time) or a key of the
non-empty stamp (which the general path replaces), or the topic needs
the v2 layout. The general path then stores or refuses the batch with the
full checks and remarks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from tidemq.common import properties as props
from tidemq.common.errors import ProtocolError
from tidemq.common.hashing import java_string_hash_uncached
from tidemq.record.codec import MAX_PROPERTIES_LENGTH, encode_record, split_batch
from tidemq.record.native import compiled
from tidemq.record.property_text import (
    CLUSTER_KEY,
    CQ_ENTRY,
    INDEX_ENTRY,
    holds_stamped_key,
    index_hashes,
    last_value,
    plain_well_formed,
)

__all__ = ["BatchRecords", "encode", "encode_batch_records", "implementation"]

_DIVERTING_KEYS = tuple(
    key + props.NAME_VALUE_SEPARATOR
    for key in (
        props.TRAN_MSG,
        props.DELAY,
        props.TIMER_DELAY_SEC,
        props.TIMER_DELAY_MS,
        props.TIMER_DELIVER_MS,
        props.START_DELIVER_TIME,
    )
)
_INDEX_KEYS = (props.UNIQ_KEY, props.KEYS)


class BatchRecords(NamedTuple):
    records: bytes
    cq_entries: bytes
    index_entries: bytes
    msg_ids: str
    messages: int
    tags: dict[int, int]


def encode_batch_records(
    body: bytes | bytearray | memoryview,
    topic: bytes,
    queue_id: int,
    first_queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    born_port: int,
    store_timestamp: int,
    store_host: bytes,
    store_port: int,
    cluster_property: bytes,
    stamp_properties: bytes = b"",
) -> BatchRecords | tuple[bytes, bytes, bytes, str, int, dict[int, int]] | None:
    """See the module docstring (the reference the compiled twin follows)."""
    cluster = cluster_property.decode("latin-1")
    stamp = stamp_properties.decode("latin-1")
    if (
        not topic.isascii()
        or len(topic) > 127
        or len(born_host) not in (4, 16)
        or len(store_host) not in (4, 16)
        or len(cluster) > MAX_PROPERTIES_LENGTH
        or not plain_well_formed(cluster)
        or len(stamp) > MAX_PROPERTIES_LENGTH
        or not plain_well_formed(stamp)
    ):
        return None
    try:
        entries = split_batch(body)
    except ProtocolError:
        return None
    if not entries:
        return None
    for entry in entries:
        raw = entry.properties
        if (
            not plain_well_formed(raw)
            or any(key in raw for key in _DIVERTING_KEYS)
            or holds_stamped_key(raw, stamp)
        ):
            return None
        added = len(stamp) + (0 if CLUSTER_KEY in raw else len(cluster))
        if len(raw) + added > MAX_PROPERTIES_LENGTH:
            return None
    topic_text = topic.decode("ascii")
    records: list[bytes] = []
    cq: list[bytes] = []
    index: list[bytes] = []
    ids: list[str] = []
    tags: dict[int, int] = {}
    prefix = (store_host + (store_port & 0xFFFFFFFF).to_bytes(4, "big")).hex().upper()
    offset = physical_offset
    for position, entry in enumerate(entries):
        raw = entry.properties
        stored = (raw if CLUSTER_KEY in raw else raw + cluster) + stamp
        queue_offset = first_queue_offset + position
        record = encode_record(
            topic,
            queue_id,
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
            stored.encode("ascii"),
        )
        size = len(record)
        records.append(record)
        tag_value = last_value(raw, props.TAGS)
        tags_code = java_string_hash_uncached(tag_value) if tag_value else 0
        cq.append(CQ_ENTRY.pack(offset, size, tags_code))
        tags[tags_code] = queue_offset
        named = {key: value for key in _INDEX_KEYS if (value := last_value(raw, key)) is not None}
        hashes = index_hashes(topic_text, named)
        if hashes is None:
            return None
        index.extend(INDEX_ENTRY.pack(offset, key_hash) for key_hash in hashes)
        ids.append(f"{prefix}{offset:016X}")
        offset += size
    return BatchRecords(
        b"".join(records), b"".join(cq), b"".join(index), ",".join(ids), len(entries), tags
    )


_Encoder = Callable[
    [
        bytes | bytearray | memoryview,
        bytes,
        int,
        int,
        int,
        int,
        int,
        bytes,
        int,
        int,
        bytes,
        int,
        bytes,
        bytes,
    ],
    "tuple[bytes, bytes, bytes, str, int, dict[int, int]] | None",
]
_compiled = compiled("_append")
encode: _Encoder = encode_batch_records if _compiled is None else _compiled.encode_batch_records


def implementation() -> str:
    return "python" if _compiled is None else "compiled"
