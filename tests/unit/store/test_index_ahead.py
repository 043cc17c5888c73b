"""Index files made ahead: not on the store's thread, not on a message's way.

Mapping a new file's slots holds the GIL (Python's `mmap.madvise`), 20-30 ms
for RocketMQ's 5 million slots; made by the first message that needed the
file, it stalled the broker's event loop for that long (tidemq.store.index).
These tests check where and how a large file is made, with a file layer that
records the thread that opens each file and every slice of slots mapped.
"""

from __future__ import annotations

import errno
import threading
from pathlib import Path

from tidemq.common.clock import ManualClock
from tidemq.store.api import DispatchRequest, MessageToStore, PutStatus
from tidemq.store.config import StoreConfig
from tidemq.store.file_store import FileMessageStore
from tidemq.store.fs import MmapFile, NoSpaceError, RealFileSystem, StoreFile
from tidemq.store.index import (
    HEADER_SIZE,
    PREFAULT_SLICE_BYTES,
    SLOT_SIZE,
    IndexService,
)
from tidemq.testing.waiting import wait_until

BASE_MS = 1_700_000_000_000


class _RecordingFile(MmapFile):
    """A mapped file that notes each range of pages mapped ahead."""

    def __init__(self, path: Path, size: int, prefaults: list[tuple[int, int]]) -> None:
        super().__init__(path, size)
        self._prefaults = prefaults

    def prefault(self, pos: int, length: int) -> None:
        self._prefaults.append((pos, length))
        super().prefault(pos, length)


class _RecordingFs(RealFileSystem):
    """The real file layer, noting which thread opens each file; `refuse`
    makes opening a new file fail as a full disk does."""

    def __init__(self) -> None:
        self.opened: list[tuple[str, int]] = []
        self.prefaults: list[tuple[int, int]] = []
        self.refuse = False

    def open_file(self, path: Path, size: int) -> StoreFile:
        if self.refuse and not path.exists():
            raise NoSpaceError(errno.ENOSPC, "No space left on device", str(path))
        self.opened.append((path.name, threading.get_ident()))
        return _RecordingFile(path, size, self.prefaults)


def _request(offset: int, key: str) -> DispatchRequest:
    return DispatchRequest("T", 0, offset, 100, 0, BASE_MS, 0, unique_key=key)


def _service(
    directory: Path, fs: _RecordingFs, *, slots: int = 64, entries: int = 20, pauses: list[int]
) -> IndexService:
    service = IndexService(
        directory,
        fs,
        ManualClock(BASE_MS),
        max_hash_slots=slots,
        max_index_count=entries,
        make_ahead_min_slot_bytes=0,  # every file counts as large here
        pause=lambda: pauses.append(len(fs.prefaults)),
    )
    service.load(True, 0)
    return service


def _put(service: IndexService, offset: int) -> None:
    service.reserve(1)
    service.build(_request(offset, f"key-{offset}"))


def _files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def test_the_first_file_is_made_at_open_and_the_first_message_only_uses_it(
    tmp_path: Path,
) -> None:
    fs, pauses = _RecordingFs(), []
    service = _service(tmp_path / "index", fs, pauses=pauses)
    service.make_ahead()
    made = _files(tmp_path / "index")
    assert len(made) == 1 and len(fs.opened) == 1

    _put(service, 0)

    assert len(fs.opened) == 1, "the first message made a file of its own"
    assert service.files() == [tmp_path / "index" / made[0]]
    assert service.query("T", "key-0", 10, 0, 2**62) == [0]
    service.close()


def test_the_next_file_is_made_on_another_thread_before_the_newest_is_full(
    tmp_path: Path,
) -> None:
    """20 entries a file: below 2 free (a tenth) the next one is made by a
    thread of its own, and the message that rolls over takes it."""
    fs, pauses = _RecordingFs(), []
    service = _service(tmp_path / "index", fs, pauses=pauses)
    service.make_ahead()
    caller = threading.get_ident()
    for offset in range(18):  # entry 0 is never used: 19 fit, 1 is left free
        _put(service, offset * 100)
    wait_until(lambda: len(fs.opened) == 2, "the next index file, made ahead")
    assert fs.opened[1][1] != caller, "the next file was made on the store's thread"

    _put(service, 1800)  # the last entry of the first file
    _put(service, 1900)  # the first of the second

    assert len(fs.opened) == 2, "a message made a file although one was made ahead"
    assert [path.name for path in service.files()] == [name for name, _ in fs.opened]
    assert service.query("T", "key-1900", 10, 0, 2**62) == [1900]
    service.close()


def test_a_file_made_while_writes_go_on_maps_its_slots_a_slice_at_a_time(
    tmp_path: Path,
) -> None:
    """With a pause after each slice, so that the GIL is let go between them."""
    slots = 3 * PREFAULT_SLICE_BYTES // SLOT_SIZE  # three slices and the header's bytes
    fs, pauses = _RecordingFs(), []
    service = _service(tmp_path / "index", fs, slots=slots, pauses=pauses)
    service.make_ahead()
    assert fs.prefaults == [(HEADER_SIZE, slots * SLOT_SIZE)], "at open: in one call"
    assert pauses == []
    del fs.prefaults[:]
    for offset in range(18):
        _put(service, offset * 100)
    wait_until(lambda: len(pauses) == 4, "the next index file, made ahead")

    slots_end = HEADER_SIZE + slots * SLOT_SIZE
    assert all(length <= PREFAULT_SLICE_BYTES for _, length in fs.prefaults)
    covered = 0
    for pos, length in fs.prefaults:
        assert pos == covered, "slices leave a gap or overlap"
        covered = pos + length
    assert covered == slots_end
    assert len(fs.prefaults) == 4
    assert pauses == [1, 2, 3, 4], "a slice without a pause after it"
    service.close()


def test_a_file_made_on_the_stores_thread_maps_its_slots_at_once(tmp_path: Path) -> None:
    """Small files (below make_ahead_min_slot_bytes) are made when needed, as before."""
    fs = _RecordingFs()
    service = IndexService(tmp_path / "index", fs, ManualClock(BASE_MS), max_hash_slots=64)
    service.load(True, 0)
    service.make_ahead()
    assert fs.opened == []
    _put(service, 0)
    assert fs.prefaults == [(HEADER_SIZE, 64 * SLOT_SIZE)]
    service.close()


def test_a_made_ahead_file_left_by_a_crash_is_removed_without_a_rebuild(tmp_path: Path) -> None:
    fs, pauses = _RecordingFs(), []
    directory = tmp_path / "index"
    service = _service(directory, fs, pauses=pauses)
    service.make_ahead()
    for offset in range(18):
        _put(service, offset * 100)
    wait_until(lambda: len(_files(directory)) == 2, "the next index file, made ahead")
    service.flush()
    written, _made_ahead = _files(directory)
    # A crash: the process ends without close(); only what is on disk counts.

    reopened = IndexService(
        directory, RealFileSystem(), ManualClock(BASE_MS), max_hash_slots=64, max_index_count=20
    )
    rebuild_from = reopened.load(False, 1800)

    assert rebuild_from is None, "an unused file made ahead asked for a rebuild"
    assert _files(directory) == [written]
    assert [path.name for path in reopened.files()] == [written]
    assert reopened.query("T", "key-1700", 10, 0, 2**62) == [1700]
    reopened.close()
    service.close()


def test_close_removes_a_file_made_ahead_and_never_used(tmp_path: Path) -> None:
    fs, pauses = _RecordingFs(), []
    directory = tmp_path / "index"
    service = _service(directory, fs, pauses=pauses)
    service.make_ahead()
    _put(service, 0)
    for offset in range(1, 18):
        _put(service, offset * 100)
    wait_until(lambda: len(fs.opened) == 2, "the next index file, made ahead")
    service.close()
    assert _files(directory) == [fs.opened[0][0]]


def test_close_waits_for_a_file_being_made_then_removes_it(tmp_path: Path) -> None:
    fs = _RecordingFs()
    directory = tmp_path / "index"
    started, proceed = threading.Event(), threading.Event()

    def pause() -> None:
        if len(fs.opened) == 2:  # the file made ahead of the roll, not the first one
            started.set()
            proceed.wait()

    service = IndexService(
        directory,
        fs,
        ManualClock(BASE_MS),
        max_hash_slots=64,
        max_index_count=20,
        make_ahead_min_slot_bytes=0,
        pause=pause,
    )
    service.load(True, 0)
    service.make_ahead()
    for offset in range(18):
        _put(service, offset * 100)
    assert started.wait(60), "the next file was not being made"
    closer = threading.Thread(target=service.close)
    closer.start()
    proceed.set()
    closer.join(60)
    assert not closer.is_alive()
    assert _files(directory) == [fs.opened[0][0]]


def test_a_file_that_cannot_be_made_ahead_is_tried_once_then_made_when_needed(
    tmp_path: Path,
) -> None:
    fs, pauses = _RecordingFs(), []
    directory = tmp_path / "index"
    service = _service(directory, fs, pauses=pauses)
    service.make_ahead()
    fs.refuse = True  # the disk is full from here on
    for offset in range(18):
        _put(service, offset * 100)
    maker = service._maker
    assert maker is not None
    maker.join(60)
    _put(service, 1800)  # past the threshold again: no second attempt
    assert service._maker is maker

    fs.refuse = False
    _put(service, 1900)  # the roll makes its file on the store's thread
    assert fs.opened[1][1] == threading.get_ident()
    assert service.query("T", "key-1900", 10, 0, 2**62) == [1900]
    service.close()


def test_the_store_makes_its_first_large_index_file_at_open(tmp_path: Path) -> None:
    config = StoreConfig(
        root=tmp_path / "store",
        index_max_hash_slots=(1 << 20) // SLOT_SIZE,  # 1 MiB of slots: made ahead
        index_max_count=1000,
    )
    store = FileMessageStore(config, clock=ManualClock(BASE_MS))
    store.open()
    made = _files(config.index_dir)
    assert len(made) == 1, "no index file made at open"

    result = store.append([MessageToStore("T", 0, b"body", "UNIQ_KEY\x01id-1\x02")])

    assert result.status is PutStatus.PUT_OK
    assert _files(config.index_dir) == made
    assert store.query_by_key("T", "id-1", 1).physical_offsets == [0]
    store.close()

    reopened = FileMessageStore(config, clock=ManualClock(BASE_MS))
    reopened.open()
    assert reopened.query_by_key("T", "id-1", 1).physical_offsets == [0]
    reopened.close()
    assert _files(config.index_dir) == made, "a reopen with room in the newest file made one"
