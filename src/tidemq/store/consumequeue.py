"""Per topic and queue: the index from queue offset to commitlog record.

Entry layout (20 bytes, big-endian), entry `n` at byte `n * 20`:

| bytes | field |
|---|---|
| 0-7   | commitlog physical offset (int64) |
| 8-11  | record size (int32) |
| 12-19 | tags code (int64): Java hashCode of TAGS, or a delivery time for delay topics |

300,000 entries a file (6,000,000 bytes), each file named by its start byte
offset (`00000000000006000000` is the second file). An all-zero entry (size 0)
marks the end of the written entries. A hole, entries before a queue's first
real entry, is filled with RocketMQ's blank entry (offset 0, size
0x7FFFFFFF, tags 0) and never returned by reads.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

from tidemq.store.fs import FileSystem
from tidemq.store.mapped_file import MappedFileQueue, data_prefix_end

ENTRY = struct.Struct(">qiq")
ENTRY_SIZE = ENTRY.size
BLANK_SIZE = 0x7FFFFFFF
BLANK_ENTRY = ENTRY.pack(0, BLANK_SIZE, 0)
DEFAULT_ENTRIES_PER_FILE = 300_000
RESERVE_CHUNK = 1 << 20
"""Blocks are reserved 1 MiB (52,428 entries) ahead: a broker has many queues."""


class ConsumeQueue:
    """One topic/queue's entries; queue offset `n` is entry `n`."""

    def __init__(
        self,
        topic: str,
        queue_id: int,
        directory: Path,
        fs: FileSystem,
        entries_per_file: int = DEFAULT_ENTRIES_PER_FILE,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.entries_per_file = entries_per_file
        self.log = MappedFileQueue(directory, entries_per_file * ENTRY_SIZE, fs, RESERVE_CHUNK)
        self.min_offset = 0
        self.max_physical_end = 0
        """Commitlog offset one past the newest record this queue points to."""

    # -- offsets ----------------------------------------------------------

    @property
    def max_offset(self) -> int:
        """Queue offset the next entry gets (= entries written)."""
        return self.log.max_offset // ENTRY_SIZE

    # -- writing ----------------------------------------------------------

    def put(self, physical_offset: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """Write the entry for `queue_offset`. Returns False when an identical
        entry is already there (re-dispatch after recovery is idempotent).

        A queue offset beyond the end leaves a hole of blank entries; one
        below the end that disagrees with the stored entry is overwritten,
        because the commitlog is the source of truth.
        """
        files = self.log.files
        if files:
            last = files[-1]
            wrote = last.wrote_position
            if queue_offset * ENTRY_SIZE == last.start_offset + wrote and wrote < last.size:
                # The common case: the next entry, in the current file.
                if wrote + ENTRY_SIZE > last.file.reserved:
                    last.reserve(wrote + ENTRY_SIZE)
                last.file.write(wrote, ENTRY.pack(physical_offset, size, tags_code))
                last.wrote_position = wrote + ENTRY_SIZE
                last.dirty = True
                if physical_offset + size > self.max_physical_end:
                    self.max_physical_end = physical_offset + size
                return True
        current = self.max_offset
        if queue_offset < current:
            if self.raw_entry(queue_offset) == (physical_offset, size, tags_code):
                return False
            self._overwrite(queue_offset, ENTRY.pack(physical_offset, size, tags_code))
        else:
            if queue_offset > current:
                self._fill_blanks(current, queue_offset)
            self._append(ENTRY.pack(physical_offset, size, tags_code), queue_offset)
        end = physical_offset + size
        if end > self.max_physical_end:
            self.max_physical_end = end
        return True

    def put_run(self, first_queue_offset: int, entries: bytes) -> None:
        """Write consecutive entries (20 bytes each, packed) from
        `first_queue_offset`: one write when they are next and fit the current
        file (a batch), otherwise entry by entry through `put`."""
        size = len(entries)
        if not size:
            return
        files = self.log.files
        if files:
            last = files[-1]
            wrote = last.wrote_position
            if (
                first_queue_offset * ENTRY_SIZE == last.start_offset + wrote
                and wrote + size <= last.size
            ):
                if wrote + size > last.file.reserved:
                    last.reserve(wrote + size)
                last.file.write(wrote, entries)
                last.wrote_position = wrote + size
                last.dirty = True
                physical, record_size, _ = ENTRY.unpack_from(entries, size - ENTRY_SIZE)
                if physical + record_size > self.max_physical_end:
                    self.max_physical_end = physical + record_size
                return
        for position, (physical, record_size, tags_code) in enumerate(ENTRY.iter_unpack(entries)):
            self.put(physical, record_size, tags_code, first_queue_offset + position)

    def reserve(self, first: int, end: int) -> None:
        """Room for entries `first` to `end` (exclusive) and any blanks before
        them, so that putting them cannot run out of disk (NoSpaceError now
        instead, with nothing written)."""
        files = self.log.files
        if files:
            last = files[-1]
            if end * ENTRY_SIZE <= last.start_offset + last.file.reserved:
                return  # the common case: reserved a chunk ahead already
        start = self.log.max_offset if files else first * ENTRY_SIZE
        self.log.reserve(start, end * ENTRY_SIZE)

    def _append(self, entry: bytes, queue_offset: int) -> None:
        target = self.log.writable_file(queue_offset * ENTRY_SIZE)
        target.append(entry)

    def _overwrite(self, queue_offset: int, entry: bytes) -> None:
        byte_offset = queue_offset * ENTRY_SIZE
        mapped = self.log.find(byte_offset)
        if mapped is None:
            raise ValueError(f"no consumequeue file for offset {queue_offset}")
        mapped.file.write(byte_offset - mapped.start_offset, entry)
        mapped.dirty = True
        mapped.flushed_position = min(mapped.flushed_position, byte_offset - mapped.start_offset)

    def _fill_blanks(self, start: int, end: int) -> None:
        """Fill [start, end) with blank entries, skipping whole files when the
        queue is empty (a queue that starts late begins at the file holding `end`)."""
        if self.log.last is None:
            first_in_file = end - end % self.entries_per_file
            start = first_in_file
            self.min_offset = end
        for offset in range(start, end):
            self._append(BLANK_ENTRY, offset)

    # -- reading ----------------------------------------------------------

    def entry(self, queue_offset: int) -> tuple[int, int, int] | None:
        if queue_offset < 0 or queue_offset >= self.max_offset:
            return None
        view = self.log.view(queue_offset * ENTRY_SIZE, ENTRY_SIZE)
        if view is None:
            return None
        physical, size, tags = ENTRY.unpack(view)
        if size == BLANK_SIZE:
            return None
        return physical, size, tags

    def entries_view(self, queue_offset: int, max_count: int) -> memoryview | None:
        """Up to `max_count` consecutive entries from one file, as raw bytes
        (callers decode with `ENTRY.iter_unpack`)."""
        end = self.max_offset
        if queue_offset < 0 or queue_offset >= end:
            return None
        byte_offset = queue_offset * ENTRY_SIZE
        mapped = self.log.find(byte_offset)
        if mapped is None:
            return None
        pos = byte_offset - mapped.start_offset
        count = min(max_count, end - queue_offset, (mapped.wrote_position - pos) // ENTRY_SIZE)
        if count <= 0:
            return None
        return mapped.file.view(pos, count * ENTRY_SIZE)

    def iter_entries(self, start: int = 0) -> Iterator[tuple[int, int, int, int]]:
        """(queue offset, physical offset, size, tags code) from `start` on."""
        offset = max(start, self.min_offset, self._first_entry())
        while True:
            view = self.entries_view(offset, self.entries_per_file)
            if view is None:
                return
            for physical, size, tags in ENTRY.iter_unpack(view):
                if size != BLANK_SIZE:
                    yield offset, physical, size, tags
                offset += 1

    # -- recovery and retention ------------------------------------------

    def load(self) -> None:
        self.log.load()

    def recover(self, commitlog_end: int) -> int:
        """Find the written end and drop entries pointing past `commitlog_end`
        (their records were lost). Returns how many entries were dropped."""
        files = self.log.files
        if not files:
            return 0
        end_entry = self.scan_end_entry()
        valid_end = end_entry
        dropped = 0
        # Walk back from the end over entries whose records do not exist.
        while valid_end > self._first_entry():
            found = self.raw_entry(valid_end - 1)
            if found is None:
                break
            physical, size, _ = found
            if size != BLANK_SIZE and physical + size <= commitlog_end:
                break
            valid_end -= 1
            dropped += 1
        self.log.set_end(valid_end * ENTRY_SIZE)
        self._refresh_bounds()
        return dropped

    def assume_written_end(self) -> None:
        """Bounds from the entries as they are, changing nothing (a read-only
        view of a store another process owns)."""
        self.log.assume_end(self.scan_end_entry() * ENTRY_SIZE)
        self._refresh_bounds()

    def _first_entry(self) -> int:
        return self.log.min_offset // ENTRY_SIZE

    def raw_entry(self, queue_offset: int) -> tuple[int, int, int] | None:
        """The entry as stored, blank or not, without bounds from recovery."""
        byte_offset = queue_offset * ENTRY_SIZE
        mapped = self.log.find(byte_offset)
        if mapped is None or queue_offset < 0:
            return None
        result: tuple[int, int, int] = ENTRY.unpack(
            mapped.file.view(byte_offset - mapped.start_offset, ENTRY_SIZE)
        )
        return result

    def scan_end_entry(self) -> int:
        """The first entry whose size is 0 (never written), scanning each file."""
        if not self.log.files:
            return 0
        for mapped in self.log.files:
            mapped.wrote_position = mapped.flushed_position = mapped.size
        for mapped in self.log.files:
            readable = data_prefix_end(mapped.file)  # holes are unwritten: not read
            view = mapped.file.view(0, readable - readable % ENTRY_SIZE)
            for index, (_, size, _) in enumerate(ENTRY.iter_unpack(view)):
                if size <= 0:
                    return (mapped.start_offset // ENTRY_SIZE) + index
            if readable < mapped.size:
                return (mapped.start_offset + readable) // ENTRY_SIZE
        last = self.log.files[-1]
        return (last.start_offset + last.size) // ENTRY_SIZE

    def _refresh_bounds(self) -> None:
        self.max_physical_end = 0
        last_offset = self.max_offset - 1
        found = self.entry(last_offset) if last_offset >= 0 else None
        if found is not None:
            self.max_physical_end = found[0] + found[1]
        self.min_offset = self._first_entry()
        for offset, _, _, _ in self.iter_entries(self.min_offset):
            self.min_offset = offset
            break
        else:
            self.min_offset = self.max_offset

    def correct_min_offset(self, commitlog_min: int) -> None:
        """Advance the min offset past entries whose records were deleted."""
        for offset, physical, _, _ in self.iter_entries(self.min_offset):
            if physical >= commitlog_min:
                self.min_offset = offset
                return
        self.min_offset = self.max_offset

    def delete_expired(self, commitlog_min: int) -> list[Path]:
        """Delete whole files whose every record lies before `commitlog_min`."""
        removed: list[Path] = []
        while len(self.log.files) > 1:
            first = self.log.files[0]
            last_entry = first.file.view(first.size - ENTRY_SIZE, ENTRY_SIZE)
            physical, size, _ = ENTRY.unpack(last_entry)
            if size == BLANK_SIZE or physical + size <= commitlog_min:
                path = self.log.delete_first()
                if path is None:
                    break
                removed.append(path)
            else:
                break
        self.correct_min_offset(commitlog_min)
        return removed

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        self.log.close()

    def destroy(self) -> None:
        self.log.destroy()
