"""The exactly-once sink's commit ledger: what a committed micro-batch wrote.

Each task of a streaming write stores its rows as transactional half
messages (invisible) and reports them as :class:`Half` values. When Spark
commits batch N the driver first appends a *commit record* for N, listing
every half, to the sink's ledger queue, and only then sends END_TRANSACTION
commit for each half. The ledger decides what a replay does:

* batch N already recorded: its own halves are committed again (the broker
  ignores an END for a resolved half, so this only finishes a commit a
  crash interrupted) and the replay's new halves are rolled back;
* otherwise: record, then commit.

A record may span several ledger messages (chunks); a record whose last
chunk is missing was never committed (END is sent only after the last
chunk is acknowledged). Records are zlib-compressed JSON. This module is
pure: encoding and the choice of the latest complete record.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "BATCH_PROPERTY",
    "CHUNK_HALVES",
    "CHUNK_PROPERTY",
    "CommitRecord",
    "Half",
    "LedgerEntry",
    "decode_chunk",
    "encode_record",
    "latest_complete",
    "ledger_topic",
]

BATCH_PROPERTY = "SPARK_BATCH"
CHUNK_PROPERTY = "SPARK_CHUNK"
"""'i/n': chunk i (from 0) of a record written as n messages."""
CHUNK_HALVES = 20_000
"""Halves per ledger message: well under the 4 MiB body limit once compressed."""
LEDGER_TOPIC_PREFIX = "TIDEMQ_SINK_"
_MAX_TOPIC = 127


@dataclass(frozen=True, slots=True)
class Half:
    """Where a half message is stored: what END_TRANSACTION needs to find it."""

    broker_name: str
    topic: str
    queue_offset: int
    """Its offset in the half queue (tranStateTableOffset)."""
    commit_log_offset: int
    msg_id: str
    """Its unique key, which is also its transaction id."""
    lane: str = ""
    """Halves of one lane (a message group's queue) are committed in order; "" = any order."""

    def to_json(self) -> list[object]:
        return [
            self.broker_name,
            self.topic,
            self.queue_offset,
            self.commit_log_offset,
            self.msg_id,
            self.lane,
        ]

    @classmethod
    def from_json(cls, item: Sequence[object]) -> Half:
        broker, topic, queue_offset, commit_log_offset, msg_id, lane = item
        return cls(
            str(broker),
            str(topic),
            int(str(queue_offset)),
            int(str(commit_log_offset)),
            str(msg_id),
            str(lane),
        )


@dataclass(frozen=True, slots=True)
class CommitRecord:
    batch_id: int
    halves: tuple[Half, ...]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One ledger message as read back: its queue offset, batch, chunk i of n, body."""

    offset: int
    batch_id: int
    chunk: int
    chunks: int
    body: bytes


def ledger_topic(sink_id: str) -> str:
    """The one-queue topic holding `sink_id`'s commit records."""
    topic = LEDGER_TOPIC_PREFIX + sink_id
    if len(topic) > _MAX_TOPIC:
        raise ValueError(f"sink id {sink_id!r} is too long for a topic name")
    return topic


def encode_record(record: CommitRecord) -> list[tuple[dict[str, str], bytes]]:
    """(properties, body) of each ledger message of `record`, in order."""
    halves = [h.to_json() for h in record.halves]
    pieces = [halves[i : i + CHUNK_HALVES] for i in range(0, len(halves), CHUNK_HALVES)] or [[]]
    out = []
    for index, piece in enumerate(pieces):
        body = zlib.compress(json.dumps(piece, separators=(",", ":")).encode(), 6)
        properties = {
            BATCH_PROPERTY: str(record.batch_id),
            CHUNK_PROPERTY: f"{index}/{len(pieces)}",
        }
        out.append((properties, body))
    return out


def decode_chunk(offset: int, properties: dict[str, str], body: bytes) -> LedgerEntry:
    """ValueError when the message is not a ledger chunk."""
    try:
        batch_id = int(properties[BATCH_PROPERTY])
        index_text, _, count_text = properties[CHUNK_PROPERTY].partition("/")
        chunk, chunks = int(index_text), int(count_text)
    except (KeyError, ValueError):
        raise ValueError(f"ledger message at offset {offset} is not a commit record") from None
    if not 0 <= chunk < chunks:
        raise ValueError(f"ledger message at offset {offset} has chunk {chunk}/{chunks}")
    return LedgerEntry(offset, batch_id, chunk, chunks, body)


def latest_complete(entries: Sequence[LedgerEntry]) -> CommitRecord | int | None:
    """The newest complete record among `entries` (consecutive ledger messages
    up to the queue's end); or, when that record starts before the first
    entry, the offset to read from instead; None when `entries` hold no
    complete record (read further back, if there is more).

    A record is complete when its chunks 0..n-1 stand at consecutive offsets."""
    by_offset = {e.offset: e for e in entries}
    for entry in sorted(entries, key=lambda e: e.offset, reverse=True):
        if entry.chunk != entry.chunks - 1:
            continue
        first = entry.offset - entry.chunk
        if first < min(by_offset):
            return first
        parts = [by_offset.get(first + i) for i in range(entry.chunks)]
        if all(
            p is not None and p.batch_id == entry.batch_id and p.chunk == i
            for i, p in enumerate(parts)
        ):
            halves: list[Half] = []
            for part in parts:
                assert part is not None
                halves += [Half.from_json(item) for item in json.loads(zlib.decompress(part.body))]
            return CommitRecord(entry.batch_id, tuple(halves))
    return None
