"""Transactional messages on a broker: half messages, END_TRANSACTION, check-back.

SPEC §6; the behaviour of RocketMQ 4.9.7 (TransactionalMessageBridge,
TransactionalMessageServiceImpl, EndTransactionProcessor), with two
deliberate differences noted below.

Half messages (`prepare`): a transactional send is stored in
RMQ_SYS_TRANS_HALF_TOPIC queue 0 with its real topic and queue in
REAL_TOPIC / REAL_QID, PGROUP = the producer group, the transaction sysflag
bits cleared. No consumer subscribes to that topic, so it is out of sight.

END_TRANSACTION (`end`): the half is read at the request's commit-log offset
and must match it (producer group, queue offset, commit-log offset; Java's
codes and remarks). Commit stores the real message and the op record in one
append (so a crash leaves both or neither); rollback stores the op record.
An op record (RMQ_SYS_TRANS_OP_HALF_TOPIC, tag "d", body the half's queue
offset) says "resolved". Difference: a repeated END for a transaction already
resolved is ignored with a log line, where Java would store a second copy.

Check-back (transaction_check.py): every `transaction_check_interval_ms` the
half queue is scanned from its progress offset; see `CheckBack`.

Batches (tidemq extensions, for the exactly-once Spark sink): a
TIDEMQ_SEND_HALF_BATCH body becomes one run of half records (`HalfBatch`)
and TIDEMQ_END_TRANSACTIONS (`end_many`) one run of committed messages and
op records, each encoded in one call straight from the request body and the
stored halves (`tidemq.record.transaction_records`, compiled) and written
with one `put_run`: the same records, byte for byte, as the general path's
one MessageToStore per message, which takes over whenever the encoder
declines (anything unusual, a half resolved already, a full commitlog file).

What is resolved is kept by transaction key (UNIQ_KEY) in a `ResolvedLedger`,
since the check-back re-appends a half on every check. The ledger is rebuilt
at start from the op queue (op records carry the key in KEYS); both progress
offsets (half queue, op queue) are consumer offsets of group
CID_RMQ_SYS_TRANS, persisted with all consumer offsets. After a crash they may
be a little old: the scan then revisits some halves, which can send an extra
check, never store a second copy (the ledger knows what was resolved).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tidemq.broker.config import BrokerConfig
from tidemq.broker.requests import BrokerError, SendRequest
from tidemq.broker.stats import TRANSACTION
from tidemq.broker.transaction_check import CheckBack
from tidemq.broker.transaction_halves import (
    StoredHalf,
    committed_message,
    decode_half,
    op_record,
)
from tidemq.broker.transaction_policy import (
    CHECK_GROUP,
    HALF_TOPIC,
    OP_TOPIC,
    ResolvedLedger,
    end_mismatch,
    parse_op_body,
)
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.clock import Clock
from tidemq.common.message_id import UniqueIdGenerator
from tidemq.common.properties import edit_properties
from tidemq.common.tasks import TaskSet
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.headers import EndTransactionRequestHeader
from tidemq.record.codec import decode_record
from tidemq.record.transaction_records import EndRecords, encode_ends, encode_halves
from tidemq.store.api import (
    STORED_STATUSES,
    MessageStore,
    MessageToStore,
    PutStatus,
    QueueEntries,
    RecordRun,
    RunPosition,
)
from tidemq.store.config import SCHEDULE_TOPIC, TIMER_TOPIC
from tidemq.timer.parking import TIMER_PROPERTIES

if TYPE_CHECKING:
    from tidemq.broker.consumers import ProducerManager
    from tidemq.broker.offsets import ConsumerOffsetManager
    from tidemq.broker.stats import BrokerStats

__all__ = ["BrokerTransactions", "HalfBatch", "put_failure"]

log = logging.getLogger(__name__)

_STORED = STORED_STATUSES
"""FLUSH_DISK_TIMEOUT: written and dispatched, only not yet known durable."""
_REBUILD_PAGE = 256
_HALF_TOPIC = HALF_TOPIC.encode()
_OP_TOPIC = OP_TOPIC.encode()
_OWN_TAG_SLOTS = (SCHEDULE_TOPIC.encode(), TIMER_TOPIC.encode())
"""Topics whose consumequeue tag slot the store fills with a time, not the TAGS hash."""


def put_failure(status: PutStatus, remark: str) -> BrokerError:
    """The BrokerError for a put the store refused."""
    if status is PutStatus.SERVICE_NOT_AVAILABLE:
        code = ResponseCode.SERVICE_NOT_AVAILABLE
    elif status in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
        code = ResponseCode.MESSAGE_ILLEGAL
    else:
        code = ResponseCode.SYSTEM_ERROR
    return BrokerError(code, remark or f"storing failed: {status.value}")


class _EndedAhead:
    """Half-queue offsets ended by TIDEMQ_END_TRANSACTIONS that the check-back
    has not reached yet, as sorted disjoint [start, end) runs (a batch of
    halves is sent, and ended, as consecutive offsets). The scan would only
    find them resolved and skip them, reading each back: its progress moves
    past them at once instead (`advance`). At most _MAX_RUNS runs are kept,
    the nearest ones; the scan reads the rest as it always did."""

    _MAX_RUNS = 4096

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, offsets: Sequence[int]) -> None:
        ordered = sorted(offsets)
        count = len(ordered)
        i = 0
        while i < count:
            start = ordered[i]
            end = start + 1
            i += 1
            while i < count and ordered[i] <= end:
                end = ordered[i] + 1
                i += 1
            self._add_run(start, end)
        if len(self.starts) > self._MAX_RUNS:
            del self.starts[self._MAX_RUNS :], self.ends[self._MAX_RUNS :]

    def _add_run(self, start: int, end: int) -> None:
        starts, ends = self.starts, self.ends
        at = bisect.bisect_left(starts, start)
        if at and ends[at - 1] >= start:  # joins the run before
            at -= 1
            start = starts[at]
        last = at
        while last < len(starts) and starts[last] <= end:  # and every run it reaches
            end = max(end, ends[last])
            last += 1
        starts[at:last] = [start]
        ends[at:last] = [end]

    def advance(self, progress: int) -> int:
        """`progress` moved past the runs it reaches; runs behind it are dropped."""
        starts, ends = self.starts, self.ends
        done = 0
        while done < len(starts) and starts[done] <= progress:
            progress = max(progress, ends[done])
            done += 1
        del starts[:done], ends[:done]
        return progress


class HalfBatch:
    """A TIDEMQ_SEND_HALF_BATCH body as one run of half records: the encoder
    `MessageStore.put_run` calls (`prepare`'s rules on every entry, see
    `transaction_records.encode_half_records`), then what it stored: the
    halves' offset message ids and first half-queue offset."""

    def __init__(
        self, request: SendRequest, queue_id: int, cluster_name: str, stamp: bytes = b""
    ) -> None:
        self.request = request
        self.queue_id = queue_id
        self.cluster = f"{props.CLUSTER}\x01{cluster_name}\x02".encode()
        self.stamp = stamp
        """The send stamp (MSG_REGION, TRACE_ON) each half carries."""
        self.msg_ids = ""
        self.first_queue_offset = -1

    def __call__(self, position: RunPosition) -> RecordRun | None:
        request = self.request
        first = position.queue_offsets.get((HALF_TOPIC, 0), 0)
        encoded = encode_halves(
            request.body,
            _HALF_TOPIC,
            request.topic.encode(),
            self.queue_id,
            request.producer_group.encode(),
            first,
            position.physical_offset,
            position.room,
            position.max_message_size,
            request.sys_flag & ~sysflag.TRANSACTION_MASK,
            request.born_timestamp,
            request.born_host,
            request.born_port,
            position.store_timestamp,
            position.store_host,
            position.store_port,
            self.cluster,
            self.stamp,
        )
        if encoded is None:
            return None
        records, cq_entries, index_entries, msg_ids, _, tags, index_bound = encoded
        self.msg_ids, self.first_queue_offset = msg_ids, first
        queue = QueueEntries(HALF_TOPIC, 0, first, cq_entries, tags)
        return RecordRun(records, [queue], index_entries, index_bound)


class BrokerTransactions:
    """TransactionHooks over one store (see the module docstring)."""

    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        clock: Clock,
        *,
        stats: BrokerStats,
        offsets: ConsumerOffsetManager,
        producers: ProducerManager,
        store_host: bytes,
        store_port: int,
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.stats = stats
        """A committed message counts as a put of its real topic."""
        self.offsets = offsets
        """Holds the check-back's progress offsets (group CID_RMQ_SYS_TRANS)."""
        self.producers = producers
        """Whom the check-back asks (CHECK_TRANSACTION_STATE)."""
        self.store_host = store_host
        self.store_port = store_port
        """The address op records carry as their born and store host."""
        grace_ms = 2 * max(config.transaction_check_interval_ms, config.transaction_timeout_ms)
        self.ledger = ResolvedLedger(grace_ms)
        self.lock = asyncio.Lock()
        """Held while one half is resolved or checked, so the two never race."""
        self.progress = 0
        """Next half queue offset the check-back looks at."""
        self._ended_ahead = _EndedAhead()
        self.waiting: dict[str, int] = {}
        """Real topic -> half messages stored and not yet committed, rolled back
        or discarded (rocketmq_half_messages): counted from the half queue at
        start, then kept as halves come and go."""
        self.check_back = CheckBack(self)
        self._ids = UniqueIdGenerator(clock, store_host)
        self._tasks = TaskSet("broker-transactions")

    # -- half messages ------------------------------------------------------------

    def prepare(self, message: MessageToStore, producer_group: str) -> MessageToStore:
        parsed = props.decode_properties(message.properties)
        delay = parsed.get(props.DELAY, "").strip()
        if delay not in ("", "0") and not delay.startswith("-"):
            raise BrokerError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"a transactional message cannot have a delay level (DELAY={delay}); "
                "send it without one",
            )
        timer = next((key for key in TIMER_PROPERTIES if key in parsed), None)
        if timer is not None:
            raise BrokerError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"a transactional message cannot have a delivery time ({timer}); "
                "send it without one",
            )
        updates: dict[str, str | None] = {
            props.REAL_TOPIC: message.topic,
            props.REAL_QID: str(message.queue_id),
        }
        if not parsed.get(props.PGROUP):
            updates[props.PGROUP] = producer_group
        key = parsed.get(props.UNIQ_KEY)
        if not key:
            key = updates[props.UNIQ_KEY] = self._ids.next_id()
        # Java's parseHalfMessageInner: the committed copy carries it to consumers
        updates[props.TRANSACTION_ID] = key
        return MessageToStore(
            topic=HALF_TOPIC,
            queue_id=0,
            body=message.body,
            properties=edit_properties(message.properties, updates),
            flag=message.flag,
            sys_flag=sysflag.reset_transaction_value(
                message.sys_flag, sysflag.TRANSACTION_NOT_TYPE
            ),
            born_timestamp=message.born_timestamp,
            born_host=message.born_host,
            born_port=message.born_port,
            reconsume_times=message.reconsume_times,
        )

    def half_at(self, commit_log_offset: int) -> StoredHalf | None:
        """The half message stored at a commit-log offset, if that is one."""
        if commit_log_offset < 0:
            return None
        raw = self.store.read_by_physical_offset(commit_log_offset)
        if raw is None:
            return None
        half = decode_half(bytes(raw))
        if half is None or half.record.commit_log_offset != commit_log_offset:
            return None
        return half

    def locate(self, key: str) -> tuple[int, int] | None:
        """(commit-log offset, half-queue offset) of the newest stored copy of
        the half message whose transaction key (UNIQ_KEY) is `key`, or None.

        The gRPC door ends a transaction by this key, as RocketMQ's clients
        name it (the proxy keeps key -> offsets in memory instead). Found
        through the index; if the index has no such half (disabled, or behind
        a full disk), by scanning the half queue from the check-back's
        progress, where every unresolved transaction has a copy."""
        found = self.store.query_by_unique_key(HALF_TOPIC, key)
        newest: StoredHalf | None = None
        for raw in found.buffers:
            half = decode_half(raw)
            if half is None or half.key != key:
                continue
            if newest is None or half.record.commit_log_offset > newest.record.commit_log_offset:
                newest = half
        if newest is None:
            newest = self._scan_for(key)
        if newest is None:
            return None
        return newest.record.commit_log_offset, newest.record.queue_offset

    def _scan_for(self, key: str) -> StoredHalf | None:
        newest: StoredHalf | None = None
        offset = max(self.progress, self.store.min_offset(HALF_TOPIC, 0))
        end = self.store.max_offset(HALF_TOPIC, 0)
        while offset < end:
            page = self.store.get_messages(CHECK_GROUP, HALF_TOPIC, 0, offset, _REBUILD_PAGE)
            if page.next_begin_offset <= offset:
                break
            for buf in page.buffers:
                half = decode_half(buf)
                if half is not None and half.key == key:
                    newest = half
            offset = page.next_begin_offset
        return newest

    # -- END_TRANSACTION ------------------------------------------------------------------

    async def end(self, header: EndTransactionRequestHeader) -> None:
        kind = header.commit_or_rollback
        source = "check" if header.from_transaction_check else "producer"
        if kind == sysflag.TRANSACTION_NOT_TYPE:
            log.info(
                "END_TRANSACTION from %s of %s: state unknown for %s, the check-back will ask",
                source,
                header.producer_group,
                header.msg_id,
            )
            return
        if kind not in (sysflag.TRANSACTION_COMMIT_TYPE, sysflag.TRANSACTION_ROLLBACK_TYPE):
            log.warning(
                "END_TRANSACTION for %s with commitOrRollback=%d ignored", header.msg_id, kind
            )
            return
        async with self.lock:
            half = self._unresolved(
                header.producer_group,
                header.commit_log_offset,
                header.tran_state_table_offset,
                "commit" if kind == sysflag.TRANSACTION_COMMIT_TYPE else "rollback",
            )
            if half is None:
                return
            if kind == sysflag.TRANSACTION_COMMIT_TYPE:
                op_offset = await self._commit(half)
            else:
                op_offset = await self._store_op(half)
            self.resolved(half, op_offset)
            self._ended(half, kind == sysflag.TRANSACTION_COMMIT_TYPE)

    def _unresolved(
        self, producer_group: str, commit_log_offset: int, queue_offset: int, what: str
    ) -> StoredHalf | None:
        """The half an END names, or None when it is resolved already (logged);
        BrokerError (Java's code and remarks) when it is missing or differs.
        Call with the lock held."""
        half = self.half_at(commit_log_offset)
        if half is None:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        remark = end_mismatch(
            half_group=half.producer_group,
            half_queue_offset=half.record.queue_offset,
            half_commit_log_offset=half.record.commit_log_offset,
            producer_group=producer_group,
            tran_state_table_offset=queue_offset,
            commit_log_offset=commit_log_offset,
        )
        if remark is not None:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, remark)
        if half.key in self.ledger:
            log.info(
                "END_TRANSACTION (%s) for %s of %s ignored: the transaction is resolved",
                what,
                half.key,
                producer_group,
            )
            return None
        return half

    async def end_many(
        self, producer_group: str, items: Sequence[tuple[int, int, bool]]
    ) -> tuple[int, int]:
        """End many halves at once (TIDEMQ_END_TRANSACTIONS, a tidemq extension):
        `items` are (commit-log offset, half-queue offset, commit?). Every half is
        checked first, so one missing or mismatched half refuses the whole
        request and nothing is stored; then the committed messages and the op
        records of all of them go into the store in one append, in `items`
        order. Halves resolved already are skipped, as by `end`. The
        check-back's progress then moves past the named halves it reaches
        (`_EndedAhead`): it need not read them back to skip them.
        Returns (ended now, resolved before)."""
        async with self.lock:
            ended = await self._end_run(producer_group, items)
            if ended is None:
                ended = await self._end_each(producer_group, items)
            self._ended_ahead.add([queue_offset for _, queue_offset, _ in items])
            self.progress = self._ended_ahead.advance(self.progress)
            return ended

    async def _end_each(
        self, producer_group: str, items: Sequence[tuple[int, int, bool]]
    ) -> tuple[int, int]:
        """`end_many` through one MessageToStore per record (the general path)."""
        chosen: list[tuple[StoredHalf, bool]] = []
        seen: set[str] = set()
        for commit_log_offset, queue_offset, commit in items:
            half = self._unresolved(producer_group, commit_log_offset, queue_offset, "batch end")
            if half is not None and half.key not in seen:
                seen.add(half.key)
                chosen.append((half, commit))
        if not chosen:
            return 0, len(items)
        records: list[MessageToStore] = []
        op_positions: list[int] = []
        try:
            for half, commit in chosen:
                if commit:
                    records.append(committed_message(half))
                records.append(op_record(half, self.store_host, self.store_port))
                op_positions.append(len(records) - 1)
        except ValueError as exc:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        batch = await self.store.put_messages(records)
        if batch.status not in _STORED or len(batch.results) != len(records):
            raise put_failure(batch.status, batch.remark)
        for (half, commit), position in zip(chosen, op_positions, strict=True):
            if commit:
                message = records[position - 1]
                self.stats.record_put(message.topic, 1, len(message.body), TRANSACTION)
            self.resolved(half, batch.results[position].queue_offset)
            self._ended(half, commit)
        return len(chosen), len(items) - len(chosen)

    async def _end_run(
        self, producer_group: str, items: Sequence[tuple[int, int, bool]]
    ) -> tuple[int, int] | None:
        """`end_many` as one run encoded from the stored halves
        (`transaction_records.encode_end_records`); None when the encoder
        declines or a half is resolved already (or named twice): the general
        path then checks, skips and remarks as it always did. Call with the
        lock held."""
        encoded: list[EndRecords] = []
        ledger = self.ledger

        def encode(position: RunPosition) -> RecordRun | None:
            found = encode_ends(
                position.log_files,
                items,
                producer_group.encode(),
                _HALF_TOPIC,
                _OP_TOPIC,
                _OWN_TAG_SLOTS,
                position.physical_offset,
                position.room,
                position.max_message_size,
                position.store_timestamp,
                position.store_host,
                position.store_port,
                self.store_host,
                self.store_port,
                position.queue_offsets,
            )
            if found is None:
                return None
            run = EndRecords(*found)
            keys = run.keys
            if len(set(keys)) != len(keys) or any(key in ledger for key in keys):
                return None
            encoded.append(run)
            queues = [QueueEntries(*part[:5]) for part in run.queues]
            return RecordRun(run.records, queues, run.index_entries, run.index_bound)

        result = await self.store.put_run(encode)
        if result is None:
            return None
        if result.status not in _STORED:
            raise put_failure(result.status, result.remark)
        run = encoded[0]
        for topic, _, _, _, _, committed, body_bytes in run.queues:
            if committed:
                self.stats.record_put(topic, committed, body_bytes, TRANSACTION)
                self.stats.record_end(topic, True, count=committed)
                self._forget_waiting(topic, committed)
        for commit_log_offset, _, commit in items:
            if not commit:  # a rollback: its topic is only in its half
                half = self.half_at(commit_log_offset)
                if half is not None:
                    self._ended(half, False)
        horizon = self.store.max_offset(HALF_TOPIC, 0)
        now_ms = self.clock.now_ms()
        for position, key in enumerate(run.keys):
            ledger.add(key, run.op_first_offset + position, horizon, now_ms)
        return len(run.keys), 0

    async def _commit(self, half: StoredHalf) -> int:
        """Store the real message and the op record together; the op's queue offset."""
        try:
            message = committed_message(half)
        except ValueError as exc:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        op = op_record(half, self.store_host, self.store_port)
        batch = await self.store.put_messages([message, op])
        if batch.status not in _STORED or len(batch.results) != 2:
            raise put_failure(batch.status, batch.remark)
        self.stats.record_put(message.topic, 1, len(message.body), TRANSACTION)
        return batch.results[1].queue_offset

    async def _store_op(self, half: StoredHalf) -> int:
        op = op_record(half, self.store_host, self.store_port)
        result = await self.store.put_message(op)
        if result.status not in _STORED:
            raise put_failure(result.status, result.remark)
        return result.queue_offset

    # -- what waits (rocketmq_half_messages) -------------------------------------------

    def halves_stored(self, topic: str, count: int = 1) -> None:
        """`count` new half messages of `topic` were stored (by a producer's send)."""
        self.waiting[topic] = self.waiting.get(topic, 0) + count

    def _forget_waiting(self, topic: str, count: int = 1) -> None:
        left = self.waiting.get(topic, 0) - count
        if left > 0:
            self.waiting[topic] = left
        else:
            self.waiting.pop(topic, None)

    def _ended(self, half: StoredHalf, commit: bool) -> None:
        """`half` was committed or rolled back: it waits no more; counted."""
        topic = half.record.properties.get(props.REAL_TOPIC, "")
        self._forget_waiting(topic)
        latency_s = max(0, self.clock.now_ms() - half.record.born_timestamp) // 1000
        self.stats.record_end(topic, commit, latency_s if commit else None)

    def discarded(self, half: StoredHalf) -> None:
        """The check-back gave up on `half` (checked too often, unreadable queue)."""
        self._forget_waiting(half.record.properties.get(props.REAL_TOPIC, ""))

    def _count_waiting(self) -> None:
        """Count the unresolved halves from the check-back's progress on, each
        transaction once (the check-back re-appends a half at every check)."""
        seen: dict[str, str] = {}
        offset = self.progress
        end = self.store.max_offset(HALF_TOPIC, 0)
        while offset < end:
            page = self.store.get_messages(CHECK_GROUP, HALF_TOPIC, 0, offset, _REBUILD_PAGE)
            if not page.buffers:
                if page.next_begin_offset <= offset:
                    break
                offset = page.next_begin_offset
                continue
            for buf in page.buffers:
                half = decode_half(bytes(buf))
                if half is not None and half.key not in self.ledger:
                    seen[half.key] = half.record.properties.get(props.REAL_TOPIC, "")
            offset = page.next_begin_offset
        self.waiting = {}
        for topic in seen.values():
            self.halves_stored(topic)

    def resolved(self, half: StoredHalf, op_offset: int) -> None:
        """Remember that `half`'s transaction has its op record at `op_offset`."""
        self.ledger.add(
            half.key, op_offset, self.store.max_offset(HALF_TOPIC, 0), self.clock.now_ms()
        )

    # -- progress ---------------------------------------------------------------------

    def commit_progress(self) -> None:
        """Hand both progress offsets to the consumer offsets (persisted with them)."""
        self.ledger.prune(self.progress, self.clock.now_ms())
        op_offset = self.ledger.first_op_offset(self.store.max_offset(OP_TOPIC, 0))
        offsets = self.offsets
        offsets.commit(CHECK_GROUP, HALF_TOPIC, 0, self.progress)
        offsets.commit(CHECK_GROUP, OP_TOPIC, 0, op_offset)

    def _load_progress(self) -> None:
        offsets = self.offsets
        half_min = self.store.min_offset(HALF_TOPIC, 0)
        saved = offsets.query(CHECK_GROUP, HALF_TOPIC, 0)
        self.progress = max(saved, half_min)
        op_start = max(offsets.query(CHECK_GROUP, OP_TOPIC, 0), self.store.min_offset(OP_TOPIC, 0))
        self._rebuild_ledger(op_start)
        self.ledger.prune(self.progress, self.clock.now_ms())

    def _rebuild_ledger(self, op_start: int) -> None:
        """Read the op queue from `op_start`: which transactions are resolved.
        Their horizon is unknown, so the half queue's end now stands in (later
        than the real one, so nothing is forgotten early)."""
        horizon = self.store.max_offset(HALF_TOPIC, 0)
        offset = op_start
        end = self.store.max_offset(OP_TOPIC, 0)
        while offset < end:
            page = self.store.get_messages(CHECK_GROUP, OP_TOPIC, 0, offset, _REBUILD_PAGE)
            if not page.buffers:
                if page.next_begin_offset <= offset:
                    break
                offset = page.next_begin_offset
                continue
            for buf, queue_offset in zip(page.buffers, page.queue_offsets, strict=True):
                resolved = self._op_entry(bytes(buf))
                if resolved is not None:
                    self.ledger.add(resolved[0], queue_offset, horizon, resolved[1])
            offset = page.next_begin_offset
        log.info("transactions: %d resolved transactions known from the op queue", len(self.ledger))

    def _op_entry(self, raw: bytes) -> tuple[str, int] | None:
        """(the transaction an op record resolves, when): its KEYS, else the key
        read from the half its body names (op records written by others)."""
        try:
            record, _ = decode_record(raw)
        except ProtocolError:
            return None
        key = record.properties.get(props.KEYS)
        if key:
            return key, record.store_timestamp
        for half_offset in parse_op_body(record.body):
            page = self.store.get_messages(CHECK_GROUP, HALF_TOPIC, 0, half_offset, 1)
            if page.buffers and page.queue_offsets[0] == half_offset:
                half = decode_half(bytes(page.buffers[0]))
                if half is not None:
                    return half.key, record.store_timestamp
        return None

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        self._load_progress()
        if self.stats.detailed:  # only /metrics reads it
            self._count_waiting()
        self.commit_progress()
        self._tasks.spawn(self.check_back.run())

    async def stop(self) -> None:
        await self._tasks.cancel_all()
        async with self.lock:
            self.commit_progress()
