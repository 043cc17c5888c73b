"""Store settings, with RocketMQ's defaults."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from tidemq.common.message import MAX_MESSAGE_SIZE
from tidemq.store.consumequeue import DEFAULT_ENTRIES_PER_FILE

GiB = 1 << 30

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC = "rmq_sys_wheel_timer"
"""RocketMQ 5's timer topic: its tag slot holds the delivery time (TIMER_OUT_MS)."""


class FlushMode(Enum):
    ASYNC = "async"
    SYNC = "sync"


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """'1s 5s 1m 2h' -> delays in milliseconds (RocketMQ's messageDelayLevel)."""
    units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    levels = []
    for word in text.split():
        unit = units.get(word[-1:])
        if unit is None or not word[:-1].isdigit():
            raise ValueError(f"bad delay level {word!r}: expected a number and s, m, h or d")
        levels.append(int(word[:-1]) * unit)
    if not levels:
        raise ValueError("at least one delay level is needed")
    return tuple(levels)


@dataclass(frozen=True)
class StoreConfig:
    root: Path
    commitlog_file_size: int = GiB
    consumequeue_entries_per_file: int = DEFAULT_ENTRIES_PER_FILE
    flush_mode: FlushMode = FlushMode.ASYNC
    flush_interval_commitlog_ms: int = 500
    flush_interval_consumequeue_ms: int = 1000
    sync_flush_timeout_ms: int = 5000
    max_message_size: int = MAX_MESSAGE_SIZE
    max_transfer_bytes: int = 256 * 1024
    max_scan_entries: int = 800
    """A filtered read scans at most this many entries (RocketMQ: 16,000 bytes of entries)."""
    index_enabled: bool = True
    index_max_hash_slots: int = 5_000_000
    index_max_count: int = 20_000_000
    file_reserved_hours: float = 72
    delete_when: str = "04"
    """Hours of the day (';'-separated) when expired files are deleted."""
    disk_max_used_ratio: float = 0.75
    """Above this, expired files are deleted at any hour (diskMaxUsedSpaceRatio)."""
    disk_force_clean_ratio: float = 0.85
    """Above this, the oldest files go even unexpired (diskSpaceCleanForciblyRatio);
    a disk marked full takes writes again at or below it."""
    disk_warning_ratio: float = 0.90
    """Above this, the disk is marked full and writes are refused
    (diskSpaceWarningLevelRatio). RocketMQ clamps it to 0.35..0.90 and the
    force ratio to 0.30..0.85; tidemq takes any 0 < force <= warning <= 1."""
    clean_file_forcibly: bool = True
    """Delete unexpired files above the force ratio (cleanFileForciblyEnable)."""
    disk_check_interval_ms: int = 1000
    """Writes measure disk use at most this often (RocketMQ: every 10 s)."""
    delete_files_per_run: int = 10
    store_host: bytes = b"\x7f\x00\x00\x01"
    store_port: int = 10911
    delay_levels: str = DEFAULT_DELAY_LEVELS
    replica: bool = False
    """A slave's store: its commitlog is written only by the master's HA
    stream (`FileMessageStore.append_replicated`); every put is refused with
    SERVICE_NOT_AVAILABLE, as RocketMQ's DefaultMessageStore refuses puts on
    a SLAVE."""

    @property
    def commitlog_dir(self) -> Path:
        return self.root / "commitlog"

    @property
    def consumequeue_dir(self) -> Path:
        return self.root / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.root / "index"

    @property
    def checkpoint_path(self) -> Path:
        return self.root / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.root / "abort"

    @property
    def delete_hours(self) -> frozenset[int]:
        return frozenset(int(h) for h in self.delete_when.split(";") if h.strip())

    def validate(self) -> None:
        if self.commitlog_file_size < 64 * 1024:
            raise ValueError("commitlog files must be at least 64 KiB")
        if self.max_message_size + 1024 > self.commitlog_file_size:
            raise ValueError("the max message size must fit in one commitlog file")
        if self.consumequeue_entries_per_file < 1:
            raise ValueError("a consumequeue file needs at least one entry")
        if not 0 < self.disk_force_clean_ratio <= self.disk_warning_ratio <= 1:
            raise ValueError(
                "disk ratios must satisfy 0 < disk_force_clean_ratio <= disk_warning_ratio <= 1"
            )
        if not 0 < self.disk_max_used_ratio <= 1:
            raise ValueError("disk_max_used_ratio must be in (0, 1]")
        if len(self.store_host) not in (4, 16):
            raise ValueError("the store host is a 4-byte IPv4 or 16-byte IPv6 address")
        parse_delay_levels(self.delay_levels)
