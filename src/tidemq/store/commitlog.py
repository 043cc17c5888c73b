"""The commitlog: every message of every topic, appended to one log.

Records use the stored-message layout of `tidemq.record.codec`, so
a pull response is a run of records sent as they lie in the file. A record
never spans two files: when one does not fit, the rest of the file is closed
with a blank record (TOTALSIZE = bytes left, MAGIC = BLANK_MAGIC) and the
record goes to the next file. Every file therefore keeps at least 8 bytes for
that blank.

An append happens in two steps, so that a full disk refuses it whole: `prepare`
encodes the records and assigns their offsets without writing a byte, the
caller reserves room (here and in the derived files), then `write` puts the
bytes in place, or `cancel` gives the queue offsets back.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.properties import decode_properties
from tidemq.protocol.errors import ProtocolError
from tidemq.record import batch_append
from tidemq.record.codec import (
    BLANK_MAGIC,
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_V1,
    MESSAGE_MAGIC_V2,
    decode_record,
    encode_record,
    patch_offsets,
)
from tidemq.store.api import (
    BatchToStore,
    DispatchRequest,
    MessageToStore,
    PutResult,
    PutStatus,
)
from tidemq.store.fs import FileSystem
from tidemq.store.mapped_file import (
    MappedFile,
    MappedFileQueue,
    StoreCorruptedError,
    data_prefix_end,
)

log = logging.getLogger(__name__)

_SIZE_MAGIC = struct.Struct(">ii")

TagsCodeRule = Callable[[str, Mapping[str, str], int], int]


_TRANSACTION_MASK = sysflag.TRANSACTION_MASK
_CONSUMABLE_TRANSACTION_TYPES = (sysflag.TRANSACTION_NOT_TYPE, sysflag.TRANSACTION_COMMIT_TYPE)


def is_consumable(sys_flag: int) -> bool:
    """Prepared and rolled-back transaction records get no consumequeue entry."""
    return sys_flag & _TRANSACTION_MASK in _CONSUMABLE_TRANSACTION_TYPES


@dataclass(slots=True)
class AppendPlan:
    """Records encoded for one append and not written yet: the bytes for each
    file they go to, a result per message and a dispatch request per
    consumable one."""

    start: int
    """Log offset of the first byte."""
    end: int
    """Log offset one past the last byte."""
    segments: list[tuple[int, bytes]]
    """(log offset, bytes): one run of bytes per file, in order."""
    results: list[PutResult]
    dispatches: list[DispatchRequest]


@dataclass(slots=True)
class BatchPlan:
    """A whole batch body encoded in one call (`tidemq.record.batch_append`),
    not written yet: the records as one run, with their consumequeue and
    index entries packed, and no Python object per message."""

    append: AppendPlan
    """The commitlog part, one segment (what `write` puts in place)."""
    topic: str
    queue_id: int
    first_queue_offset: int
    count: int
    cq_entries: bytes
    index_entries: bytes
    msg_ids: str
    tags: dict[int, int]
    """For each tags code of the batch, the last queue offset that has it."""
    store_timestamp: int


class CommitLog:
    def __init__(
        self,
        directory: Path,
        file_size: int,
        fs: FileSystem,
        store_host: bytes,
        store_port: int,
        tags_code_rule: TagsCodeRule,
    ) -> None:
        self.log = MappedFileQueue(directory, file_size, fs)
        self.store_host = store_host
        self.store_port = store_port
        self.queue_offsets: dict[tuple[str, int], int] = {}
        """Next queue offset per (topic, queue id): RocketMQ's topicQueueTable."""
        self._id_prefix = (store_host + store_port.to_bytes(4, "big")).hex().upper()
        self._tags_code_rule = tags_code_rule
        self._topic_bytes: dict[str, bytes] = {}
        self.write_listeners: list[Callable[[], None]] = []
        """Called after every append (on the writer's thread): a master's HA
        connections wake to send the new bytes."""
        self.read_end = 0
        """Where the last `records_between` stopped."""

    # -- writing ----------------------------------------------------------

    def message_id(self, physical_offset: int) -> str:
        return f"{self._id_prefix}{physical_offset:016X}"

    def append(
        self, messages: Sequence[MessageToStore], store_timestamp: int
    ) -> tuple[list[PutResult], list[DispatchRequest]]:
        """Encode, reserve and write `messages` (NoSpaceError: nothing written)."""
        plan = self.prepare(messages, store_timestamp)
        try:
            self.log.reserve(plan.start, plan.end)
        except BaseException:
            self.cancel(plan)
            raise
        self.write(plan)
        return plan.results, plan.dispatches

    def _append_position(self) -> tuple[int, int]:
        """(start offset of the file the next record goes to, position in it)."""
        last = self.log.last
        if last is None:
            return 0, 0
        if last.remaining == 0:
            return last.start_offset + self.log.file_size, 0
        return last.start_offset, last.wrote_position

    def next_append(self) -> tuple[int, int]:
        """(log offset of the next record, bytes a run starting there may take
        without crossing into the next file): for records encoded outside
        (`FileMessageStore.put_run`), which `write` then puts in place."""
        file_start, position = self._append_position()
        return file_start + position, self.log.file_size - position - END_FILE_MIN_BLANK_LENGTH

    def prepare(self, messages: Sequence[MessageToStore], store_timestamp: int) -> AppendPlan:
        """Encode `messages` back to back from the log's end and assign their
        offsets (queue offsets are taken: `write` or `cancel` must follow).

        A result per message and a dispatch request per consumable one
        (prepared/rolled-back transaction records get none). This is the
        hottest loop of the broker: no per-message objects beyond those two.
        """
        results: list[PutResult] = []
        dispatches: list[DispatchRequest] = []
        segments: list[tuple[int, bytes]] = []
        pending: list[bytes] = []
        file_size = self.log.file_size
        file_start, position = self._append_position()
        offset = segment_start = start = file_start + position
        space = file_size - position
        queue_offsets = self.queue_offsets
        topic_bytes_cache = self._topic_bytes
        host, port, prefix = self.store_host, self.store_port, self._id_prefix
        tags_code_rule = self._tags_code_rule
        for message in messages:
            topic = message.topic
            topic_bytes = topic_bytes_cache.get(topic)
            if topic_bytes is None:
                topic_bytes = topic_bytes_cache[topic] = topic.encode()
            parsed = decode_properties(message.properties)
            sys_flag = message.sys_flag
            queue_id = message.queue_id
            consumable = sys_flag & _TRANSACTION_MASK in _CONSUMABLE_TRANSACTION_TYPES
            key = (topic, queue_id)
            queue_offset = queue_offsets.get(key, 0) if consumable else 0
            record = encode_record(
                topic_bytes,
                queue_id,
                message.flag,
                queue_offset,
                offset,
                sys_flag,
                message.born_timestamp,
                message.born_host,
                message.born_port,
                store_timestamp,
                host,
                port,
                message.reconsume_times,
                message.prepared_transaction_offset,
                message.body,
                message.properties.encode(),
            )
            size = len(record)
            if size + END_FILE_MIN_BLANK_LENGTH > space:
                if size + END_FILE_MIN_BLANK_LENGTH > file_size:
                    self._give_back(dispatches)
                    raise ValueError(f"a record of {size} bytes cannot fit a commitlog file")
                pending.append(_SIZE_MAGIC.pack(space, BLANK_MAGIC))
                segments.append((segment_start, b"".join(pending)))
                pending = []
                offset = segment_start = offset + space
                space = file_size
                moved = bytearray(record)
                patch_offsets(moved, 0, queue_offset, offset)
                record = bytes(moved)
            pending.append(record)
            space -= size
            if consumable:
                queue_offsets[key] = queue_offset + 1
                tags_code = message.tags_code
                if tags_code is None:
                    tags_code = tags_code_rule(topic, parsed, store_timestamp)
                dispatches.append(
                    DispatchRequest(
                        topic,
                        queue_id,
                        offset,
                        size,
                        tags_code,
                        store_timestamp,
                        queue_offset,
                        parsed.get(props.KEYS, ""),
                        parsed.get(props.UNIQ_KEY),
                        sys_flag,
                        parsed,
                    )
                )
            results.append(
                PutResult(
                    PutStatus.PUT_OK,
                    offset,
                    size,
                    queue_offset,
                    store_timestamp,
                    f"{prefix}{offset:016X}",
                )
            )
            offset += size
        if pending:
            segments.append((segment_start, b"".join(pending) if len(pending) > 1 else pending[0]))
        return AppendPlan(start, offset, segments, results, dispatches)

    def prepare_batch(self, batch: BatchToStore, store_timestamp: int) -> BatchPlan | None:
        """Encode a whole SEND_BATCH_MESSAGE body at the log's end in one call,
        taking its queue offsets (`write` or `cancel_batch` must follow).
        None when the batch needs the general path (`prepare` over one
        MessageToStore per entry): see `batch_append`, or when it does not
        fit the current file (the general path closes the file with a blank)."""
        file_size = self.log.file_size
        file_start, position = self._append_position()
        start = file_start + position
        topic = batch.topic
        topic_bytes = self._topic_bytes.get(topic)
        if topic_bytes is None:
            topic_bytes = self._topic_bytes[topic] = topic.encode()
        key = (topic, batch.queue_id)
        first_queue_offset = self.queue_offsets.get(key, 0)
        encoded = batch_append.encode(
            batch.body,
            topic_bytes,
            batch.queue_id,
            first_queue_offset,
            start,
            batch.sys_flag,
            batch.born_timestamp,
            batch.born_host,
            batch.born_port,
            store_timestamp,
            self.store_host,
            self.store_port,
            batch.cluster_property,
            batch.stamp,
        )
        if encoded is None:
            return None
        records, cq_entries, index_entries, msg_ids, count, tags = encoded
        end = start + len(records)
        if len(records) + END_FILE_MIN_BLANK_LENGTH > file_size - position:
            return None
        self.queue_offsets[key] = first_queue_offset + count
        return BatchPlan(
            AppendPlan(start, end, [(start, records)], [], []),
            topic,
            batch.queue_id,
            first_queue_offset,
            count,
            cq_entries,
            index_entries,
            msg_ids,
            tags,
            store_timestamp,
        )

    def cancel_batch(self, plan: BatchPlan) -> None:
        """Forget a prepared batch: its queue offsets go back to the queue."""
        self.queue_offsets[(plan.topic, plan.queue_id)] = plan.first_queue_offset

    def write(self, plan: AppendPlan) -> None:
        """Put a prepared append's bytes in place (its room reserved beforehand)."""
        log = self.log
        for segment_start, data in plan.segments:
            files = log.files
            mapped = files[-1] if files else None
            if mapped is None or segment_start >= mapped.start_offset + log.file_size:
                # The next file (made ahead by the reservation): the previous
                # one was closed with a blank, or filled exactly.
                mapped = log.create_file(segment_start)
            if mapped.start_offset + mapped.wrote_position != segment_start:
                raise StoreCorruptedError(
                    f"append planned at {segment_start}, but the log ends at {mapped.end_offset}"
                )
            mapped.append(data)
        for listener in self.write_listeners:
            listener()

    def cancel(self, plan: AppendPlan) -> None:
        """Forget a prepared append: its queue offsets go back to their owners."""
        self._give_back(plan.dispatches)

    def _give_back(self, dispatches: list[DispatchRequest]) -> None:
        queue_offsets = self.queue_offsets
        for request in reversed(dispatches):
            queue_offsets[(request.topic, request.queue_id)] = request.queue_offset

    # -- reading ----------------------------------------------------------

    def view(self, physical_offset: int, size: int) -> memoryview | None:
        return self.log.view(physical_offset, size)

    def record_at(self, physical_offset: int) -> memoryview | None:
        """The whole record starting at `physical_offset`, if one is there."""
        head = self.log.view(physical_offset, 8)
        if head is None:
            return None
        size, magic = _SIZE_MAGIC.unpack(head)
        if magic not in (MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2) or size <= 0:
            return None
        return self.log.view(physical_offset, size)

    @property
    def min_offset(self) -> int:
        return self.log.min_offset

    @property
    def max_offset(self) -> int:
        return self.log.max_offset

    # -- recovery ---------------------------------------------------------

    def scan(self, start: int) -> Iterator[tuple[int, DispatchRequest | None, int]]:
        """Valid records from `start` (a record boundary) to the first invalid
        byte: yields (physical offset, dispatch request or None, queue offset).
        Afterwards `scan_end` holds the offset where valid data stops and
        `scan_stop_reason` says why."""
        self.scan_end = start
        self.scan_stop_reason = "end of log"
        for each in self.log.files:
            each.wrote_position = each.flushed_position = each.size
        offset = start
        readable_in: MappedFile | None = None
        readable = 0
        while True:
            mapped = self.log.find(offset)
            if mapped is None:
                break
            if mapped is not readable_in:  # past the first hole, only zeros
                readable_in, readable = mapped, data_prefix_end(mapped.file)
            pos = offset - mapped.start_offset
            left = mapped.size - pos
            if left < END_FILE_MIN_BLANK_LENGTH:
                self.scan_stop_reason = f"no room for an end-of-file marker at {offset}"
                break
            if pos + 8 > readable:
                self.scan_stop_reason = "end of written data"
                break
            size, magic = _SIZE_MAGIC.unpack(mapped.file.view(pos, 8))
            if size == 0 and magic == 0:
                self.scan_stop_reason = "end of written data"
                break
            if magic == BLANK_MAGIC:
                if size != left:
                    self.scan_stop_reason = f"bad end-of-file marker at {offset}"
                    break
                offset = mapped.start_offset + mapped.size
                self.scan_end = offset
                continue
            checked = self._check_record(mapped.file.view(pos, min(left, readable - pos)), offset)
            if isinstance(checked, str):
                self.scan_stop_reason = checked
                break
            dispatch, queue_offset, record_size = checked
            yield offset, dispatch, queue_offset
            offset += record_size
            self.scan_end = offset

    def records_between(
        self, start: int, end: int, *, verify_crc: bool = True
    ) -> Iterator[tuple[int, DispatchRequest | None]]:
        """The records written in [start, end) of the live log (unlike `scan`,
        which recovery runs before positions are known): each one's offset and
        dispatch request. Afterwards `read_end` is where reading stopped: at
        `end`, at a record whose bytes have not all arrived yet (a slave's
        log ends wherever the master's last transfer did), or, with a
        warning, at bytes that do not check out. `verify_crc=False` skips the
        body checksum (a slave dispatching its master's bytes, as RocketMQ's
        reput does not check it either)."""
        offset = start
        self.read_end = start
        while offset < end:
            mapped = self.log.find(offset)
            if mapped is None:
                return
            pos = offset - mapped.start_offset
            written = mapped.wrote_position
            if pos + 8 > written:
                return
            size, magic = _SIZE_MAGIC.unpack(mapped.file.view(pos, 8))
            if magic == BLANK_MAGIC:
                offset = mapped.start_offset + mapped.size
                self.read_end = offset
                continue
            if magic in (MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2) and pos + size > written:
                return
            checked = self._check_record(
                mapped.file.view(pos, written - pos), offset, verify_crc=verify_crc
            )
            if isinstance(checked, str):
                log.warning("stopped reading the commitlog at %d: %s", offset, checked)
                return
            dispatch, _, record_size = checked
            yield offset, dispatch
            offset += record_size
            self.read_end = offset

    def _check_record(
        self, view: memoryview, offset: int, *, verify_crc: bool = True
    ) -> tuple[DispatchRequest | None, int, int] | str:
        try:
            message, size = decode_record(view, 0, verify_crc=verify_crc)
        except ProtocolError as exc:
            return f"invalid record at {offset}: {exc}"
        if message.commit_log_offset != offset:
            return f"record at {offset} claims physical offset {message.commit_log_offset}"
        raw_props = props.encode_properties(message.properties)
        if "\x00" in message.topic or "\x00" in raw_props:
            return f"record at {offset} holds NUL bytes (torn write)"
        dispatch = None
        if is_consumable(message.sys_flag):
            tags_code = self._tags_code_rule(
                message.topic, message.properties, message.store_timestamp
            )
            dispatch = DispatchRequest(
                topic=message.topic,
                queue_id=message.queue_id,
                commitlog_offset=offset,
                size=size,
                tags_code=tags_code,
                store_timestamp=message.store_timestamp,
                queue_offset=message.queue_offset,
                keys=message.properties.get(props.KEYS, ""),
                unique_key=message.properties.get(props.UNIQ_KEY),
                sys_flag=message.sys_flag,
                properties=message.properties,
            )
        return dispatch, message.queue_offset, size

    def close(self) -> None:
        self.log.close()
