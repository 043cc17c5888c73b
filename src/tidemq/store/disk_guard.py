"""Whether the store takes writes, judged by how full its disk is.

RocketMQ refuses every put while the disk is marked full: its clean service
measures the commitlog's partition every 10 s and sets RunningFlags'
DISK_FULL_BIT above diskSpaceWarningLevelRatio (90 %), and clears it at or
below diskSpaceCleanForciblyRatio (85 %); the send path then answers
SERVICE_NOT_AVAILABLE ("the broker's disk is full [CL: ...]"). Reads,
consumer offsets and admin requests go on as usual.

The guard does the same with an injected clock: a write asks `writable()`,
which measures (one statvfs) at most every `check_interval_s`, so a burst of
sends costs one system call a second. A write that failed with ENOSPC calls
`no_space` and the disk is full at once; it takes writes again once use fell
a percent below where the write failed, or, should the ratio never show it (a
quota), after `NO_SPACE_RETRY_S`: a write that finds no room again is refused
as cleanly, nothing is lost by trying. Transitions are logged once each: to
full at WARNING (ratio and path), back to OK at INFO.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from tidemq.common.clock import Clock
from tidemq.store.space import disk_full_next, used_ratio, writable_again_at

log = logging.getLogger(__name__)

NO_SPACE_RETRY_S = 10.0
"""After an ENOSPC, writes are tried again after this long at the latest
(RocketMQ's clean service interval)."""

DiskUsage = Callable[[Path], float]
"""The used ratio (0..1) of the file system holding a path."""


def disk_used_ratio(path: Path) -> float:
    """RocketMQ's used ratio of the partition holding `path` (one statvfs)."""
    stats = os.statvfs(path)
    return used_ratio(stats.f_blocks, stats.f_bfree, stats.f_bavail)


def disk_used_bytes(path: Path) -> int:
    """Bytes in use on the file system holding `path`: its size less its free
    blocks, as RocketMQ's rocketmq_storage_size (File.getTotalSpace -
    getFreeSpace of the store root)."""
    stats = os.statvfs(path)
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


class DiskGuard:
    """The disk-full flag of one store, measured lazily and cached."""

    def __init__(
        self,
        path: Path,
        usage: DiskUsage,
        clock: Clock,
        *,
        warning_ratio: float,
        clean_ratio: float,
        check_interval_s: float,
    ) -> None:
        self.path = path
        self._usage = usage
        self._clock = clock
        self.warning_ratio = warning_ratio
        self.clean_ratio = clean_ratio
        self._interval = check_interval_s
        self.full = False
        self.ratio = 0.0
        self._checked_at: float | None = None
        self._no_space_ratio: float | None = None
        self._no_space_at = 0.0
        self._no_space_reason = ""
        self._warned = False

    def writable(self) -> bool:
        """False while the disk counts as full (measures when the cache is stale)."""
        now = self._clock.monotonic()
        checked = self._checked_at
        if checked is None or now - checked >= self._interval:
            self.measure()
        return not self.full

    def measure(self) -> float:
        """Measure now, apply the hysteresis, log a transition; the ratio."""
        now = self._checked_at = self._clock.monotonic()
        try:
            ratio = self._usage(self.path)
        except OSError as exc:  # the directory went away: keep the last answer
            log.warning("cannot measure disk use of %s: %s", self.path, exc)
            return self.ratio
        self.ratio = ratio
        retrying = self._no_space_ratio is not None and now - self._no_space_at >= NO_SPACE_RETRY_S
        if retrying:
            self._no_space_ratio = None  # a write that finds no room is refused as cleanly
        full = disk_full_next(
            self.full,
            ratio,
            warning_ratio=self.warning_ratio,
            clean_ratio=self.clean_ratio,
            no_space_ratio=self._no_space_ratio,
        )
        if full and not self.full:
            self._no_space_reason = ""
            self._warn(
                "disk of %s is %.0f%% used, more than %.0f%%: the store refuses writes "
                "until it is %.0f%% or less",
                self.path,
                ratio * 100,
                self.warning_ratio * 100,
                self.clean_ratio * 100,
            )
        elif self.full and not full:
            self._no_space_ratio = None
            self._no_space_reason = ""
            if retrying:
                log.debug("disk of %s: trying writes again after running out of space", self.path)
            else:
                self._recovered()
        self.full = full
        return ratio

    def no_space(self, error: OSError, what: str | None = None) -> None:
        """A write failed with ENOSPC: refuse writes from now on (nothing was
        written). `what` names it; by default the file the error names."""
        was_full = self.full
        self.measure()
        self.full = True
        self._no_space_ratio = self.ratio
        self._no_space_at = self._clock.monotonic()
        self._no_space_reason = f"no space left writing {what or self._name(error)}"
        if not was_full:
            self._warn(
                "disk of %s is full (%s: %s, %.0f%% used): the store refuses writes "
                "until space is freed",
                self.path,
                self._no_space_reason,
                error.strerror or error,
                self.ratio * 100,
            )

    def wrote(self) -> None:
        """A write went through: if a full disk was reported, say it is over."""
        if self._warned and not self.full:
            self._recovered()

    def _warn(self, message: str, *args: object) -> None:
        """The transition to full, logged once an episode (retries stay quiet)."""
        if not self._warned:
            self._warned = True
            log.warning(message, *args)

    def _recovered(self) -> None:
        if self._warned:
            self._warned = False
            log.info(
                "disk of %s is %.0f%% used: the store takes writes again",
                self.path,
                self.ratio * 100,
            )

    def _name(self, error: OSError) -> str:
        """The store file an error names, relative to the store's root."""
        if not error.filename:
            return "a store file"
        path = Path(str(error.filename))
        try:
            return str(path.relative_to(self.path))
        except ValueError:
            return str(path)

    def remark(self) -> str:
        """The refusal a producer reads (RocketMQ's text names the disk use the same way)."""
        reason = f"{self._no_space_reason}, " if self._no_space_reason else ""
        limit = writable_again_at(self.clean_ratio, self._no_space_ratio)
        return (
            "service not available now: the broker's disk is full "
            f"[{reason}CL: {self.ratio:.2f} used of {self.path}; "
            f"writes resume at {limit:.2f} or less]"
        )
