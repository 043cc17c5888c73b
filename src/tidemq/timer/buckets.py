"""Timer files: one per span of delivery time, holding fixed-size units.

`buckets/<bucket start ms, 20 digits>` holds a unit for every timer (and every
recall marker) whose effective time falls in [start, start + span). Units are
appended in enqueue order and read whole when the bucket's window comes near,
so the far future costs disk, not memory. A unit (40 bytes, big-endian):

    eff_ms        i64  effective delivery time (clamped for late entries)
    log_position  i64  where the raw record lies in the timer log (-1: marker)
    source_offset i64  commitlog offset of the parked record or the marker
    key_hash      u64  64-bit hash of delete_key(real topic, UNIQ_KEY) (0: none)
    kind          u8   1 NORMAL, 2 RECALL
    (3 bytes of padding)
    crc32         u32  zlib CRC-32 of the 36 bytes before it

A unit that fails its CRC is skipped when read; a partial unit at the end (a
torn append) is cut off before the file is appended to again.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import logging
import os
import struct
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)

UNIT = struct.Struct(">qqqQB3xI")
_BODY = struct.Struct(">qqqQB3x")


class UnitKind(enum.IntEnum):
    NORMAL = 1
    RECALL = 2


class Unit(NamedTuple):
    eff_ms: int
    log_position: int
    source_offset: int
    key_hash: int
    kind: UnitKind


def key_hash(key: str) -> int:
    """A 64-bit hash of a delete key; never 0 (0 means "no key")."""
    value = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")
    return value or 1


def encode_unit(unit: Unit) -> bytes:
    body = _BODY.pack(unit.eff_ms, unit.log_position, unit.source_offset, unit.key_hash, unit.kind)
    return body + struct.pack(">I", zlib.crc32(body))


def decode_units(data: bytes, name: str = "") -> tuple[list[Unit], int]:
    """The valid units in `data` and how many were dropped (bad CRC or kind)."""
    units: list[Unit] = []
    bad = 0
    usable = len(data) - len(data) % UNIT.size
    view = memoryview(data)
    for index, (eff, position, source, khash, kind, crc) in enumerate(
        UNIT.iter_unpack(view[:usable])
    ):
        start = index * UNIT.size
        if zlib.crc32(view[start : start + _BODY.size]) != crc or kind not in (1, 2):
            bad += 1
            continue
        units.append(Unit(eff, position, source, khash, UnitKind(kind)))
    if bad:
        log.warning("timer file %s: %d unit(s) failed their check and were skipped", name, bad)
    return units, bad


def bucket_start(eff_ms: int, span_ms: int) -> int:
    return eff_ms - eff_ms % span_ms


class TimerFiles:
    """The bucket directory: append units, read a bucket, delete it."""

    def __init__(self, directory: Path, span_ms: int) -> None:
        if span_ms < 1000:
            raise ValueError("a timer file must span at least 1000 ms")
        self.directory = directory
        self.span_ms = span_ms
        self._checked: set[int] = set()
        self._dirty: set[int] = set()
        self._new_files = False
        self._units: dict[int, int] | None = None
        """Bucket start -> units in its file, once `unit_counts` first looked."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._prefix = os.path.join(directory, "")

    def path(self, start: int) -> Path:
        return self.directory / f"{start:020d}"

    def _name(self, start: int) -> str:
        """The file name as a plain string: the enqueue path opens one per unit
        in the worst case, and pathlib costs more than the open."""
        return f"{self._prefix}{start:020d}"

    def starts(self) -> list[int]:
        """Every bucket on disk, in time order."""
        return sorted(int(p.name) for p in self.directory.iterdir() if p.name.isdigit())

    def append(self, units: Iterable[Unit]) -> None:
        """Append units, each to the file of its eff_ms (one write per file)."""
        grouped: dict[int, list[bytes]] = {}
        span = self.span_ms
        for unit in units:
            start = unit.eff_ms - unit.eff_ms % span
            grouped.setdefault(start, []).append(encode_unit(unit))
        for start, encoded in grouped.items():
            self._write(start, b"".join(encoded))
            if self._units is not None:
                self._units[start] = self._units.get(start, 0) + len(encoded)

    def _write(self, start: int, data: bytes) -> None:
        fd = os.open(self._name(start), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            if start not in self._checked:
                size = os.fstat(fd).st_size
                if size == 0:
                    self._new_files = True
                elif size % UNIT.size:
                    log.warning("timer file %020d: cut a torn unit off its end", start)
                    os.ftruncate(fd, size - size % UNIT.size)
                self._checked.add(start)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        self._dirty.add(start)

    def read(self, start: int) -> list[Unit]:
        try:
            data = self.path(start).read_bytes()
        except FileNotFoundError:
            return []
        return decode_units(data, self.path(start).name)[0]

    def take_dirty(self) -> tuple[list[int], bool]:
        """(buckets written since the last call, whether one was created); on the loop thread."""
        dirty, self._dirty = sorted(self._dirty), set()
        new_files, self._new_files = self._new_files, False
        return dirty, new_files

    def requeue_dirty(self, starts: list[int], new_files: bool) -> None:
        """A sync of what `take_dirty` gave failed: sync those buckets next time."""
        self._dirty.update(starts)
        self._new_files = self._new_files or new_files

    def sync_now(self, starts: list[int], new_files: bool) -> None:
        """fsync those buckets (a worker thread may run this)."""
        for start in starts:
            try:
                fd = os.open(self._name(start), os.O_RDONLY)
            except FileNotFoundError:
                continue  # retired meanwhile
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        if new_files:
            with contextlib.suppress(OSError):
                fd = os.open(self.directory, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def unit_counts(self) -> dict[int, int]:
        """Bucket start -> the units its file holds (recall markers included,
        torn tails not cut yet counted down): from the files' sizes the first
        time, kept up to date by `append` and `delete` since."""
        if self._units is None:
            units: dict[int, int] = {}
            for start in self.starts():
                with contextlib.suppress(FileNotFoundError):
                    units[start] = self.path(start).stat().st_size // UNIT.size
            self._units = units
        return self._units

    def delete(self, start: int) -> bool:
        """Remove a bucket's file; False when there was none."""
        if self._units is not None:
            self._units.pop(start, None)
        self._checked.discard(start)
        self._dirty.discard(start)
        try:
            os.unlink(self._name(start))
        except FileNotFoundError:
            return False
        return True
