"""Reading topics: the batch reader and the micro-batch stream reader.

Both plan on the driver (queues from the name server, offsets from the
brokers) and read in tasks: one input partition per queue and offset
range, pulled with the filter pushed down to the broker (TAG by hash plus
the exact client check, SQL92 by the broker) and returned as Arrow batches.
A range read twice gives the same rows, so a stream restarted from its
checkpoint replays exactly what its offset log names.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.client.errors import ClientError
from tidemq.common.message import MessageQueue
from tidemq.protocol import ProtocolError, ResponseCode
from tidemq.record.codec import RecordColumns
from tidemq.record.records import decode_record_columns
from tidemq.spark.arrow_records import fast_batch
from tidemq.spark.columns import records_to_batch
from tidemq.spark.connection import Connection
from tidemq.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    Position,
    limit_ranges,
    plan_ranges,
    position_of,
    to_spark,
)
from tidemq.spark.options import ReadOptions

__all__ = [
    "QueueRangePartition",
    "TidemqBatchReader",
    "TidemqStreamReader",
    "read_partition",
    "read_range",
]

log = logging.getLogger(__name__)

ARROW_BATCH_BYTES = 2 * 1024 * 1024
"""Pull answers (256 KiB each at most, the broker's transfer limit) per Arrow batch."""


class QueueRangePartition(InputPartition):
    """One queue's offsets [start, end) (its `value`, an OffsetRange): one Spark task."""

    def __init__(self, part: OffsetRange) -> None:
        super().__init__(part)


def read_partition(options: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Spark stands in one empty partition (value None) when a plan has none:
    an empty topic, or a batch with nothing new (e.g. one that only moves the
    watermark on)."""
    if partition.value is None:
        return iter(())
    return read_range(options, partition.value)


def read_range(options: ReadOptions, part: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The Arrow batches of one partition (runs in a Spark task)."""
    text, kind = options.expression
    tags = SubscriptionSpec.parse(part.queue.topic, text, kind, sub_version=0).tags
    with Connection(options.namesrv) as conn:
        answers = conn.pull_range(
            part,
            options.expression,
            batch=options.pull_batch,
            fail_on_data_loss=options.fail_on_data_loss,
        )
        for raw in _joined(answers, ARROW_BATCH_BYTES):
            broker = part.queue.broker_name
            batch = fast_batch(broker, raw, part.start, part.end, tags)
            if batch is None:  # an uncommon record shape (or a malformed one)
                batch = records_to_batch(broker, decode(raw, part), part.start, part.end, tags)
            if batch.num_rows:
                yield batch


def _joined(answers: Iterator[bytes], size: int) -> Iterator[bytes]:
    """Pull answers joined into runs of about `size` bytes (records are
    self-delimiting, so a run of runs is a run): fewer, larger Arrow batches,
    whose fixed costs a pull of 256 KiB alone does not amortise."""
    pending: list[bytes] = []
    held = 0
    for raw in answers:
        pending.append(raw)
        held += len(raw)
        if held >= size:
            yield b"".join(pending)
            pending, held = [], 0
    if pending:
        yield b"".join(pending)


def decode(raw: bytes, part: OffsetRange) -> RecordColumns:
    try:
        return decode_record_columns(raw)
    except ProtocolError as exc:
        where = f"{part.queue.topic} {part.queue.broker_name}:{part.queue.queue_id}"
        raise ClientError(
            f"malformed records from {where} in {part.start}..{part.end}: {exc}",
            ResponseCode.SYSTEM_ERROR,
        ) from None


def resolve_start(
    conn: Connection, options: ReadOptions, queues: Sequence[MessageQueue]
) -> Position:
    """Where reading starts in each queue: startingTimestamp, else startingOffsets."""
    if options.starting_timestamp is not None:
        return conn.offsets_at(queues, options.starting_timestamp)
    starting = options.starting
    if starting == "latest":
        return conn.max_offsets(queues)
    if starting == "earliest":
        return conn.min_offsets(queues)
    assert isinstance(starting, dict)
    return _resolve_special(conn, queues, starting, default=EARLIEST)


def _resolve_special(
    conn: Connection, queues: Sequence[MessageQueue], given: Position, *, default: int
) -> Position:
    """A position for `queues` from JSON offsets where -2/-1 mean earliest/latest;
    queues the JSON leaves out get `default`."""
    wanted = {mq: given.get(mq, default) for mq in queues}
    unknown = sorted(set(given) - set(queues))
    if unknown:
        raise ValueError(
            "offsets name queues the topic does not have: "
            + ", ".join(f"{q.topic} {q.broker_name}:{q.queue_id}" for q in unknown)
        )
    earliest = [mq for mq, o in wanted.items() if o == EARLIEST]
    latest = [mq for mq, o in wanted.items() if o == LATEST]
    resolved = dict(wanted)
    if earliest:
        resolved.update(conn.min_offsets(earliest))
    if latest:
        resolved.update(conn.max_offsets(latest))
    return resolved


class TidemqBatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> list[QueueRangePartition]:
        with Connection(self.options.namesrv) as conn:
            queues = conn.read_queues(self.options.topics)
            start = resolve_start(conn, self.options, queues)
            ending = self.options.ending
            if ending == "latest":
                end = conn.max_offsets(queues)
            else:
                assert isinstance(ending, dict)
                end = _resolve_special(conn, queues, ending, default=LATEST)
        return [QueueRangePartition(r) for r in plan_ranges(start, end)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition)


class TidemqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over every queue of the topics, new queues from their start."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.target: Position | None = None
        """Trigger.AvailableNow: what existed when the query started; never read past it."""
        self.committed: Position | None = None
        """What was last stored as the consumer group's offsets."""

    def prepareForTriggerAvailableNow(self) -> None:
        with Connection(self.options.namesrv) as conn:
            self.target = conn.max_offsets(conn.read_queues(self.options.topics))

    def initialOffset(self) -> dict[str, Any]:
        with Connection(self.options.namesrv) as conn:
            queues = conn.read_queues(self.options.topics)
            return to_spark(resolve_start(conn, self.options, queues))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_messages_per_trigger
        return ReadMaxRows(limit) if limit is not None else ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = position_of(start)
        with Connection(self.options.namesrv) as conn:
            # Spark plans the next batch only once the one ending at `start` is
            # done, so `start` is processed: committing it here (rather than
            # waiting for commit(), which Spark calls a batch later) keeps the
            # group's lag exact, also after the last batch of an AvailableNow run
            self._commit_group(conn, begin)
            queues = conn.read_queues(self.options.topics)
            new = {mq: 0 for mq in queues if mq not in begin}
            if new:
                log.info("tidemq stream: new queues %s are read from their start", sorted(new))
                begin = {**begin, **new}
            latest = {**begin, **conn.max_offsets(queues)}
        if self.target is not None:
            latest = {
                mq: max(begin.get(mq, 0), min(o, self.target.get(mq, 0)))
                for mq, o in latest.items()
            }
        if isinstance(limit, ReadMaxRows):
            return to_spark(limit_ranges(begin, latest, limit.max_rows))
        return to_spark(latest)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        with Connection(self.options.namesrv) as conn:
            return to_spark(conn.max_offsets(conn.read_queues(self.options.topics)))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[QueueRangePartition]:
        # a queue in `end` but not in `start` appeared meanwhile: read from offset 0,
        # so that the range is the same whenever this batch is planned again
        return [QueueRangePartition(r) for r in plan_ranges(position_of(start), position_of(end))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """With consumerGroup, store the processed offsets as that group's progress."""
        if self.options.consumer_group is not None:
            with Connection(self.options.namesrv) as conn:
                self._commit_group(conn, position_of(end))

    def _commit_group(self, conn: Connection, position: Position) -> None:
        group = self.options.consumer_group
        if group is None or not position:
            return
        if self.committed is not None:  # commit() trails latestOffset by a batch: never go back
            position = {mq: max(o, self.committed.get(mq, o)) for mq, o in position.items()}
            if position == self.committed:
                return
        conn.commit_group(group, position)
        self.committed = position
