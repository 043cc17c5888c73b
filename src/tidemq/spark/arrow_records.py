"""A pull response body straight to an Arrow record batch, with array
operations instead of a Python step per field of every record.

The Spark source's reads are bound by decoding (see docs/benchmarks.md), so
the common record shape gets this fast path: magic v1, IPv4 hosts, an
uncompressed body. Only the walk from one record to the next stays a Python
loop (one int read per record). The fixed fields are then gathered with
numpy. Bodies, topics and property strings are copied into Arrow buffers in
one `join` each. The properties are split into a map column by Arrow's
string kernels, and `keys`, `tags` and `msg_id` are looked up in that map.

Anything else (another magic, IPv6, a compressed body, a property without
its separator) makes :func:`fast_batch` return None, and the caller uses
the general decoder (`decode_record_columns` + `columns.records_to_batch`),
which also raises the errors for malformed records. Both paths give equal
batches; a property test checks this.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.record.codec import MESSAGE_MAGIC_V1
from tidemq.spark.columns import arrow_schema

__all__ = ["fast_batch"]

_SCHEMA = arrow_schema()
_TIMESTAMP_MS = pa.timestamp("ms", tz="UTC")
_TIMESTAMP = pa.timestamp("us", tz="UTC")
_TOTAL = struct.Struct(">i")
_R2 = np.arange(2)
_R4 = np.arange(4)
_R8 = np.arange(8)
_FIXED_V1_IPV4 = 88
"""TOTALSIZE through BODYLENGTH with IPv4 hosts; the body starts here."""
_DECLINED_FLAGS = sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6 | sysflag.COMPRESSED


def _starts(buf: bytes) -> np.ndarray | None:
    """Where each record starts (TOTALSIZE chain); None unless it ends exactly at the end."""
    starts = []
    offset, end, unpack = 0, len(buf), _TOTAL.unpack_from
    while offset + _FIXED_V1_IPV4 <= end:
        starts.append(offset)
        (total,) = unpack(buf, offset)
        if total < _FIXED_V1_IPV4 + 3:
            return None
        offset += total
    if offset != end or not starts:
        return None
    return np.asarray(starts, dtype=np.int64)


def _gather(data: np.ndarray, at: np.ndarray, width: np.ndarray, dtype: str) -> np.ndarray:
    """The big-endian integers of `dtype` at each offset `at` (as int64)."""
    values: np.ndarray = data[at[:, None] + width].view(dtype).reshape(-1).astype(np.int64)
    return values


def _segments(
    view: memoryview, starts: np.ndarray, lengths: np.ndarray
) -> tuple[pa.Buffer, pa.Buffer]:
    """(int32 offsets, data) of the byte ranges [start, start + length) laid end to end."""
    offsets = np.zeros(len(starts) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    pieces = [view[s : s + n] for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)]
    return pa.py_buffer(offsets), pa.py_buffer(b"".join(pieces))


def _property_map(raw: pa.StringArray) -> pa.MapArray | None:
    """`k\\x01v\\x02...` strings as a map column (None: a pair without \\x01)."""
    pairs = pc.split_pattern(raw, "\x02")
    flat = pc.list_flatten(pairs)
    parents = pc.list_parent_indices(pairs)
    present = pc.greater(pc.binary_length(flat), 0)
    flat, parents = flat.filter(present), parents.filter(present)
    split = pc.split_pattern(flat, "\x01", max_splits=1)
    if len(split) and pc.min(pc.list_value_length(split)).as_py() != 2:
        return None
    counts = np.bincount(parents.to_numpy(zero_copy_only=False), minlength=len(raw))
    offsets = np.zeros(len(raw) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.MapArray.from_arrays(
        pa.array(offsets), pc.list_element(split, 0), pc.list_element(split, 1)
    )


def fast_batch(
    broker: str, buf: bytes, start: int, end: int, tags: frozenset[str] | None
) -> pa.RecordBatch | None:
    """The Arrow batch of the records in `buf` with queue offsets in [start, end)
    and a tag in `tags` (None: any), or None when a record is not of the
    common shape (the caller then decodes it the general way)."""
    starts = _starts(buf)
    if starts is None:
        return None
    data = np.frombuffer(buf, dtype=np.uint8)
    n = len(starts)
    total = _gather(data, starts, _R4, ">i4")
    magic = _gather(data, starts + 4, _R4, ">i4")
    flags = _gather(data, starts + 36, _R4, ">i4")
    body_len = _gather(data, starts + 84, _R4, ">i4")
    if (
        (magic != MESSAGE_MAGIC_V1).any()
        or (flags & _DECLINED_FLAGS).any()
        or (body_len < 0).any()
        or (_FIXED_V1_IPV4 + body_len + 3 > total).any()
    ):
        return None
    topic_at = starts + _FIXED_V1_IPV4 + body_len
    topic_len = data[topic_at].view(np.int8).astype(np.int64)
    if (topic_len < 0).any() or (topic_at + 3 + topic_len > starts + total).any():
        return None
    props_at = topic_at + 1 + topic_len
    props_len = _gather(data, props_at, _R2, ">i2")
    if (props_len < 0).any() or (props_at + 2 + props_len != starts + total).any():
        return None
    view = memoryview(buf)
    try:
        topics = pa.StringArray.from_buffers(n, *_segments(view, topic_at + 1, topic_len))
        raw_props = pa.StringArray.from_buffers(n, *_segments(view, props_at + 2, props_len))
        topics.validate(full=True)
        raw_props.validate(full=True)
    except pa.ArrowInvalid:  # not UTF-8: the general decoder says where
        return None
    properties = _property_map(raw_props)
    if properties is None:
        return None
    bodies = pa.BinaryArray.from_buffers(
        pa.binary(), n, [None, *_segments(view, starts + _FIXED_V1_IPV4, body_len)]
    )
    queue_offset = _gather(data, starts + 20, _R8, ">i8")
    unique = pc.map_lookup(properties, pa.scalar(props.UNIQ_KEY), "last")
    if unique.null_count:
        unique = _with_offset_ids(unique, data, starts)
    columns = [
        topics,
        pa.array(np.full(n, broker, dtype=object), pa.string()),
        pa.array(_gather(data, starts + 12, _R4, ">i4").astype(np.int32)),
        pa.array(queue_offset),
        unique,
        pc.map_lookup(properties, pa.scalar(props.KEYS), "last"),
        pc.map_lookup(properties, pa.scalar(props.TAGS), "last"),
        properties,
        bodies,
        pa.array(_gather(data, starts + 40, _R8, ">i8"), _TIMESTAMP_MS).cast(_TIMESTAMP),
        pa.array(_gather(data, starts + 56, _R8, ">i8"), _TIMESTAMP_MS).cast(_TIMESTAMP),
        pa.array(_gather(data, starts + 72, _R4, ">i4").astype(np.int32)),
    ]
    batch = pa.RecordBatch.from_arrays(columns, schema=_SCHEMA)
    keep = (queue_offset >= start) & (queue_offset < end)
    if tags is not None:
        keep &= pc.is_in(columns[6], value_set=pa.array(sorted(tags), pa.string())).to_numpy(
            zero_copy_only=False
        )
    return batch if keep.all() else batch.filter(pa.array(keep))


def _with_offset_ids(unique: pa.Array, data: np.ndarray, starts: np.ndarray) -> pa.Array:
    """UNIQ_KEY where present, else the offset message id (store host + commit-log offset)."""
    host = data[starts[:, None] + 64 + _R8]  # store IP (4) + port (4)
    physical = _gather(data, starts + 28, _R8, ">i8")
    ids = [
        key if key is not None else f"{bytes(h).hex().upper()}{p & 0xFFFFFFFFFFFFFFFF:016X}"
        for key, h, p in zip(unique.to_pylist(), host, physical.tolist(), strict=True)
    ]
    return pa.array(ids, pa.string())
