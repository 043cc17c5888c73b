"""Which commitlog files to delete: a pure policy, tested with properties.

RocketMQ's rule: a file expires `fileReservedTime` (72 h) after it was last
written. Expired files are deleted at the configured hour (`deleteWhen`, 04)
or at any hour once the disk is fuller than `diskMaxUsedSpaceRatio` (75 %).
Above the force ratio (85 %) the oldest files go even if not expired. Files
go oldest first, at most a batch per run, and never the newest (written) one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CommitLogFile:
    start_offset: int
    last_modified_ms: int


@dataclass(frozen=True)
class RetentionPolicy:
    reserved_ms: int = 72 * 3_600_000
    delete_hours: frozenset[int] = frozenset({4})
    disk_max_used_ratio: float = 0.75
    disk_force_clean_ratio: float = 0.85
    max_files_per_run: int = 10


def select_files_to_delete(
    files: Sequence[CommitLogFile],
    now_ms: int,
    policy: RetentionPolicy,
    *,
    hour: int,
    disk_ratio: float,
    manual: bool = False,
) -> int:
    """How many of the oldest `files` (sorted by start offset) to delete now."""
    time_up = hour in policy.delete_hours
    space_full = disk_ratio >= policy.disk_max_used_ratio
    force = disk_ratio >= policy.disk_force_clean_ratio
    if not (time_up or space_full or manual):
        return 0
    deletable = files[:-1]
    count = 0
    for item in deletable[: policy.max_files_per_run]:
        expired = item.last_modified_ms + policy.reserved_ms <= now_ms
        if not (expired or force):
            break
        count += 1
    return count
