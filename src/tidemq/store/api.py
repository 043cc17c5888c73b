"""The storage engine's interface and its value types.

Two implementations stand behind `MessageStore`: `FileMessageStore` (commitlog
+ consumequeue + index on disk) and `MemoryMessageStore` (the reference model).
One conformance suite runs against both, so the broker can rely on the same
semantics whichever it is given.

Writes are asynchronous because a sync-flush write is acknowledged only after
fsync; reads are synchronous because they are slices of memory.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

DEFAULT_STORE_HOST = (b"\x7f\x00\x00\x01", 10911)


class PutStatus(enum.Enum):
    """RocketMQ's PutMessageStatus, the subset tidemq's store produces."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    """A SYNC_MASTER stored it; no slave acknowledged it in time (stored all the same)."""
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    """A SYNC_MASTER stored it with no slave connected, or every one too far
    behind to wait for (stored all the same)."""
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


STORED_STATUSES = frozenset(
    {
        PutStatus.PUT_OK,
        PutStatus.FLUSH_DISK_TIMEOUT,
        PutStatus.FLUSH_SLAVE_TIMEOUT,
        PutStatus.SLAVE_NOT_AVAILABLE,
    }
)
"""The answers that mean the message is in the commitlog, with or without
the durability asked for (SendMessageProcessor.handlePutMessageResult answers
each of them with sendOK = true)."""


class GetStatus(enum.Enum):
    """RocketMQ's GetMessageStatus: why a read returned what it did."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class MessageToStore:
    """What the broker hands the store: one message with its routing decided.

    `properties` is the already-encoded property string (key\\x01value\\x02...),
    exactly as it will lie in the record, so the broker never re-encodes what a
    client sent. `born_host` is the raw IPv4 (4 bytes) or IPv6 (16 bytes)
    address of the producer.
    """

    topic: str
    queue_id: int
    body: bytes
    properties: str = ""
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = b"\x7f\x00\x00\x01"
    born_port: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    tags_code: int | None = None
    """Overrides the consumequeue tag slot (delay/timer topics store a time)."""
    wait_store: bool = True
    """False: answer the put once appended, without waiting for the sync
    flush or a SYNC_MASTER's slave (the sender's WAIT=false, Java's
    `isWaitStoreMsgOK`); the flush is only hurried along. Not stored."""


@dataclass(slots=True)
class BatchToStore:
    """A SEND_BATCH_MESSAGE as the broker hands it to the store: the body as
    the client sent it (entries of body, flag and property string), one topic
    and queue, and what the broker adds to every record. The store encodes
    the records straight from the body (`tidemq.record.batch_append`)."""

    topic: str
    queue_id: int
    body: bytes
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = b"\x7f\x00\x00\x01"
    born_port: int = 0
    cluster_property: bytes = b""
    """`CLUSTER\x01<name>\x02`, appended to a property string without CLUSTER."""
    stamp: bytes = b""
    """Properties appended to every property string after the cluster (the
    broker's MSG_REGION and TRACE_ON); a string that already holds one of
    those keys takes the general path, which replaces them."""
    wait_store: bool = True
    """As `MessageToStore.wait_store`, for the whole batch (Java reads WAIT
    from the batch's own properties, the request header's)."""


@dataclass(slots=True, frozen=True)
class BatchAppendResult:
    """A batch stored from its body: consecutive offsets from `queue_offset`."""

    status: PutStatus
    count: int = 0
    queue_offset: int = -1
    msg_ids: str = ""
    """The offset message ids, joined by commas (as the send response carries them)."""
    remark: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def stored(self) -> bool:
        """In the commitlog, durable as asked or not (see STORED_STATUSES)."""
        return self.status in STORED_STATUSES


@dataclass(slots=True, frozen=True)
class RunPosition:
    """Where a run of records encoded outside the store goes (`put_run`), and
    what its encoder needs to know: the records start at `physical_offset`
    and may take `room` bytes (a run never crosses into the next commitlog
    file); each queue continues from its next offset in `queue_offsets`
    (absent: 0); `log_files` are the written bytes of each commitlog file
    with its log offset, oldest first, for encoders that copy stored records."""

    physical_offset: int
    room: int
    store_timestamp: int
    store_host: bytes
    store_port: int
    max_message_size: int
    queue_offsets: Mapping[tuple[str, int], int]
    log_files: Sequence[tuple[int, memoryview | bytes]]


class QueueEntries(NamedTuple):
    """A run's consecutive consumequeue entries in one queue (20 bytes each,
    packed), and for each tags code the last queue offset that has it (whom
    an arrival wakes)."""

    topic: str
    queue_id: int
    first_queue_offset: int
    cq_entries: bytes
    tags: Mapping[int, int]


class RecordRun(NamedTuple):
    """Records encoded by the caller for one append (`put_run`): laid back to
    back from the position's offset, every one consumable (one consumequeue
    entry each, in `queues`), and their index entries packed as
    `tidemq.record.batch_append` packs them (int64 offset, int32 key hash).
    `index_bound`: the index room to reserve, counted as the general path
    counts it (`room.index_entries_bound`), so that index files roll at the
    same moment, under the same names."""

    records: bytes
    queues: Sequence[QueueEntries]
    index_entries: bytes
    index_bound: int


RunEncoder = Callable[[RunPosition], "RecordRun | None"]
"""Encodes a run at the position it is given; None: the caller's general path instead."""


@dataclass(slots=True)
class PutResult:
    """One stored message, or why it was not stored (read-only by convention)."""

    status: PutStatus
    physical_offset: int = -1
    size: int = 0
    queue_offset: int = -1
    store_timestamp: int = 0
    msg_id: str = ""
    remark: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def stored(self) -> bool:
        """In the commitlog, durable as asked or not (see STORED_STATUSES)."""
        return self.status in STORED_STATUSES


@dataclass(slots=True, frozen=True)
class BatchPutResult:
    """A batch is stored as consecutive records with consecutive queue offsets."""

    status: PutStatus
    results: tuple[PutResult, ...] = ()
    remark: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def stored(self) -> bool:
        """In the commitlog, durable as asked or not (see STORED_STATUSES)."""
        return self.status in STORED_STATUSES


@dataclass(slots=True)
class GetResult:
    """A page of stored records, as they lie in the commitlog (never re-encoded).

    `buffers[i]` is the whole record at queue offset `queue_offsets[i]`.
    `next_begin_offset` is where the next read of this queue should start.
    """

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list[memoryview | bytes] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    physical_offsets: list[int] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        return len(self.buffers)

    @property
    def total_size(self) -> int:
        return sum(len(b) for b in self.buffers)

    def body(self) -> bytes:
        """The records joined: the body of a PULL_MESSAGE response."""
        return b"".join(self.buffers)


@dataclass(slots=True)
class DispatchRequest:
    """One stored record as the dispatcher sees it: enough to build the
    consumequeue entry and the index entries without reading the record again.

    Not frozen: one is made per stored message and frozen dataclasses pay for
    `object.__setattr__` on every field. Treat it as read-only."""

    topic: str
    queue_id: int
    commitlog_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    keys: str = ""
    unique_key: str | None = None
    sys_flag: int = 0
    properties: Mapping[str, str] = field(default_factory=dict)


class MessageFilter(Protocol):
    """Decides which records a read returns: first cheaply by the consumequeue
    tag slot, then (for survivors) by the record's properties."""

    def matches_tags_code(self, tags_code: int) -> bool: ...

    def matches_properties(self, properties: Mapping[str, str] | None) -> bool: ...

    @property
    def needs_properties(self) -> bool:
        """True when `matches_properties` must see the record's properties."""
        ...


class ArrivalListener(Protocol):
    """Called after a message is dispatched (long-poll wake-up)."""

    def __call__(self, request: DispatchRequest) -> None: ...


@dataclass(slots=True, frozen=True)
class QueryResult:
    """Records found through the index (by key, unique key or time range)."""

    buffers: list[memoryview | bytes]
    physical_offsets: list[int]
    index_last_update_timestamp: int = 0
    index_last_update_phy_offset: int = 0


class MessageStore(Protocol):
    """What the broker needs from storage; see the module docstring."""

    async def put_message(self, message: MessageToStore) -> PutResult: ...

    async def put_messages(self, messages: Sequence[MessageToStore]) -> BatchPutResult: ...

    async def put_batch(self, batch: BatchToStore) -> BatchAppendResult | None:
        """A batch straight from its body, or None: use `put_messages`."""
        ...

    async def put_run(self, encode: RunEncoder) -> BatchAppendResult | None:
        """Records the caller encodes, at the position `encode` is given, in one
        append (`count` is how many were stored); None: use `put_messages`
        (the encoder declined, or the store has no such path)."""
        ...

    def get_messages(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        message_filter: MessageFilter | None = None,
        max_bytes: int | None = None,
    ) -> GetResult: ...

    def read_by_physical_offset(self, physical_offset: int) -> memoryview | bytes | None: ...

    def commitlog_max_offset(self) -> int:
        """The physical offset after the last record (where the next one goes)."""
        ...

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
        """Records whose KEYS (or UNIQ_KEY) hold `key`, newest first, at most
        `max_num`; with `below_offset`, only records before that commit-log
        offset (the cursor of a paged query)."""
        ...

    def query_by_unique_key(self, topic: str, unique_key: str) -> QueryResult: ...

    def query_by_time(
        self, topic: str, begin_ms: int, end_ms: int, max_num: int
    ) -> QueryResult: ...

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int: ...

    def min_offset(self, topic: str, queue_id: int) -> int: ...

    def max_offset(self, topic: str, queue_id: int) -> int: ...

    def store_time(self, topic: str, queue_id: int, queue_offset: int) -> int: ...

    def physical_offset(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """The commitlog offset of a queue entry; -1 when there is no such entry."""
        ...

    def earliest_message_time(self) -> int: ...

    def queues(self) -> dict[str, list[int]]: ...

    def add_arrival_listener(self, listener: ArrivalListener) -> None: ...

    def delete_topics(self, topics: Sequence[str]) -> None: ...

    def close(self) -> None: ...
