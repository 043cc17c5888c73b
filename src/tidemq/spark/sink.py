"""Writing DataFrames into topics: the batch writer (at least once) and the
exactly-once streaming writer (transactional halves plus the commit ledger).

Rows become messages (`columns.row_to_message`). Rows with a
`message_group` go to the queue the group hashes to (the producer's
sharding-key rule, RocketMQ 5's FIFO message group) in row order; the rest
are spread over the queues in batches. Timer rows (`deliver_at`) are sent
one by one, since a batch cannot carry a delivery time.

The streaming writer sends every row as a half message (out of sight) and
reports the halves to the driver, one `HalfRun` per send; `commit(batchId)`
records them in the sink's ledger and then commits them, `abort` rolls them
back. See `tidemq.spark.ledger` for why a replayed batch id is never written
twice. A batch of bodies alone (the only column, the topic from the options)
becomes messages in one go rather than row by row.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
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
from tidemq.client.model import SendStatus
from tidemq.client.producer import AsyncProducer
from tidemq.common import properties as props
from tidemq.common.message import Message, MessageQueue
from tidemq.common.properties import decode_properties
from tidemq.protocol import ResponseCode
from tidemq.record.records import decode_record_columns
from tidemq.spark.columns import check_write_schema, row_to_message
from tidemq.spark.connection import Connection
from tidemq.spark.ledger import (
    CommitRecord,
    Half,
    HalfRun,
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

IN_FLIGHT = 8
"""Send requests (batches of messages or of halves) in flight per task."""
LEDGER_PAGE = 32


@dataclass
class SentMessages(WriterCommitMessage):
    """What one task wrote: a count, and the halves of a streaming write (a
    run per send: what travels to the driver is small whatever the count)."""

    count: int = 0
    runs: list[HalfRun] = field(default_factory=list)

    @property
    def halves(self) -> list[Half]:
        return [half for run in self.runs for half in run.halves()]


def _sent(messages: list[WriterCommitMessage | None]) -> list[SentMessages]:
    return [m for m in messages if isinstance(m, SentMessages)]


def _checked(batches: Iterator[pa.RecordBatch], options: WriteOptions) -> Iterator[pa.RecordBatch]:
    checked = False
    for batch in batches:
        if not checked:
            check_write_schema(batch.schema.names, options.topic)
            checked = True
        yield batch


def _rows(batches: Iterator[pa.RecordBatch], options: WriteOptions) -> Iterator[dict[str, object]]:
    for batch in _checked(batches, options):
        yield from batch.to_pylist()


def _bodies_alone(batch: pa.RecordBatch, topic: str | None) -> list[Message] | None:
    """The messages of a batch whose only column is a body without nulls, to
    the options' topic, made in one go (as `row_to_message` makes each: a str
    body as UTF-8); None: the batch goes row by row."""
    if topic is None or batch.schema.names != ["body"]:
        return None
    column = batch.column(0)
    if column.null_count:
        return None  # the row path names the null body
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    elif not (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
        return None
    return [Message(topic, body) for body in column.to_pylist()]


def _packed_offsets(offset_ids: list[str]) -> bytes:
    """The commit-log offsets of offset message ids (their last 16 hex digits),
    packed as big-endian int64s; ValueError for an id that is not one."""
    if any(len(i) not in (32, 56) for i in offset_ids):
        raise ValueError(f"not offset message ids: {offset_ids[:3]}")
    return bytes.fromhex("".join(i[-16:] for i in offset_ids))


class _Chunks:
    """Messages to send requests of at most `size` messages each, at most
    IN_FLIGHT at a time: a message group's messages (a `lane`, the queue the
    group hashes to) go in row order, one request after the other on that
    queue; the rest fill shared requests per topic; `alone` messages go one
    per request. `send(chunk, lane, index)` makes one request; `index`
    numbers the requests in the order they were formed."""

    def __init__(
        self,
        size: int,
        send: Callable[[list[Message], MessageQueue | None, int], Awaitable[None]],
    ) -> None:
        self.size = size
        self.send = send
        self.gate = asyncio.Semaphore(IN_FLIGHT)
        self.tasks: list[asyncio.Task[None]] = []
        self.free: dict[str, list[Message]] = {}
        self.lanes: dict[MessageQueue, list[Message]] = {}
        self.tails: dict[MessageQueue, asyncio.Task[None]] = {}
        self.count = 0

    async def add(self, message: Message, lane: MessageQueue | None, alone: bool = False) -> None:
        if alone:
            self._spawn([message], None, None)
        elif lane is not None:
            self.lanes.setdefault(lane, []).append(message)
            if len(self.lanes[lane]) >= self.size:
                self._flush_lane(lane)
        else:
            pending = self.free.setdefault(message.topic, [])
            pending.append(message)
            if len(pending) >= self.size:
                self._spawn(self.free.pop(message.topic), None, None)
        if len(self.tasks) > 4 * IN_FLIGHT:
            await _settle(self.tasks)

    async def add_many(self, messages: list[Message]) -> None:
        """Messages of one topic for any queue, in order: `add` for each."""
        if not messages:
            return
        topic = messages[0].topic
        pending = self.free.setdefault(topic, [])
        pending.extend(messages)
        while len(pending) >= self.size:
            self._spawn(pending[: self.size], None, None)
            del pending[: self.size]
            if len(self.tasks) > 4 * IN_FLIGHT:
                await _settle(self.tasks)

    async def finish(self) -> None:
        for lane in list(self.lanes):
            self._flush_lane(lane)
        for topic in list(self.free):
            self._spawn(self.free.pop(topic), None, None)
        await _settle(self.tasks, everything=True)

    def _flush_lane(self, lane: MessageQueue) -> None:
        self.tails[lane] = self._spawn(self.lanes.pop(lane), lane, self.tails.get(lane))

    def _spawn(
        self, chunk: list[Message], lane: MessageQueue | None, after: asyncio.Task[None] | None
    ) -> asyncio.Task[None]:
        index = self.count
        self.count += 1

        async def run() -> None:
            if after is not None:
                await after
            async with self.gate:
                await self.send(chunk, lane, index)

        task = asyncio.ensure_future(run())
        self.tasks.append(task)
        return task


class _Sender:
    """One task's sends over one connection: plain batches, or halves."""

    def __init__(self, conn: Connection, options: WriteOptions) -> None:
        self.conn = conn
        self.options = options
        self.producer: AsyncProducer = conn.producer(options.producer_group, options.send_timeout_s)
        self._queues: dict[str, list[MessageQueue]] = {}
        self._next: dict[str, int] = {}

    async def queues(self, topic: str) -> list[MessageQueue]:
        queues = self._queues.get(topic)
        if queues is None:
            queues = self._queues[topic] = await self.producer.publish_queues(topic)
        return queues

    async def lane_of(self, message: Message, group: str | None) -> MessageQueue | None:
        if group is None:
            return None
        return select_by_sharding_key(await self.queues(message.topic), group)

    async def any_queue(self, topic: str) -> MessageQueue:
        queues = await self.queues(topic)
        index = self._next.get(topic, 0)
        self._next[topic] = index + 1
        return queues[index % len(queues)]

    # -- at least once --------------------------------------------------------------

    async def send_all(self, rows: Iterator[dict[str, object]]) -> int:
        async def send(chunk: list[Message], lane: MessageQueue | None, index: int) -> None:
            if len(chunk) == 1 and props.TIMER_DELIVER_MS in chunk[0].properties:
                result = await self.producer.send(chunk[0])
            else:
                result = await self.producer.send_batch(chunk, queue=lane)
            _check_stored(result.status, len(chunk), chunk[0].topic)

        chunks = _Chunks(self.options.send_batch, send)
        count = 0
        for row in rows:
            message, group = row_to_message(row, self.options.topic)
            count += 1
            timer = props.TIMER_DELIVER_MS in message.properties
            await chunks.add(message, await self.lane_of(message, group), alone=timer)
        await chunks.finish()
        return count

    # -- halves (exactly once) ------------------------------------------------------

    async def send_halves(self, batches: Iterator[pa.RecordBatch], sent: list[HalfRun]) -> None:
        """Send every row as a half message (TIDEMQ_SEND_HALF_BATCH); `sent`
        gets a run per send, in row order within a message group."""
        stored: dict[int, HalfRun] = {}

        async def send(chunk: list[Message], lane: MessageQueue | None, index: int) -> None:
            queue = lane or await self.any_queue(chunk[0].topic)
            result = await self.producer.send_halves(chunk, queue)
            _check_stored(result.status, len(chunk), chunk[0].topic)
            offset_ids = result.offset_msg_id.split(",")
            if len(offset_ids) != len(chunk) or result.msg_id.count(",") + 1 != len(chunk):
                raise ClientError(
                    f"the broker answered {len(offset_ids)} halves for {len(chunk)} messages",
                    ResponseCode.SYSTEM_ERROR,
                )
            lane_name = f"{queue.topic}/{queue.broker_name}/{queue.queue_id}" if lane else ""
            run = HalfRun(
                result.broker_name,
                result.topic,
                result.queue_offset,
                _packed_offsets(offset_ids),
                result.msg_id,
                lane_name,
            )
            stored[index] = run
            sent.append(run)  # known now, in case a later chunk fails

        chunks = _Chunks(self.options.send_batch, send)
        for batch in _checked(batches, self.options):
            bodies = _bodies_alone(batch, self.options.topic)
            if bodies is not None:
                await chunks.add_many(bodies)
                continue
            for row in batch.to_pylist():
                message, group = row_to_message(row, self.options.topic)
                if props.TIMER_DELIVER_MS in message.properties:
                    raise ValueError(
                        "the exactly-once streaming sink cannot write deliver_at (a "
                        "transactional message has no delivery time); write timer messages "
                        "with a batch write"
                    )
                await chunks.add(message, await self.lane_of(message, group))
        await chunks.finish()
        sent[:] = [stored[index] for index in sorted(stored)]


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


def _check_stored(status: SendStatus, count: int, topic: str) -> None:
    if status != SendStatus.SEND_OK:
        raise ClientError(
            f"{count} message(s) to {topic} were answered {status}, not {SendStatus.SEND_OK}",
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
        for answer in self.conn.pull_range(
            part, ("*", "TAG"), batch=LEDGER_PAGE, fail_on_data_loss=True
        ):
            records = decode_record_columns(answer)
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
        sent: list[HalfRun] = []
        with Connection(self.options.namesrv) as conn:
            sender = _Sender(conn, self.options)
            try:
                conn.run(sender.send_halves(iterator, sent))
            except BaseException:
                try:
                    conn.end_runs(self.options.producer_group, sent, commit=False)
                except ClientError as exc:  # the broker's check-back discards them later
                    log.warning("tidemq sink: rolling back a failed task's halves: %s", exc)
                raise
        return SentMessages(count=sum(len(run) for run in sent), runs=sent)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        runs = [run for m in _sent(messages) for run in m.runs]
        group = self.options.producer_group
        assert self.options.sink_id is not None
        with Connection(self.options.namesrv) as conn:
            ledger = Ledger(conn, self.options.sink_id, group)
            last = ledger.latest()
            if last is not None and batchId <= last.batch_id:
                conn.end_runs(group, runs, commit=False)
                if batchId < last.batch_id:
                    raise ValueError(
                        f"sink {self.options.sink_id} has committed batch {last.batch_id}, but "
                        f"this query commits batch {batchId}: its checkpoint was reset; give "
                        "the query a new sinkId (or checkpointLocation)"
                    )
                conn.end_runs(group, last.runs, commit=True)
                log.info("tidemq sink: batch %d was committed before; replay rolled back", batchId)
                return
            ledger.append(CommitRecord(batchId, runs=runs))
            conn.end_runs(group, runs, commit=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        runs = [run for m in _sent(messages) for run in m.runs]
        with Connection(self.options.namesrv) as conn:
            conn.end_runs(self.options.producer_group, runs, commit=False)
        count = sum(len(run) for run in runs)
        log.warning("tidemq sink: batch %d aborted, %d halves rolled back", batchId, count)
