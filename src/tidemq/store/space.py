"""Disk space policies: pure functions, tested with properties.

Three decisions live here, apart from the code that acts on them:

- how far ahead of a write to reserve a mapped file's blocks
  (`reservation_end`): the store's files are mapped and written through
  memory, and a page with no block behind it on a full disk kills the
  process with SIGBUS. Blocks reserved with fallocate first turn that into
  an ENOSPC the store can refuse cleanly. Reserving a whole 1 GiB commitlog
  file up front would cost the disk at once, so blocks are reserved a chunk
  ahead of the write position;
- how full the disk is (`used_ratio`): RocketMQ's
  `UtilAll.getDiskPartitionSpaceUsedPercent`, which is df's "Use%": used
  blocks over used plus available ones (blocks kept for root do not count),
  rounded up to a whole percent;
- whether the store takes writes (`disk_full_next`): RocketMQ marks the disk
  full above `diskSpaceWarningLevelRatio` (90 %) and OK again only at or
  below `diskSpaceCleanForciblyRatio` (85 %), so the state does not flap
  between two sends (DefaultMessageStore.CleanCommitLogService.isSpaceToDelete,
  RunningFlags.getAndMakeDiskFull / getAndMakeDiskOK). A write that failed
  with ENOSPC marks it full at once, whatever the ratio said.
"""

from __future__ import annotations

import errno
import math
import mmap

PAGE_SIZE = mmap.PAGESIZE
DEFAULT_RESERVE_CHUNK = 16 << 20
"""Commitlog and index files reserve their blocks this far ahead (1 GiB
commitlog files: 64 fallocate calls a file)."""
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
NO_SPACE_MARGIN = 0.01
"""After an ENOSPC the disk is OK again only once use fell a percent below
where the write failed: someone freed space, the next write will not fail
the same way at once."""


def is_no_space(error: BaseException) -> bool:
    """ENOSPC or EDQUOT: the disk (or the quota) is full, nothing else is wrong."""
    return isinstance(error, OSError) and error.errno in NO_SPACE_ERRNOS


def page_ceil(offset: int) -> int:
    return -(-offset // PAGE_SIZE) * PAGE_SIZE


def page_floor(offset: int) -> int:
    return offset - offset % PAGE_SIZE


def reservation_end(needed_end: int, file_size: int, chunk: int) -> int:
    """Where to reserve a file's blocks up to so that bytes below `needed_end`
    can be written: the next multiple of `chunk` at or past it (a whole chunk
    ahead when it falls on a boundary), never past the file's end."""
    if chunk <= 0:
        raise ValueError("the reservation chunk must be positive")
    if needed_end >= file_size:
        return file_size
    ahead = (needed_end // chunk + 1) * chunk
    return min(file_size, ahead)


def used_ratio(total_blocks: int, free_blocks: int, available_blocks: int) -> float:
    """RocketMQ's disk use of a partition (statvfs f_blocks, f_bfree, f_bavail):
    (total - free) / ((total - free) + available), rounded up to 0.01;
    0.0 for a file system that reports no blocks."""
    used = max(0, total_blocks - free_blocks)
    entire = used + max(0, available_blocks)
    if entire <= 0:
        return 0.0
    return math.ceil(used * 100 / entire) / 100


def disk_full_next(
    full: bool,
    ratio: float,
    *,
    warning_ratio: float,
    clean_ratio: float,
    no_space_ratio: float | None = None,
) -> bool:
    """Whether the disk counts as full after measuring `ratio`.

    Full above `warning_ratio`; once full, it stays full until the ratio is
    at or below `clean_ratio` (and, after an ENOSPC seen at `no_space_ratio`,
    a margin below that too).
    """
    if ratio > warning_ratio:
        return True
    if not full:
        return False
    return ratio > writable_again_at(clean_ratio, no_space_ratio)


def writable_again_at(clean_ratio: float, no_space_ratio: float | None = None) -> float:
    """The used ratio at or below which a full disk takes writes again."""
    if no_space_ratio is None:
        return clean_ratio
    return max(0.0, min(clean_ratio, no_space_ratio - NO_SPACE_MARGIN))
