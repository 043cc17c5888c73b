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

Halves travel as :class:`HalfRun` values: the halves one send stored, at
consecutive half-queue offsets, with their commit-log offsets packed. A
micro-batch of a hundred thousand rows is then a few hundred small values
from the tasks to the driver and in its ledger record, not a Python object
per row; `Half` spells a run out where single halves are wanted. A record
is JSON ``{"runs": [[broker, topic, lane, first queue offset, commit-log
offsets (base64 of big-endian int64s), comma-joined msg ids], ...]}``;
records of the first format (a list of halves) are still read.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "BATCH_PROPERTY",
    "CHUNK_HALVES",
    "CHUNK_PROPERTY",
    "CommitRecord",
    "Half",
    "HalfRun",
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
_COMPRESSION = 1
"""zlib level: the msg ids are most of a record, and they compress well at once."""
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
class HalfRun:
    """The halves one send stored: half-queue offsets from `first_queue_offset`
    on, one per commit-log offset (`commit_log_offsets`: big-endian int64s),
    msg ids joined by commas, all on one broker, topic and lane."""

    broker_name: str
    topic: str
    first_queue_offset: int
    commit_log_offsets: bytes
    msg_ids: str
    lane: str = ""

    def __len__(self) -> int:
        return len(self.commit_log_offsets) // 8

    def offsets(self) -> tuple[int, ...]:
        """The commit-log offsets, in queue-offset order."""
        return struct.unpack(f">{len(self)}q", self.commit_log_offsets)

    def halves(self) -> list[Half]:
        ids = self.msg_ids.split(",") if self.msg_ids else []
        return [
            Half(self.broker_name, self.topic, self.first_queue_offset + i, offset, key, self.lane)
            for i, (offset, key) in enumerate(zip(self.offsets(), ids, strict=True))
        ]

    def part(self, start: int, count: int) -> HalfRun:
        """Halves `start` to `start + count` of this run, as a run."""
        if start == 0 and count >= len(self):
            return self
        ids = self.msg_ids.split(",")[start : start + count]
        return HalfRun(
            self.broker_name,
            self.topic,
            self.first_queue_offset + start,
            self.commit_log_offsets[8 * start : 8 * (start + count)],
            ",".join(ids),
            self.lane,
        )

    @staticmethod
    def of(halves: Iterable[Half]) -> list[HalfRun]:
        """`halves` as runs, in order: consecutive halves of one broker, topic
        and lane at consecutive queue offsets share one."""
        runs: list[HalfRun] = []
        group: list[Half] = []
        for half in halves:
            if group and (
                half.queue_offset != group[-1].queue_offset + 1
                or (half.broker_name, half.topic, half.lane)
                != (group[0].broker_name, group[0].topic, group[0].lane)
            ):
                runs.append(_run_of(group))
                group = []
            group.append(half)
        if group:
            runs.append(_run_of(group))
        return runs

    def to_json(self) -> list[object]:
        return [
            self.broker_name,
            self.topic,
            self.lane,
            self.first_queue_offset,
            base64.b64encode(self.commit_log_offsets).decode("ascii"),
            self.msg_ids,
        ]

    @classmethod
    def from_json(cls, item: Sequence[object]) -> HalfRun:
        broker, topic, lane, first, offsets, ids = item
        packed = base64.b64decode(str(offsets), validate=True)
        if len(packed) % 8 or len(str(ids).split(",")) != len(packed) // 8:
            raise ValueError("a ledger run's offsets and ids do not match")
        return cls(str(broker), str(topic), int(str(first)), packed, str(ids), str(lane))


def _run_of(group: Sequence[Half]) -> HalfRun:
    first = group[0]
    packed = struct.pack(f">{len(group)}q", *(h.commit_log_offset for h in group))
    ids = ",".join(h.msg_id for h in group)
    return HalfRun(first.broker_name, first.topic, first.queue_offset, packed, ids, first.lane)


class CommitRecord:
    """A committed micro-batch: its id and the halves it wrote, kept as runs
    (`halves` spells them out). Records are equal when their ids and halves are."""

    __slots__ = ("batch_id", "runs")

    def __init__(
        self, batch_id: int, halves: Iterable[Half] = (), *, runs: Sequence[HalfRun] = ()
    ) -> None:
        self.batch_id = batch_id
        self.runs: tuple[HalfRun, ...] = tuple(runs) + tuple(HalfRun.of(halves))

    @property
    def halves(self) -> tuple[Half, ...]:
        return tuple(half for run in self.runs for half in run.halves())

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CommitRecord):
            return NotImplemented
        return self.batch_id == other.batch_id and self.halves == other.halves

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"CommitRecord(batch_id={self.batch_id}, halves={len(self)} in {len(self.runs)} runs)"
        )


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


def _pieces(runs: Sequence[HalfRun]) -> list[list[HalfRun]]:
    """`runs` cut into chunks of CHUNK_HALVES halves (the last one shorter)."""
    pieces: list[list[HalfRun]] = [[]]
    room = CHUNK_HALVES
    for run in runs:
        start = 0
        while start < len(run):
            if not room:
                pieces.append([])
                room = CHUNK_HALVES
            take = min(room, len(run) - start)
            pieces[-1].append(run.part(start, take))
            room -= take
            start += take
    return pieces


def encode_record(record: CommitRecord) -> list[tuple[dict[str, str], bytes]]:
    """(properties, body) of each ledger message of `record`, in order."""
    pieces = _pieces(record.runs)
    out = []
    for index, piece in enumerate(pieces):
        document = {"runs": [run.to_json() for run in piece]}
        body = zlib.compress(json.dumps(document, separators=(",", ":")).encode(), _COMPRESSION)
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
            runs: list[HalfRun] = []
            for part in parts:
                assert part is not None
                runs += _decode_runs(part)
            return CommitRecord(entry.batch_id, runs=runs)
    return None


def _decode_runs(entry: LedgerEntry) -> list[HalfRun]:
    """The runs of one chunk, of either format (see the module docstring)."""
    document = json.loads(zlib.decompress(entry.body))
    if isinstance(document, list):  # the first format: one item per half
        return HalfRun.of(Half.from_json(item) for item in document)
    return [HalfRun.from_json(item) for item in document["runs"]]
