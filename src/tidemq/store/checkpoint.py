"""The checkpoint: how far each derived structure is known to be durable.

Layout (48 bytes, big-endian): magic "TMQC" (4), version int32, commitlog
flushed offset int64, consumequeue offset int64 (every record below it has a
durable consumequeue entry), index offset int64 (likewise for the index),
checkpoint time ms int64, CRC32 of the preceding 40 bytes int32, 4 bytes
padding. Written to a temporary file, fsynced and renamed over the old one,
so a crash leaves either the old or the new checkpoint, never a torn one.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from tidemq.common.atomic_file import write_atomically

_MAGIC = b"TMQC"
_VERSION = 1
_LAYOUT = struct.Struct(">4siqqqq")
_TRAILER = struct.Struct(">I4x")


@dataclass(frozen=True)
class Checkpoint:
    commitlog_offset: int = 0
    consumequeue_offset: int = 0
    index_offset: int = 0
    timestamp_ms: int = 0

    @property
    def safe_offset(self) -> int:
        """Recovery re-dispatches from here: below it everything derived is durable."""
        return min(self.consumequeue_offset, self.index_offset)


def encode_checkpoint(cp: Checkpoint) -> bytes:
    head = _LAYOUT.pack(
        _MAGIC,
        _VERSION,
        cp.commitlog_offset,
        cp.consumequeue_offset,
        cp.index_offset,
        cp.timestamp_ms,
    )
    return head + _TRAILER.pack(zlib.crc32(head))


def decode_checkpoint(data: bytes) -> Checkpoint | None:
    """None when the bytes are not a checkpoint this store wrote."""
    if len(data) != _LAYOUT.size + _TRAILER.size:
        return None
    head = data[: _LAYOUT.size]
    (crc,) = _TRAILER.unpack(data[_LAYOUT.size :])
    if zlib.crc32(head) != crc:
        return None
    magic, version, commitlog, cq, index, ts = _LAYOUT.unpack(head)
    if magic != _MAGIC or version != _VERSION:
        return None
    return Checkpoint(commitlog, cq, index, ts)


def read_checkpoint(path: Path) -> Checkpoint | None:
    try:
        return decode_checkpoint(path.read_bytes())
    except FileNotFoundError:
        return None


def write_checkpoint(path: Path, cp: Checkpoint) -> None:
    write_atomically(path, encode_checkpoint(cp))
