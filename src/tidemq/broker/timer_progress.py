"""How far a broker's timer has got, as RocketMQ 5 hands it to a slave.

A master answers GET_TIMER_CHECK_POINT (60) with Java's 56-byte
TimerCheckpoint.encode body: lastReadTimeMs, lastTimerLogFlushPos,
lastTimerQueueOffset, masterTimerQueueOffset, then the data version
(stateVersion, timestamp, counter), each a big-endian int64
(AdminBrokerProcessor.getTimerCheckPoint). A slave asks for it with the other
tables and keeps lastReadTimeMs, masterTimerQueueOffset and the data version
(SlaveSynchronize.syncTimerCheckPoint), so that once it serves as the master
it delivers from where its master stopped.

tidemq's own checkpoint (tidemq.timer.checkpoint) maps onto Java's fields:
the watermark's time is the last read time (every timer message due at or
before it was delivered), the timer log's durable end the flush position and
the next TIMER_TOPIC offset to enqueue both queue offsets. The slave keeps
the copy in `config/timerMasterProgress.json`; it runs no timer itself.
"""

from __future__ import annotations

import json
import logging
import struct
from dataclasses import asdict, dataclass
from pathlib import Path

from tidemq.common.atomic_file import write_atomically
from tidemq.timer.checkpoint import FILE_NAME, TimerCheckpoint, load_checkpoint

__all__ = [
    "MASTER_PROGRESS_FILE",
    "TimerProgress",
    "decode_progress",
    "encode_progress",
    "from_checkpoint",
    "load_master_progress",
    "read_progress",
    "save_master_progress",
]

log = logging.getLogger(__name__)

MASTER_PROGRESS_FILE = "timerMasterProgress.json"
"""Under a slave's config directory: its master's timer progress."""
_LAYOUT = struct.Struct(">7q")
_WITHOUT_VERSION = struct.Struct(">4q")
"""Bodies of RocketMQ before the data version was added (TimerCheckpoint.decode reads both)."""


class TimerProgressError(ValueError):
    """A GET_TIMER_CHECK_POINT body that is not one."""


@dataclass(frozen=True, slots=True)
class TimerProgress:
    last_read_time_ms: int
    last_timer_log_flush_pos: int
    last_timer_queue_offset: int
    master_timer_queue_offset: int
    state_version: int = 0
    timestamp_ms: int = 0
    counter: int = 0


def from_checkpoint(checkpoint: TimerCheckpoint, timestamp_ms: int) -> TimerProgress:
    """A master's progress from its durable checkpoint, stamped `timestamp_ms`."""
    return TimerProgress(
        last_read_time_ms=max(0, checkpoint.watermark_ms),
        last_timer_log_flush_pos=checkpoint.log_end,
        last_timer_queue_offset=checkpoint.enqueue_offset,
        master_timer_queue_offset=checkpoint.enqueue_offset,
        timestamp_ms=timestamp_ms,
        counter=checkpoint.enqueue_offset,
    )


def read_progress(timer_directory: Path) -> TimerProgress:
    """The progress of the timer whose files are in `timer_directory`, from its
    durable checkpoint (stamped with the checkpoint's write time); all zero
    before the first checkpoint. TimerCheckpointError if it is unreadable."""
    checkpoint = load_checkpoint(timer_directory)
    if checkpoint is None:
        return from_checkpoint(TimerCheckpoint(), 0)
    written_ms = (timer_directory / FILE_NAME).stat().st_mtime_ns // 1_000_000
    return from_checkpoint(checkpoint, written_ms)


def encode_progress(progress: TimerProgress) -> bytes:
    return _LAYOUT.pack(
        progress.last_read_time_ms,
        progress.last_timer_log_flush_pos,
        progress.last_timer_queue_offset,
        progress.master_timer_queue_offset,
        progress.state_version,
        progress.timestamp_ms,
        progress.counter,
    )


def decode_progress(body: bytes) -> TimerProgress:
    if len(body) == _LAYOUT.size:
        return TimerProgress(*_LAYOUT.unpack(body))
    if len(body) == _WITHOUT_VERSION.size:
        return TimerProgress(*_WITHOUT_VERSION.unpack(body))
    raise TimerProgressError(
        f"a timer checkpoint is {_LAYOUT.size} (or {_WITHOUT_VERSION.size}) bytes, not {len(body)}"
    )


def save_master_progress(path: Path, progress: TimerProgress) -> None:
    """Keep what a slave copied (atomically: a crash leaves the old copy or the new)."""
    write_atomically(path, json.dumps(asdict(progress), sort_keys=True).encode())


def load_master_progress(path: Path) -> TimerProgress | None:
    """What a slave last copied of its master's progress; None if it never
    copied any (or the copy is unreadable: the timer then starts as a new
    master would, and says so)."""
    try:
        document = json.loads(path.read_text())
        return TimerProgress(**document)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        log.warning("the copy of the master's timer progress in %s is unusable: %s", path, exc)
        return None
