"""The file layer under the store: fixed-size files written at positions and
read as memoryviews.

This is the seam for fault injection. `RealFileSystem` maps files with mmap
and makes them durable with fdatasync (which, unlike `mmap.flush`, releases the
GIL). `FaultyFileSystem` keeps every file in memory, remembers which bytes
were synced, and on `crash()` writes to disk what a power cut could leave: the
synced bytes, plus, for each unsynced write, all of it, a torn prefix or
nothing, with optional bit flips, all chosen from a seed. Recovery is then
tested on those real files.

Blocks before bytes: a mapped file is created sparse, and a write through the
mapping into a page with no block behind it faults; on a full disk the kernel
answers that fault with SIGBUS and the process dies. So every file reserves
its blocks (posix_fallocate) before bytes land in them: `reserve` for the
sequential writers, which reserve a chunk ahead, and `write` itself for
anything else. A full disk then raises `NoSpaceError` before anything is
written. Bytes that already hold data have their blocks, so overwriting them
(recovery zeroing a torn tail) needs no new ones, even on a full disk.
Holes must not even be read through the mapping: on tmpfs a read fault takes
a page as well, so scans past the written end ask `data_ranges` first.
`FaultyFileSystem` can be given a capacity to run out of.

Zeros ahead (`zero_ahead`, for a log synced after every append: the
sync-flush commitlog): blocks reserved with fallocate are *unwritten*
extents, and the first sync of each stretch of them must convert them to
written ones, a journal commit that roughly doubles an fdatasync. Writing
zeros there first (plain `pwrite`s a step at a time, synced with the next
data) leaves written blocks behind, so later syncs only write data. The
zeros are written beyond the end of every append made or under way, and an
append that would reach a stretch being zeroed waits for it: zeros never
land on data.

A log's appends (`append_at`) go through `pwrite`, not the mapping. A store
through a mapping first faults the page in, and the fault reads around it:
the page cache fills large folios, zeroed whole for blocks not written yet,
far ahead of the bytes appended. That zeroing was the largest single cost of
a batch append (about half the broker's CPU under a batch produce load,
perf: `zero_user_segments` under `filemap_fault`); `pwrite` copies into the
page cache without a fault and zeroes at most the rest of the page it
starts. In a synced log it also dirties only the blocks it writes, where a
mapped store dirties its whole folio and each fdatasync writes far more than
was appended. Reads stay zero-copy slices of the mapping (Linux keeps both
views of the page cache coherent); other writes (consumequeue entries,
recovery zeroing a torn tail) go through the mapping as before.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import random
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tidemq.store.lock import StoreLock
from tidemq.store.space import PAGE_SIZE, is_no_space, page_ceil, page_floor


class NoSpaceError(OSError):
    """The disk has no block for bytes about to be written: nothing was written."""


class StoreFile(Protocol):
    """One fixed-size file. Positions are relative to the file's start."""

    @property
    def path(self) -> Path: ...

    @property
    def size(self) -> int: ...

    def write(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Write at `pos`, reserving blocks first (NoSpaceError: nothing written)."""
        ...

    def append_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Write a log's next bytes at `pos`: the same as `write`, but safe
        beside `zero_ahead` and, in a file that gets zeros ahead, cheaper to sync."""
        ...

    def zero_ahead(self, start: int, end: int, step: int) -> int:
        """Unless zeros reach `end` already, write up to `step` bytes of them
        from `start` or past what was zeroed before, never before the end of
        an append made or under way and never past the reserved prefix, where
        they make later syncs cheaper: how many were written (0: nothing to do
        or to gain). Bytes from `start` on must hold nothing but zeros."""
        ...

    @property
    def reserved(self) -> int:
        """Bytes [0, reserved) have blocks on disk: writes there cannot fault."""
        ...

    def reserve(self, end: int, ahead_to: int = 0) -> None:
        """Give bytes [0, end) blocks, trying [0, ahead_to) at once (a chunk
        ahead); NoSpaceError, with nothing changed, when the disk is full."""
        ...

    def view(self, pos: int, length: int) -> memoryview: ...

    def data_ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of [start, end) that may hold data, in order; the rest are
        holes (zeros without blocks), to be taken as zeros, never read."""
        ...

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


class FixedSizeFile:
    """What both file kinds share: a path, a fixed size, bounds on writes, and
    which of its bytes have blocks (a prefix, grown by `reserve`)."""

    def __init__(self, path: Path, size: int) -> None:
        self._path = path
        self._size = size
        self._reserved = 0

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

    @property
    def reserved(self) -> int:
        return self._reserved

    def reserve(self, end: int, ahead_to: int = 0) -> None:
        if end <= self._reserved:
            return
        exact = min(self._size, page_ceil(end))
        target = min(self._size, page_ceil(ahead_to))
        if target > exact:
            try:
                self._allocate(self._reserved, target)
            except NoSpaceError:
                pass  # not a whole chunk left: maybe the bytes needed now
            else:
                self._reserved = target
                return
        self._allocate(self._reserved, exact)
        self._reserved = exact

    def _ensure_blocks(self, pos: int, end: int) -> None:
        """Before writing [pos, end) past the reserved prefix: blocks for the
        pages written, and no others (a write far out must not reserve the
        holes before it). Pages that hold data have their blocks already, so
        overwriting them succeeds even on a full disk."""
        start, stop = page_floor(pos), min(self._size, page_ceil(end))
        if start <= self._reserved:
            self._allocate(self._reserved, stop)
            self._reserved = stop
        else:
            self._allocate(start, stop)

    def _allocate(self, start: int, end: int) -> None:
        """Give [start, end) blocks; NoSpaceError when the disk has none left."""
        raise NotImplementedError

    def data_ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        return [(start, end)] if start < end else []

    def write(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        raise NotImplementedError

    def append_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        self.write(pos, data)

    def zero_ahead(self, start: int, end: int, step: int) -> int:
        """Nothing to gain where blocks are not real (see MmapFile)."""
        return 0


_MADV_POPULATE_WRITE = 23
ZERO_STEP = 1 << 20
"""Zeros written by one `zero_ahead` call, at most: one pwrite of this size
takes a fraction of a millisecond, and an append that catches up with the
zeros waits for no more than that."""
_ZEROS = bytes(ZERO_STEP)
_FALLOCATE_UNSUPPORTED = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


class MmapFile(FixedSizeFile):
    """A file mapped shared into memory: reads are zero-copy slices. Created
    sparse; blocks are reserved with posix_fallocate before writes reach them."""

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
        self._fallocate_unsupported = False
        self._zeroing = threading.Condition(threading.Lock())
        """Taken by `zero_ahead` and `close`, by an append only when it must
        wait for zeros (see `append_at`); notified when a stretch is written."""
        self._written_end = 0
        """End of the furthest write made or under way: zeros go only past it.
        Set by the writer's thread alone."""
        self._zeroing_from = size
        """Start of the stretch being zeroed now (the size when none is)."""
        self._zeroed_end = 0
        """Zeros were written up to here (past `_written_end`, they still hold)."""

    def write(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        end = self._check_range(pos, len(data))
        if end > self._reserved:
            self._ensure_blocks(pos, end)
        if end > self._written_end:
            self._written_end = end
        self._mmap[pos:end] = data

    def append_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """With `pwrite` (see the module docstring), after making sure no zeros
        are being written where the bytes go.

        No lock on this path, which every append takes: the append first
        makes its end known, then looks for a stretch being zeroed, while
        `zero_ahead` first claims its stretch, then looks at that end again.
        The GIL runs those steps one at a time in some order, so one of the
        two always sees the other: the zeros back off, or the append waits."""
        length = len(data)
        end = self._check_range(pos, length)
        if end > self._reserved:
            self._ensure_blocks(pos, end)
        if end > self._written_end:
            self._written_end = end
        if end > self._zeroing_from:
            self._wait_for_zeros(end)
        try:
            written = os.pwrite(self._fd, data, pos)
            while written < length:  # a regular file writes everything or fails; be sure
                written += os.pwrite(self._fd, memoryview(data)[written:], pos + written)
        except OSError as exc:
            if is_no_space(exc):
                raise NoSpaceError(exc.errno, exc.strerror, str(self._path)) from None
            raise

    def _wait_for_zeros(self, end: int) -> None:
        """Caught up with the zeros: wait for their stretch (one step's pwrite)."""
        with self._zeroing:
            while end > self._zeroing_from:
                self._zeroing.wait()

    def zero_ahead(self, start: int, end: int, step: int) -> int:
        """A whole step at a time: each stretch of new blocks costs the sync
        that first writes it a journal commit, so the zeros come in few large
        stretches rather than a little ahead of every append. From a page
        boundary (a page's block becomes a written one only if the whole page
        is), past every write this file saw, and only over reserved blocks:
        the zeros take no block the file would not hold anyway. Meant for a
        thread other than the writer's (the flush thread): the writer appends
        meanwhile, and waits only if it reaches the stretch being zeroed.
        `write` is not coordinated with this: only `append_at` may run at the
        same time."""
        with self._zeroing:
            limit = min(end, self._reserved)
            if self._closed or self._zeroed_end >= limit:
                return 0
            start = max(page_ceil(start), page_ceil(self._written_end), self._zeroed_end)
            stop = min(self._reserved, start + min(step, len(_ZEROS)))
            if stop <= start:
                return 0
            self._zeroing_from = start  # the claim first, then the append's end again
            if page_ceil(self._written_end) > start:  # an append got there meanwhile
                self._zeroing_from = self._size
                self._zeroing.notify_all()
                return 0
        written = 0
        try:
            written = os.pwrite(self._fd, memoryview(_ZEROS)[: stop - start], start)
        finally:
            with self._zeroing:
                self._zeroing_from = self._size
                self._zeroed_end = max(self._zeroed_end, start + written)
                self._zeroing.notify_all()
        return written

    def _allocate(self, start: int, end: int) -> None:
        if end <= start or self._fallocate_unsupported:
            return
        try:
            os.posix_fallocate(self._fd, start, end - start)
        except OSError as exc:
            if is_no_space(exc):
                raise NoSpaceError(exc.errno, exc.strerror, str(self._path)) from None
            if exc.errno not in _FALLOCATE_UNSUPPORTED:
                raise
            # A file system without fallocate: writes fault for blocks as before.
            self._fallocate_unsupported = True

    def view(self, pos: int, length: int) -> memoryview:
        return self._view[pos : pos + length]

    def data_ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        """From SEEK_DATA / SEEK_HOLE (the whole range where they are missing)."""
        ranges: list[tuple[int, int]] = []
        pos = start
        try:
            while pos < end:
                data = os.lseek(self._fd, pos, os.SEEK_DATA)
                if data >= end:
                    break
                hole = os.lseek(self._fd, data, os.SEEK_HOLE)
                ranges.append((data, min(hole, end)))
                pos = hole
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no data past `pos`
                return super().data_ranges(start, end)
        return ranges

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
        with self._zeroing:
            self._closed = True  # no zeros start from now on
            while self._zeroing_from < self._size:  # nor is any still being written
                self._zeroing.wait()
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


class SimulatedFile(FixedSizeFile):
    """An in-memory file that knows which of its bytes are durable, and which
    have blocks (charged to its file system's capacity)."""

    def __init__(self, fs: FaultyFileSystem, path: Path, size: int, initial: bytes) -> None:
        super().__init__(path, size)
        self._fs = fs
        self.data = bytearray(size)
        self.data[: len(initial)] = initial
        self.durable = bytearray(self.data)
        self.unsynced: list[tuple[int, bytes]] = []
        self.closed = False
        # What is on disk already has its blocks (a crash image is written whole).
        self._reserved = min(size, page_ceil(len(initial)))
        self.charged = self._reserved
        self._extra_pages: set[int] = set()

    def _allocate(self, start: int, end: int) -> None:
        first, stop = page_floor(start), page_ceil(end)
        new = [
            page
            for page in range(first, stop, PAGE_SIZE)
            if page >= self._reserved and page not in self._extra_pages
        ]
        if not new:
            return
        self._fs.charge(len(new) * PAGE_SIZE, self._path)
        self._extra_pages.update(new)
        self.charged += len(new) * PAGE_SIZE

    def write(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        end = self._check_range(pos, len(data))
        self._fs.check_alive()
        if end > self._reserved:
            self._ensure_blocks(pos, end)
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
    """A file system whose contents can be lost the way a power cut loses them,
    and which, given a `capacity` in bytes, runs out of blocks (ENOSPC)."""

    def __init__(self, seed: int, *, capacity: int | None = None) -> None:
        self.random = random.Random(seed)
        self.files: dict[Path, SimulatedFile] = {}
        self.removed: set[Path] = set()
        self.lock = threading.Lock()
        self.sync_count = 0
        self.locks: list[StoreLock] = []
        self._crashed = False
        self.capacity = capacity
        """Bytes of blocks the files may hold; None: unlimited. Settable at any time."""
        self.allocated = 0
        """Bytes of blocks the open files hold (whole pages)."""

    def check_alive(self) -> None:
        if self._crashed:
            raise CrashedError("the simulated machine has crashed")

    def charge(self, size: int, path: Path) -> None:
        """Take `size` bytes of blocks for `path`, or raise NoSpaceError."""
        with self.lock:
            if self.capacity is not None and self.allocated + size > self.capacity:
                raise NoSpaceError(errno.ENOSPC, "No space left on device (simulated)", str(path))
            self.allocated += size

    def used_ratio(self, _path: Path | None = None) -> float:
        """Blocks held over capacity (0.0 without one): a `disk_usage` for the store."""
        if self.capacity is None:
            return 0.0
        if self.capacity <= 0:
            return 1.0
        return min(1.0, self.allocated / self.capacity)

    def open_file(self, path: Path, size: int) -> StoreFile:
        self.check_alive()
        existing = self.files.get(path)
        if existing is not None and not existing.closed:
            return existing
        initial = path.read_bytes() if path.exists() else b""
        if len(initial) > size:
            raise ValueError(f"{path} is {len(initial)} bytes, expected at most {size}")
        if existing is not None:
            self._release(existing)
        simulated = SimulatedFile(self, path, size, initial)
        with self.lock:
            self.allocated += simulated.charged
        self.files[path] = simulated
        self.removed.discard(path)
        return simulated

    def remove(self, path: Path) -> None:
        removed = self.files.pop(path, None)
        if removed is not None:
            self._release(removed)
        self.removed.add(path)
        path.unlink(missing_ok=True)

    def _release(self, simulated: SimulatedFile) -> None:
        with self.lock:
            self.allocated -= simulated.charged
        simulated.charged = 0

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
