"""Sync flush acknowledges only after fsync, and writers share fsyncs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tidemq.store.api import PutStatus
from tidemq.store.config import FlushMode
from tidemq.store.file_store import FileMessageStore
from tidemq.store.fs import FaultyFileSystem
from tidemq.testing.stores import StuckFileSystem, make_message, small_config
from tidemq.testing.waiting import wait_until


def sync_config(root: Path, **overrides: object) -> object:
    return small_config(root, flush_mode=FlushMode.SYNC, **overrides)


async def test_sync_writes_are_durable_when_acknowledged(tmp_path: Path) -> None:
    fs = FaultyFileSystem(seed=1)
    store = FileMessageStore(sync_config(tmp_path), fs=fs)  # type: ignore[arg-type]
    store.open()
    try:
        result = await store.put_message(make_message("T", "durable"))
        assert result.ok
        commitlog = fs.files[store.commitlog.log.files[0].file.path]
        end = result.physical_offset + result.size
        assert bytes(commitlog.durable[result.physical_offset : end]) == bytes(
            commitlog.data[result.physical_offset : end]
        )
    finally:
        store.close()


async def test_concurrent_writers_share_fsyncs(tmp_path: Path) -> None:
    store = FileMessageStore(sync_config(tmp_path))  # type: ignore[arg-type]
    store.open()
    try:
        before = store.flush.flush_count

        async def writer(w: int) -> None:
            for i in range(50):
                assert (await store.put_message(make_message("T", f"{w}-{i}", queue_id=w % 4))).ok

        await asyncio.gather(*(writer(w) for w in range(16)))
        rounds = store.flush.flush_count - before
        assert sum(store.max_offset("T", q) for q in range(4)) == 800
        assert rounds < 800, f"{rounds} fsync rounds for 800 writes: no group commit"
    finally:
        store.close()


async def test_a_hung_disk_answers_flush_disk_timeout_and_keeps_the_message(
    tmp_path: Path,
) -> None:
    fs = StuckFileSystem()
    store = FileMessageStore(
        sync_config(tmp_path, sync_flush_timeout_ms=200),
        fs=fs,  # type: ignore[arg-type]
    )
    store.open()
    try:
        fs.stuck = True
        result = await store.put_message(make_message("T", "slow"))
        assert result.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert "flush" in result.remark
        assert store.max_offset("T", 0) == 1
    finally:
        fs.release.set()
        store.close()


def test_async_mode_flushes_in_the_background(tmp_path: Path) -> None:
    store = FileMessageStore(small_config(tmp_path, flush_interval_commitlog_ms=20))
    store.open()
    try:
        result = store.put_messages_blocking([make_message("T", "later")])
        end = result.results[0].physical_offset + result.results[0].size
        wait_until(lambda: store.flush.flushed_offset >= end, "the background flush")
    finally:
        store.close()
