"""Which commitlog files to delete: a pure policy, tested with properties.

RocketMQ's rule: a file expires `fileReservedTime` (72 h) after it was last
written. Expired files are deleted at the configured hour (`deleteWhen`, 04)
or at any hour once the disk is fuller than `diskMaxUsedSpaceRatio` (75 %).
Above the force ratio (85 %) the oldest files go even if not expired, unless
forced cleaning is off (`cleanFileForciblyEnable`). Files go oldest first, at
most a batch per run, and never the newest (written) one.
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
    clean_forcibly: bool = True
    """RocketMQ's cleanFileForciblyEnable: off, only expired files are deleted."""


def select_deletions(
    files: Sequence[CommitLogFile],
    now_ms: int,
    policy: RetentionPolicy,
    *,
    hour: int,
    disk_ratio: float,
    manual: bool = False,
) -> list[bool]:
    """For each of the oldest `files` to delete now, in order, whether it is
    forced: deleted before it expired, because the disk is that full."""
    time_up = hour in policy.delete_hours
    space_full = disk_ratio >= policy.disk_max_used_ratio
    force = policy.clean_forcibly and disk_ratio >= policy.disk_force_clean_ratio
    if not (time_up or space_full or manual):
        return []
    deletable = files[:-1]
    forced: list[bool] = []
    for item in deletable[: policy.max_files_per_run]:
        expired = item.last_modified_ms + policy.reserved_ms <= now_ms
        if not (expired or force):
            break
        forced.append(not expired)
    return forced
