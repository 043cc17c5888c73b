"""The timer log: raw copies of parked records, so commitlog retention (72 h)
cannot delete a message that is due in 30 days.

Append-only segment files `timerlog/<start position, 20 digits>`. A position
is global: segment start + offset in the segment, and is never reused. Each
record is

    total length  i32   (header + raw record)
    magic         u32   0x544D4C47 ("TMLG")
    crc32         u32   zlib CRC-32 of everything after this field
    eff_ms        i64   effective delivery time (what the timer file says)
    source_offset i64   commitlog offset of the parked record
    raw record          the parked commitlog record, byte for byte

A record never straddles segments: when it does not fit in what is left of
`segment_size`, a new segment starts at the current end. Recovery checks the
records past the last checkpointed end and truncates at the first torn one;
the next append then opens a new segment at the *old* end of the file, so a
stale timer-file unit that pointed into the torn tail can never point at a
different record later (`holds` is false for it, and the entry is enqueued
again from the consumequeue).

Writes go straight to the file descriptor (no user-space buffer), so a
`kill -9` loses nothing that `append` returned; `sync` makes it durable.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)

HEAD = struct.Struct(">iIIqq")
MAGIC = 0x544D4C47
_CRC_FROM = 12
"""The CRC covers the record from eff_ms on."""
_FIRST_READ = 4096
"""Bytes read at once when a record is read back (a longer record takes two reads)."""


class TimerLogError(ValueError):
    """A record that is missing or does not check out."""


class LogRecord(NamedTuple):
    eff_ms: int
    source_offset: int
    raw: bytes


def encode_log_record(eff_ms: int, source_offset: int, raw: bytes) -> bytes:
    tail = struct.pack(">qq", eff_ms, source_offset) + raw
    return struct.pack(">iII", HEAD.size + len(raw), MAGIC, zlib.crc32(tail)) + tail


@dataclass
class Segment:
    start: int
    path: Path
    length: int
    max_eff_ms: int = -1
    """The latest eff_ms of a record in it: deletable once all of it is delivered."""
    fd: int | None = None

    @property
    def end(self) -> int:
        return self.start + self.length


def _segment_name(start: int) -> str:
    return f"{start:020d}"


class TimerLog:
    def __init__(self, directory: Path, segment_size: int) -> None:
        if segment_size < 4096:
            raise ValueError("timer log segments must be at least 4096 bytes")
        self.directory = directory
        self.segment_size = segment_size
        self.segments: list[Segment] = []
        self._roll_next = False
        self._dead_end = 0
        """Where the next segment starts after a torn tail was cut off."""
        self._unsynced: set[int] = set()
        self._new_files = False

    # -- opening and recovery ------------------------------------------------

    def open(self, trusted_end: int, max_eff: dict[int, int]) -> list[LogRecord]:
        """Load the segments; check every record at or after `trusted_end`
        (the end the last checkpoint made durable), truncating at the first torn
        one. `max_eff` is the checkpoint's per-segment bookkeeping. Returns the
        records found after `trusted_end` (header fields only, raw left empty)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for path in sorted(self.directory.iterdir()):
            if not path.name.isdigit():
                continue
            start = int(path.name)
            self.segments.append(Segment(start, path, path.stat().st_size, max_eff.get(start, -1)))
        tail: list[LogRecord] = []
        for segment in self.segments:
            if segment.end <= trusted_end:
                continue
            first = max(trusted_end - segment.start, 0)
            valid_end, found = self._check_segment(segment, first)
            tail.extend(found)
            for record in found:
                segment.max_eff_ms = max(segment.max_eff_ms, record.eff_ms)
            if valid_end < segment.length:
                log.warning(
                    "timer log %s: torn tail at %d of %d bytes, truncated",
                    segment.path.name,
                    valid_end,
                    segment.length,
                )
                old_end = segment.end
                with open(segment.path, "r+b") as handle:
                    handle.truncate(valid_end)
                    os.fsync(handle.fileno())
                segment.length = valid_end
                self._roll_next = True
                self._dead_end = old_end
        return tail

    def _check_segment(self, segment: Segment, first: int) -> tuple[int, list[LogRecord]]:
        data = segment.path.read_bytes()
        pos = first
        found: list[LogRecord] = []
        while pos + HEAD.size <= len(data):
            total, magic, crc, eff_ms, source = HEAD.unpack_from(data, pos)
            if magic != MAGIC or total < HEAD.size or pos + total > len(data):
                break
            if zlib.crc32(memoryview(data)[pos + _CRC_FROM : pos + total]) != crc:
                break
            found.append(LogRecord(eff_ms, source, b""))
            pos += total
        return pos, found

    # -- writing -------------------------------------------------------------

    @property
    def end(self) -> int:
        """The position the next record gets (when it fits the active segment)."""
        if not self.segments:
            return self._dead_end
        last = self.segments[-1]
        return max(last.end, self._dead_end) if self._roll_next else last.end

    def append_many(self, records: Sequence[tuple[int, int, bytes]]) -> list[int]:
        """Append (eff_ms, source_offset, raw) records; their positions."""
        positions: list[int] = []
        pending: list[bytes] = []
        segment = self._writable()
        pending_len = 0
        for eff_ms, source, raw in records:
            encoded = encode_log_record(eff_ms, source, raw)
            if segment.length + pending_len + len(encoded) > self.segment_size and (
                segment.length + pending_len > 0
            ):
                self._write(segment, pending)
                pending, pending_len = [], 0
                segment = self._roll(segment.end)
            positions.append(segment.end + pending_len)
            pending.append(encoded)
            pending_len += len(encoded)
            segment.max_eff_ms = max(segment.max_eff_ms, eff_ms)
        self._write(segment, pending)
        return positions

    def _writable(self) -> Segment:
        if not self.segments or self._roll_next:
            start = self.end
            self._roll_next = False
            return self._roll(start)
        return self.segments[-1]

    def _roll(self, start: int) -> Segment:
        self.directory.mkdir(parents=True, exist_ok=True)
        segment = Segment(start, self.directory / _segment_name(start), 0)
        self.segments.append(segment)
        self._new_files = True
        return segment

    def _fd(self, segment: Segment) -> int:
        if segment.fd is None:
            segment.fd = os.open(segment.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        return segment.fd

    def _write(self, segment: Segment, pending: list[bytes]) -> None:
        if not pending:
            return
        data = memoryview(b"".join(pending))
        fd = self._fd(segment)
        while data:
            written = os.write(fd, data)
            segment.length += written
            data = data[written:]
        self._unsynced.add(segment.start)

    def take_unsynced(self) -> tuple[list[int], bool]:
        """(descriptors written since the last call, whether a segment was
        created): what `sync_now` must fsync. Called on the loop thread, so the
        fsync itself can run in a worker while the loop keeps appending."""
        starts, self._unsynced = self._unsynced, set()
        new_files, self._new_files = self._new_files, False
        fds = [s.fd for s in self.segments if s.start in starts and s.fd is not None]
        return fds, new_files

    def requeue_unsynced(self, fds: list[int], new_files: bool) -> None:
        """A sync of what `take_unsynced` gave failed: those segments are still
        unsynced, so the next checkpoint must sync them again."""
        self._unsynced |= {s.start for s in self.segments if s.fd is not None and s.fd in fds}
        self._new_files = self._new_files or new_files

    def sync_now(self, fds: list[int], new_files: bool) -> None:
        for fd in fds:
            os.fsync(fd)
        if new_files:
            sync_dir(self.directory)

    # -- reading -------------------------------------------------------------

    def holds(self, position: int) -> bool:
        """True when a record may start at `position` (it lies in written data)."""
        segment = self._find(position)
        return segment is not None and position + HEAD.size <= segment.end

    def read(self, position: int) -> LogRecord:
        segment = self._find(position)
        if segment is None or position + HEAD.size > segment.end:
            raise TimerLogError(f"no timer log record at {position}")
        fd = self._fd(segment)
        offset = position - segment.start
        data = os.pread(fd, _FIRST_READ, offset)  # most records: one read
        if len(data) < HEAD.size:
            raise TimerLogError(f"timer log record at {position} is cut short")
        total, magic, crc, eff_ms, source = HEAD.unpack_from(data)
        if magic != MAGIC or total < HEAD.size or position + total > segment.end:
            raise TimerLogError(f"bad timer log record header at {position}")
        if len(data) < total:
            data += os.pread(fd, total - len(data), offset + len(data))
        if len(data) < total:
            raise TimerLogError(f"timer log record at {position} is cut short")
        view = memoryview(data)[:total]
        if zlib.crc32(view[_CRC_FROM:]) != crc:
            raise TimerLogError(f"timer log record at {position} fails its CRC")
        return LogRecord(eff_ms, source, bytes(view[HEAD.size :]))

    def _find(self, position: int) -> Segment | None:
        lo, hi = 0, len(self.segments)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.segments[mid].start <= position:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            return None
        segment = self.segments[lo - 1]
        return segment if position < segment.end else None

    def __iter__(self) -> Iterator[Segment]:
        return iter(self.segments)

    # -- retirement ----------------------------------------------------------

    def retire(self, delivered_below_ms: int) -> list[int]:
        """Delete the segments (never the active one) whose every record has
        eff_ms < `delivered_below_ms`; their starts."""
        gone: list[int] = []
        keep: list[Segment] = []
        for index, segment in enumerate(self.segments):
            last = index == len(self.segments) - 1
            if not last and segment.max_eff_ms < delivered_below_ms:
                if segment.fd is not None:
                    os.close(segment.fd)
                    segment.fd = None
                with contextlib.suppress(FileNotFoundError):
                    segment.path.unlink()
                gone.append(segment.start)
            else:
                keep.append(segment)
        self.segments = keep
        return gone

    def bookkeeping(self) -> dict[int, int]:
        """Per segment start, the latest eff_ms in it (for the checkpoint)."""
        return {segment.start: segment.max_eff_ms for segment in self.segments}

    def close(self) -> None:
        for segment in self.segments:
            if segment.fd is not None:
                os.close(segment.fd)
                segment.fd = None


def sync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
