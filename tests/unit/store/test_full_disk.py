"""A full disk: writes are refused whole, nothing acknowledged is lost, reads,
recovery and retention go on, and writes resume once space is freed.

The simulated file system has a capacity (`FaultyFileSystem(capacity=...)`),
so running out of blocks is an ENOSPC at reservation time, the way
posix_fallocate reports it on a real disk.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from tidemq.common.clock import ManualClock
from tidemq.record.codec import decode_records
from tidemq.store.api import GetStatus, PutStatus
from tidemq.store.config import FlushMode, StoreConfig
from tidemq.store.consumequeue import ConsumeQueue
from tidemq.store.disk_guard import NO_SPACE_RETRY_S
from tidemq.store.file_store import FileMessageStore
from tidemq.store.fs import CrashPlan, FaultyFileSystem, MmapFile, NoSpaceError
from tidemq.store.mapped_file import MappedFileQueue
from tidemq.store.space import PAGE_SIZE
from tidemq.testing.stores import make_message, small_config

QUEUES = 3


def ratios_off(root: Path, **overrides: Any) -> StoreConfig:
    """Small files; disk ratios that never refuse: only ENOSPC does."""
    return small_config(
        root,
        disk_warning_ratio=1.0,
        disk_force_clean_ratio=1.0,
        flush_mode=FlushMode.SYNC,
        **overrides,
    )


def open_store(
    config: StoreConfig, fs: FaultyFileSystem, clock: ManualClock | None = None
) -> FileMessageStore:
    store = FileMessageStore(config, fs=fs, clock=clock or ManualClock(), disk_usage=fs.used_ratio)
    store.open()
    return store


def bodies_by_queue(store: FileMessageStore, topic: str = "T") -> dict[int, list[bytes]]:
    """Every readable body per queue, checking each sits at its queue offset."""
    found: dict[int, list[bytes]] = {}
    for queue_id in range(QUEUES):
        bodies = found.setdefault(queue_id, [])
        offset = store.min_offset(topic, queue_id)
        while True:
            got = store.get_messages("check", topic, queue_id, offset, 32)
            if got.status is not GetStatus.FOUND:
                break
            for expected, message in zip(
                got.queue_offsets, decode_records(got.body()), strict=True
            ):
                assert message.queue_offset == expected
                bodies.append(message.body)
            offset = got.next_begin_offset
    return found


def fill(
    store: FileMessageStore, rng: random.Random, acked: dict[int, list[bytes]], limit: int = 3000
) -> list[str]:
    """Send batches until 10 are refused (or `limit` batches); the refusals' remarks."""
    remarks: list[str] = []
    for n in range(limit):
        queue_id = rng.randrange(QUEUES)
        batch = [
            make_message(
                "T",
                f"{n}-{i}-".encode() * rng.randrange(1, 300),
                queue_id=queue_id,
                keys=f"k{n}-{i} x{n}",
            )
            for i in range(rng.randrange(1, 5))
        ]
        result = store.put_messages_blocking(batch)
        if result.ok:
            offsets = [r.queue_offset for r in result.results]
            start = len(acked.setdefault(queue_id, []))
            assert offsets == list(range(start, start + len(batch)))  # no gap, no reuse
            acked[queue_id].extend(m.body for m in batch)
        else:
            assert result.status is PutStatus.SERVICE_NOT_AVAILABLE
            remarks.append(result.remark)
            if len(remarks) >= 10:
                break
    return remarks


@pytest.mark.parametrize("seed", range(4))
def test_enospc_refuses_whole_batches_and_loses_nothing_acknowledged(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    fs = FaultyFileSystem(seed, capacity=rng.randrange(300_000, 1_500_000))
    clock = ManualClock()
    store = open_store(ratios_off(tmp_path), fs, clock)
    acked: dict[int, list[bytes]] = {}

    remarks = fill(store, rng, acked)

    assert remarks, "the disk never filled"
    assert sum(map(len, acked.values())) > 0
    assert all("disk is full" in r and "no space left writing" in r for r in remarks)
    assert fs.allocated <= (fs.capacity or 0)
    readable = bodies_by_queue(store)
    assert {q: readable[q] for q in acked} == acked  # refused batches left no trace
    assert store.query_by_key("T", "x0", 4).physical_offsets or 0 not in acked

    fs.capacity = None  # space freed: writes resume, offsets go on from where they were
    clock.advance(1.0)
    more = make_message("T", b"after", queue_id=0)
    result = store.put_messages_blocking([more])
    assert result.ok, result.remark
    assert result.results[0].queue_offset == len(acked.get(0, []))
    store.close()


def test_a_restart_on_a_full_disk_serves_reads_and_takes_writes_once_space_is_freed(
    tmp_path: Path,
) -> None:
    rng = random.Random(7)
    fs = FaultyFileSystem(7, capacity=900_000)
    store = open_store(ratios_off(tmp_path), fs)
    acked: dict[int, list[bytes]] = {}
    assert fill(store, rng, acked)
    store.flush.stop()
    fs.crash(CrashPlan(keep_probability=1.0))  # kill -9: the page cache survives

    full = FaultyFileSystem(8, capacity=0)  # no block left for anything new
    clock = ManualClock()
    again = open_store(ratios_off(tmp_path), full, clock)

    readable = bodies_by_queue(again)
    assert {q: readable[q] for q in acked} == acked
    before = full.allocated
    assert fill(again, rng, acked)  # blocks reserved before the crash are used up first
    assert full.allocated == before  # and no new one was taken
    readable = bodies_by_queue(again)
    assert {q: readable[q] for q in acked} == acked

    full.capacity = None
    clock.advance(NO_SPACE_RETRY_S)
    result = again.put_messages_blocking([make_message("T", b"x", queue_id=1)])
    assert result.ok, result.remark
    assert result.results[0].queue_offset == len(acked.get(1, []))
    again.close()


def crashed_store_with_unsynced_derived_files(tmp_path: Path) -> tuple[StoreConfig, list[bytes]]:
    """Acknowledged (synced) commitlog records whose consumequeue and index
    entries were never synced, then a power cut."""
    fs = FaultyFileSystem(3)
    config = ratios_off(tmp_path, flush_interval_consumequeue_ms=600_000, index_max_hash_slots=64)
    store = open_store(config, fs)
    sent = [f"m{i}-".encode() * 50 for i in range(120)]
    for i, body in enumerate(sent):
        assert store.put_messages_blocking([make_message("T", body, keys=f"key{i}")]).ok
    fs.crash(CrashPlan(keep_probability=0.0, tear_probability=0.0))
    store.flush.stop()  # its last flush finds the machine dead
    return config, sent


def test_recovery_on_a_full_disk_serves_reads_and_indexes_later(tmp_path: Path) -> None:
    config, sent = crashed_store_with_unsynced_derived_files(tmp_path)
    full = FaultyFileSystem(4, capacity=0)
    clock = ManualClock()
    store = open_store(config, full, clock)  # the consumequeue files exist: rewritten in place

    assert bodies_by_queue(store)[0] == sent
    assert store.query_by_key("T", "key5", 1).physical_offsets == []  # no room for an index
    assert not store.put_messages_blocking([make_message("T", b"no")]).ok

    full.capacity = None
    clock.advance(NO_SPACE_RETRY_S)
    assert store.put_messages_blocking([make_message("T", b"yes", keys="key-new")]).ok
    assert store.query_by_key("T", "key5", 1).physical_offsets
    assert store.query_by_key("T", "key-new", 1).physical_offsets
    store.close()


def test_recovery_without_room_for_consumequeues_dispatches_them_later(tmp_path: Path) -> None:
    config, sent = crashed_store_with_unsynced_derived_files(tmp_path)
    shutil.rmtree(config.consumequeue_dir)  # every entry must be written anew
    full = FaultyFileSystem(5, capacity=0)
    clock = ManualClock()
    store = open_store(config, full, clock)

    assert store.max_offset("T", 0) == 0  # stored, waiting for room
    refused = store.put_messages_blocking([make_message("T", b"no")])
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE

    full.capacity = None
    clock.advance(NO_SPACE_RETRY_S)
    result = store.put_messages_blocking([make_message("T", b"next")])
    assert result.ok, result.remark
    assert result.results[0].queue_offset == len(sent)
    assert bodies_by_queue(store)[0] == [*sent, b"next"]
    full.crash(CrashPlan(keep_probability=1.0))
    store.flush.stop()

    again = FileMessageStore(config)
    again.open()
    assert bodies_by_queue(again)[0] == [*sent, b"next"]
    again.close()


def test_a_dispatch_that_finds_no_room_is_not_acknowledged_and_catches_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reservation should prevent it; if it ever underestimates, the
    record waits (refused), and appears once there is room (at-least-once)."""
    fs = FaultyFileSystem(0)
    clock = ManualClock()
    store = FileMessageStore(ratios_off(tmp_path), fs=fs, clock=clock, disk_usage=lambda _: 0.5)
    store.open()
    assert store.put_messages_blocking([make_message("T", b"first")]).ok
    put, put_run = ConsumeQueue.put, ConsumeQueue.put_run
    failing = [True]

    def no_room(self: ConsumeQueue, *args: int) -> bool:
        if failing[0]:
            raise NoSpaceError(28, "No space left on device", str(self.log.directory))
        return put(self, *args)

    def no_room_for_a_run(self: ConsumeQueue, first: int, entries: bytes) -> None:
        if failing[0]:
            raise NoSpaceError(28, "No space left on device", str(self.log.directory))
        put_run(self, first, entries)

    # Single messages are dispatched entry by entry (`put`) or, appended as a
    # group, as runs (`put_run`): either finds no room.
    monkeypatch.setattr(ConsumeQueue, "put", no_room)
    monkeypatch.setattr(ConsumeQueue, "put_run", no_room_for_a_run)
    refused = store.put_messages_blocking([make_message("T", b"held")])
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert store.max_offset("T", 0) == 1

    failing[0] = False
    assert not store.put_messages_blocking([make_message("T", b"early")]).ok  # still full
    clock.advance(NO_SPACE_RETRY_S)
    result = store.put_messages_blocking([make_message("T", b"late")])
    assert result.ok and result.results[0].queue_offset == 2
    assert bodies_by_queue(store)[0] == [b"first", b"held", b"late"]
    store.close()


def test_above_the_warning_ratio_writes_are_refused_and_reads_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    ratio = [0.5]
    store = FileMessageStore(small_config(tmp_path), clock=clock, disk_usage=lambda _: ratio[0])
    store.open()
    caplog.set_level(logging.INFO, logger="tidemq.store")
    assert store.put_messages_blocking([make_message("T", b"one")]).ok

    ratio[0] = 0.93
    clock.advance(1.0)
    refused = store.put_messages_blocking([make_message("T", b"two")])
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "disk is full" in refused.remark and "0.93" in refused.remark
    assert store.get_messages("g", "T", 0, 0, 8).status is GetStatus.FOUND
    assert store.runtime_info()["tidemqDiskFull"] == "true"
    assert store.runtime_info()["commitLogDiskRatio"] == "0.93"

    ratio[0] = 0.86  # below the warning ratio, above the clean one: still refused
    clock.advance(1.0)
    assert not store.put_messages_blocking([make_message("T", b"three")]).ok
    ratio[0] = 0.85
    clock.advance(1.0)
    assert store.put_messages_blocking([make_message("T", b"four")]).results[0].queue_offset == 1
    store.close()

    levels = [r.levelname for r in caplog.records if r.name == "tidemq.store.disk_guard"]
    assert levels == ["WARNING", "INFO"]


def test_mapped_files_reserve_blocks_a_chunk_ahead(tmp_path: Path) -> None:
    log = MappedFileQueue(tmp_path / "log", 1 << 20, FaultyFileSystem(0), reserve_chunk=64 << 10)
    log.writable_file().append(b"x" * 100)
    first = log.files[0]
    assert first.file.reserved == 64 << 10
    first.append(b"y" * (64 << 10))
    assert first.file.reserved == 128 << 10
    log.reserve(first.end_offset, (1 << 20) + 10)  # into the next file, made ahead
    assert len(log.files) == 1
    assert first.file.reserved == 1 << 20
    nxt = log.create_file(1 << 20)
    assert nxt.file.reserved >= 10


def test_a_file_that_cannot_be_reserved_is_not_left_behind(tmp_path: Path) -> None:
    fs = FaultyFileSystem(0, capacity=6 * PAGE_SIZE)
    log = MappedFileQueue(tmp_path / "log", 4 * PAGE_SIZE, fs, reserve_chunk=4 * PAGE_SIZE)
    log.writable_file().append(b"x")
    with pytest.raises(NoSpaceError):
        log.reserve(1, 7 * PAGE_SIZE)  # the next file has no room
    assert [p.name for p in fs.files] == ["00000000000000000000"]
    assert [p.name for p in fs.removed] == [f"{4 * PAGE_SIZE:020d}"]
    assert fs.allocated == 4 * PAGE_SIZE
    fs.capacity = None
    log.reserve(1, 7 * PAGE_SIZE)
    assert len(log.files) == 1  # the next file waits aside until the log reaches it


def test_real_files_get_blocks_before_writes(tmp_path: Path) -> None:
    path = tmp_path / "f"
    mapped = MmapFile(path, 8 << 20)
    try:
        assert os.stat(path).st_blocks == 0  # sparse
        mapped.reserve(10, 1 << 20)
        assert mapped.reserved == 1 << 20
        assert os.stat(path).st_blocks * 512 >= 1 << 20
        mapped.write(6 << 20, b"far")  # past the reservation: just its page
        assert mapped.reserved == 1 << 20
        assert os.stat(path).st_blocks * 512 < 2 << 20
    finally:
        mapped.close()


def test_zeroing_a_torn_tail_writes_only_pages_that_hold_data(tmp_path: Path) -> None:
    fs = FaultyFileSystem(0)
    log = MappedFileQueue(tmp_path / "log", 64 * PAGE_SIZE, fs, reserve_chunk=PAGE_SIZE)
    mapped = log.writable_file()
    mapped.append(b"a" * 100)
    mapped.file.write(40 * PAGE_SIZE + 7, b"garbage")
    fs.capacity = fs.allocated  # full: zeroing must need no new block
    assert log.set_end(50) == 50 + len(b"garbage")
    assert bytes(mapped.file.view(0, 64 * PAGE_SIZE)).count(0) == 64 * PAGE_SIZE - 50
