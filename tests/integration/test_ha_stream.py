"""The HA stream in one process: a master's and a slave's Replication over
loopback sockets, each with a real file store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tidemq.ha.config import BrokerRole, HaSettings
from tidemq.ha.service import Replication
from tidemq.store.api import PutStatus
from tidemq.store.config import FlushMode
from tidemq.store.file_store import FileMessageStore
from tidemq.testing.stores import make_message, small_config
from tidemq.testing.waiting import HANG_GUARD_S, eventually

SETTINGS = HaSettings(slave_timeout_s=10.0, heartbeat_interval_s=0.2, housekeeping_interval_s=2.0)


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[list[FileMessageStore]]:
    opened: list[FileMessageStore] = []
    yield opened
    for store in opened:
        await asyncio.to_thread(store.close)


def open_store(stores: list[FileMessageStore], root: Path, **settings: object) -> FileMessageStore:
    store = FileMessageStore(small_config(root, **settings))
    store.open()
    stores.append(store)
    return store


async def test_a_sync_master_with_sync_flush_answers_once_both_disks_have_it(
    tmp_path: Path, stores: list[FileMessageStore]
) -> None:
    master_store = open_store(stores, tmp_path / "m", flush_mode=FlushMode.SYNC)
    slave_store = open_store(stores, tmp_path / "s", flush_mode=FlushMode.SYNC, replica=True)
    master = Replication(master_store, BrokerRole.SYNC_MASTER, SETTINGS)
    await master.start("127.0.0.1", 0)
    slave = Replication(
        slave_store, BrokerRole.SLAVE, SETTINGS, master_address=f"127.0.0.1:{master.port}"
    )
    await slave.start("127.0.0.1", 0)
    try:
        assert master.waits is not None
        await eventually(lambda: master.waits and master.waits.reporting_slaves, "a slave")
        async with asyncio.timeout(HANG_GUARD_S):
            results = await asyncio.gather(
                *(master_store.put_message(make_message("T", f"m{i}")) for i in range(50))
            )
        assert {r.status for r in results} == {PutStatus.PUT_OK}
        end = max(r.physical_offset + r.size for r in results)
        # Answered only after the slave flushed what it reported.
        assert slave_store.flush.flushed_offset >= end
        assert master_store.flush.flushed_offset >= end
    finally:
        await slave.stop()
        await master.stop()


async def test_a_slave_reconnects_to_a_restarted_master_and_continues(
    tmp_path: Path, stores: list[FileMessageStore]
) -> None:
    master_store = open_store(stores, tmp_path / "m")
    slave_store = open_store(stores, tmp_path / "s", replica=True)
    master = Replication(master_store, BrokerRole.ASYNC_MASTER, SETTINGS)
    await master.start("127.0.0.1", 0)
    port = master.port
    slave = Replication(slave_store, BrokerRole.SLAVE, SETTINGS)
    await slave.start("127.0.0.1", 0)
    try:
        slave.learn_master(f"127.0.0.1:{port}")  # as a registration answer says it
        await master_store.put_message(make_message("T", "before"))
        await eventually(
            lambda: slave_store.commitlog.max_offset == master_store.commitlog.max_offset,
            "the first copy",
        )
        await master.stop()
        master = Replication(master_store, BrokerRole.ASYNC_MASTER, SETTINGS)
        await master.start("127.0.0.1", port)
        await master_store.put_message(make_message("T", "after"))
        await eventually(
            lambda: slave_store.commitlog.max_offset == master_store.commitlog.max_offset,
            "the copy after the master came back",
        )
        assert slave_store.max_offset("T", 0) == 2
        assert slave.client is not None and slave.client.connected
    finally:
        await slave.stop()
        await master.stop()


async def test_a_slave_missing_bytes_the_master_deleted_says_so_and_keeps_its_store(
    tmp_path: Path, stores: list[FileMessageStore]
) -> None:
    master_store = open_store(stores, tmp_path / "m")
    slave_store = open_store(stores, tmp_path / "s", replica=True)
    for i in range(300):
        await master_store.put_message(make_message("T", b"x" * 2000 + str(i).encode()))
    slave_store.append_replicated(0, master_store.replication_data(0, 1000) or b"")
    master_store.commitlog.log.delete_first()  # retention, while the slave was away
    master = Replication(master_store, BrokerRole.ASYNC_MASTER, SETTINGS)
    await master.start("127.0.0.1", 0)
    slave = Replication(
        slave_store, BrokerRole.SLAVE, SETTINGS, master_address=f"127.0.0.1:{master.port}"
    )
    await slave.start("127.0.0.1", 0)
    try:
        client = slave.client
        assert client is not None
        error = await eventually(lambda: client.last_error, "the slave's refusal")
        assert "bytes missing" in error and "move this slave's store aside" in error
        assert slave_store.commitlog.max_offset == 1000
    finally:
        await slave.stop()
        await master.stop()
