"""Rows in and out of the `tidemq` data source: the read schema, messages
as Arrow record batches, and written rows as messages.

Reads return Arrow batches (Spark takes them without a per-row Python
conversion), built from the pulled records decoded straight into columns
(`decode_record_columns`), so no message object is made per row.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from tidemq.client._send import make_message
from tidemq.common import properties as props
from tidemq.common.message import Message
from tidemq.common.properties import decode_properties
from tidemq.record.codec import RecordColumns

__all__ = [
    "READ_SCHEMA",
    "WRITE_COLUMNS",
    "arrow_schema",
    "check_write_schema",
    "records_to_batch",
    "row_to_message",
]

READ_SCHEMA = (
    "topic string, broker string, queue_id int, queue_offset bigint, msg_id string, "
    "keys string, tags string, properties map<string,string>, body binary, "
    "born_timestamp timestamp, store_timestamp timestamp, reconsume_times int"
)

WRITE_COLUMNS = ("body", "topic", "tags", "keys", "properties", "message_group", "deliver_at")

_TIMESTAMP = pa.timestamp("us", tz="UTC")


def arrow_schema() -> pa.Schema:
    return pa.schema(
        [
            ("topic", pa.string()),
            ("broker", pa.string()),
            ("queue_id", pa.int32()),
            ("queue_offset", pa.int64()),
            ("msg_id", pa.string()),
            ("keys", pa.string()),
            ("tags", pa.string()),
            ("properties", pa.map_(pa.string(), pa.string())),
            ("body", pa.binary()),
            ("born_timestamp", _TIMESTAMP),
            ("store_timestamp", _TIMESTAMP),
            ("reconsume_times", pa.int32()),
        ]
    )


_SCHEMA = arrow_schema()
_MS = pa.timestamp("ms", tz="UTC")


def records_to_batch(
    broker: str,
    records: RecordColumns,
    start: int,
    end: int,
    tags: frozenset[str] | None,
) -> pa.RecordBatch:
    """The Arrow batch of the pulled `records` with queue offsets in [start, end)
    whose tag is one of `tags` (None: any), in their order.

    The tag check is the exact one Java's client makes after the broker's
    hash filter; properties are parsed once per record, for it and the map."""
    keep: list[int] = []
    keys: list[str | None] = []
    tag_column: list[str | None] = []
    items: list[list[tuple[str, str]]] = []
    ids: list[str] = []
    for i, (offset, raw) in enumerate(zip(records.queue_offset, records.properties, strict=True)):
        if offset < start or offset >= end:
            continue
        parsed = decode_properties(raw)
        tag = parsed.get(props.TAGS)
        if tags is not None and tag not in tags:
            continue
        keep.append(i)
        keys.append(parsed.get(props.KEYS))
        tag_column.append(tag)
        items.append(list(parsed.items()))
        ids.append(parsed.get(props.UNIQ_KEY) or records.offset_msg_id[i])

    def pick(values: list[Any]) -> list[Any]:
        return values if len(keep) == len(values) else [values[i] for i in keep]

    columns = [
        pa.array(pick(records.topic), pa.string()),
        pa.array([broker] * len(keep), pa.string()),
        pa.array(pick(records.queue_id), pa.int32()),
        pa.array(pick(records.queue_offset), pa.int64()),
        pa.array(ids, pa.string()),
        pa.array(keys, pa.string()),
        pa.array(tag_column, pa.string()),
        pa.array(items, pa.map_(pa.string(), pa.string())),
        pa.array(pick(records.body), pa.binary()),
        pa.array(pick(records.born_timestamp), _MS).cast(_TIMESTAMP),
        pa.array(pick(records.store_timestamp), _MS).cast(_TIMESTAMP),
        pa.array(pick(records.reconsume_times), pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=_SCHEMA)


def check_write_schema(names: Iterable[str], default_topic: str | None) -> None:
    """ValueError unless the columns can be written: a body, a topic from somewhere."""
    present = set(names)
    if "body" not in present:
        raise ValueError("writing to tidemq needs a 'body' column (binary or string)")
    if "topic" not in present and default_topic is None:
        raise ValueError("give a 'topic' column or the option topic")
    unknown = sorted(present - set(WRITE_COLUMNS))
    if unknown:
        raise ValueError(
            f"columns {', '.join(unknown)} are not written by tidemq; "
            f"known: {', '.join(WRITE_COLUMNS)}"
        )


def _deliver_at(value: Any) -> int | dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"deliver_at must be a timestamp or epoch milliseconds, not {value!r}")


def row_to_message(row: Mapping[str, Any], default_topic: str | None) -> tuple[Message, str | None]:
    """The message for one written row and its message group (None: any queue)."""
    body = row.get("body")
    if body is None:
        raise ValueError("a row has a null body")
    topic = row.get("topic") or default_topic
    if not topic:
        raise ValueError("a row has no topic (null topic column and no topic option)")
    properties = row.get("properties")
    if properties is not None and not isinstance(properties, Mapping):
        properties = dict(properties)
    group = row.get("message_group")
    message = make_message(
        topic,
        body if isinstance(body, str) else bytes(body),
        tags=row.get("tags") or None,
        keys=row.get("keys") or None,
        properties=properties,
        deliver_at=_deliver_at(row.get("deliver_at")),
    )
    if group:
        message.properties[props.SHARDING_KEY] = str(group)
    return message, (str(group) if group else None)
