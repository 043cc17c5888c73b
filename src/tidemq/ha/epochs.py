"""The epoch file: which master epoch wrote which stretch of the commitlog (EpochFileCache).

RocketMQ 5 (apache/rocketmq, store/.../ha/autoswitch/EpochFileCache) keeps,
beside the commitlog, one entry per master epoch: the epoch and the
commitlog offset its first byte went to. A broker appends an entry when the
controller makes it master (AutoSwitchHAService.changeToMaster: the epoch
and its commitlog end); a slave takes its master's entries. Two replicas
agree on the commitlog up to the end of the last epoch both have with the
same start (`consistent_point`, EpochFileCache.findConsistentPoint): a
replica coming back as a slave cuts its commitlog there, and so drops what
it wrote as a master that no in-sync replica had.

The file holds one ``epoch-startOffset`` line per entry (Java's
EpochEntrySerializer), written whole and atomically.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tidemq.common.atomic_file import write_atomically

__all__ = ["EPOCH_FILE", "EpochEntry", "EpochFile", "consistent_point", "epoch_at"]

EPOCH_FILE = "epochFileCheckpoint"
"""Its name in the store directory (Java's, beside the commitlog directory)."""


@dataclass(frozen=True, slots=True, order=True)
class EpochEntry:
    epoch: int
    start: int


def _ends(entries: Sequence[EpochEntry], end: int) -> list[int]:
    """Each entry's end: the next one's start, the log's end for the last."""
    return [entries[i + 1].start for i in range(len(entries) - 1)] + [end] if entries else []


def consistent_point(
    local: Sequence[EpochEntry], local_end: int, remote: Sequence[EpochEntry], remote_end: int
) -> int | None:
    """The commitlog offset up to which two replicas hold the same bytes: the
    end of the newest epoch both have with the same start (the smaller of the
    two ends); None when they share no epoch."""
    remote_by_epoch = dict(
        zip(
            (e.epoch for e in remote),
            zip(remote, _ends(remote, remote_end), strict=True),
            strict=True,
        )
    )
    for entry, end in reversed(list(zip(local, _ends(local, local_end), strict=True))):
        found = remote_by_epoch.get(entry.epoch)
        if found is not None and found[0].start == entry.start:
            return min(end, found[1], local_end, remote_end)
    return None


def epoch_at(entries: Sequence[EpochEntry], end: int) -> int:
    """The epoch of the last entry with bytes below `end` (0: none): what a
    replica reports to the controller, whose election prefers the newest."""
    found = 0
    for entry in entries:
        if entry.start < end or (entry.start == end == 0):
            found = entry.epoch
    return found


class EpochFile:
    """The entries of one store, kept in `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[EpochEntry] = self._read()

    def _read(self) -> list[EpochEntry]:
        try:
            text = self.path.read_text(encoding="ascii")
        except FileNotFoundError:
            return []
        entries: list[EpochEntry] = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            epoch, sep, start = line.strip().partition("-")
            if not (sep and epoch.isdigit() and start.isdigit()):
                raise ValueError(f"{self.path}:{number}: not an epoch-startOffset line: {line!r}")
            entries.append(EpochEntry(int(epoch), int(start)))
        return entries

    def _write(self) -> None:
        text = "".join(f"{e.epoch}-{e.start}\n" for e in self.entries)
        write_atomically(self.path, text.encode("ascii"))

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def append(self, epoch: int, start: int) -> bool:
        """A new master epoch begins at `start` (EpochFileCache.appendEntry:
        refused unless both epoch and start grow; a repeat of the last is a no-op)."""
        if self.entries:
            last = self.entries[-1]
            if last == EpochEntry(epoch, start):
                return True
            if epoch <= last.epoch or start < last.start:
                return False
            if start == last.start:
                self.entries.pop()  # the last epoch wrote nothing: the new one replaces it
        self.entries.append(EpochEntry(epoch, start))
        self._write()
        return True

    def replace(self, entries: Sequence[EpochEntry]) -> None:
        """Take another replica's entries (a slave takes its master's)."""
        self.entries = sorted(entries)
        self._write()

    def truncate_from(self, offset: int) -> None:
        """Drop the entries that start at or past `offset` (truncateSuffixByOffset)."""
        kept = [e for e in self.entries if e.start < offset]
        if kept != self.entries:
            self.entries = kept
            self._write()
