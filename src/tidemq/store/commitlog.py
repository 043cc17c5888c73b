"""The commitlog: every message of every topic, appended to one log.

Records use the stored-message layout of `tidemq.protocol.message_codec`, so
a pull response is a run of records sent as they lie in the file. A record
never spans two files: when one does not fit, the rest of the file is closed
with a blank record (TOTALSIZE = bytes left, MAGIC = BLANK_MAGIC) and the
record goes to the next file. Every file therefore keeps at least 8 bytes for
that blank.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.properties import decode_properties
from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.message_codec import (
    BLANK_MAGIC,
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_V1,
    MESSAGE_MAGIC_V2,
    decode_record,
    encode_record,
    patch_offsets,
)
from tidemq.store.api import DispatchRequest, MessageToStore
from tidemq.store.fs import FileSystem
from tidemq.store.mapped_file import MappedFileQueue

_SIZE_MAGIC = struct.Struct(">ii")

TagsCodeRule = Callable[[str, Mapping[str, str], int], int]


@dataclass(slots=True, frozen=True)
class Appended:
    """One record written: where, and what the dispatcher needs."""

    physical_offset: int
    size: int
    queue_offset: int
    msg_id: str
    dispatch: DispatchRequest | None
    """None for prepared/rolled-back transaction records: not consumable."""


def is_consumable(sys_flag: int) -> bool:
    """Prepared and rolled-back transaction records get no consumequeue entry."""
    kind = sysflag.transaction_value(sys_flag)
    return kind in (sysflag.TRANSACTION_NOT_TYPE, sysflag.TRANSACTION_COMMIT_TYPE)


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

    # -- writing ----------------------------------------------------------

    def message_id(self, physical_offset: int) -> str:
        return f"{self._id_prefix}{physical_offset:016X}"

    def append(self, messages: Sequence[MessageToStore], store_timestamp: int) -> list[Appended]:
        """Encode and write `messages` back to back (one write per file)."""
        appended: list[Appended] = []
        pending: list[bytes] = []
        mapped = self.log.writable_file()
        position = mapped.wrote_position
        offset = mapped.start_offset + position
        space = mapped.size - position
        for message in messages:
            topic_bytes = message.topic.encode()
            props_bytes = message.properties.encode()
            parsed = decode_properties(message.properties)
            consumable = is_consumable(message.sys_flag)
            key = (message.topic, message.queue_id)
            queue_offset = self.queue_offsets.get(key, 0) if consumable else 0
            record = encode_record(
                topic=topic_bytes,
                queue_id=message.queue_id,
                flag=message.flag,
                queue_offset=queue_offset,
                physical_offset=offset,
                sys_flag=message.sys_flag,
                born_timestamp=message.born_timestamp,
                born_host=message.born_host,
                born_port=message.born_port,
                store_timestamp=store_timestamp,
                store_host=self.store_host,
                store_port=self.store_port,
                reconsume_times=message.reconsume_times,
                prepared_transaction_offset=message.prepared_transaction_offset,
                body=message.body,
                properties=props_bytes,
            )
            size = len(record)
            if size + END_FILE_MIN_BLANK_LENGTH > space:
                if size + END_FILE_MIN_BLANK_LENGTH > mapped.size:
                    raise ValueError(f"a record of {size} bytes cannot fit a commitlog file")
                pending.append(_SIZE_MAGIC.pack(space, BLANK_MAGIC))
                mapped.append(b"".join(pending))
                pending = []
                mapped = self.log.roll()
                offset = mapped.start_offset
                space = mapped.size
                moved = bytearray(record)
                patch_offsets(moved, 0, queue_offset, offset)
                record = bytes(moved)
            pending.append(record)
            space -= size
            if consumable:
                self.queue_offsets[key] = queue_offset + 1
                tags_code = message.tags_code
                if tags_code is None:
                    tags_code = self._tags_code_rule(message.topic, parsed, store_timestamp)
                dispatch: DispatchRequest | None = DispatchRequest(
                    topic=message.topic,
                    queue_id=message.queue_id,
                    commitlog_offset=offset,
                    size=size,
                    tags_code=tags_code,
                    store_timestamp=store_timestamp,
                    queue_offset=queue_offset,
                    keys=parsed.get(props.KEYS, ""),
                    unique_key=parsed.get(props.UNIQ_KEY),
                    sys_flag=message.sys_flag,
                    properties=parsed,
                )
            else:
                dispatch = None
            appended.append(Appended(offset, size, queue_offset, self.message_id(offset), dispatch))
            offset += size
        if pending:
            mapped.append(b"".join(pending) if len(pending) > 1 else pending[0])
        return appended

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
        while True:
            mapped = self.log.find(offset)
            if mapped is None:
                break
            pos = offset - mapped.start_offset
            left = mapped.size - pos
            if left < END_FILE_MIN_BLANK_LENGTH:
                self.scan_stop_reason = f"no room for an end-of-file marker at {offset}"
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
            checked = self._check_record(mapped.file.view(pos, left), offset)
            if isinstance(checked, str):
                self.scan_stop_reason = checked
                break
            dispatch, queue_offset, record_size = checked
            yield offset, dispatch, queue_offset
            offset += record_size
            self.scan_end = offset

    def _check_record(
        self, view: memoryview, offset: int
    ) -> tuple[DispatchRequest | None, int, int] | str:
        try:
            message, size = decode_record(view, 0, verify_crc=True)
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
