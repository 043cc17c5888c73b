"""What recovery found and dropped, so nothing is ever dropped silently."""

from __future__ import annotations

from dataclasses import dataclass, field

from tidemq.store.checkpoint import Checkpoint


@dataclass
class RecoveryReport:
    clean_shutdown: bool
    checkpoint: Checkpoint | None
    scanned_from: int = 0
    commitlog_end: int = 0
    stop_reason: str = ""
    truncated_bytes: int = 0
    """Non-zero bytes past the last valid record that were cleared."""
    records_scanned: int = 0
    redispatched: int = 0
    """Consumequeue entries that had to be written again."""
    consumequeue_dropped: dict[str, int] = field(default_factory=dict)
    """'topic/queueId' -> entries dropped because their records were lost."""
    index_rebuilt_from: int | None = None
    index_files_dropped: int = 0

    @property
    def dropped_anything(self) -> bool:
        return bool(self.truncated_bytes or self.consumequeue_dropped or self.index_files_dropped)

    def summary(self) -> str:
        how = "clean shutdown" if self.clean_shutdown else "crash recovery"
        parts = [
            f"{how}: commitlog valid up to {self.commitlog_end}",
            f"scanned {self.records_scanned} records from {self.scanned_from}",
            f"re-dispatched {self.redispatched}",
        ]
        if self.truncated_bytes:
            parts.append(f"truncated {self.truncated_bytes} bytes ({self.stop_reason})")
        for queue, count in sorted(self.consumequeue_dropped.items()):
            parts.append(f"dropped {count} consumequeue entries of {queue}")
        if self.index_files_dropped:
            parts.append(
                f"dropped {self.index_files_dropped} index files, "
                f"rebuilt from {self.index_rebuilt_from}"
            )
        return "; ".join(parts)
