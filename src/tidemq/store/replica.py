"""The store's side of replication: the master's bytes out, a slave's bytes in.

A master reads its commitlog as it lies in the files (`read_chunk`) and a
slave writes the same bytes at the same offsets (`write_chunk`), so the two
commitlogs are identical byte for byte; the slave's store then dispatches the
complete records among them (consumequeues, index, arrivals) through the
same code that dispatches after recovery (`FileMessageStore.append_replicated`).

A SYNC_MASTER's store asks a `ReplicaGate` after each write whether a slave
has it (`tidemq.ha.waits` is the one the broker attaches): PUT_OK, or
SLAVE_NOT_AVAILABLE at once, or a future answered PUT_OK or
FLUSH_SLAVE_TIMEOUT. `combine` joins that answer with the flush's, as
RocketMQ's CommitLog.handleDiskFlushAndHA does: a replica failure wins over a
flush failure, either wins over PUT_OK.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

from tidemq.store.api import PutStatus
from tidemq.store.mapped_file import MappedFileQueue, StoreCorruptedError

__all__ = [
    "REPLICA_REMARKS",
    "ReplicaGate",
    "ReplicaTruncation",
    "combine",
    "read_chunk",
    "write_chunk",
]

REPLICA_REMARKS = {
    PutStatus.FLUSH_SLAVE_TIMEOUT: "stored on the master; no slave acknowledged it in time",
    PutStatus.SLAVE_NOT_AVAILABLE: (
        "stored on the master; no slave is connected, or none is close enough to wait for"
    ),
}
"""Remarks for the answers that mean "stored on the master only" (Java sends
none: a client reads the status from the response code)."""


class ReplicaGate(Protocol):
    """Whether a slave has the commitlog up to `end` (a SYNC_MASTER waits for it)."""

    def wait_replicated(self, end: int) -> PutStatus | asyncio.Future[PutStatus]: ...


def combine(flush: PutStatus, replica: PutStatus) -> PutStatus:
    """One answer from the flush's and the replica's (handleDiskFlushAndHA's thenCombine)."""
    if replica is not PutStatus.PUT_OK:
        return replica
    return flush


@dataclass(frozen=True, slots=True)
class ReplicaTruncation:
    """What a slave dropped when it found itself ahead of its master."""

    offset: int
    """The new end: the master's."""
    previous_end: int
    records: int
    queues: dict[str, tuple[int, int]] = field(default_factory=dict)
    """'topic/queue' -> [first, end) queue offsets dropped."""

    @property
    def dropped_bytes(self) -> int:
        return self.previous_end - self.offset

    def describe(self) -> str:
        shown = ", ".join(f"{key} [{a}, {b})" for key, (a, b) in sorted(self.queues.items()))
        return (
            f"commitlog [{self.offset}, {self.previous_end}): {self.dropped_bytes} bytes, "
            f"{self.records} messages" + (f" ({shown})" if shown else "")
        )


def read_chunk(log: MappedFileQueue, offset: int, max_bytes: int) -> bytes | None:
    """Up to `max_bytes` of the log's bytes from `offset`, within one file: b""
    when nothing is written there yet, None when `offset` is not in the log
    (below its oldest file, or past its end)."""
    if offset >= log.max_offset:
        return b"" if offset == log.max_offset else None
    if offset < log.min_offset:
        return None
    mapped = log.find(offset)
    if mapped is None:
        return None
    position = offset - mapped.start_offset
    # A file the log has left was closed by a blank record: only its 8-byte
    # header is written, the rest of the file is zeros. They are sent too, so
    # that the slave's file fills up and its next bytes go to the next file,
    # as RocketMQ's master sends a file up to its end.
    written = mapped.wrote_position if mapped is log.files[-1] else mapped.size
    size = min(written - position, max_bytes)
    if size <= 0:
        return b""
    return mapped.file.view(position, size).tobytes()


def write_chunk(log: MappedFileQueue, offset: int, data: bytes) -> int:
    """Put `data` at `offset`, the log's end (or anywhere on a file boundary
    when the log is empty), making files as it reaches them; NoSpaceError
    before anything is written when the disk is full. Returns the new end."""
    if log.files and offset != log.max_offset:
        raise StoreCorruptedError(
            f"replicated bytes for {offset}, but the log ends at {log.max_offset}"
        )
    if not log.files and offset % log.file_size:
        raise StoreCorruptedError(f"an empty log cannot start at {offset}, inside a file")
    end = offset + len(data)
    log.reserve(offset, end)
    written = 0
    while written < len(data):
        here = offset + written
        mapped = log.writable_file(here)
        if mapped.end_offset != here:
            raise StoreCorruptedError(
                f"replicated bytes for {here}, but the file ends at {mapped.end_offset}"
            )
        room = mapped.remaining
        piece = data[written : written + room]
        mapped.append(piece)
        written += len(piece)
    return end
