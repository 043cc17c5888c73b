"""The file store: commitlog + consumequeues + index on disk.

Shape of a write: validate, encode and append to the commitlog (one write per
file for a batch), dispatch at once in the same thread (consumequeue entry,
index entries, arrival listeners for long polling), then in sync-flush mode
wait for the group commit. A group of ordinary messages to known queues is
checked, encoded and dispatched in one call (`tidemq.record.group_append`,
compiled); anything else takes the general path, message by message.
`put_message` and `put_messages` go through the group committer
(`group_commit`): the writes of one loop tick are appended with one call
and, in sync-flush mode, wait for one flush. Dispatch reads
nothing back: the append already knows every field. After a crash the same
dispatch requests are rebuilt by scanning the commitlog from the checkpoint.

Reads are synchronous slices of the mapped files. Retention runs on the
caller's thread (`run_retention`), never concurrently with reads.

A full disk refuses writes, nothing else (see `disk_guard` and `room`): above
the warning ratio, or after any ENOSPC, `append` answers SERVICE_NOT_AVAILABLE
without writing; otherwise it reserves every block the append needs before
writing its first byte. Should a dispatch still run out of room (recovery
re-dispatching on a full disk, or a batch the reservation underestimated), the
store remembers where dispatching stopped (`_dispatch_behind`, or
`_index_behind` for the index alone), refuses writes, and dispatches the rest
once there is room again. Reads, recovery and retention need no new blocks.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path

from tidemq.common import properties as props
from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.common.names import is_safe_path_component, preview
from tidemq.common.properties import PropertyView, decode_properties
from tidemq.protocol.errors import ProtocolError
from tidemq.record import group_append
from tidemq.record.codec import peek_header, peek_properties, peek_topic_and_properties
from tidemq.store.api import (
    ArrivalListener,
    BatchAppendResult,
    BatchPutResult,
    BatchToStore,
    DispatchRequest,
    GetResult,
    GetStatus,
    MessageFilter,
    MessageToStore,
    PutResult,
    PutStatus,
    QueryResult,
    QueueEntries,
    RunEncoder,
    RunPosition,
)
from tidemq.store.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from tidemq.store.commitlog import AppendPlan, CommitLog
from tidemq.store.config import SCHEDULE_TOPIC, TIMER_TOPIC, FlushMode, StoreConfig
from tidemq.store.consumequeue import BLANK_SIZE, ENTRY, ConsumeQueue
from tidemq.store.disk_guard import DiskGuard, disk_used_bytes, disk_used_ratio
from tidemq.store.filters import make_tags_code_rule
from tidemq.store.flush import FlushService
from tidemq.store.fs import REAL_FS, FileSystem, NoSpaceError
from tidemq.store.group_commit import FLUSH_TIMEOUT_REMARK, GroupCommitter
from tidemq.store.index import IndexService
from tidemq.store.lock import StoreLock
from tidemq.store.reads import classify_offset
from tidemq.store.recovery import RecoveryReport
from tidemq.store.replica import (
    REPLICA_REMARKS,
    ReplicaGate,
    ReplicaTruncation,
    combine,
    read_chunk,
    write_chunk,
)
from tidemq.store.retention import CommitLogFile, RetentionPolicy, select_deletions
from tidemq.store.retention_report import RetentionCounters, queue_losses
from tidemq.store.room import reserve_for_append
from tidemq.store.space import is_no_space
from tidemq.store.validation import validate_batch

log = logging.getLogger(__name__)

QueueKey = tuple[str, int]

_TAGS_RULE_TOPICS = (SCHEDULE_TOPIC, TIMER_TOPIC)
"""Topics whose consumequeue tag slot the store computes (a delivery time)
unless the message brings it: `group_append` leaves them to the general path."""


class StoreClosedError(RuntimeError):
    pass


class UnsafeNameError(ValueError):
    """A topic name that is not one plain directory name inside the store."""


class FileMessageStore:
    def __init__(
        self,
        config: StoreConfig,
        *,
        fs: FileSystem = REAL_FS,
        clock: Clock = SYSTEM_CLOCK,
        disk_usage: Callable[[Path], float] | None = None,
    ) -> None:
        config.validate()
        self.config = config
        self.fs = fs
        self.clock = clock
        self._disk_usage = disk_usage or disk_used_ratio
        self.disk = DiskGuard(
            config.root,
            self._disk_usage,
            clock,
            warning_ratio=config.disk_warning_ratio,
            clean_ratio=config.disk_force_clean_ratio,
            check_interval_s=config.disk_check_interval_ms / 1000,
        )
        self.retention = RetentionCounters()
        self._dispatch_behind: int | None = None
        """Commitlog offset from which records wait for their dispatch (no room)."""
        self._index_behind: int | None = None
        """Commitlog offset from which records wait for their index entries."""
        self._tags_code_rule = make_tags_code_rule(config.delay_levels)
        self.commitlog = CommitLog(
            config.commitlog_dir,
            config.commitlog_file_size,
            fs,
            config.store_host,
            config.store_port,
            self._tags_code_rule,
        )
        self.index = IndexService(
            config.index_dir,
            fs,
            clock,
            max_hash_slots=config.index_max_hash_slots,
            max_index_count=config.index_max_count,
        )
        self.consume_queues: dict[QueueKey, ConsumeQueue] = {}
        self._listeners: list[ArrivalListener] = []
        self._dispatched_offset = 0
        self.recovery_report: RecoveryReport | None = None
        self.flush = FlushService(
            sync_mode=config.flush_mode is FlushMode.SYNC,
            flush_commitlog=self.commitlog.log.flush,
            flush_derived=self._flush_derived,
            commitlog_interval_ms=config.flush_interval_commitlog_ms,
            derived_interval_ms=config.flush_interval_consumequeue_ms,
            prepare_commitlog=self.commitlog.log.zero_ahead,
        )
        self._open = False
        self._closed = False
        self._read_only = False
        self._fenced: str | None = None
        self._lock: StoreLock | None = None
        self._replication: ReplicaGate | None = None
        self.group_commit = GroupCommitter(
            self.append,
            self.flush,
            sync_timeout_s=config.sync_flush_timeout_ms / 1000,
            written_end=lambda: self.commitlog.max_offset,
        )

    # -- lifecycle ----------------------------------------------------------

    def open(self) -> RecoveryReport:
        """Lock the store, load files, recover (after a crash: verify and
        repair), start flushing. StoreLockedError when another owner has it."""
        root = self.config.root
        root.mkdir(parents=True, exist_ok=True)
        self._lock = self.fs.lock_store(root)
        try:
            return self._open_locked()
        except BaseException:
            self._release_lock()
            raise

    def _open_locked(self) -> RecoveryReport:
        root = self.config.root
        clean = not self.config.abort_path.exists()
        self.config.abort_path.touch()
        self.fs.sync_dir(root)
        self.commitlog.log.load()
        self._load_queues()
        checkpoint = read_checkpoint(self.config.checkpoint_path)
        report = self._recover(clean, checkpoint)
        self.recovery_report = report
        if report.dropped_anything:
            log.warning("store recovery dropped data: %s", report.summary())
        else:
            log.info("store recovered: %s", report.summary())
        self._flush_derived()
        self._make_first_files()
        self.flush.flushed_offset = self.commitlog.max_offset
        self.flush.start()
        self._open = True
        return report

    def _make_first_files(self) -> None:
        """The files the first message would otherwise make on its way (the
        event loop's, in a broker): the first commitlog file, kept aside until
        the first append and removed at close if unused, and the next index
        file when it is a large one (index.py). On a full disk nothing is made
        here; the first write then reports it as any write does."""
        log_files = self.commitlog.log
        if not log_files.files:
            try:
                log_files.reserve(0, 1)
            except NoSpaceError as exc:
                log.info("no room to make the first commitlog file at open (%s)", exc.strerror)
        if self.config.index_enabled:
            self.index.make_ahead()

    def close(self) -> None:
        """Flush everything, write the checkpoint, mark the shutdown clean."""
        if self._closed or not self._open:
            return
        self.group_commit.close()  # writes still taken: a pending group is stored
        self._closed = True
        self.flush.stop()
        failed = self.flush.failed
        for queue in self.consume_queues.values():
            queue.close()
        self.index.close()
        self.commitlog.close()
        if failed is None and not self._read_only:
            self.config.abort_path.unlink(missing_ok=True)
        self._release_lock()

    def _release_lock(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    def fence(self, reason: str | None) -> None:
        """Refuse every write from now on with `reason` (None: accept them
        again). A master the controller replaced fences itself at once, so
        that two masters never accept writes for one broker name."""
        self._fenced = reason

    @property
    def fenced(self) -> str | None:
        return self._fenced

    def open_read_only(self) -> None:
        """Look at the store as it is now, changing nothing: for a store that
        another process owns (no lock, no recovery, no flushing, no writes).

        The store must have been made with a read-only file layer
        (`store.read_only_fs.ReadOnlyFileSystem`). Reads see what the owner
        had written when this was called: the commitlog up to its first
        invalid byte, each queue up to its last written entry.
        """
        self._read_only = True
        self.commitlog.log.load()
        self._load_queues()
        log_files = self.commitlog.log
        end = self.commitlog.max_offset
        if log_files.last is not None:
            for _ in self.commitlog.scan(log_files.last.start_offset):
                pass
            end = self.commitlog.scan_end
            log_files.assume_end(end)
        for (topic, queue_id), queue in self.consume_queues.items():
            queue.assume_written_end()
            self.commitlog.queue_offsets[(topic, queue_id)] = queue.max_offset
            queue.correct_min_offset(log_files.min_offset)
        self._dispatched_offset = end
        self._open = True

    def __enter__(self) -> FileMessageStore:
        if not self._open:
            self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- recovery -----------------------------------------------------------

    def _load_queues(self) -> None:
        base = self.config.consumequeue_dir
        if not base.exists():
            return
        for topic_dir in sorted(base.iterdir()):
            for queue_dir in sorted(topic_dir.iterdir()):
                if not queue_dir.name.isdigit():
                    continue
                queue = self._new_queue(topic_dir.name, int(queue_dir.name))
                queue.load()

    def _recover(self, clean: bool, checkpoint: Checkpoint | None) -> RecoveryReport:
        report = RecoveryReport(clean_shutdown=clean, checkpoint=checkpoint)
        log_files = self.commitlog.log
        start = log_files.min_offset
        if checkpoint is not None:
            start = max(start, min(checkpoint.safe_offset, checkpoint.commitlog_offset))
        if log_files.last is not None:
            start = min(start, log_files.last.start_offset + log_files.file_size)
        index_checkpoint = checkpoint.index_offset if checkpoint is not None else 0
        # An index left behind by a full disk is rebuilt from its checkpoint.
        index_trusted = (
            clean
            and checkpoint is not None
            and checkpoint.index_offset >= checkpoint.consumequeue_offset
        )
        rebuild_from = self.index.load(index_trusted, index_checkpoint)
        if rebuild_from is not None:
            report.index_rebuilt_from = rebuild_from
            report.index_files_dropped = 1
            start = max(log_files.min_offset, min(start, rebuild_from))
        report.scanned_from = start
        # Pass 1: find where valid data ends.
        end = self._scan_valid_end(start, report, trust_queues=checkpoint is not None)
        report.commitlog_end = end
        report.truncated_bytes = log_files.set_end(end)
        self.index.truncate_after(end)
        for (topic, queue_id), queue in self.consume_queues.items():
            dropped = queue.recover(end)
            if dropped:
                report.consumequeue_dropped[f"{topic}/{queue_id}"] = dropped
        # Pass 2: re-dispatch what the derived structures may have missed.
        waiting = self._redispatch(start, report)
        log_files.set_end(end)
        queue_offsets = self.commitlog.queue_offsets
        for (topic, queue_id), queue in self.consume_queues.items():
            queue_offsets[(topic, queue_id)] = queue.max_offset
            queue.correct_min_offset(log_files.min_offset)
        for key, next_offset in waiting.items():
            queue_offsets[key] = max(queue_offsets.get(key, 0), next_offset)
        self._dispatched_offset = end if self._dispatch_behind is None else self._dispatch_behind
        return report

    def _redispatch(self, start: int, report: RecoveryReport) -> dict[QueueKey, int]:
        """Dispatch the records from `start` again (idempotently). On a full
        disk, dispatching stops where an entry found no room and resumes once
        there is room; the queues' next offsets are then taken from the records
        left waiting (returned: queue -> next queue offset)."""
        waiting: dict[QueueKey, int] = {}
        for offset, dispatch, queue_offset in self.commitlog.scan(start):
            if dispatch is None:
                continue
            if self._dispatch_behind is None:
                try:
                    if self._dispatch(dispatch, notify=False):
                        report.redispatched += 1
                    continue
                except NoSpaceError as exc:
                    self._dispatch_behind = offset
                    self.disk.no_space(exc)
                    log.warning(
                        "store recovery: no room to dispatch the records from commitlog "
                        "offset %d on; they are stored and will be dispatched once there is room",
                        offset,
                    )
            waiting[(dispatch.topic, dispatch.queue_id)] = queue_offset + 1
        return waiting

    def _scan_valid_end(self, start: int, report: RecoveryReport, *, trust_queues: bool) -> int:
        """The end of valid records from `start`. Besides magic, sizes and body
        CRC, each record's queue offset must continue its queue: a damaged
        header must never overwrite a durable consumequeue entry."""
        ends = {key: queue.scan_end_entry() for key, queue in self.consume_queues.items()}
        expected: dict[QueueKey, int] = {}
        for offset, dispatch, queue_offset in self.commitlog.scan(start):
            if dispatch is not None:
                key = (dispatch.topic, dispatch.queue_id)
                want = expected.get(key)
                if want is not None and queue_offset != want:
                    problem: str | None = f"queue offset {queue_offset}, expected {want}"
                elif want is None and trust_queues:
                    problem = self._first_offset_problem(key, queue_offset, offset, start, ends)
                else:
                    problem = None
                if problem is not None:
                    report.stop_reason = f"record at {offset} of {key[0]}/{key[1]}: {problem}"
                    return offset
                expected[key] = queue_offset + 1
            report.records_scanned += 1
        report.stop_reason = self.commitlog.scan_stop_reason
        return self.commitlog.scan_end

    def _first_offset_problem(
        self, key: QueueKey, queue_offset: int, physical: int, start: int, ends: dict[QueueKey, int]
    ) -> str | None:
        """Entries for records below the checkpoint are durable, so the first
        record after it must fit them: no jump past the queue's end, no
        disagreement with a durable entry, no going back before its predecessor."""
        queue = self.consume_queues.get(key)
        if queue is None or not queue.log.files:
            return None
        end = ends[key]
        if queue_offset > end:
            return f"queue offset {queue_offset} jumps past the consumequeue end {end}"
        here = queue.raw_entry(queue_offset) if queue_offset < end else None
        if here is not None and here[0] < start and here[1] != BLANK_SIZE and here[0] != physical:
            return f"queue offset {queue_offset} belongs to the record at {here[0]}"
        before = queue.raw_entry(queue_offset - 1) if 0 < queue_offset <= end else None
        if before is not None and 0 < before[1] < BLANK_SIZE and before[0] >= physical:
            return f"queue offset {queue_offset} comes after the record at {before[0]}"
        return None

    # -- writing ------------------------------------------------------------

    async def put_message(self, message: MessageToStore) -> PutResult:
        """Store one message; concurrent calls share one append and, in
        sync-flush mode, one flush wait (see `group_commit`)."""
        outcome = self.group_commit.submit(message)
        return outcome if isinstance(outcome, PutResult) else await outcome

    async def put_messages(self, messages: Sequence[MessageToStore]) -> BatchPutResult:
        """Store a batch as consecutive records, whole or not at all. It joins
        the current group like a single message (one append for the group)."""
        if not messages:
            return self.append(messages)  # refused: the batch is empty
        outcome = self.group_commit.submit_batch(messages)
        return outcome if isinstance(outcome, BatchPutResult) else await outcome

    def put_messages_blocking(self, messages: Sequence[MessageToStore]) -> BatchPutResult:
        """The same as `put_messages` for callers without an event loop."""
        result = self.append(messages)
        if not result.ok or not self.flush.sync_mode:
            return result
        end = result.results[-1].physical_offset + result.results[-1].size
        if self.flush.wait_blocking(end, self.config.sync_flush_timeout_ms / 1000):
            return result
        return _with_status(result, PutStatus.FLUSH_DISK_TIMEOUT, "flush to disk timed out")

    def append(self, messages: Sequence[MessageToStore]) -> BatchPutResult:
        """Write and dispatch without waiting for durability: in one call when
        every message suits `group_append` (a group of single sends), else
        through the general path, which checks and encodes message by message."""
        appended = self._append_group(messages)
        return appended if appended is not None else self._append_general(messages)

    def _append_group(self, messages: Sequence[MessageToStore]) -> BatchPutResult | None:
        """The messages as one run (`tidemq.record.group_append`), or None:
        the general path must take them (a message it does not handle, a
        queue not created yet, the end of a commitlog file, or any refusal,
        which the general path words with its checks in their order)."""
        if self._write_refusal(None) is not None:
            return None
        commitlog = self.commitlog
        start, room = commitlog.next_append()
        store_timestamp = self.clock.now_ms()
        encoded = group_append.encode(
            messages,
            start,
            room,
            store_timestamp,
            commitlog.store_host,
            commitlog.store_port,
            commitlog.queue_offsets,
            self.config.max_message_size,
            _TAGS_RULE_TOPICS,
            PutResult,
            PutStatus.PUT_OK,
        )
        if encoded is None:
            return None
        records, results, parts, index_entries, index_bound = encoded
        consume_queues = self.consume_queues
        queues: list[ConsumeQueue] = []
        for topic, queue_id, _, _, _ in parts:
            queue = consume_queues.get((topic, queue_id))
            if queue is None:
                return None
            queues.append(queue)
        index = self.index if self.config.index_enabled and self._index_behind is None else None
        end = start + len(records)
        try:
            commitlog.log.reserve(start, end)
            for (_, _, first, cq_entries, _), queue in zip(parts, queues, strict=True):
                queue.reserve(first, first + len(cq_entries) // ENTRY.size)
            if index is not None:
                index.reserve(index_bound)
        except NoSpaceError as exc:
            return self._no_space(exc)
        next_offsets = commitlog.queue_offsets
        for topic, queue_id, first, cq_entries, _ in parts:
            next_offsets[(topic, queue_id)] = first + len(cq_entries) // ENTRY.size
        try:
            commitlog.write(AppendPlan(start, end, [(start, records)], [], []))
        except NoSpaceError as exc:  # the room was reserved: never expected
            log.error("no space for a reserved commitlog write at %d: %s", start, exc)
            self._dispatch_behind = self._dispatched_offset = start
            return self._no_space(exc)
        refused = self._dispatch_runs(
            start,
            [QueueEntries(*part) for part in parts],
            queues,
            index_entries,
            index,
            store_timestamp,
        )
        if refused is not None:
            return refused
        return BatchPutResult(PutStatus.PUT_OK, results)

    def _append_general(self, messages: Sequence[MessageToStore]) -> BatchPutResult:
        refusal = self._write_refusal(messages)
        if refusal is not None:
            return refusal
        plan = self.commitlog.prepare(messages, self.clock.now_ms())
        index = self.index if self.config.index_enabled and self._index_behind is None else None
        try:
            reserve_for_append(plan, self.commitlog, self._queue, index)
        except NoSpaceError as exc:
            self.commitlog.cancel(plan)
            return self._no_space(exc)
        try:
            self.commitlog.write(plan)
        except NoSpaceError as exc:  # the room was reserved: never expected
            log.error("no space for a reserved commitlog write at %d: %s", plan.start, exc)
            self._dispatch_behind = self._dispatched_offset = plan.start
            return self._no_space(exc)
        return self._dispatch_appended(plan)

    async def put_batch(self, batch: BatchToStore) -> BatchAppendResult | None:
        """Store a SEND_BATCH_MESSAGE straight from its body, in one call and
        without a Python object per message (`tidemq.record.batch_append`).
        None: the batch needs the general path (`put_messages` over one
        MessageToStore per entry), which stores or refuses it with every check."""
        appended = self.append_batch(batch)
        if appended is None:
            return None
        result, end = appended
        if not result.ok:
            return result
        if batch.wait_store:
            status = await self._durable(end)
        else:  # the sender does not wait (WAIT=false): see `GroupCommitter._stored`
            self.flush.wake()
            status = PutStatus.PUT_OK
        if status is PutStatus.PUT_OK:
            return result
        return BatchAppendResult(
            status, result.count, result.queue_offset, result.msg_ids, _DURABILITY_REMARKS[status]
        )

    async def _durable(self, end: int) -> PutStatus:
        """Wait for what a write up to `end` must have before it is answered:
        the flush in sync-flush mode (within sync_flush_timeout_ms), a slave's
        acknowledgement on a SYNC_MASTER; the combined answer (`replica.combine`)."""
        replica = self._replica_wait(end)
        flushed = PutStatus.PUT_OK
        if self.flush.sync_mode:
            try:
                async with asyncio.timeout(self.config.sync_flush_timeout_ms / 1000):
                    durable = await self.flush.wait_async(end)
            except TimeoutError:
                durable = False
            if not durable:
                flushed = PutStatus.FLUSH_DISK_TIMEOUT
        if not isinstance(replica, PutStatus):
            replica = await replica
        return combine(flushed, replica)

    def _replica_wait(self, end: int) -> PutStatus | asyncio.Future[PutStatus]:
        gate = self._replication
        return PutStatus.PUT_OK if gate is None else gate.wait_replicated(end)

    @property
    def replication(self) -> ReplicaGate | None:
        """A SYNC_MASTER's slaves (attached by the broker): each write is
        answered once one of them has it, or with why not (`store.replica`)."""
        return self._replication

    @replication.setter
    def replication(self, gate: ReplicaGate | None) -> None:
        self._replication = gate
        self.group_commit.replicate = None if gate is None else gate.wait_replicated

    def append_batch(self, batch: BatchToStore) -> tuple[BatchAppendResult, int] | None:
        """Write and dispatch a batch body without waiting for durability:
        (result, log offset one past its last byte), or None for the general path."""
        self.group_commit.commit_pending()  # call order: the writes already made go first
        refusal = self._write_refusal(None)
        if refusal is not None:
            return BatchAppendResult(refusal.status, remark=refusal.remark), 0
        if (
            len(batch.body) > self.config.max_message_size
            or batch.queue_id < 0
            or not is_safe_path_component(batch.topic)
        ):
            return None
        plan = self.commitlog.prepare_batch(batch, self.clock.now_ms())
        if plan is None:
            return None
        index = self.index if self.config.index_enabled and self._index_behind is None else None
        queue = self._queue(plan.topic, plan.queue_id)
        try:
            self.commitlog.log.reserve(plan.append.start, plan.append.end)
            queue.reserve(plan.first_queue_offset, plan.first_queue_offset + plan.count)
            if index is not None:
                index.reserve(len(plan.index_entries) // 12)
        except NoSpaceError as exc:
            self.commitlog.cancel_batch(plan)
            return self._batch_refusal(self._no_space(exc)), 0
        try:
            self.commitlog.write(plan.append)
        except NoSpaceError as exc:  # the room was reserved: never expected
            log.error("no space for a reserved commitlog write at %d: %s", plan.append.start, exc)
            self._dispatch_behind = self._dispatched_offset = plan.append.start
            return self._batch_refusal(self._no_space(exc)), 0
        entries = QueueEntries(
            plan.topic, plan.queue_id, plan.first_queue_offset, plan.cq_entries, plan.tags
        )
        refused = self._dispatch_runs(
            plan.append.start, [entries], [queue], plan.index_entries, index, plan.store_timestamp
        )
        if refused is not None:
            return self._batch_refusal(refused), 0
        return (
            BatchAppendResult(PutStatus.PUT_OK, plan.count, plan.first_queue_offset, plan.msg_ids),
            plan.append.end,
        )

    @staticmethod
    def _batch_refusal(refused: BatchPutResult) -> BatchAppendResult:
        return BatchAppendResult(refused.status, remark=refused.remark)

    def _write_refusal(self, messages: Sequence[MessageToStore] | None) -> BatchPutResult | None:
        """Why no write may happen now (closed, read-only, failed flush, an
        invalid message among `messages`, full disk, dispatch held back), or None."""
        if not self._open or self._closed:
            return BatchPutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="the store is not open")
        if self._read_only:
            return BatchPutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="the store is read-only")
        if self.config.replica:
            return BatchPutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=SLAVE_REFUSAL)
        if self._fenced is not None:
            return BatchPutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=self._fenced)
        if self.flush.failed is not None:
            return BatchPutResult(
                PutStatus.SERVICE_NOT_AVAILABLE, remark=f"disk flush failed: {self.flush.failed}"
            )
        if messages is not None:
            problem = validate_batch(messages, self.config)
            if problem is not None:
                return BatchPutResult(problem[0], remark=problem[1])
        if self._dispatch_behind is not None or self._index_behind is not None:
            return self._disk_refusal()
        if not self.disk.writable():
            return BatchPutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=self.disk.remark())
        return None

    def _dispatch_appended(self, plan: AppendPlan) -> BatchPutResult:
        """Dispatch a written append; acknowledged only if every consumequeue
        entry was written (otherwise its records wait for room, unacknowledged)."""
        dispatch = self._dispatch
        for request in plan.dispatches:
            try:
                dispatch(request, notify=True)
            except NoSpaceError as exc:
                self._dispatch_behind = request.commitlog_offset
                self._dispatched_offset = request.commitlog_offset
                log.warning(
                    "no room for the consumequeue entry of the record at %d: the batch is "
                    "refused; its records are dispatched once there is room",
                    request.commitlog_offset,
                )
                return self._no_space(exc)
        self._dispatched_offset = self.commitlog.max_offset
        self.disk.wrote()
        return BatchPutResult(PutStatus.PUT_OK, tuple(plan.results))

    def _disk_refusal(self) -> BatchPutResult | None:
        """SERVICE_NOT_AVAILABLE while the disk is full or records still wait
        for their dispatch; None when a write may go ahead."""
        if self.disk.writable() and self._catch_up():
            return None
        return BatchPutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=self.disk.remark())

    def _no_space(self, error: OSError) -> BatchPutResult:
        self.disk.no_space(error)
        return BatchPutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=self.disk.remark())

    def _catch_up(self) -> bool:
        """Dispatch the records a full disk held back; True when none wait."""
        behind = self._dispatch_behind
        if behind is not None:
            end = self.commitlog.max_offset
            for offset, request in self.commitlog.records_between(behind, end):
                if request is None:
                    continue
                try:
                    self._dispatch(request, notify=True)
                except NoSpaceError as exc:
                    self._dispatch_behind = self._dispatched_offset = offset
                    self.disk.no_space(exc)
                    return False
            self._dispatch_behind = None
            self._dispatched_offset = self.commitlog.read_end
            log.info(
                "dispatched the records from commitlog offset %d held back by a full disk", behind
            )
        behind = self._index_behind
        if behind is not None and self.config.index_enabled:
            end = self.commitlog.max_offset
            for offset, request in self.commitlog.records_between(behind, end):
                if request is None:
                    continue
                try:
                    self.index.build(request)
                except NoSpaceError as exc:
                    self._index_behind = offset
                    self.disk.no_space(exc)
                    return False
            self._index_behind = None
            log.info(
                "indexed the records from commitlog offset %d held back by a full disk", behind
            )
        return True

    def _queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = self.consume_queues.get((topic, queue_id))
        return queue if queue is not None else self._new_queue(topic, queue_id)

    def _dispatch(self, request: DispatchRequest, *, notify: bool) -> bool:
        key = (request.topic, request.queue_id)
        queue = self.consume_queues.get(key)
        if queue is None:
            queue = self._new_queue(request.topic, request.queue_id)
        written = queue.put(
            request.commitlog_offset, request.size, request.tags_code, request.queue_offset
        )
        if self.config.index_enabled and self._index_behind is None:
            try:
                self.index.build(request)
            except NoSpaceError as exc:
                # The message stays readable; only finding it by key waits.
                self._index_behind = request.commitlog_offset
                self.disk.no_space(exc)
                log.warning(
                    "no room in the index for the record at %d: it and later ones are "
                    "indexed once there is room",
                    request.commitlog_offset,
                )
        if notify:
            for listener in self._listeners:
                listener(request)
        return written

    def _new_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        directory = self._topic_dir(topic) / str(queue_id)
        queue = ConsumeQueue(
            topic, queue_id, directory, self.fs, self.config.consumequeue_entries_per_file
        )
        self.consume_queues[(topic, queue_id)] = queue
        return queue

    def _flush_derived(self) -> None:
        """Sync consumequeues and index, then record how far they are durable.

        The offset is taken before syncing and capped by the commitlog's
        flushed offset, so the checkpoint never claims more than is on disk.
        """
        dispatched = min(self._dispatched_offset, self.commitlog.log.flush())
        index_behind = self._index_behind
        indexed = dispatched if index_behind is None else min(dispatched, index_behind)
        for queue in list(self.consume_queues.values()):
            queue.flush()
        self.index.flush()
        checkpoint = Checkpoint(
            commitlog_offset=dispatched,
            consumequeue_offset=dispatched,
            index_offset=indexed,
            timestamp_ms=self.clock.now_ms(),
        )
        try:
            write_checkpoint(self.config.checkpoint_path, checkpoint)
        except OSError as exc:
            if not is_no_space(exc):
                raise
            # The old checkpoint stays valid (recovery only scans more); the
            # next flush writes it again.
            self.disk.no_space(exc, "the checkpoint")

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        self._listeners.append(listener)

    # -- reading ------------------------------------------------------------

    def get_messages(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        message_filter: MessageFilter | None = None,
        max_bytes: int | None = None,
    ) -> GetResult:
        queue = self.consume_queues.get((topic, queue_id))
        if queue is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_offset, max_offset = queue.min_offset, queue.max_offset
        finished = classify_offset(offset, min_offset, max_offset)
        if finished is not None:
            return finished
        result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, min_offset, max_offset)
        self._collect(queue, offset, max_nums, message_filter, max_bytes, result)
        return result

    def _collect(
        self,
        queue: ConsumeQueue,
        offset: int,
        max_nums: int,
        message_filter: MessageFilter | None,
        max_bytes: int | None,
        result: GetResult,
    ) -> None:
        """Fill `result` from `offset`, the hot loop of every pull."""
        byte_budget = max_bytes if max_bytes is not None else self.config.max_transfer_bytes
        scan_left = max(self.config.max_scan_entries, max_nums)
        commitlog_min = self.commitlog.min_offset
        files = self.commitlog.log.files
        file_size = self.commitlog.log.file_size
        first_start = files[0].start_offset if files else 0
        buffers, queue_offsets, physicals = (
            result.buffers,
            result.queue_offsets,
            result.physical_offsets,
        )
        tags_check = message_filter.matches_tags_code if message_filter is not None else None
        props_check = (
            message_filter.matches_properties
            if message_filter is not None and message_filter.needs_properties
            else None
        )
        total = 0
        removed = False
        next_offset = offset
        while scan_left > 0 and len(buffers) < max_nums:
            view = queue.entries_view(next_offset, scan_left)
            if view is None:
                break
            stop = False
            for physical, size, tags in ENTRY.iter_unpack(view):
                if size == BLANK_SIZE:
                    next_offset += 1
                    scan_left -= 1
                    continue
                if physical < commitlog_min:
                    removed = True
                    next_offset += 1
                    scan_left -= 1
                    continue
                if tags_check is not None and not tags_check(tags):
                    next_offset += 1
                    scan_left -= 1
                    continue
                mapped = files[(physical - first_start) // file_size]
                record = mapped.file.view(physical - mapped.start_offset, size)
                if props_check is not None and not props_check(_record_properties(record)):
                    next_offset += 1
                    scan_left -= 1
                    continue
                if buffers and total + size > byte_budget:
                    stop = True
                    break
                buffers.append(record)
                queue_offsets.append(next_offset)
                physicals.append(physical)
                total += size
                next_offset += 1
                scan_left -= 1
                if len(buffers) >= max_nums or scan_left <= 0:
                    stop = True
                    break
            if stop:
                break
        result.next_begin_offset = next_offset
        if buffers:
            result.status = GetStatus.FOUND
        elif removed:
            result.status = GetStatus.MESSAGE_WAS_REMOVING

    def read_by_physical_offset(self, physical_offset: int) -> memoryview | None:
        return self.commitlog.record_at(physical_offset)

    def commitlog_max_offset(self) -> int:
        return self.commitlog.max_offset

    def query_by_key(
        self,
        topic: str,
        key: str,
        max_num: int,
        begin_ms: int = 0,
        end_ms: int | None = None,
        *,
        below_offset: int | None = None,
    ) -> QueryResult:
        end = end_ms if end_ms is not None else 2**62
        offsets = self.index.query(topic, key, max_num * 2 + 8, begin_ms, end, below_offset)

        def keyed(properties: dict[str, str]) -> bool:
            return key in properties.get(props.KEYS, "").split(" ") or (
                properties.get(props.UNIQ_KEY) == key
            )

        return self._verified(offsets, topic, keyed, max_num)

    def query_by_unique_key(self, topic: str, unique_key: str) -> QueryResult:
        offsets = self.index.query(topic, unique_key, 32, 0, 2**62)
        return self._verified(
            offsets, topic, lambda p: p.get(props.UNIQ_KEY) == unique_key, max_num=32
        )

    def _verified(
        self,
        offsets: list[int],
        topic: str,
        wanted: Callable[[dict[str, str]], bool],
        max_num: int,
    ) -> QueryResult:
        """Index hits checked against the records (hashes collide, data ages out)."""
        buffers: list[memoryview | bytes] = []
        found: list[int] = []
        for physical in offsets:
            record = self.commitlog.record_at(physical)
            if record is None:
                continue
            try:
                record_topic, raw = peek_topic_and_properties(record, 0)
            except ProtocolError:
                continue
            if record_topic == topic and wanted(decode_properties(raw)):
                buffers.append(record)
                found.append(physical)
                if len(found) >= max_num:
                    break
        return QueryResult(
            buffers,
            found,
            index_last_update_timestamp=self.index.last_update_timestamp,
            index_last_update_phy_offset=self.index.last_update_phy_offset,
        )

    def query_by_time(self, topic: str, begin_ms: int, end_ms: int, max_num: int) -> QueryResult:
        """Messages of `topic` stored in [begin_ms, end_ms], oldest first per queue."""
        buffers: list[memoryview | bytes] = []
        found: list[int] = []
        for (queue_topic, queue_id), queue in sorted(self.consume_queues.items()):
            if queue_topic != topic:
                continue
            start = self.offset_by_time(topic, queue_id, begin_ms)
            for _, physical, size, _ in queue.iter_entries(start):
                record = self.commitlog.view(physical, size)
                if record is None:
                    continue
                if peek_header(record, 0).store_timestamp > end_ms:
                    break
                buffers.append(record)
                found.append(physical)
                if len(found) >= max_num:
                    return QueryResult(buffers, found)
        return QueryResult(buffers, found)

    def _store_time_at(self, queue: ConsumeQueue, queue_offset: int) -> int:
        entry = queue.entry(queue_offset)
        if entry is None:
            return -1
        record = self.commitlog.view(entry[0], entry[1])
        if record is None:
            return -1
        return peek_header(record, 0).store_timestamp

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset stored at or after `timestamp_ms`, else the max offset."""
        queue = self.consume_queues.get((topic, queue_id))
        if queue is None:
            return 0
        low, high = queue.min_offset, queue.max_offset
        while low < high:
            middle = (low + high) // 2
            stored = self._store_time_at(queue, middle)
            if stored < 0 or stored < timestamp_ms:
                low = middle + 1
            else:
                high = middle
        return low

    def min_offset(self, topic: str, queue_id: int) -> int:
        queue = self.consume_queues.get((topic, queue_id))
        return 0 if queue is None else queue.min_offset

    def max_offset(self, topic: str, queue_id: int) -> int:
        queue = self.consume_queues.get((topic, queue_id))
        return 0 if queue is None else queue.max_offset

    def store_time(self, topic: str, queue_id: int, queue_offset: int) -> int:
        queue = self.consume_queues.get((topic, queue_id))
        return -1 if queue is None else self._store_time_at(queue, queue_offset)

    def physical_offset(self, topic: str, queue_id: int, queue_offset: int) -> int:
        queue = self.consume_queues.get((topic, queue_id))
        entry = None if queue is None else queue.entry(queue_offset)
        return -1 if entry is None else entry[0]

    def earliest_message_time(self) -> int:
        """Store time of the oldest record still on disk, -1 when there is none."""
        record = self.commitlog.record_at(self.commitlog.min_offset)
        return -1 if record is None else peek_header(record, 0).store_timestamp

    def flush_behind_bytes(self) -> int:
        """Commit log bytes written but not yet flushed to disk."""
        return max(0, self.commitlog.max_offset - self.flush.flushed_offset)

    def dispatch_behind_bytes(self) -> int:
        """Commit log bytes not yet dispatched to consume queues and the index."""
        return max(0, self.commitlog.max_offset - self._dispatched_offset)

    def disk_used_bytes(self) -> int:
        """Bytes in use on the file system of the store's root (disk_guard.disk_used_bytes)."""
        return disk_used_bytes(self.config.root)

    def runtime_info(self) -> dict[str, str]:
        """The store's part of GET_BROKER_RUNTIME_INFO: RocketMQ's disk keys
        (DefaultMessageStore.getRuntimeInfo) and tidemq's retention counters."""
        self.disk.writable()  # measures when the cached figure is stale
        ratio = str(self.disk.ratio)
        counters = self.retention
        return {
            "commitLogDiskRatio": ratio,
            f"commitLogDiskRatio_{self.config.commitlog_dir}": ratio,
            "consumeQueueDiskRatio": ratio,
            "tidemqDiskFull": str(self.disk.full).lower(),
            "tidemqDeletedCommitLogFiles": str(counters.deleted_files),
            "tidemqForcedDeletedFiles": str(counters.forced_files),
            "tidemqForcedDeletedMessages": str(counters.forced_messages),
            "tidemqFlushTrouble": _flush_state(self.flush),
        }

    def queues(self) -> dict[str, list[int]]:
        table: dict[str, list[int]] = {}
        for topic, queue_id in sorted(self.consume_queues):
            table.setdefault(topic, []).append(queue_id)
        return table

    def _topic_dir(self, topic: str) -> Path:
        """The consumequeue directory of `topic`, refusing any name that would
        point elsewhere (whatever the layers above checked)."""
        base = self.config.consumequeue_dir
        if not is_safe_path_component(topic):
            raise UnsafeNameError(f"refusing topic name {preview(topic)}: not a directory name")
        return base / topic

    def delete_topics(self, topics: Sequence[str]) -> None:
        """Forget the topics' queues and delete their consumequeue directories.
        Nothing outside the store's consumequeue directory is ever removed."""
        doomed = set(topics)
        directories = [self._topic_dir(topic) for topic in doomed]
        for key in [k for k in self.consume_queues if k[0] in doomed]:
            queue = self.consume_queues.pop(key)
            queue.destroy()
            self.commitlog.queue_offsets.pop(key, None)
        for directory in directories:
            if directory.is_symlink():
                directory.unlink()
            elif directory.is_dir():
                shutil.rmtree(directory, ignore_errors=True)

    # -- retention ----------------------------------------------------------

    def run_retention(self, *, force: bool = False) -> list[Path]:
        """Delete expired commitlog files (and what points into them) when it
        is the configured hour or the disk is fuller than the limit; above the
        force ratio, unexpired ones too, each such deletion logged at WARNING
        with the queue offsets it took. Measures disk use (the full flag's
        hysteresis runs here too) and dispatches what a full disk held back."""
        now_ms = self.clock.now_ms()
        ratio = self.disk.measure()
        if not self.disk.full and (self._dispatch_behind is not None or self._index_behind):
            self._catch_up()
        policy = RetentionPolicy(
            reserved_ms=int(self.config.file_reserved_hours * 3_600_000),
            delete_hours=self.config.delete_hours,
            disk_max_used_ratio=self.config.disk_max_used_ratio,
            disk_force_clean_ratio=self.config.disk_force_clean_ratio,
            max_files_per_run=self.config.delete_files_per_run,
            clean_forcibly=self.config.clean_file_forcibly,
        )
        files = [
            CommitLogFile(m.start_offset, _mtime_ms(m.file.path)) for m in self.commitlog.log.files
        ]
        hour = datetime.fromtimestamp(now_ms / 1000).hour
        forced = select_deletions(files, now_ms, policy, hour=hour, disk_ratio=ratio, manual=force)
        expired = forced.index(True) if True in forced else len(forced)
        removed = self._delete_oldest(expired, forced=False, ratio=ratio)
        removed += self._delete_oldest(len(forced) - expired, forced=True, ratio=ratio)
        return removed

    def _delete_oldest(self, count: int, *, forced: bool, ratio: float) -> list[Path]:
        """Delete the `count` oldest commitlog files and what pointed into them."""
        if count <= 0:
            return []
        before = {key: queue.min_offset for key, queue in self.consume_queues.items()}
        removed: list[Path] = []
        for _ in range(count):
            path = self.commitlog.log.delete_first()
            if path is None:
                break
            removed.append(path)
        if not removed:
            return []
        files = len(removed)
        commitlog_min = self.commitlog.min_offset
        for queue in self.consume_queues.values():
            removed.extend(queue.delete_expired(commitlog_min))
        removed.extend(self.index.delete_files_before(commitlog_min))
        after = {key: queue.min_offset for key, queue in self.consume_queues.items()}
        losses = queue_losses(before, after)
        self.retention.record(files, files if forced else 0, losses if forced else [])
        shown = "; ".join(loss.describe() for loss in losses[:_LOSSES_LOGGED])
        if len(losses) > _LOSSES_LOGGED:
            shown += f"; and {len(losses) - _LOSSES_LOGGED} more queues"
        if forced:
            log.warning(
                "disk %.0f%% used (force clean ratio %.0f%%): deleted %d commitlog files that "
                "had not expired; %d messages are gone, read or not, from queue offsets "
                "(topic/queue [first, end)): %s",
                ratio * 100,
                self.config.disk_force_clean_ratio * 100,
                files,
                sum(loss.count for loss in losses),
                shown or "none",
            )
        else:
            log.info("retention deleted %d files (%d commitlog): %s", len(removed), files, shown)
        return removed

    # -- replication (tidemq.ha) ---------------------------------------------------

    def add_write_listener(self, listener: Callable[[], None]) -> None:
        """`listener()` after every commitlog append, on the writer's thread."""
        self.commitlog.write_listeners.append(listener)

    def replication_data(self, offset: int, max_bytes: int) -> bytes | None:
        """A master's bytes for a slave, as they lie in the file: see `replica.read_chunk`."""
        return read_chunk(self.commitlog.log, offset, max_bytes)

    def append_replicated(self, offset: int, data: bytes) -> int:
        """A slave appends its master's bytes at `offset` (its log's end, or a
        file boundary when its log is empty) and dispatches every record they
        complete, as recovery does: consumequeue and index entries, arrivals
        (long polls held on the slave wake), the queues' next offsets. A record
        cut by the end of a transfer is dispatched when its rest arrives.
        NoSpaceError when the disk is full (nothing written). The new end."""
        if not self._open or self._closed:
            raise StoreClosedError("the store is not open")
        end = write_chunk(self.commitlog.log, offset, data)
        self.disk.wrote()
        self._dispatch_replicated(end)
        return end

    def _dispatch_replicated(self, end: int) -> None:
        if self._dispatch_behind is not None:
            return  # a full disk held dispatching back: retention catches up
        commitlog = self.commitlog
        queue_offsets = commitlog.queue_offsets
        start = max(self._dispatched_offset, commitlog.min_offset)
        for offset, request in commitlog.records_between(start, end, verify_crc=False):
            if request is None:
                continue
            try:
                self._dispatch(request, notify=True)
            except NoSpaceError as exc:
                self._dispatch_behind = self._dispatched_offset = offset
                self.disk.no_space(exc)
                log.warning(
                    "no room for the consumequeue entry of the replicated record at %d: "
                    "it and later records are dispatched once there is room",
                    offset,
                )
                return
            queue_offsets[(request.topic, request.queue_id)] = request.queue_offset + 1
        self._dispatched_offset = max(start, commitlog.read_end)

    def truncate_replica(self, offset: int) -> ReplicaTruncation:
        """A slave found itself ahead of its master: drop its commitlog past
        `offset` (the master's end) and whatever points there (consumequeue
        and index entries), log what went at WARNING and return it."""
        commitlog = self.commitlog
        end = commitlog.max_offset
        spans: dict[str, tuple[int, int]] = {}
        records = 0
        for _, request in commitlog.records_between(offset, end):
            records += 1
            if request is not None:
                key = f"{request.topic}/{request.queue_id}"
                first = spans.get(key, (request.queue_offset, 0))[0]
                spans[key] = (first, request.queue_offset + 1)
        commitlog.log.set_end(offset)
        self.index.truncate_after(offset)
        for queue_key, queue in self.consume_queues.items():
            queue.recover(offset)
            commitlog.queue_offsets[queue_key] = queue.max_offset
        self._dispatched_offset = min(self._dispatched_offset, offset)
        if self._dispatch_behind is not None and self._dispatch_behind >= offset:
            self._dispatch_behind = None
        if self._index_behind is not None and self._index_behind >= offset:
            self._index_behind = None
        self.flush.flushed_offset = min(self.flush.flushed_offset, offset)
        # The checkpoint on disk may point past the new end; one that does not
        # goes down now (a recovery must never take zeros for written bytes).
        dispatched = self._dispatched_offset
        indexed = dispatched if self._index_behind is None else min(dispatched, self._index_behind)
        checkpoint = Checkpoint(offset, dispatched, indexed, self.clock.now_ms())
        write_checkpoint(self.config.checkpoint_path, checkpoint)
        truncation = ReplicaTruncation(offset, end, records, spans)
        log.warning("this slave was ahead of its master and dropped %s", truncation.describe())
        return truncation

    # -- runs encoded by the caller (transaction halves and ends) -------------------

    async def put_run(self, encode: RunEncoder) -> BatchAppendResult | None:
        """Records the caller encodes at the log's end (`encode` gets the
        position, see `RunPosition`), written and dispatched in one append
        with no Python object per record; then, in sync-flush mode, the wait
        for durability. None: the encoder declined, or the run does not fit
        the current file; the caller takes `put_messages` instead."""
        appended = self.append_run(encode)
        if appended is None:
            return None
        result, end = appended
        if not result.ok:
            return result
        status = await self._durable(end)
        if status is PutStatus.PUT_OK:
            return result
        return BatchAppendResult(status, result.count, remark=_DURABILITY_REMARKS[status])

    def append_run(self, encode: RunEncoder) -> tuple[BatchAppendResult, int] | None:
        """Write and dispatch a caller-encoded run without waiting for
        durability: (result, log offset one past its last byte), or None."""
        self.group_commit.commit_pending()  # call order: the writes already made go first
        refusal = self._write_refusal(None)
        if refusal is not None:
            return BatchAppendResult(refusal.status, remark=refusal.remark), 0
        commitlog = self.commitlog
        start, room = commitlog.next_append()
        position = RunPosition(
            start,
            room,
            self.clock.now_ms(),
            commitlog.store_host,
            commitlog.store_port,
            self.config.max_message_size,
            commitlog.queue_offsets,
            [(m.start_offset, m.file.view(0, m.wrote_position)) for m in commitlog.log.files],
        )
        run = encode(position)
        if run is None or not run.records or len(run.records) > room:
            return None
        next_offsets = commitlog.queue_offsets
        for part in run.queues:
            if part.queue_id < 0 or not is_safe_path_component(part.topic):
                return None
            if part.first_queue_offset != next_offsets.get((part.topic, part.queue_id), 0):
                raise ValueError(
                    f"a run for {part.topic}/{part.queue_id} starts at {part.first_queue_offset}, "
                    "not at the queue's next offset"
                )
        end = start + len(run.records)
        index = self.index if self.config.index_enabled and self._index_behind is None else None
        queues = [self._queue(part.topic, part.queue_id) for part in run.queues]
        try:
            commitlog.log.reserve(start, end)
            for part, queue in zip(run.queues, queues, strict=True):
                first = part.first_queue_offset
                queue.reserve(first, first + len(part.cq_entries) // ENTRY.size)
            if index is not None:
                index.reserve(max(run.index_bound, len(run.index_entries) // 12))
        except NoSpaceError as exc:
            return self._batch_refusal(self._no_space(exc)), 0
        count = 0
        for part in run.queues:
            entries = len(part.cq_entries) // ENTRY.size
            next_offsets[(part.topic, part.queue_id)] = part.first_queue_offset + entries
            count += entries
        try:
            commitlog.write(AppendPlan(start, end, [(start, run.records)], [], []))
        except NoSpaceError as exc:  # the room was reserved: never expected
            log.error("no space for a reserved commitlog write at %d: %s", start, exc)
            self._dispatch_behind = self._dispatched_offset = start
            return self._batch_refusal(self._no_space(exc)), 0
        refused = self._dispatch_runs(
            start, run.queues, queues, run.index_entries, index, position.store_timestamp
        )
        if refused is not None:
            return self._batch_refusal(refused), 0
        return BatchAppendResult(PutStatus.PUT_OK, count), end

    def _dispatch_runs(
        self,
        start: int,
        parts: Sequence[QueueEntries],
        queues: Sequence[ConsumeQueue],
        index_entries: bytes,
        index: IndexService | None,
        store_timestamp: int,
    ) -> BatchPutResult | None:
        """Dispatch records appended as one run from `start` (a batch body, or
        a run its caller encoded): each queue's consumequeue entries, the
        packed index entries and one arrival per queue and tags code; a
        refusal if a consumequeue had no room."""
        try:
            for part, queue in zip(parts, queues, strict=True):
                queue.put_run(part.first_queue_offset, part.cq_entries)
        except NoSpaceError as exc:
            self._dispatch_behind = self._dispatched_offset = start
            log.warning(
                "no room for the consumequeue entries of the records at %d: they are "
                "refused, and dispatched once there is room",
                start,
            )
            return self._no_space(exc)
        if index is not None:
            try:
                index.build_packed(index_entries, store_timestamp)
            except NoSpaceError as exc:
                self._index_behind = start
                self.disk.no_space(exc)
                log.warning(
                    "no room in the index for the records at %d: they and later records are "
                    "indexed once there is room",
                    start,
                )
        listeners = self._listeners
        for part in parts if listeners else ():
            for tags_code, queue_offset in part.tags.items():
                arrival = DispatchRequest(
                    part.topic, part.queue_id, start, 0, tags_code, store_timestamp, queue_offset
                )
                for listener in listeners:
                    listener(arrival)
        self._dispatched_offset = self.commitlog.max_offset
        self.disk.wrote()
        return None


_LOSSES_LOGGED = 100
"""Queues named in one retention log line; the rest are counted."""

SLAVE_REFUSAL = "service not available now: this broker is a slave, messages are put to its master"
"""Why a slave's store refuses a put (RocketMQ's remark names "messages are put to the slave")."""

_DURABILITY_REMARKS = {PutStatus.FLUSH_DISK_TIMEOUT: FLUSH_TIMEOUT_REMARK, **REPLICA_REMARKS}


def _flush_state(flush: FlushService) -> str:
    """What is wrong with flushing, for people: empty when nothing is."""
    if flush.failed is not None:
        return f"failed, writes refused until restart: {flush.failed}"
    trouble = flush.trouble
    if trouble is None:
        return ""
    return f"{trouble.part.value} flush failing ({trouble.retries} retries): {trouble.error}"


def _with_status(result: BatchPutResult, status: PutStatus, remark: str) -> BatchPutResult:
    results = tuple(
        PutResult(
            status, r.physical_offset, r.size, r.queue_offset, r.store_timestamp, r.msg_id, remark
        )
        for r in result.results
    )
    return BatchPutResult(status, results, remark)


def _record_properties(record: memoryview) -> Mapping[str, str] | None:
    """The record's properties for a filter, decoded lazily (filters read few)."""
    try:
        return PropertyView(peek_properties(record))
    except ProtocolError:
        return None


def _mtime_ms(path: Path) -> int:
    try:
        return int(path.stat().st_mtime * 1000)
    except FileNotFoundError:
        return 0
