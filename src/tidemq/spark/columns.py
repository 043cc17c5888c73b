"""Rows in and out of the `tidemq` data source: the read schema, messages
as Arrow record batches, and written rows as messages.

Reads return Arrow batches (Spark takes them without a per-row Python
conversion). The two properties a pull adds per answer (MIN_OFFSET,
MAX_OFFSET) are left out, so that reading a range twice gives equal rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from tidemq.client._send import make_message
from tidemq.common import properties as props
from tidemq.common.message import Message, MessageExt

__all__ = [
    "READ_SCHEMA",
    "WRITE_COLUMNS",
    "arrow_schema",
    "check_write_schema",
    "messages_to_batch",
    "row_to_message",
]

READ_SCHEMA = (
    "topic string, broker string, queue_id int, queue_offset bigint, msg_id string, "
    "keys string, tags string, properties map<string,string>, body binary, "
    "born_timestamp timestamp, store_timestamp timestamp, reconsume_times int"
)

WRITE_COLUMNS = ("body", "topic", "tags", "keys", "properties", "message_group", "deliver_at")

_PULL_ONLY = frozenset({props.MIN_OFFSET, props.MAX_OFFSET})
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


def messages_to_batch(broker: str, messages: Sequence[MessageExt]) -> pa.RecordBatch:
    """One Arrow batch of `messages` (all of one broker), in their order."""
    n = len(messages)
    keys: list[str | None] = []
    tags: list[str | None] = []
    prop_items: list[list[tuple[str, str]]] = []
    for m in messages:
        p = m.properties
        keys.append(p.get(props.KEYS))
        tags.append(p.get(props.TAGS))
        prop_items.append([(k, v) for k, v in p.items() if k not in _PULL_ONLY])
    columns = [
        pa.array([m.topic for m in messages], pa.string()),
        pa.array([broker] * n, pa.string()),
        pa.array([m.queue_id for m in messages], pa.int32()),
        pa.array([m.queue_offset for m in messages], pa.int64()),
        pa.array([m.properties.get(props.UNIQ_KEY) or m.msg_id for m in messages], pa.string()),
        pa.array(keys, pa.string()),
        pa.array(tags, pa.string()),
        pa.array(prop_items, pa.map_(pa.string(), pa.string())),
        pa.array([m.body for m in messages], pa.binary()),
        pa.array([m.born_timestamp * 1000 for m in messages], _TIMESTAMP),
        pa.array([m.store_timestamp * 1000 for m in messages], _TIMESTAMP),
        pa.array([m.reconsume_times for m in messages], pa.int32()),
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
