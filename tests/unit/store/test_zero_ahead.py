"""Appends through pwrite, and zeros written ahead of a sync-flush commitlog.

The zeros are only a speed-up (written blocks make each fdatasync cheaper),
so what matters here is that they never cost a byte: they land only past
every append made or under way, only over blocks reserved already, and the
files hold exactly the bytes they held before.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidemq.common.clock import ManualClock
from tidemq.store.config import FlushMode
from tidemq.store.file_store import FileMessageStore
from tidemq.store.flush import FlushService
from tidemq.store.fs import REAL_FS, FaultyFileSystem, MmapFile
from tidemq.store.mapped_file import MappedFile, MappedFileQueue
from tidemq.store.space import PAGE_SIZE, page_ceil
from tidemq.testing.stores import make_message, small_config
from tidemq.testing.waiting import HANG_GUARD_S, eventually, wait_until

SIZE = 1 << 20
STEP = 16 * PAGE_SIZE


@pytest.fixture
def mmap_file(tmp_path: Path) -> Iterator[MmapFile]:
    file = MmapFile(tmp_path / "00000000000000000000", SIZE)
    yield file
    file.close()


def written_blocks_end(file: MmapFile) -> int:
    """Where the file's first hole starts (the size when it has none)."""
    ranges = file.data_ranges(0, file.size)
    return ranges[0][1] if ranges and ranges[0][0] == 0 else 0


# -- append_at ---------------------------------------------------------------------


def test_append_at_writes_the_same_bytes_as_write(tmp_path: Path) -> None:
    rng = random.Random(7)
    chunks = [rng.randbytes(rng.randrange(1, 5000)) for _ in range(200)]
    appended = MmapFile(tmp_path / "a", SIZE)
    mapped = MmapFile(tmp_path / "b", SIZE)
    try:
        pos = 0
        for chunk in chunks:
            appended.reserve(pos + len(chunk))
            appended.append_at(pos, chunk)
            mapped.write(pos, chunk)
            pos += len(chunk)
        assert appended.view(0, pos).tobytes() == b"".join(chunks)
    finally:
        appended.close()
        mapped.close()
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()


def test_append_at_past_the_reserved_prefix_reserves_first(mmap_file: MmapFile) -> None:
    mmap_file.append_at(3 * PAGE_SIZE + 10, b"tail")
    assert mmap_file.view(3 * PAGE_SIZE + 10, 4).tobytes() == b"tail"
    assert written_blocks_end(mmap_file) == 0, "the holes before the write got blocks"


# -- zero_ahead --------------------------------------------------------------------


def test_zeros_start_on_the_page_after_the_last_append(mmap_file: MmapFile) -> None:
    mmap_file.reserve(SIZE)
    mmap_file.append_at(0, b"x" * 5000)

    zeroed = mmap_file.zero_ahead(5000, 5000 + 4 * STEP, STEP)

    assert zeroed == STEP
    assert mmap_file.view(0, 5000).tobytes() == b"x" * 5000
    assert mmap_file.view(5000, page_ceil(5000) + STEP - 5000).tobytes() == bytes(
        page_ceil(5000) + STEP - 5000
    )


def test_zeros_come_a_whole_step_at_a_time_until_they_reach_the_lead(
    mmap_file: MmapFile,
) -> None:
    mmap_file.reserve(SIZE)
    mmap_file.append_at(0, b"x" * 100)
    lead_end = 100 + 3 * STEP

    steps = [mmap_file.zero_ahead(100, lead_end, STEP) for _ in range(5)]

    assert steps == [STEP, STEP, STEP, 0, 0]
    # The log grows a little: still ahead enough, so no sliver of zeros per append.
    mmap_file.append_at(100, b"y" * 100)
    assert mmap_file.zero_ahead(200, 200 + 3 * STEP, STEP) == 0


def test_zeros_take_no_block_that_was_not_reserved(mmap_file: MmapFile) -> None:
    mmap_file.reserve(2 * STEP)
    mmap_file.append_at(0, b"x")

    total = sum(mmap_file.zero_ahead(1, SIZE, STEP) for _ in range(10))

    assert total == 2 * STEP - PAGE_SIZE
    assert mmap_file.reserved == 2 * STEP


def test_zeros_never_start_before_the_given_start(tmp_path: Path) -> None:
    """A reopened file does not know how far it was written: the caller's
    start (the recovered end) keeps the zeros off the old data."""
    path = tmp_path / "00000000000000000000"
    first = MmapFile(path, SIZE)
    first.reserve(SIZE)
    first.append_at(0, b"old data" * 1000)
    first.close()
    reopened = MmapFile(path, SIZE)
    try:
        reopened.reserve(SIZE)
        assert reopened.zero_ahead(8000, 8000 + STEP, STEP) == STEP
        assert reopened.view(0, 8000).tobytes() == b"old data" * 1000
    finally:
        reopened.close()


def test_an_append_reaching_zeros_being_written_waits_for_them(
    mmap_file: MmapFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    mmap_file.reserve(SIZE)
    mmap_file.append_at(0, b"a" * 100)
    real_pwrite = os.pwrite
    zeros_started = threading.Event()
    let_zeros_finish = threading.Event()

    def pwrite(fd: int, data: bytes | memoryview, offset: int) -> int:
        if len(data) == STEP and not any(data):  # the zeros: held until released
            zeros_started.set()
            assert let_zeros_finish.wait(HANG_GUARD_S)
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)  # what fs calls
    zeroing = threading.Thread(target=mmap_file.zero_ahead, args=(100, 100 + STEP, STEP))
    zeroing.start()
    record = b"r" * (2 * PAGE_SIZE)  # from 100 into the stretch being zeroed
    appending = threading.Thread(target=mmap_file.append_at, args=(100, record))
    try:
        assert zeros_started.wait(HANG_GUARD_S)
        appending.start()
        appending.join(0.2)
        assert appending.is_alive(), "the append went ahead while zeros were written there"
    finally:
        let_zeros_finish.set()
        zeroing.join(HANG_GUARD_S)
    appending.join(HANG_GUARD_S)
    assert not appending.is_alive()

    assert mmap_file.view(0, 100 + len(record)).tobytes() == b"a" * 100 + record


def test_zeros_never_land_on_appends_made_at_the_same_time(tmp_path: Path) -> None:
    """A writer appends records while another thread zeros ahead, in small
    steps that keep catching up with it: the file ends up holding exactly
    the records, then zeros."""
    rng = random.Random(11)
    records = [rng.randbytes(rng.randrange(100, 3 * PAGE_SIZE)) for _ in range(600)]
    size = page_ceil(sum(map(len, records))) + 64 * PAGE_SIZE
    mapped = MappedFile(0, MmapFile(tmp_path / "log", size), reserve_chunk=size)
    mapped.append(records[0])
    # Appends are pwrites, which let go of the GIL: the threads really interleave.
    zeroed = [mapped.file.zero_ahead(len(records[0]), len(records[0]) + PAGE_SIZE, PAGE_SIZE)]
    stop = threading.Event()
    zeros_written = threading.Event()

    def zero_ahead() -> None:
        while not stop.is_set():
            wrote = mapped.wrote_position
            zeroed.append(mapped.file.zero_ahead(wrote, wrote + 2 * PAGE_SIZE, PAGE_SIZE))
            if zeroed[-1]:
                zeros_written.set()

    zeroing = threading.Thread(target=zero_ahead)
    zeroing.start()
    try:
        half = len(records) // 2
        for record in records[1:half]:
            mapped.append(record)
        # the zeros run between the appends however the threads are scheduled
        assert zeros_written.wait(HANG_GUARD_S), "the zeroing thread never wrote"
        for record in records[half:]:
            mapped.append(record)
    finally:
        stop.set()
        zeroing.join(HANG_GUARD_S)
    try:
        expected = b"".join(records)
        assert sum(zeroed[1:]) > 0, "no zeros were written: the race was not exercised"
        assert mapped.file.view(0, len(expected)).tobytes() == expected
        rest = mapped.file.view(len(expected), size - len(expected)).tobytes()
        assert rest == bytes(len(rest))
    finally:
        mapped.file.close()


def test_closing_waits_for_zeros_being_written_and_stops_them(
    mmap_file: MmapFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    mmap_file.reserve(SIZE)
    real_pwrite = os.pwrite
    zeros_started = threading.Event()
    let_zeros_finish = threading.Event()

    def pwrite(fd: int, data: bytes | memoryview, offset: int) -> int:
        zeros_started.set()
        assert let_zeros_finish.wait(HANG_GUARD_S)
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)  # what fs calls
    zeroing = threading.Thread(target=mmap_file.zero_ahead, args=(0, STEP, STEP))
    zeroing.start()
    closing = threading.Thread(target=mmap_file.close)
    try:
        assert zeros_started.wait(HANG_GUARD_S)
        closing.start()
        closing.join(0.2)
        assert closing.is_alive(), "closed (and freed its descriptor) under a write"
    finally:
        let_zeros_finish.set()
        zeroing.join(HANG_GUARD_S)
    closing.join(HANG_GUARD_S)
    assert not closing.is_alive()

    assert mmap_file.zero_ahead(STEP, 2 * STEP, STEP) == 0


def test_simulated_files_gain_nothing_and_write_nothing(tmp_path: Path) -> None:
    fs = FaultyFileSystem(seed=3)
    file = fs.open_file(tmp_path / "f", SIZE)
    file.reserve(SIZE)
    file.append_at(0, b"abc")
    assert file.zero_ahead(3, SIZE, STEP) == 0
    assert file.view(0, 3).tobytes() == b"abc"


def test_the_queue_zeros_ahead_of_its_last_file_only(tmp_path: Path) -> None:
    queue = MappedFileQueue(tmp_path / "log", 2 * STEP, REAL_FS, reserve_chunk=2 * STEP)
    assert queue.zero_ahead(4 * STEP, STEP) == 0, "no file yet"
    try:
        queue.reserve(0, 2 * STEP + 100)  # the second file made ahead, kept aside
        queue.writable_file().append(b"x" * 100)

        assert queue.zero_ahead(4 * STEP, STEP) == STEP
        assert queue.zero_ahead(4 * STEP, STEP) == STEP - PAGE_SIZE
        assert queue.zero_ahead(4 * STEP, STEP) == 0, "past the file: the next one waits"
    finally:
        queue.close()


# -- the flush thread --------------------------------------------------------------


class Counting:
    def __init__(self, error: BaseException | None = None) -> None:
        self.calls = 0
        self.error = error

    def __call__(self) -> int:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return 0


def flush_service(*, sync: bool, prepare: Counting) -> FlushService:
    return FlushService(
        sync_mode=sync,
        flush_commitlog=lambda: 100,
        flush_derived=lambda: None,
        commitlog_interval_ms=1,
        prepare_commitlog=prepare,
    )


def test_sync_mode_prepares_the_commitlog_after_its_rounds() -> None:
    prepare = Counting()
    flush = flush_service(sync=True, prepare=prepare)
    flush.start()
    try:
        assert flush.wait_blocking(100, HANG_GUARD_S)
        wait_until(lambda: prepare.calls >= 3, "three rounds, each followed by a step")
    finally:
        flush.stop()


def test_async_mode_never_prepares() -> None:
    prepare = Counting()
    flush = flush_service(sync=False, prepare=prepare)
    flush.start()
    try:
        wait_until(lambda: flush.flush_count >= 3, "three async flushes")
    finally:
        flush.stop()
    assert prepare.calls == 0


def test_a_failed_preparation_is_logged_once_and_syncs_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    prepare = Counting(OSError(28, "No space left on device"))
    flush = flush_service(sync=True, prepare=prepare)
    flush.start()
    try:
        wait_until(lambda: flush.flush_count >= 5, "five rounds after the failure")
        assert flush.wait_blocking(100, HANG_GUARD_S)
        assert flush.failed is None and flush.trouble is None
    finally:
        flush.stop()
    assert prepare.calls == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "ENOSPC" in warnings[0], warnings


# -- the store ---------------------------------------------------------------------


def zeros_ahead(last: MappedFile) -> bool:
    assert isinstance(last.file, MmapFile)
    return written_blocks_end(last.file) > page_ceil(last.wrote_position)


def store_files(root: Path) -> dict[str, bytes]:
    """Every commitlog and consumequeue file, by path under the root."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for part in ("commitlog", "consumequeue")
        for path in sorted((root / part).rglob("*"))
        if path.is_file()
    }


async def test_a_sync_store_writes_the_same_files_with_zeros_ahead(tmp_path: Path) -> None:
    """Byte for byte what an async-flush store writes (it never zeros ahead),
    across a file roll; reopened, it finds the same end: zeros are no records."""
    bodies = [f"message {i} ".encode() * (10 + i % 30) for i in range(1200)]
    ends: dict[FlushMode, int] = {}
    for mode in (FlushMode.SYNC, FlushMode.ASYNC):
        store = FileMessageStore(
            small_config(tmp_path / mode.value, flush_mode=mode), clock=ManualClock()
        )
        store.open()
        try:
            async with asyncio.timeout(HANG_GUARD_S):
                for i, body in enumerate(bodies):  # one writer: the same order in both
                    assert (await store.put_message(make_message("T", body, queue_id=i % 3))).ok
            if mode is FlushMode.SYNC:
                assert len(store.commitlog.log.files) > 1, "no file roll"
                await eventually(
                    functools.partial(zeros_ahead, store.commitlog.log.files[-1]),
                    "zeros written ahead of the sync store's end",
                )
            ends[mode] = store.commitlog.max_offset
        finally:
            store.close()

    assert ends[FlushMode.SYNC] == ends[FlushMode.ASYNC]
    assert store_files(tmp_path / "sync") == store_files(tmp_path / "async")
    reopened = FileMessageStore(small_config(tmp_path / "sync", flush_mode=FlushMode.SYNC))
    reopened.open()
    try:
        assert reopened.commitlog.max_offset == ends[FlushMode.SYNC]
        assert [reopened.max_offset("T", q) for q in range(3)] == [400, 400, 400]
    finally:
        reopened.close()
