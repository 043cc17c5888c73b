"""BrokerPop: POP consumption over one store (the service behind `PopHooks`).

Non-FIFO groups (RocketMQ 5's design): a pop advances the group's offset at
once and records a checkpoint (CK) of the offsets it handed out; acks mark
them. A CK whose invisible time passed with offsets unacked is *revived*:
each unacked message is copied into the group's POP retry topic
`%RETRY%<group>_<topic>` with RECONSUME_TIME + 1 (or into `%DLQ%<group>`
once the group's retry_max_times is used up), and pops read that retry
topic first.

FIFO groups (seed 004): no CK; the consumer offset stays at the batch until
every message of it is acked (`FifoBook`), and the queue is blocked for
other pops meanwhile. When the invisible time passes unacked, the same
messages are delivered again, attempt + 1; past the group's max attempts
the batch goes to the DLQ and the queue moves on.

Durability: CKs and acks are journal records in the revive topic
`rmq_sys_REVIVE_LOG_<cluster>` (queue 0), written through the store, so
with sync flush an ack is on disk before its answer. The in-memory CK
table is rebuilt at start by replaying the journal from the revive
progress (kept as the offset of `CID_RMQ_SYS_REVIVE_GROUP`, persisted with
the other offsets), which only moves past CKs that are fully resolved.
FIFO state is persisted as `config/consumerOrderInfo.json` periodically
and, in sync-flush mode, with the offsets before an ack is answered.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tidemq.broker.pop.api import (
    ALL_QUEUES,
    MAX_INVISIBLE_MS,
    MAX_POP_BATCH,
    PoppedMessage,
    PopRequest,
    PopResult,
    ReceiptHandleError,
)
from tidemq.broker.pop.fifo_book import NOT_DONE, NOT_IN_BATCH, STALE, FifoBook, OrderInfo
from tidemq.broker.pop.receipts import (
    NORMAL_TOPIC,
    RETRY_TOPIC,
    ReceiptHandle,
    parse_receipt_handle,
)
from tidemq.broker.requests import BrokerError
from tidemq.broker.topics import PERM_READ_WRITE
from tidemq.common import properties as props
from tidemq.common.clock import Clock
from tidemq.common.names import retry_topic_of
from tidemq.common.tasks import TaskSet
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.errors import ProtocolError
from tidemq.record.codec import decode_record
from tidemq.store.api import DispatchRequest, MessageFilter, MessageStore, MessageToStore
from tidemq.store.config import FlushMode

if TYPE_CHECKING:
    from tidemq.broker.config import BrokerConfig
    from tidemq.broker.consume_checks import ConsumeChecks
    from tidemq.broker.groups import SubscriptionGroupManager
    from tidemq.broker.offsets import ConsumerOffsetManager
    from tidemq.broker.schedule import PutFunction
    from tidemq.broker.stats import BrokerStats
    from tidemq.broker.topics import TopicConfigManager

__all__ = ["REVIVE_GROUP", "BrokerPop", "pop_retry_topic", "revive_topic"]

log = logging.getLogger(__name__)

REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG = "ck"
ACK_TAG = "ack"
REVIVE_TICK_S = 0.1
MAX_HELD_POPS = 10_000
POLL_RECHECK_S = 0.5
"""Held pops look again this often (FIFO queues unblock when a batch's time passes)."""


def pop_retry_topic(group: str, topic: str) -> str:
    """Where revived messages of `group` on `topic` wait (Java KeyBuilder v1)."""
    return f"{retry_topic_of(group)}_{topic}"


def revive_topic(cluster: str) -> str:
    return f"rmq_sys_REVIVE_LOG_{cluster}"


@dataclass(slots=True)
class Checkpoint:
    """The offsets one non-FIFO pop handed out of one queue."""

    group: str
    topic: str
    """The queue's topic (the POP retry topic for revived copies)."""
    origin_topic: str
    queue_id: int
    start: int
    pop_ms: int
    invisible_ms: int
    offsets: list[int]
    acked: set[int] = field(default_factory=set)
    journal_offset: int = -1

    @property
    def key(self) -> tuple[str, str, int, int, int]:
        return (self.group, self.topic, self.queue_id, self.start, self.pop_ms)

    @property
    def due_ms(self) -> int:
        return self.pop_ms + self.invisible_ms

    def unacked(self) -> list[int]:
        return [o for o in self.offsets if o not in self.acked]

    def to_json(self) -> dict[str, Any]:
        return {
            "c": self.group,
            "t": self.topic,
            "ot": self.origin_topic,
            "q": self.queue_id,
            "so": self.start,
            "pt": self.pop_ms,
            "it": self.invisible_ms,
            "d": [o - self.start for o in self.offsets],
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any], journal_offset: int) -> Checkpoint:
        start = int(raw["so"])
        return cls(
            str(raw["c"]),
            str(raw["t"]),
            str(raw.get("ot", raw["t"])),
            int(raw["q"]),
            start,
            int(raw["pt"]),
            int(raw["it"]),
            [start + int(d) for d in raw["d"]],
            journal_offset=journal_offset,
        )


def _ack_json(ck: Checkpoint, offsets: list[int]) -> dict[str, Any]:
    return {
        "c": ck.group,
        "t": ck.topic,
        "q": ck.queue_id,
        "so": ck.start,
        "pt": ck.pop_ms,
        "ao": offsets,
    }


def _check_invisible(invisible_ms: int) -> None:
    if not 0 <= invisible_ms <= MAX_INVISIBLE_MS:
        raise BrokerError(
            ResponseCode.INVALID_PARAMETER,
            f"invisible time {invisible_ms} ms is out of range 0..{MAX_INVISIBLE_MS} ms",
        )


class BrokerPop:
    """POP for one broker: pop, ack, change invisible time, revive, FIFO blocking."""

    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        clock: Clock,
        *,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        checks: ConsumeChecks,
        put: PutFunction,
        stats: BrokerStats | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        """The groups' offsets, and the revive progress (group CID_RMQ_SYS_REVIVE_GROUP)."""
        self.checks = checks
        """The pull's checks (group, topic, filter), so a pop is refused as a pull is."""
        self._put_restored = put
        """Stores revived copies and dead letters (counted as puts)."""
        self.stats = stats
        """Where deliveries and dead letters are counted (None: not counted)."""
        self.broker_name = config.broker_name
        self.book = FifoBook(config.config_dir / "consumerOrderInfo.json", clock)
        self.revive_topic = revive_topic(config.cluster_name)
        self._pending: dict[tuple[str, str, int, int, int], Checkpoint] = {}
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._held = 0
        self._rotation = 0
        self._tasks = TaskSet("broker-pop")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_persist = 0.0
        store.add_arrival_listener(self._on_arrival)

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.book.load()
        replayed = self._replay_journal()
        log.info("pop: %d pending checkpoints after replaying %d journal records", *replayed)
        self._tasks.spawn(self._revive_loop())

    async def stop(self) -> None:
        await self._tasks.cancel_all()
        self._wake_all()
        self._advance_progress()
        await asyncio.to_thread(self.book.persist)

    def pending_count(self) -> int:
        return len(self._pending)

    # -- figures for /metrics --------------------------------------------------------

    def in_flight(self) -> dict[tuple[str, str, int, bool], list[int]]:
        """(group, original topic, queue id, from the retry topic) -> the offsets
        handed out and not acked yet, of the queue they were popped from."""
        found: dict[tuple[str, str, int, bool], list[int]] = {}
        for ck in self._pending.values():
            key = (ck.group, ck.origin_topic, ck.queue_id, ck.topic != ck.origin_topic)
            found.setdefault(key, []).extend(ck.unacked())
        return found

    def revive_lag(self, now_ms: int) -> tuple[int, int]:
        """(journal records not yet passed by the revive progress, ms since the
        oldest checkpoint that is due but not revived): RocketMQ's
        rocketmq_pop_revive_lag and rocketmq_pop_revive_latency."""
        progress = max(0, self.offsets.query(REVIVE_GROUP, self.revive_topic, 0))
        behind = max(0, self.store.max_offset(self.revive_topic, 0) - progress)
        due = [ck.due_ms for ck in self._pending.values() if ck.due_ms <= now_ms]
        return behind, (now_ms - min(due)) if due else 0

    def is_fifo(self, group: str) -> bool:
        config = self.groups.get(group)
        return config is not None and config.consume_message_orderly

    # -- pop ---------------------------------------------------------------------------

    async def pop(self, request: PopRequest) -> PopResult:
        group_config, topic_config = self.checks.readable(request.group, request.topic, "pop")
        if request.queue_id != ALL_QUEUES and not (
            0 <= request.queue_id < topic_config.read_queue_nums
        ):
            raise BrokerError(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{request.queue_id}] is illegal, topic:[{request.topic}] "
                f"readQueueNums:[{topic_config.read_queue_nums}]",
            )
        if request.invisible_ms <= 0:
            raise BrokerError(
                ResponseCode.INVALID_PARAMETER,
                f"invisible time {request.invisible_ms} ms must be positive",
            )
        _check_invisible(request.invisible_ms)
        message_filter = self.checks.message_filter(
            request.expression, request.expression_type or "TAG"
        )
        fifo = group_config.consume_message_orderly if request.order is None else request.order
        max_nums = max(1, min(request.max_nums, MAX_POP_BATCH))
        max_attempts = group_config.retry_max_times + 1
        deadline = self.clock.monotonic() + max(0, request.poll_ms) / 1000
        while True:
            result = await self._pop_once(
                request, topic_config.read_queue_nums, message_filter, fifo, max_nums, max_attempts
            )
            remaining = deadline - self.clock.monotonic()
            if result.messages or remaining <= 0:
                return result
            if self._held >= MAX_HELD_POPS:
                result.polling_full = True
                return result
            await self._wait_arrival(
                (request.topic, pop_retry_topic(request.group, request.topic)),
                min(remaining, POLL_RECHECK_S),
            )

    def _sources(
        self, request: PopRequest, queue_nums: int, fifo: bool
    ) -> Iterator[tuple[str, int]]:
        """(queue topic, queue id) in pop order: the retry topic, then the
        topic's queues from a rotating start so no queue starves."""
        if not fifo:
            yield pop_retry_topic(request.group, request.topic), 0
        if request.queue_id != ALL_QUEUES:
            yield request.topic, request.queue_id
            return
        self._rotation += 1
        for i in range(queue_nums):
            yield request.topic, (self._rotation + i) % queue_nums

    async def _pop_once(
        self,
        request: PopRequest,
        queue_nums: int,
        message_filter: MessageFilter | None,
        fifo: bool,
        max_nums: int,
        max_attempts: int,
    ) -> PopResult:
        now = self.clock.now_ms()
        result = PopResult(pop_ms=now, invisible_ms=request.invisible_ms)
        journal: list[Checkpoint] = []
        for queue_topic, queue_id in self._sources(request, queue_nums, fifo):
            need = max_nums - len(result.messages)
            if need <= 0:
                break
            is_retry = queue_topic != request.topic
            if fifo and self.book.check_block(queue_topic, request.group, queue_id):
                continue
            offset = self._start_offset(request, queue_topic, queue_id, is_retry)
            get = self.store.get_messages(
                request.group, queue_topic, queue_id, offset, need, message_filter
            )
            result.rest_num += max(0, get.max_offset - get.next_begin_offset)
            if not get.buffers:
                if get.next_begin_offset > offset and not self.book.get(
                    queue_topic, request.group, queue_id
                ):
                    self.offsets.commit(request.group, queue_topic, queue_id, get.next_begin_offset)
                continue
            records = [bytes(b) for b in get.buffers]
            offsets = list(get.queue_offsets)
            topic_type = RETRY_TOPIC if is_retry else NORMAL_TOPIC
            if fifo:
                count = self.book.update(
                    queue_topic, request.group, queue_id, offsets, now, request.invisible_ms
                )
                if count + 1 > max_attempts:
                    await self._dead_letter_batch(
                        request.group, queue_topic, queue_id, records, request.topic
                    )
                    self.book.clear(queue_topic, request.group, queue_id)
                    self.offsets.commit(request.group, queue_topic, queue_id, get.next_begin_offset)
                    continue
                attempts = [count + 1] * len(records)
            else:
                ck = Checkpoint(
                    request.group,
                    queue_topic,
                    request.topic,
                    queue_id,
                    offsets[0],
                    now,
                    request.invisible_ms,
                    offsets,
                )
                self._pending[ck.key] = ck
                journal.append(ck)
                self.offsets.commit(request.group, queue_topic, queue_id, get.next_begin_offset)
                attempts = [_reconsume_times(r) + 1 for r in records]
            if self.stats is not None:
                self.stats.record_pop(
                    request.topic, request.group, len(records), sum(map(len, records)), is_retry
                )
            for record, queue_offset, attempt in zip(records, offsets, attempts, strict=True):
                handle = ReceiptHandle(
                    offsets[0],
                    now,
                    request.invisible_ms,
                    0,
                    topic_type,
                    self.broker_name,
                    queue_id,
                    queue_offset,
                )
                result.messages.append(
                    PoppedMessage(
                        record, request.topic, queue_id, queue_offset, handle.text(), attempt
                    )
                )
        for ck in journal:
            await self._journal_checkpoint(ck)
        return result

    def _start_offset(
        self, request: PopRequest, queue_topic: str, queue_id: int, is_retry: bool
    ) -> int:
        offset = self.offsets.query(request.group, queue_topic, queue_id)
        if offset >= 0:
            return offset
        if request.init_mode_max and not is_retry:
            offset = self.store.max_offset(queue_topic, queue_id)
        else:
            offset = self.store.min_offset(queue_topic, queue_id)
        self.offsets.commit(request.group, queue_topic, queue_id, offset)
        return offset

    # -- ack, change invisible, DLQ ----------------------------------------------------

    def _queue_topic(self, group: str, topic: str, handle: ReceiptHandle) -> str:
        if handle.broker_name != self.broker_name:
            raise ReceiptHandleError(
                f"receipt handle belongs to broker {handle.broker_name}, not {self.broker_name}"
            )
        return pop_retry_topic(group, topic) if handle.from_retry else topic

    def _fifo_handle(self, group: str, handle: ReceiptHandle) -> bool:
        return not handle.from_retry and self.is_fifo(group)

    def _checkpoint_of(self, group: str, topic: str, handle: ReceiptHandle) -> Checkpoint:
        queue_topic = self._queue_topic(group, topic, handle)
        key = (group, queue_topic, handle.queue_id, handle.start_offset, handle.pop_ms)
        ck = self._pending.get(key)
        if ck is None or handle.queue_offset not in ck.offsets or handle.queue_offset in ck.acked:
            raise ReceiptHandleError(
                "receipt handle is unknown or its message was acked already"
                f" (group {group}, topic {topic})"
            )
        if self.clock.now_ms() >= ck.due_ms:
            raise ReceiptHandleError("receipt handle is expired: the invisible time has passed")
        return ck

    def _fifo_batch(self, group: str, topic: str, handle: ReceiptHandle) -> tuple[str, OrderInfo]:
        """(queue topic, batch) of the FIFO delivery `handle` names, for a change
        of invisible time or the DLQ; ReceiptHandleError when its message is
        acked already or the batch was delivered again since. No invisible-time
        check: the broker has none (the gRPC door checks, as the proxy does)."""
        queue_topic = self._queue_topic(group, topic, handle)
        info = self.book.get(queue_topic, group, handle.queue_id)
        if (
            info is None
            or handle.queue_offset not in info.absolute()
            or self.book.is_acked(queue_topic, group, handle.queue_id, handle.queue_offset)
        ):
            raise ReceiptHandleError(
                "receipt handle is unknown or its message was acked already"
                f" (group {group}, topic {topic})"
            )
        if handle.pop_ms != info.pop_ms:
            raise ReceiptHandleError(
                "receipt handle is stale: its message was delivered again since"
                f" (group {group}, topic {topic})"
            )
        return queue_topic, info

    async def ack(self, group: str, topic: str, receipt_handle: str) -> None:
        handle = parse_receipt_handle(receipt_handle)
        if self._fifo_handle(group, handle):
            await self._fifo_ack(group, topic, handle)
            return
        ck = self._checkpoint_of(group, topic, handle)
        self._mark_acked(ck, [handle.queue_offset])
        await self._journal_ack(ck, [handle.queue_offset])

    async def batch_ack(self, group: str, topic: str, receipt_handles: list[str]) -> list[bool]:
        results = []
        for text in receipt_handles:
            try:
                await self.ack(group, topic, text)
            except BrokerError:
                results.append(False)
            else:
                results.append(True)
        return results

    async def change_invisible(
        self, group: str, topic: str, receipt_handle: str, invisible_ms: int
    ) -> str:
        _check_invisible(invisible_ms)
        handle = parse_receipt_handle(receipt_handle)
        now = self.clock.now_ms()
        if self._fifo_handle(group, handle):
            queue_topic, info = self._fifo_batch(group, topic, handle)
            self.book.change_invisible(
                queue_topic, group, handle.queue_id, handle.queue_offset, now, invisible_ms
            )
            renewed = ReceiptHandle(
                info.absolute()[0],
                info.pop_ms,
                info.invisible_ms,
                0,
                handle.topic_type,
                self.broker_name,
                handle.queue_id,
                handle.queue_offset,
            )
            if invisible_ms == 0:
                self._wake((topic,))
            return renewed.text()
        old = self._checkpoint_of(group, topic, handle)
        pop_ms = now
        # a change in the pop's own millisecond would share its checkpoint's key
        while (group, old.topic, old.queue_id, handle.queue_offset, pop_ms) in self._pending:
            pop_ms += 1
        fresh = Checkpoint(
            group,
            old.topic,
            old.origin_topic,
            old.queue_id,
            handle.queue_offset,
            pop_ms,
            invisible_ms,
            [handle.queue_offset],
        )
        self._pending[fresh.key] = fresh
        self._mark_acked(old, [handle.queue_offset])
        await self._journal_checkpoint(fresh)
        await self._journal_ack(old, [handle.queue_offset])
        return ReceiptHandle(
            handle.queue_offset,
            pop_ms,
            invisible_ms,
            0,
            handle.topic_type,
            self.broker_name,
            handle.queue_id,
            handle.queue_offset,
        ).text()

    async def forward_to_dlq(self, group: str, topic: str, receipt_handle: str) -> None:
        handle = parse_receipt_handle(receipt_handle)
        if self._fifo_handle(group, handle):
            queue_topic, _ = self._fifo_batch(group, topic, handle)
        else:
            queue_topic = self._checkpoint_of(group, topic, handle).topic
        record = self._read(group, queue_topic, handle.queue_id, handle.queue_offset)
        if record is None:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, "the message is gone from the store")
        await self._dead_letter_batch(group, queue_topic, handle.queue_id, [record], topic)
        await self.ack(group, topic, receipt_handle)

    def _mark_acked(self, ck: Checkpoint, offsets: list[int]) -> None:
        ck.acked.update(offsets)
        if not ck.unacked():
            self._pending.pop(ck.key, None)

    async def _fifo_ack(self, group: str, topic: str, handle: ReceiptHandle) -> None:
        """RocketMQ's FIFO ack (AckMessageProcessor.ackOrderly,
        AckMessageProcessor.java:397-433): no invisible-time check, so a late
        ack still commits while nobody received the batch again. An ack for a
        message committed already, or for an earlier delivery of a batch
        delivered again since (its pop time differs), changes nothing and is
        answered as done; an offset the batch does not hold is refused."""
        queue_topic = self._queue_topic(group, topic, handle)
        queue_id, offset = handle.queue_id, handle.queue_offset
        if offset < self.offsets.query(group, queue_topic, queue_id):
            return
        next_offset = self.book.commit_and_next(queue_topic, group, queue_id, offset, handle.pop_ms)
        if next_offset == NOT_IN_BATCH:
            raise ReceiptHandleError(
                f"offset is illegal, key:{queue_topic}@{group}@{queue_id}, commit:{offset}"
            )
        if next_offset == STALE:
            log.info(
                "pop: a FIFO ack of %s/%d@%d for an earlier delivery changed nothing",
                queue_topic,
                queue_id,
                offset,
            )
            return
        if next_offset != NOT_DONE:
            self.offsets.commit(group, queue_topic, queue_id, next_offset)
            self.book.clear(queue_topic, group, queue_id)
            self._wake((queue_topic,))
        if self.config.flush_mode is FlushMode.SYNC:
            await asyncio.to_thread(self._persist_fifo_state)

    def _persist_fifo_state(self) -> None:
        self.book.persist()
        self.offsets.persist()

    # -- records -------------------------------------------------------------------------

    def _read(self, group: str, topic: str, queue_id: int, offset: int) -> bytes | None:
        get = self.store.get_messages(group, topic, queue_id, offset, 1)
        if not get.buffers or get.queue_offsets[0] != offset:
            return None
        return bytes(get.buffers[0])

    async def _dead_letter_batch(
        self,
        group: str,
        queue_topic: str,
        queue_id: int,
        records: list[bytes],
        origin_topic: str,
    ) -> None:
        """Copy `records` (read from `queue_topic`, messages of `origin_topic`) into the DLQ."""
        dlq = self.topics.ensure_dlq_topic(group)
        if dlq is None:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, f"no DLQ topic for group {group}")
        for raw in records:
            copy = _copy_of(raw, dlq.topic_name, queue_topic, reconsume_delta=0)
            if copy is None:
                continue
            await self._put(copy)
            if self.stats is not None:
                self.stats.record_dead_letter(group, origin_topic)
            log.info("pop: a message of %s/%d moved to %s", queue_topic, queue_id, dlq.topic_name)

    async def _put(self, message: MessageToStore) -> None:
        result = await self._put_restored(message)
        if not result.stored:
            raise BrokerError(
                ResponseCode.SYSTEM_ERROR,
                f"storing into {message.topic} failed: {result.status.name} {result.remark}",
            )

    # -- journal ---------------------------------------------------------------------

    async def _journal(self, tag: str, document: dict[str, Any]) -> int:
        message = MessageToStore(
            topic=self.revive_topic,
            queue_id=0,
            body=json.dumps(document, separators=(",", ":")).encode(),
            properties=props.encode_properties({props.TAGS: tag}),
        )
        result = await self.store.put_message(message)
        if not result.stored:
            raise BrokerError(
                ResponseCode.SYSTEM_ERROR,
                f"the pop journal refused a record: {result.status.name} {result.remark}",
            )
        return result.queue_offset

    async def _journal_checkpoint(self, ck: Checkpoint) -> None:
        ck.journal_offset = await self._journal(CK_TAG, ck.to_json())

    async def _journal_ack(self, ck: Checkpoint, offsets: list[int]) -> None:
        await self._journal(ACK_TAG, _ack_json(ck, offsets))

    def _replay_journal(self) -> tuple[int, int]:
        """Rebuild the pending CKs from the revive progress on; (pending, records)."""
        progress = max(0, self.offsets.query(REVIVE_GROUP, self.revive_topic, 0))
        offset = max(progress, self.store.min_offset(self.revive_topic, 0))
        records = 0
        popped: dict[tuple[str, str, int], int] = {}
        while True:
            get = self.store.get_messages(REVIVE_GROUP, self.revive_topic, 0, offset, 256)
            if not get.buffers:
                break
            for raw, queue_offset in zip(get.buffers, get.queue_offsets, strict=True):
                records += 1
                ck = self._apply_journal_record(bytes(raw), queue_offset)
                if ck is not None:
                    key = (ck.group, ck.topic, ck.queue_id)
                    popped[key] = max(popped.get(key, 0), max(ck.offsets) + 1)
            offset = get.next_begin_offset
        # a pop commits its offset in memory only; its CK says how far it went
        for (group, topic, queue_id), next_offset in popped.items():
            if self.offsets.query(group, topic, queue_id) < next_offset:
                self.offsets.commit(group, topic, queue_id, next_offset)
        return len(self._pending), records

    def _apply_journal_record(self, raw: bytes, queue_offset: int) -> Checkpoint | None:
        """Apply one journal record; the CK when it is one."""
        try:
            record, _ = decode_record(raw)
            document = json.loads(record.body)
            tag = record.properties.get(props.TAGS)
            if tag == CK_TAG:
                ck = Checkpoint.from_json(document, queue_offset)
                self._pending[ck.key] = ck
                return ck
            elif tag == ACK_TAG:
                key = (
                    str(document["c"]),
                    str(document["t"]),
                    int(document["q"]),
                    int(document["so"]),
                    int(document["pt"]),
                )
                acked = self._pending.get(key)
                if acked is not None:
                    self._mark_acked(acked, [int(o) for o in document["ao"]])
        except (ProtocolError, ValueError, KeyError, TypeError) as exc:
            log.error("pop journal record at %d is unreadable: %s", queue_offset, exc)
        return None

    def _advance_progress(self) -> None:
        """Move the revive progress to the oldest CK still pending."""
        if self._pending:
            progress = min(ck.journal_offset for ck in self._pending.values())
            if progress < 0:
                return
        else:
            progress = self.store.max_offset(self.revive_topic, 0)
        self.offsets.commit(REVIVE_GROUP, self.revive_topic, 0, progress)

    # -- revive ----------------------------------------------------------------------

    async def _revive_loop(self) -> None:
        while True:
            await asyncio.sleep(REVIVE_TICK_S)
            try:
                await self.revive_due()
                if self.clock.monotonic() - self._last_persist >= self.config.persist_interval_s:
                    self._last_persist = self.clock.monotonic()
                    if self.book.dirty:
                        await asyncio.to_thread(self.book.persist)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("pop revive failed")

    async def revive_due(self) -> int:
        """Revive every CK whose time has passed; how many messages were revived."""
        now = self.clock.now_ms()
        due = [ck for ck in self._pending.values() if ck.due_ms <= now and ck.journal_offset >= 0]
        revived = 0
        for ck in sorted(due, key=lambda c: c.due_ms):
            group_config = self.groups.get(ck.group)
            max_retry = group_config.retry_max_times if group_config is not None else 16
            offsets = ck.unacked()
            for offset in offsets:
                raw = self._read(ck.group, ck.topic, ck.queue_id, offset)
                if raw is None:
                    log.warning("pop: %s/%d@%d is gone; not revived", ck.topic, ck.queue_id, offset)
                    continue
                if _reconsume_times(raw) >= max_retry:
                    await self._dead_letter_batch(
                        ck.group, ck.topic, ck.queue_id, [raw], ck.origin_topic
                    )
                    continue
                retry_topic = pop_retry_topic(ck.group, ck.origin_topic)
                self.topics.create_in_send_back(retry_topic, 1, PERM_READ_WRITE)
                copy = _copy_of(raw, retry_topic, ck.origin_topic, reconsume_delta=1)
                if copy is not None:
                    await self._put(copy)
                    revived += 1
            self._mark_acked(ck, offsets)
            await self._journal_ack(ck, offsets)
        if due:
            self._advance_progress()
        return revived

    # -- long polling ------------------------------------------------------------------

    def _on_arrival(self, request: DispatchRequest) -> None:
        if request.topic not in self._waiters:
            return
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and running is loop:
            self._wake((request.topic,))
        elif loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake, (request.topic,))

    def _wake(self, topics: tuple[str, ...]) -> None:
        for topic in topics:
            for waiter in self._waiters.pop(topic, set()):
                if not waiter.done():
                    waiter.set_result(None)

    def _wake_all(self) -> None:
        self._wake(tuple(self._waiters))

    async def _wait_arrival(self, topics: tuple[str, ...], timeout_s: float) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for topic in topics:
            self._waiters.setdefault(topic, set()).add(waiter)
        self._held += 1
        try:
            async with asyncio.timeout(timeout_s):
                await waiter
        except TimeoutError:
            pass
        finally:
            self._held -= 1
            for topic in topics:
                waiters = self._waiters.get(topic)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del self._waiters[topic]


def _reconsume_times(raw: bytes) -> int:
    try:
        return decode_record(raw)[0].reconsume_times
    except ProtocolError:
        return 0


def _copy_of(
    raw: bytes, topic: str, origin_topic: str, *, reconsume_delta: int
) -> MessageToStore | None:
    """The record stored again in `topic` (a POP retry topic or a DLQ)."""
    try:
        record, _ = decode_record(raw)
    except ProtocolError as exc:
        log.error("pop: an unreadable record was not copied to %s: %s", topic, exc)
        return None
    properties = dict(record.properties)
    properties.setdefault(props.RETRY_TOPIC, origin_topic)
    if not properties.get(props.ORIGIN_MESSAGE_ID, "").strip():
        properties[props.ORIGIN_MESSAGE_ID] = record.msg_id
    properties.pop(props.DELAY, None)
    reconsume = record.reconsume_times + reconsume_delta
    properties[props.RECONSUME_TIME] = str(reconsume)
    from tidemq.broker.retry import split_address

    born_host, born_port = split_address(record.born_host)
    return MessageToStore(
        topic=topic,
        queue_id=0,
        body=record.body,
        properties=props.encode_properties(properties),
        flag=record.flag,
        sys_flag=record.sys_flag,
        born_timestamp=record.born_timestamp,
        born_host=born_host,
        born_port=born_port,
        reconsume_times=reconsume,
    )
