"""The file layer under the store: fixed-size files written at positions and
read as memoryviews.

This is the seam for fault injection. `RealFileSystem` maps files with mmap
and makes them durable with fdatasync (which, unlike `mmap.flush`, releases the
GIL). `FaultyFileSystem` keeps every file in memory, remembers which bytes
were synced, and on `crash()` writes to disk what a power cut could leave: the
synced bytes, plus, for each unsynced write, all of it, a torn prefix or
nothing, with optional bit flips, all chosen from a seed. Recovery is then
tested on those real files.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import random
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tidemq.store.lock import StoreLock


class StoreFile(Protocol):
    """One fixed-size file. Positions are relative to the file's start."""

    @property
    def path(self) -> Path: ...

    @property
    def size(self) -> int: ...

    def write(self, pos: int, data: bytes | bytearray | memoryview) -> None: ...

    def view(self, pos: int, length: int) -> memoryview: ...

    def sync(self) -> None:
        """Make every write so far durable."""
        ...

    def prefault(self, pos: int, length: int) -> None:
        """Map pages in advance so later writes there do not fault (a hint)."""
        ...

    def close(self) -> None: ...


class FileSystem(Protocol):
    def open_file(self, path: Path, size: int) -> StoreFile:
        """Open `path`, creating it (sparse, zero-filled) at `size` bytes."""
        ...

    def remove(self, path: Path) -> None: ...

    def sync_dir(self, path: Path) -> None: ...

    def lock_store(self, root: Path) -> StoreLock:
        """Take the store's exclusive lock (StoreLockedError when another owner has it)."""
        ...


class _FixedSizeFile:
    """What both file kinds share: a path, a fixed size, bounds on writes."""

    def __init__(self, path: Path, size: int) -> None:
        self._path = path
        self._size = size

    @property
    def path(self) -> Path:
        return self._path

    @property
    def size(self) -> int:
        return self._size

    def _check_range(self, pos: int, length: int) -> int:
        end = pos + length
        if pos < 0 or end > self._size:
            raise ValueError(f"write [{pos}, {end}) outside {self._path.name}")
        return end


_MADV_POPULATE_WRITE = 23


class MmapFile(_FixedSizeFile):
    """A file mapped shared into memory: reads are zero-copy slices."""

    def __init__(self, path: Path, size: int) -> None:
        super().__init__(path, size)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            current = os.fstat(fd).st_size
            if current < size:
                os.ftruncate(fd, size)
            elif current > size:
                raise ValueError(f"{path} is {current} bytes, expected at most {size}")
            self._mmap = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._view = memoryview(self._mmap)
        self._closed = False

    def write(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        end = self._check_range(pos, len(data))
        self._mmap[pos:end] = data

    def view(self, pos: int, length: int) -> memoryview:
        return self._view[pos : pos + length]

    def sync(self) -> None:
        if not self._closed:
            os.fdatasync(self._fd)

    def prefault(self, pos: int, length: int) -> None:
        start = pos - pos % mmap.PAGESIZE
        end = min(self._size, pos + length)
        # MADV_POPULATE_WRITE (Linux 5.14+); older kernels refuse it, harmlessly.
        with contextlib.suppress(OSError, ValueError):
            self._mmap.madvise(_MADV_POPULATE_WRITE, start, end - start)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._view.release()
        # Readers may still hold slices (a response being sent): then the
        # mapping is released when the last slice is garbage collected.
        with contextlib.suppress(BufferError):
            self._mmap.close()
        os.close(self._fd)


class RealFileSystem:
    def open_file(self, path: Path, size: int) -> StoreFile:
        return MmapFile(path, size)

    def remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def sync_dir(self, path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def lock_store(self, root: Path) -> StoreLock:
        lock = StoreLock(root)
        lock.acquire()
        return lock


REAL_FS = RealFileSystem()


@dataclass(frozen=True)
class CrashPlan:
    """What a simulated power cut does to bytes that were written but not synced.

    For each unsynced write, in order: kept whole with `keep_probability`,
    else torn (a random prefix kept) with `tear_probability`, else lost.
    `bit_flips` random bits are flipped inside unsynced regions that were kept.
    """

    keep_probability: float = 0.5
    tear_probability: float = 0.3
    bit_flips: int = 0
    flip_only: str | None = None
    """Flip bits only in files whose path contains this (e.g. "commitlog")."""


class SimulatedFile(_FixedSizeFile):
    """An in-memory file that knows which of its bytes are durable."""

    def __init__(self, fs: FaultyFileSystem, path: Path, size: int, initial: bytes) -> None:
        super().__init__(path, size)
        self._fs = fs
        self.data = bytearray(size)
        self.data[: len(initial)] = initial
        self.durable = bytearray(self.data)
        self.unsynced: list[tuple[int, bytes]] = []
        self.closed = False

    def write(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        end = self._check_range(pos, len(data))
        self._fs.check_alive()
        chunk = bytes(data)
        self.data[pos:end] = chunk
        with self._fs.lock:
            self.unsynced.append((pos, chunk))

    def view(self, pos: int, length: int) -> memoryview:
        return memoryview(self.data)[pos : pos + length]

    def prefault(self, pos: int, length: int) -> None:
        """Nothing to map in memory."""

    def sync(self) -> None:
        self._fs.check_alive()
        with self._fs.lock:
            for pos, chunk in self.unsynced:
                self.durable[pos : pos + len(chunk)] = chunk
            self.unsynced.clear()
        self._fs.sync_count += 1

    def close(self) -> None:
        self.closed = True


class CrashedError(RuntimeError):
    """Raised by a simulated file after the machine 'lost power'."""


class FaultyFileSystem:
    """A file system whose contents can be lost the way a power cut loses them."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.files: dict[Path, SimulatedFile] = {}
        self.removed: set[Path] = set()
        self.lock = threading.Lock()
        self.sync_count = 0
        self.locks: list[StoreLock] = []
        self._crashed = False

    def check_alive(self) -> None:
        if self._crashed:
            raise CrashedError("the simulated machine has crashed")

    def open_file(self, path: Path, size: int) -> StoreFile:
        self.check_alive()
        existing = self.files.get(path)
        if existing is not None and not existing.closed:
            return existing
        initial = path.read_bytes() if path.exists() else b""
        if len(initial) > size:
            raise ValueError(f"{path} is {len(initial)} bytes, expected at most {size}")
        simulated = SimulatedFile(self, path, size, initial)
        self.files[path] = simulated
        self.removed.discard(path)
        return simulated

    def remove(self, path: Path) -> None:
        self.files.pop(path, None)
        self.removed.add(path)
        path.unlink(missing_ok=True)

    def sync_dir(self, path: Path) -> None:
        self.check_alive()

    def lock_store(self, root: Path) -> StoreLock:
        """A real lock, given up at `crash()` as a dead process's locks are."""
        self.check_alive()
        lock = StoreLock(root)
        lock.acquire()
        self.locks.append(lock)
        return lock

    def crash(self, plan: CrashPlan = CrashPlan()) -> dict[Path, int]:
        """Write to disk what survives a power cut; return lost bytes per file.

        After this, every open simulated file refuses further I/O, like a dead
        process. A new store opened on the same directory (with any file
        system) sees exactly the surviving bytes.
        """
        self._crashed = True
        for lock in self.locks:
            lock.release()
        lost: dict[Path, int] = {}
        for path, sim in self.files.items():
            image = bytearray(sim.durable)
            kept_regions: list[tuple[int, int]] = []
            dropped = 0
            for pos, chunk in sim.unsynced:
                roll = self.random.random()
                if roll < plan.keep_probability:
                    keep = len(chunk)
                elif roll < plan.keep_probability + plan.tear_probability:
                    keep = self.random.randrange(0, len(chunk) + 1)
                else:
                    keep = 0
                image[pos : pos + keep] = chunk[:keep]
                if keep:
                    kept_regions.append((pos, keep))
                dropped += len(chunk) - keep
            flippable = plan.flip_only is None or plan.flip_only in str(path)
            for _ in range(plan.bit_flips if kept_regions and flippable else 0):
                pos, length = self.random.choice(kept_regions)
                at = pos + self.random.randrange(length)
                image[at] ^= 1 << self.random.randrange(8)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(bytes(image))
            if dropped:
                lost[path] = dropped
        return lost

    def flip_durable_bit(self, path: Path, pos: int, bit: int = 0) -> None:
        """Damage a byte that was already synced (media corruption)."""
        sim = self.files[path]
        sim.durable[pos] ^= 1 << bit
