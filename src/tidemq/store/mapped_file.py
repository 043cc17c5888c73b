"""A log made of fixed-size files, each named by its 20-digit start offset.

Both the commitlog (1 GiB files by default) and every consumequeue (300,000
entries of 20 bytes) are such logs. The queue knows where each file starts,
how far it was written and how far it was synced; it never interprets the
bytes.

Blocks are reserved a chunk ahead of the write position (`append` does it),
and `reserve` lets a writer make sure of room before it writes anything: the
store reserves a whole batch's bytes, and the consumequeue entries and index
entries it will need, before the first byte goes to the commitlog. A file the
log will need next is then created at once but kept aside (`_prepared`) until
the log reaches it, so it is never seen as the log's end.

A log synced after every write (the commitlog in sync-flush mode) can have
zeros written ahead of its end (`zero_ahead`, called by the flush thread): see
`fs` for why that makes each fdatasync cheaper.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tidemq.store.fs import ZERO_STEP, FileSystem, NoSpaceError, StoreFile
from tidemq.store.space import DEFAULT_RESERVE_CHUNK, PAGE_SIZE, reservation_end

ZERO_CHUNK = bytes(1 << 20)
ZERO_LEAD = 4 << 20
"""How far ahead of the log's end `zero_ahead` keeps zeros: at 100 MB/s of
appends, 40 ms of them (the flush thread adds a step after each sync; it
syncs thousands of times a second when writers wait for it). Zeros go only
over blocks reserved already, so the disk holds no more blocks than before."""


def file_name(start_offset: int) -> str:
    """RocketMQ's file naming: the start offset, zero-padded to 20 digits."""
    return f"{start_offset:020d}"


@dataclass
class MappedFile:
    start_offset: int
    file: StoreFile
    wrote_position: int = 0
    flushed_position: int = 0
    dirty: bool = field(default=False)
    reserve_chunk: int = DEFAULT_RESERVE_CHUNK

    @property
    def size(self) -> int:
        return self.file.size

    @property
    def end_offset(self) -> int:
        """The offset one past the last written byte."""
        return self.start_offset + self.wrote_position

    @property
    def remaining(self) -> int:
        return self.file.size - self.wrote_position

    def append(self, data: bytes | bytearray | memoryview) -> None:
        end = self.wrote_position + len(data)
        if end > self.file.reserved:
            self.reserve(end)
        self.file.append_at(self.wrote_position, data)
        self.wrote_position = end
        self.dirty = True

    def reserve(self, end: int) -> None:
        """Blocks for bytes [0, end) of this file, a chunk ahead (NoSpaceError)."""
        if end > self.file.reserved:
            self.file.reserve(end, reservation_end(end, self.size, self.reserve_chunk))


class MappedFileQueue:
    """The ordered, contiguous files of one log."""

    def __init__(
        self,
        directory: Path,
        file_size: int,
        fs: FileSystem,
        reserve_chunk: int = DEFAULT_RESERVE_CHUNK,
    ) -> None:
        if file_size <= 0:
            raise ValueError("file size must be positive")
        self.directory = directory
        self.file_size = file_size
        self.fs = fs
        self.reserve_chunk = reserve_chunk
        self._prepared: list[MappedFile] = []
        """Files after the last one, created and reserved ahead of the writes."""
        self.files: list[MappedFile] = []
        self._lock = threading.Lock()  # the flusher thread iterates the list

    def load(self) -> None:
        """Open every existing file; positions are set later by recovery."""
        if not self.directory.exists():
            return
        names = sorted(p for p in self.directory.iterdir() if p.name.isdigit())
        expected: int | None = None
        for path in names:
            start = int(path.name)
            if expected is not None and start != expected:
                raise StoreCorruptedError(f"{self.directory}: file {path.name} leaves a gap")
            if path.stat().st_size > self.file_size:
                raise StoreCorruptedError(
                    f"{path} is larger than the configured file size {self.file_size}"
                )
            self.files.append(self._mapped(start, self.fs.open_file(path, self.file_size)))
            expected = start + self.file_size

    @property
    def min_offset(self) -> int:
        return self.files[0].start_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        return self.files[-1].end_offset if self.files else 0

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def create_file(self, start_offset: int) -> MappedFile:
        if start_offset % self.file_size:
            raise ValueError(f"{start_offset} is not a file boundary")
        if self.files and start_offset != self.files[-1].start_offset + self.file_size:
            raise ValueError(f"file at {start_offset} would leave a gap")
        prepared = self._prepared
        if prepared and prepared[0].start_offset == start_offset:
            mapped = prepared.pop(0)
        else:
            self._discard_prepared()
            mapped = self._open_new(start_offset)
        with self._lock:
            self.files.append(mapped)
        return mapped

    def _mapped(self, start_offset: int, file: StoreFile) -> MappedFile:
        return MappedFile(start_offset, file, reserve_chunk=self.reserve_chunk)

    def _open_new(self, start_offset: int) -> MappedFile:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / file_name(start_offset)
        return self._mapped(start_offset, self.fs.open_file(path, self.file_size))

    # -- reserving room ahead of writes ---------------------------------------

    def reserve(self, start: int, end: int) -> None:
        """Make sure bytes [start, end) of the log can be written without new
        blocks: reserve them in the files that exist, and create (and reserve)
        the ones past the last file now, kept aside until the log reaches them.
        NoSpaceError when the disk is full (a file created here for nothing is
        removed again); what was reserved before the failure stays reserved."""
        files = self.files
        if files:  # the common case: room already reserved in the last file
            last = files[-1]
            if last.start_offset <= start and end <= last.start_offset + last.file.reserved:
                return
        offset = start
        while offset < end:
            mapped = self.find(offset) or self._prepared_for(offset)
            file_end = mapped.start_offset + mapped.size
            mapped.reserve(min(end, file_end) - mapped.start_offset)
            offset = file_end

    def _prepared_for(self, offset: int) -> MappedFile:
        """The file after the last one (or the first one) holding `offset`."""
        start = offset - offset % self.file_size
        for mapped in self._prepared:
            if mapped.start_offset == start:
                return mapped
        last = self._prepared[-1] if self._prepared else self.last
        if last is not None and start != last.start_offset + self.file_size:
            raise ValueError(f"cannot prepare a file at {start}: it would leave a gap")
        mapped = self._open_new(start)
        try:
            mapped.reserve(min(self.file_size, self.reserve_chunk))
        except NoSpaceError:
            mapped.file.close()
            self.fs.remove(mapped.file.path)
            raise
        self._prepared.append(mapped)
        return mapped

    def _discard_prepared(self) -> None:
        """Close and remove the files made ahead (they hold nothing)."""
        prepared, self._prepared = self._prepared, []
        for mapped in prepared:
            mapped.file.close()
            self.fs.remove(mapped.file.path)

    def writable_file(self, start_if_empty: int = 0) -> MappedFile:
        """The file new bytes go to: the last one, or a new one after it when full."""
        last = self.last
        if last is None:
            return self.create_file(start_if_empty - start_if_empty % self.file_size)
        if last.remaining == 0:
            return self.create_file(last.start_offset + self.file_size)
        return last

    def roll(self) -> MappedFile:
        """Start the next file (the current one was closed with a blank record)."""
        last = self.last
        start = 0 if last is None else last.start_offset + self.file_size
        return self.create_file(start)

    def find(self, offset: int) -> MappedFile | None:
        """The file holding `offset`, by arithmetic (files are contiguous)."""
        files = self.files
        if not files:
            return None
        index = (offset - files[0].start_offset) // self.file_size
        if 0 <= index < len(files):
            return files[index]
        return None

    def view(self, offset: int, length: int) -> memoryview | None:
        mapped = self.find(offset)
        if mapped is None:
            return None
        pos = offset - mapped.start_offset
        if pos + length > mapped.wrote_position:
            return None
        return mapped.file.view(pos, length)

    def flush(self) -> int:
        """Sync every file written since its last sync; return the flushed offset."""
        with self._lock:
            files = list(self.files)
        flushed = self.min_offset
        for mapped in files:
            wrote = mapped.wrote_position
            if mapped.flushed_position < wrote:
                mapped.file.sync()
                mapped.flushed_position = wrote
            flushed = mapped.start_offset + mapped.flushed_position
        return flushed

    def zero_ahead(self, lead: int = ZERO_LEAD, step: int = ZERO_STEP) -> int:
        """Write the next step of zeros ahead of the log's end, up to `lead`
        bytes past it, in the last file (a new file gets its zeros once the
        log is in it). For the flush thread, between syncs: the zeros reach
        the disk with the next sync. Returns how many bytes were zeroed."""
        with self._lock:
            last = self.files[-1] if self.files else None
        if last is None:
            return 0
        wrote = last.wrote_position
        return last.file.zero_ahead(wrote, wrote + lead, step)

    @property
    def flushed_offset(self) -> int:
        last = self.last
        return self.min_offset if last is None else last.start_offset + last.flushed_position

    def set_end(self, offset: int) -> int:
        """Make `offset` the end of the log: bytes past it are zeroed, so a
        later recovery scan cannot mistake old bytes for records, and later
        files are kept aside, zeroed, as the next ones to write (their blocks
        are reused: on a full disk there may be no others), or deleted when
        nothing is left before them. Returns how many non-zero bytes were cleared."""
        cleared = 0
        with self._lock:
            keep = [f for f in self.files if f.start_offset <= offset]
            drop = [f for f in self.files if f.start_offset > offset]
            self.files = keep
        for mapped in drop:
            if keep:
                cleared += self._zero_from(mapped, 0)
                mapped.wrote_position = mapped.flushed_position = 0
            else:
                cleared += self._count_nonzero(mapped, 0)
                mapped.file.close()
                self.fs.remove(mapped.file.path)
        if keep and drop:
            self._discard_prepared()
            self._prepared = drop
        for mapped in keep:
            if mapped.start_offset + mapped.size <= offset:
                mapped.wrote_position = mapped.flushed_position = mapped.size
                continue
            pos = offset - mapped.start_offset
            cleared += self._zero_from(mapped, pos)
            mapped.wrote_position = mapped.flushed_position = pos
        return cleared

    def assume_end(self, offset: int) -> None:
        """Take `offset` as the end of the log without touching a byte (a
        read-only view: `set_end` would zero and delete what lies past it)."""
        for mapped in self.files:
            position = max(0, min(mapped.size, offset - mapped.start_offset))
            mapped.wrote_position = mapped.flushed_position = position

    def _count_nonzero(self, mapped: MappedFile, pos: int) -> int:
        total = 0
        for _, chunk in _data_chunks(mapped.file, pos):
            if chunk != ZERO_CHUNK[: len(chunk)]:
                total += len(chunk) - chunk.count(0)
        return total

    def _zero_from(self, mapped: MappedFile, pos: int) -> int:
        """Zero the non-zero bytes from `pos` on, a page at a time: only pages
        that hold data are read or written, and those have their blocks, so
        this works on a full disk and never fills the holes of a sparse file."""
        cleared = 0
        wrote = False
        for chunk_pos, chunk in _data_chunks(mapped.file, pos):
            if chunk != ZERO_CHUNK[: len(chunk)]:
                cleared += len(chunk) - chunk.count(0)
                _zero_pages(mapped.file, chunk_pos, chunk)
                wrote = True
        if wrote:
            mapped.file.sync()
        return cleared

    def delete_files_before(self, offset: int) -> list[Path]:
        """Delete whole files that end at or before `offset`, never the last one."""
        removed: list[Path] = []
        with self._lock:
            while len(self.files) > 1 and self.files[0].start_offset + self.file_size <= offset:
                mapped = self.files.pop(0)
                removed.append(mapped.file.path)
                mapped.file.close()
        for path in removed:
            self.fs.remove(path)
        return removed

    def delete_first(self) -> Path | None:
        """Delete the oldest file unless it is the only one."""
        with self._lock:
            if len(self.files) <= 1:
                return None
            mapped = self.files.pop(0)
        mapped.file.close()
        self.fs.remove(mapped.file.path)
        return mapped.file.path

    def destroy(self) -> None:
        self._discard_prepared()
        with self._lock:
            files, self.files = self.files, []
        for mapped in files:
            mapped.file.close()
            self.fs.remove(mapped.file.path)

    def close(self) -> None:
        self._discard_prepared()
        with self._lock:
            files = list(self.files)
        for mapped in files:
            mapped.file.close()


def data_prefix_end(file: StoreFile) -> int:
    """Where the file's first hole starts (its size when it has none): bytes
    before it may be read through the mapping, from there on only zeros."""
    ranges = file.data_ranges(0, file.size)
    if not ranges or ranges[0][0] != 0:
        return 0
    return ranges[0][1]


def _data_chunks(file: StoreFile, pos: int) -> Iterator[tuple[int, bytes]]:
    """(position, bytes) of the file from `pos` on, up to 1 MiB at a time,
    holes left out (they read as zeros and must not be touched)."""
    for start, end in file.data_ranges(pos, file.size):
        while start < end:
            n = min(len(ZERO_CHUNK), end - start)
            yield start, file.view(start, n).tobytes()
            start += n


def _zero_pages(file: StoreFile, pos: int, chunk: bytes) -> None:
    """Write zeros over the pages of `chunk` (read at `pos`) that are not zero."""
    start = 0
    while start < len(chunk):
        stop = min(len(chunk), start + PAGE_SIZE - (pos + start) % PAGE_SIZE)
        if chunk.count(0, start, stop) != stop - start:
            file.write(pos + start, ZERO_CHUNK[: stop - start])
        start = stop


class StoreCorruptedError(RuntimeError):
    """The on-disk layout is not one this store could have written."""
