"""A log made of fixed-size files, each named by its 20-digit start offset.

Both the commitlog (1 GiB files by default) and every consumequeue (300,000
entries of 20 bytes) are such logs. The queue knows where each file starts,
how far it was written and how far it was synced; it never interprets the
bytes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from tidemq.store.fs import FileSystem, StoreFile

ZERO_CHUNK = bytes(1 << 20)


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
        self.file.write(self.wrote_position, data)
        self.wrote_position += len(data)
        self.dirty = True


class MappedFileQueue:
    """The ordered, contiguous files of one log."""

    def __init__(self, directory: Path, file_size: int, fs: FileSystem) -> None:
        if file_size <= 0:
            raise ValueError("file size must be positive")
        self.directory = directory
        self.file_size = file_size
        self.fs = fs
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
            self.files.append(MappedFile(start, self.fs.open_file(path, self.file_size)))
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
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / file_name(start_offset)
        mapped = MappedFile(start_offset, self.fs.open_file(path, self.file_size))
        with self._lock:
            self.files.append(mapped)
        return mapped

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

    @property
    def flushed_offset(self) -> int:
        last = self.last
        return self.min_offset if last is None else last.start_offset + last.flushed_position

    def set_end(self, offset: int) -> int:
        """Make `offset` the end of the log: later files are deleted and bytes
        past it zeroed, so a later recovery scan cannot mistake old bytes for
        records. Returns how many non-zero bytes were cleared."""
        cleared = 0
        with self._lock:
            keep = [f for f in self.files if f.start_offset <= offset]
            drop = [f for f in self.files if f.start_offset > offset]
            self.files = keep
        for mapped in drop:
            cleared += self._count_nonzero(mapped, 0)
            mapped.file.close()
            self.fs.remove(mapped.file.path)
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
        size = mapped.size
        total = 0
        while pos < size:
            n = min(len(ZERO_CHUNK), size - pos)
            chunk = mapped.file.view(pos, n).tobytes()
            if chunk != ZERO_CHUNK[:n]:
                total += n - chunk.count(0)
            pos += n
        return total

    def _zero_from(self, mapped: MappedFile, pos: int) -> int:
        size = mapped.size
        cleared = 0
        wrote = False
        while pos < size:
            n = min(len(ZERO_CHUNK), size - pos)
            chunk = mapped.file.view(pos, n).tobytes()
            if chunk != ZERO_CHUNK[:n]:
                cleared += n - chunk.count(0)
                mapped.file.write(pos, ZERO_CHUNK[:n])
                wrote = True
            pos += n
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
        with self._lock:
            files, self.files = self.files, []
        for mapped in files:
            mapped.file.close()
            self.fs.remove(mapped.file.path)

    def close(self) -> None:
        with self._lock:
            files = list(self.files)
        for mapped in files:
            mapped.file.close()


class StoreCorruptedError(RuntimeError):
    """The on-disk layout is not one this store could have written."""
