"""Writing DataFrames into topics: the batch writer (at least once) and the
exactly-once streaming writer (transactional halves plus the commit ledger).

Rows become messages (`columns.row_to_message`). Rows with a
`message_group` go to the queue the group hashes to (the producer's
sharding-key rule, RocketMQ 5's FIFO message group) in row order; the rest
are spread over the queues in batches. Timer rows (`deliver_at`) are sent
one by one, since a batch cannot carry a delivery time.

The streaming writer sends every row as a half message (out of sight) and
reports the halves to the driver; `commit(batchId)` records them in the
sink's ledger and then commits them, `abort` rolls them back. See
`tidemq.spark.ledger` for why a replayed batch id is never written twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from tidemq.client._core.queue_selection import select_by_sharding_key
from tidemq.client.admin import AdminClient
from tidemq.client.errors import ClientError
from tidemq.client.producer import AsyncProducer
from tidemq.common import properties as props
from tidemq.common.message import Message, MessageQueue
from tidemq.common.message_id import decode_offset_message_id
from tidemq.common.properties import decode_properties
from tidemq.protocol import ResponseCode
from tidemq.spark.columns import check_write_schema, row_to_message
from tidemq.spark.connection import Connection
from tidemq.spark.ledger import (
    CommitRecord,
    Half,
    LedgerEntry,
    decode_chunk,
    encode_record,
    latest_complete,
    ledger_topic,
)
from tidemq.spark.offsets import OffsetRange
from tidemq.spark.options import WriteOptions

__all__ = ["Ledger", "SentMessages", "TidemqBatchWriter", "TidemqStreamWriter"]

log = logging.getLogger(__name__)

IN_FLIGHT = 16
"""Send requests (batches or single halves/timer messages) in flight per task."""
HALVES_IN_FLIGHT = 256
LEDGER_PAGE = 32


@dataclass
class SentMessages(WriterCommitMessage):
    """What one task wrote: a count, and the halves of a streaming write."""

    count: int = 0
    halves: list[Half] = field(default_factory=list)


def _sent(messages: list[WriterCommitMessage | None]) -> list[SentMessages]:
    return [m for m in messages if isinstance(m, SentMessages)]


def _rows(batches: Iterator[pa.RecordBatch], options: WriteOptions) -> Iterator[dict[str, object]]:
    checked = False
    for batch in batches:
        if not checked:
            check_write_schema(batch.schema.names, options.topic)
            checked = True
        yield from batch.to_pylist()


class _Sender:
    """One task's sends over one connection: ordered lanes per queue, batches, halves."""

    def __init__(self, conn: Connection, options: WriteOptions) -> None:
        self.conn = conn
        self.options = options
        self.producer: AsyncProducer = conn.producer(options.producer_group, options.send_timeout_s)
        self._queues: dict[str, list[MessageQueue]] = {}

    async def lane_of(self, message: Message, group: str | None) -> MessageQueue | None:
        if group is None:
            return None
        queues = self._queues.get(message.topic)
        if queues is None:
            queues = self._queues[message.topic] = await self.producer.publish_queues(message.topic)
        return select_by_sharding_key(queues, group)

    # -- at least once --------------------------------------------------------------

    async def send_all(self, rows: Iterator[dict[str, object]]) -> int:
        gate = asyncio.Semaphore(IN_FLIGHT)
        tasks: list[asyncio.Task[None]] = []
        free: dict[str, list[Message]] = {}
        lanes: dict[MessageQueue, list[Message]] = {}
        lane_tail: dict[MessageQueue, asyncio.Task[None]] = {}
        count = 0

        async def send_batch(messages: list[Message], queue: MessageQueue | None) -> None:
            async with gate:
                result = await self.producer.send_batch(messages, queue=queue)
            _check_stored(result.status, len(messages), messages[0].topic)

        async def send_one(message: Message) -> None:
            async with gate:
                result = await self.producer.send(message)
            _check_stored(result.status, 1, message.topic)

        async def after(
            previous: asyncio.Task[None] | None, messages: list[Message], queue: MessageQueue
        ) -> None:
            if previous is not None:
                await previous
            await send_batch(messages, queue)

        def flush_lane(queue: MessageQueue) -> None:
            task = asyncio.ensure_future(after(lane_tail.get(queue), lanes.pop(queue), queue))
            lane_tail[queue] = task
            tasks.append(task)

        for row in rows:
            message, group = row_to_message(row, self.options.topic)
            count += 1
            if props.TIMER_DELIVER_MS in message.properties:
                tasks.append(asyncio.ensure_future(send_one(message)))
                continue
            queue = await self.lane_of(message, group)
            if queue is not None:
                lanes.setdefault(queue, []).append(message)
                if len(lanes[queue]) >= self.options.send_batch:
                    flush_lane(queue)
                continue
            pending = free.setdefault(message.topic, [])
            pending.append(message)
            if len(pending) >= self.options.send_batch:
                tasks.append(asyncio.ensure_future(send_batch(free.pop(message.topic), None)))
            if len(tasks) > 4 * IN_FLIGHT:
                await _settle(tasks)
        for queue in list(lanes):
            flush_lane(queue)
        for messages in free.values():
            tasks.append(asyncio.ensure_future(send_batch(messages, None)))
        await _settle(tasks, everything=True)
        return count

    # -- halves (exactly once) ------------------------------------------------------

    async def send_halves(
        self, rows: Iterator[dict[str, object]], halves: list[Half | None]
    ) -> None:
        """Send every row as a half message; `halves` gets each one stored, in row order."""
        gate = asyncio.Semaphore(HALVES_IN_FLIGHT)
        tasks: list[asyncio.Task[None]] = []
        lane_tail: dict[MessageQueue, asyncio.Task[None]] = {}

        async def send(
            index: int,
            message: Message,
            queue: MessageQueue | None,
            previous: asyncio.Task[None] | None,
        ) -> None:
            if previous is not None:
                await previous
            async with gate:
                result = await self.producer.send(message, queue=queue)
            _check_stored(result.status, 1, message.topic)
            lane = f"{queue.topic}/{queue.broker_name}/{queue.queue_id}" if queue else ""
            halves[index] = Half(
                broker_name=result.broker_name,
                topic=result.topic,
                queue_offset=result.queue_offset,
                commit_log_offset=decode_offset_message_id(result.offset_msg_id)[2],
                msg_id=result.msg_id,
                lane=lane,
            )

        for row in rows:
            message, group = row_to_message(row, self.options.topic)
            if props.TIMER_DELIVER_MS in message.properties:
                raise ValueError(
                    "the exactly-once streaming sink cannot write deliver_at (a transactional "
                    "message has no delivery time); write timer messages with a batch write"
                )
            message.properties[props.TRAN_MSG] = "true"
            message.properties[props.PGROUP] = self.options.producer_group
            queue = await self.lane_of(message, group)
            halves.append(None)
            task = asyncio.ensure_future(
                send(len(halves) - 1, message, queue, lane_tail.get(queue) if queue else None)
            )
            if queue is not None:
                lane_tail[queue] = task
            tasks.append(task)
            if len(tasks) > 4 * HALVES_IN_FLIGHT:
                await _settle(tasks)
        await _settle(tasks, everything=True)


async def _settle(tasks: list[asyncio.Task[None]], everything: bool = False) -> None:
    """Wait for the older half of `tasks` (or all of them); the first failure
    raises, and then every other task is cancelled."""
    cut = len(tasks) if everything else len(tasks) // 2
    head, tasks[:] = tasks[:cut], tasks[cut:]
    try:
        await asyncio.gather(*head)
    except BaseException:
        for task in head + tasks:
            task.cancel()
        await asyncio.gather(*head, *tasks, return_exceptions=True)
        raise


def _check_stored(status: str, count: int, topic: str) -> None:
    if status not in ("SEND_OK",):
        raise ClientError(
            f"{count} message(s) to {topic} were answered {status}, not SEND_OK",
            ResponseCode.SYSTEM_ERROR,
        )


class TidemqBatchWriter(DataSourceArrowWriter):
    """`df.write.format("tidemq")`: every row sent once per successful task (at least once)."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessages:
        with Connection(self.options.namesrv) as conn:
            sender = _Sender(conn, self.options)
            return SentMessages(count=conn.run(sender.send_all(_rows(iterator, self.options))))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("tidemq: wrote %d messages", sum(m.count for m in _sent(messages)))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        written = sum(m.count for m in _sent(messages))
        log.warning("tidemq: write aborted; %d messages were already sent", written)


class Ledger:
    """The commit records of one sink, in its ledger topic's queue 0."""

    def __init__(self, conn: Connection, sink_id: str, producer_group: str) -> None:
        self.conn = conn
        self.topic = ledger_topic(sink_id)
        self.producer_group = producer_group
        self.queue = self._queue()

    def _queue(self) -> MessageQueue:
        async def find() -> MessageQueue:
            try:
                route = await self.conn.instance.route(self.topic, refresh=True)
            except ClientError as exc:
                if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                    raise
                async with AdminClient(self.conn.instance.config.namesrv) as admin:
                    await admin.create_topic(self.topic, queues=1)
                route = await self.conn.instance.route(self.topic, refresh=True)
            brokers = sorted(route.masters())
            if not brokers:
                raise ClientError(
                    f"the sink ledger topic {self.topic} has no live master",
                    ResponseCode.TOPIC_NOT_EXIST,
                )
            return MessageQueue(self.topic, brokers[0], 0)

        return self.conn.run(find())

    def latest(self) -> CommitRecord | None:
        """The newest complete commit record, if any."""
        end = self.conn.max_offsets([self.queue])[self.queue]
        first = max(0, end - LEDGER_PAGE)
        entries: list[LedgerEntry] = []
        while end > 0:
            entries = self._read(first, end) + entries
            found = latest_complete(entries)
            if isinstance(found, CommitRecord):
                return found
            if found is None and first == 0:
                return None
            end = first
            first = max(0, found if isinstance(found, int) else first - LEDGER_PAGE)
        return None

    def _read(self, start: int, end: int) -> list[LedgerEntry]:
        part = OffsetRange(self.queue, start, end)
        out = []
        for records in self.conn.pull_range(
            part, ("*", "TAG"), batch=LEDGER_PAGE, fail_on_data_loss=True
        ):
            for offset, raw, body in zip(
                records.queue_offset, records.properties, records.body, strict=True
            ):
                out.append(decode_chunk(offset, decode_properties(raw), body))
        return out

    def append(self, record: CommitRecord) -> None:
        """Write `record` (acknowledged, so durable under sync flush) before anything commits."""
        producer = self.conn.producer(self.producer_group, 10.0)

        async def write() -> None:
            for properties, body in encode_record(record):
                message = Message(self.topic, body)
                message.properties.update(properties)
                message.keys = [f"batch-{record.batch_id}"]
                result = await producer.send(message, queue=self.queue)
                _check_stored(result.status, 1, self.topic)

        self.conn.run(write())


class TidemqStreamWriter(DataSourceStreamArrowWriter):
    """`writeStream.format("tidemq")`: exactly once per batch id."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options
        assert options.sink_id is not None

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessages:
        sent: list[Half | None] = []
        with Connection(self.options.namesrv) as conn:
            sender = _Sender(conn, self.options)
            try:
                conn.run(sender.send_halves(_rows(iterator, self.options), sent))
            except BaseException:
                stored = [h for h in sent if h is not None]
                try:
                    conn.end_transactions(self.options.producer_group, stored, commit=False)
                except ClientError as exc:  # the broker's check-back discards them later
                    log.warning("tidemq sink: rolling back a failed task's halves: %s", exc)
                raise
        halves = [h for h in sent if h is not None]
        return SentMessages(count=len(halves), halves=halves)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        halves = [h for m in _sent(messages) for h in m.halves]
        group = self.options.producer_group
        assert self.options.sink_id is not None
        with Connection(self.options.namesrv) as conn:
            ledger = Ledger(conn, self.options.sink_id, group)
            last = ledger.latest()
            if last is not None and batchId <= last.batch_id:
                conn.end_transactions(group, halves, commit=False)
                if batchId < last.batch_id:
                    raise ValueError(
                        f"sink {self.options.sink_id} has committed batch {last.batch_id}, but "
                        f"this query commits batch {batchId}: its checkpoint was reset; give "
                        "the query a new sinkId (or checkpointLocation)"
                    )
                conn.end_transactions(group, list(last.halves), commit=True)
                log.info("tidemq sink: batch %d was committed before; replay rolled back", batchId)
                return
            ledger.append(CommitRecord(batchId, tuple(halves)))
            conn.end_transactions(group, halves, commit=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        halves = [h for m in _sent(messages) for h in m.halves]
        with Connection(self.options.namesrv) as conn:
            conn.end_transactions(self.options.producer_group, halves, commit=False)
        log.warning("tidemq sink: batch %d aborted, %d halves rolled back", batchId, len(halves))
