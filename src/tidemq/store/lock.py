"""One writer per store: an exclusive lock on `<store>/lock` for the owner's lifetime.

Two processes appending to one commitlog overwrite each other's records at
the same offsets, and a crash recovery run against a live store deletes the
live owner's `abort` marker. RocketMQ guards its store root with a `lock`
file held through `FileChannel.tryLock` (DefaultMessageStore); tidemq does
the same with `flock`, which the kernel drops when the process dies, so a
kill -9 never leaves a stale lock behind. The file holds the owner's pid,
only so that the refusal can name it.

`flock` locks belong to the open file, not the process: a second open of
the same store inside one process is refused too.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

LOCK_FILE = "lock"


class StoreLockedError(RuntimeError):
    """The store is already open for writing by another owner."""

    def __init__(self, root: Path, pid: int | None) -> None:
        holder = f"process {pid}" if pid is not None else "another process"
        super().__init__(
            f"the store {root} is in use by {holder}; "
            "stop it first, or give this server its own --data-dir"
        )
        self.root = root
        self.pid = pid


class StoreLock:
    """The exclusive lock of the store at `root`: `acquire()`, later `release()`."""

    def __init__(self, root: Path) -> None:
        self.path = root / LOCK_FILE
        self._root = root
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock now or raise StoreLockedError naming the holder."""
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise StoreLockedError(self._root, pid) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Give the lock up (the file stays: removing it would race a new owner)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)


def lock_holder(root: Path) -> int | None:
    """The pid holding the store at `root` now (0 when unknown), or None when
    nobody does. Looks only: never creates the lock file, never keeps the lock."""
    path = root / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            return 0 if pid is None else pid
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
