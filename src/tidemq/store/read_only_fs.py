"""A file layer that can only read: for looking at a store another process owns.

The files are mapped PROT_READ from descriptors opened O_RDONLY, so nothing
here can change a byte, extend a file or create one, whatever the store code
above it tries: a write raises, and the file system stays as it was.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from pathlib import Path

from tidemq.store.fs import FixedSizeFile, StoreFile
from tidemq.store.lock import StoreLock


class ReadOnlyStoreError(PermissionError):
    """Something tried to change a store opened read-only."""


class ReadOnlyFile(FixedSizeFile):
    """A fixed-size store file mapped for reading; bytes past its end read as zeros."""

    def __init__(self, path: Path, size: int) -> None:
        super().__init__(path, size)
        fd = os.open(path, os.O_RDONLY)
        try:
            length = min(os.fstat(fd).st_size, size)
            self._mmap = mmap.mmap(fd, length, mmap.MAP_SHARED, mmap.PROT_READ) if length else None
        finally:
            os.close(fd)
        self._length = length
        self._view = memoryview(self._mmap) if self._mmap is not None else memoryview(b"")

    def write(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        raise ReadOnlyStoreError(f"{self._path} is open read-only")

    def reserve(self, end: int, ahead_to: int = 0) -> None:
        raise ReadOnlyStoreError(f"{self._path} is open read-only")

    def data_ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        return [(start, min(end, self._length))] if start < min(end, self._length) else []

    def view(self, pos: int, length: int) -> memoryview:
        end = pos + length
        if end <= self._length:
            return self._view[pos:end]
        inside = self._view[pos : self._length].tobytes() if pos < self._length else b""
        return memoryview(inside + bytes(length - len(inside)))

    def sync(self) -> None:
        """Nothing was written."""

    def prefault(self, pos: int, length: int) -> None:
        """Nothing will be written."""

    def close(self) -> None:
        self._view.release()
        if self._mmap is not None:
            with contextlib.suppress(BufferError):
                self._mmap.close()


class ReadOnlyFileSystem:
    def open_file(self, path: Path, size: int) -> StoreFile:
        if not path.exists():
            raise ReadOnlyStoreError(f"{path} does not exist and the store is open read-only")
        return ReadOnlyFile(path, size)

    def remove(self, path: Path) -> None:
        raise ReadOnlyStoreError(f"cannot remove {path}: the store is open read-only")

    def sync_dir(self, path: Path) -> None:
        """Nothing was changed."""

    def lock_store(self, root: Path) -> StoreLock:
        raise ReadOnlyStoreError(f"the store {root} is open read-only: it takes no lock")
