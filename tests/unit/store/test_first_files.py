"""The first commitlog file is made at open, not by the first message.

In a broker the first append runs on the event loop; making a 1 GiB file there
(create, size, map, reserve its first 16 MiB) held every message behind it
(benchmarks/loop_stall_probe.py: 9.9 ms at the first message of a run on a
loaded machine). These tests check that open makes it, that the first append
only uses it, and that an unused one goes away at close or survives a crash
harmlessly.
"""

from __future__ import annotations

from pathlib import Path

from tidemq.common.clock import ManualClock
from tidemq.store.api import MessageToStore, PutStatus
from tidemq.store.config import StoreConfig
from tidemq.store.file_store import FileMessageStore
from tidemq.store.fs import RealFileSystem, StoreFile

BASE_MS = 1_700_000_000_000


class _CountingFs(RealFileSystem):
    """The real file layer, noting every file it opens."""

    def __init__(self) -> None:
        self.opened: list[Path] = []

    def open_file(self, path: Path, size: int) -> StoreFile:
        self.opened.append(path)
        return super().open_file(path, size)


def _store(root: Path, fs: RealFileSystem) -> FileMessageStore:
    return FileMessageStore(StoreConfig(root=root), fs=fs, clock=ManualClock(BASE_MS))


def _commitlog_files(root: Path) -> list[str]:
    directory = StoreConfig(root=root).commitlog_dir
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_open_makes_the_first_commitlog_file_and_the_first_append_uses_it(tmp_path: Path) -> None:
    fs = _CountingFs()
    store = _store(tmp_path / "store", fs)
    store.open()
    assert _commitlog_files(tmp_path / "store") == ["00000000000000000000"]
    opened_at_open = len(fs.opened)

    result = store.append([MessageToStore("T", 0, b"first")])

    assert result.status is PutStatus.PUT_OK
    commitlog_opens = [p for p in fs.opened[opened_at_open:] if p.parent.name == "commitlog"]
    assert commitlog_opens == [], "the first append made a commitlog file"
    assert store.commitlog.max_offset == result.results[0].size
    store.close()

    reopened = _store(tmp_path / "store", RealFileSystem())
    reopened.open()
    assert reopened.get_messages("g", "T", 0, 0, 10).message_count == 1
    reopened.close()


def test_an_unused_first_commitlog_file_is_removed_at_close(tmp_path: Path) -> None:
    store = _store(tmp_path / "store", RealFileSystem())
    store.open()
    store.close()
    assert _commitlog_files(tmp_path / "store") == []


def test_an_unused_first_commitlog_file_left_by_a_crash_is_the_empty_log(tmp_path: Path) -> None:
    store = _store(tmp_path / "store", RealFileSystem())
    store.open()
    # A crash (as in test_recovery): the flush thread and the lock go, nothing is closed.
    store.flush.stop()
    store._release_lock()

    recovered = _store(tmp_path / "store", RealFileSystem())
    report = recovered.open()

    assert not report.dropped_anything
    assert recovered.commitlog.max_offset == 0
    result = recovered.append([MessageToStore("T", 0, b"after the crash")])
    assert result.status is PutStatus.PUT_OK
    assert result.results[0].physical_offset == 0
    recovered.close()
