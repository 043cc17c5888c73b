"""The in-memory store: the reference model the file store must match.

Deliberately naive: records in a dict, queues as lists, keys in a dict of
lists. Same record bytes (so pull bodies are identical in shape), same
queue-offset and read-status rules; nothing is durable and nothing expires.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tidemq.common import properties as props
from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.common.message_id import offset_message_id
from tidemq.common.properties import decode_properties
from tidemq.record.codec import encode_record
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
    RunEncoder,
)
from tidemq.store.commitlog import is_consumable
from tidemq.store.config import StoreConfig
from tidemq.store.filters import make_tags_code_rule
from tidemq.store.reads import classify_offset
from tidemq.store.validation import validate_batch


@dataclass
class _Stored:
    record: bytes
    topic: str
    properties: dict[str, str]
    store_timestamp: int


@dataclass
class _Queue:
    entries: list[tuple[int, int, int]] = field(default_factory=list)  # physical, size, tags


class MemoryMessageStore:
    def __init__(self, config: StoreConfig | None = None, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config or StoreConfig(root=Path("/nonexistent-memory-store"))
        self.clock = clock
        self._tags_code_rule = make_tags_code_rule(self.config.delay_levels)
        self._records: dict[int, _Stored] = {}
        self._next_physical = 0
        self._queues: dict[tuple[str, int], _Queue] = {}
        self._keys: dict[tuple[str, str], list[int]] = {}
        self._listeners: list[ArrivalListener] = []
        self._closed = False

    def open(self) -> None:
        """Nothing to recover; present so both stores share a lifecycle."""

    def close(self) -> None:
        self._closed = True

    # -- writing ------------------------------------------------------------

    async def put_message(self, message: MessageToStore) -> PutResult:
        batch = self.append([message])
        return batch.results[0] if batch.results else PutResult(batch.status, remark=batch.remark)

    async def put_messages(self, messages: Sequence[MessageToStore]) -> BatchPutResult:
        return self.append(messages)

    async def put_batch(self, batch: BatchToStore) -> BatchAppendResult | None:
        """The memory store has no batch fast path: `put_messages` stores it."""
        return None

    async def put_run(self, encode: RunEncoder) -> BatchAppendResult | None:
        """No runs encoded outside the store either: `put_messages` stores them."""
        return None

    def put_messages_blocking(self, messages: Sequence[MessageToStore]) -> BatchPutResult:
        return self.append(messages)

    def append(self, messages: Sequence[MessageToStore]) -> BatchPutResult:
        if self._closed:
            return BatchPutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="the store is closed")
        problem = validate_batch(messages, self.config)
        if problem is not None:
            return BatchPutResult(problem[0], remark=problem[1])
        now = self.clock.now_ms()
        results = [self._append_one(message, now) for message in messages]
        return BatchPutResult(PutStatus.PUT_OK, tuple(results))

    def _append_one(self, message: MessageToStore, now: int) -> PutResult:
        physical = self._next_physical
        parsed = decode_properties(message.properties)
        consumable = is_consumable(message.sys_flag)
        queue = self._queues.setdefault((message.topic, message.queue_id), _Queue())
        queue_offset = len(queue.entries) if consumable else 0
        record = encode_record(
            topic=message.topic.encode(),
            queue_id=message.queue_id,
            flag=message.flag,
            queue_offset=queue_offset,
            physical_offset=physical,
            sys_flag=message.sys_flag,
            born_timestamp=message.born_timestamp,
            born_host=message.born_host,
            born_port=message.born_port,
            store_timestamp=now,
            store_host=self.config.store_host,
            store_port=self.config.store_port,
            reconsume_times=message.reconsume_times,
            prepared_transaction_offset=message.prepared_transaction_offset,
            body=message.body,
            properties=message.properties.encode(),
        )
        self._records[physical] = _Stored(record, message.topic, parsed, now)
        self._next_physical += len(record)
        if consumable:
            tags = message.tags_code
            if tags is None:
                tags = self._tags_code_rule(message.topic, parsed, now)
            queue.entries.append((physical, len(record), tags))
            keys = parsed.get(props.KEYS, "").split()
            unique = parsed.get(props.UNIQ_KEY)
            for key in [*keys, *([unique] if unique else [])]:
                self._keys.setdefault((message.topic, key), []).append(physical)
            request = DispatchRequest(
                message.topic,
                message.queue_id,
                physical,
                len(record),
                tags,
                now,
                queue_offset,
                parsed.get(props.KEYS, ""),
                unique,
                message.sys_flag,
                parsed,
            )
            for listener in self._listeners:
                listener(request)
        return PutResult(
            PutStatus.PUT_OK,
            physical_offset=physical,
            size=len(record),
            queue_offset=queue_offset,
            store_timestamp=now,
            msg_id=offset_message_id(self.config.store_host, self.config.store_port, physical),
        )

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
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        max_offset = len(queue.entries)
        finished = classify_offset(offset, 0, max_offset)
        if finished is not None:
            return finished
        budget = max_bytes if max_bytes is not None else self.config.max_transfer_bytes
        scan_limit = max(self.config.max_scan_entries, max_nums)
        result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, 0, max_offset)
        total = 0
        position = offset
        while position < max_offset and position - offset < scan_limit:
            if len(result.buffers) >= max_nums:
                break
            physical, size, tags = queue.entries[position]
            stored = self._records[physical]
            if message_filter is not None and not (
                message_filter.matches_tags_code(tags)
                and message_filter.matches_properties(stored.properties)
            ):
                position += 1
                continue
            if result.buffers and total + size > budget:
                break
            result.buffers.append(stored.record)
            result.queue_offsets.append(position)
            result.physical_offsets.append(physical)
            total += size
            position += 1
        result.next_begin_offset = position
        if result.buffers:
            result.status = GetStatus.FOUND
        return result

    def read_by_physical_offset(self, physical_offset: int) -> bytes | None:
        stored = self._records.get(physical_offset)
        return None if stored is None else stored.record

    def commitlog_max_offset(self) -> int:
        return self._next_physical

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
        below = below_offset if below_offset is not None else 2**63
        hits = [
            p
            for p in reversed(self._keys.get((topic, key), []))
            if begin_ms <= self._records[p].store_timestamp <= end and p < below
        ]
        hits = list(dict.fromkeys(hits))[:max_num]
        return QueryResult([self._records[p].record for p in hits], hits)

    def query_by_unique_key(self, topic: str, unique_key: str) -> QueryResult:
        hits = [
            p
            for p in reversed(self._keys.get((topic, unique_key), []))
            if self._records[p].properties.get(props.UNIQ_KEY) == unique_key
        ]
        return QueryResult([self._records[p].record for p in hits], hits)

    def query_by_time(self, topic: str, begin_ms: int, end_ms: int, max_num: int) -> QueryResult:
        buffers: list[memoryview | bytes] = []
        found: list[int] = []
        for (queue_topic, _), queue in sorted(self._queues.items()):
            if queue_topic != topic:
                continue
            for physical, _, _ in queue.entries:
                stored = self._records[physical]
                if begin_ms <= stored.store_timestamp <= end_ms:
                    buffers.append(stored.record)
                    found.append(physical)
                    if len(found) >= max_num:
                        return QueryResult(buffers, found)
        return QueryResult(buffers, found)

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            return 0
        for position, (physical, _, _) in enumerate(queue.entries):
            if self._records[physical].store_timestamp >= timestamp_ms:
                return position
        return len(queue.entries)

    def min_offset(self, topic: str, queue_id: int) -> int:
        return 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get((topic, queue_id))
        return 0 if queue is None else len(queue.entries)

    def store_time(self, topic: str, queue_id: int, queue_offset: int) -> int:
        queue = self._queues.get((topic, queue_id))
        if queue is None or not 0 <= queue_offset < len(queue.entries):
            return -1
        return self._records[queue.entries[queue_offset][0]].store_timestamp

    def physical_offset(self, topic: str, queue_id: int, queue_offset: int) -> int:
        queue = self._queues.get((topic, queue_id))
        if queue is None or not 0 <= queue_offset < len(queue.entries):
            return -1
        return queue.entries[queue_offset][0]

    def earliest_message_time(self) -> int:
        if not self._records:
            return -1
        return self._records[min(self._records)].store_timestamp

    def queues(self) -> dict[str, list[int]]:
        table: dict[str, list[int]] = {}
        for topic, queue_id in sorted(self._queues):
            table.setdefault(topic, []).append(queue_id)
        return table

    def delete_topics(self, topics: Sequence[str]) -> None:
        doomed = set(topics)
        for queue_key in [k for k in self._queues if k[0] in doomed]:
            del self._queues[queue_key]
        for index_key in [k for k in self._keys if k[0] in doomed]:
            del self._keys[index_key]
