"""A slave's store: the master's bytes at the same offsets, dispatched as recovery
dispatches; truncation when ahead; a SYNC_MASTER store's replica waits."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidemq.common.clock import ManualClock
from tidemq.record.codec import decode_records
from tidemq.store.api import GetStatus, PutResult, PutStatus
from tidemq.store.config import FlushMode, StoreConfig
from tidemq.store.file_store import SLAVE_REFUSAL, FileMessageStore
from tidemq.store.replica import REPLICA_REMARKS
from tidemq.testing.stores import make_message, small_config
from tidemq.testing.waiting import HANG_GUARD_S

FILE = 256 * 1024


def opened(config: StoreConfig, clock: ManualClock) -> FileMessageStore:
    store = FileMessageStore(config, clock=clock)
    store.open()
    return store


@pytest.fixture
def pair(tmp_path: Path, clock: ManualClock) -> Iterator[tuple[FileMessageStore, FileMessageStore]]:
    master = opened(small_config(tmp_path / "master"), clock)
    slave = opened(small_config(tmp_path / "slave", replica=True), clock)
    yield master, slave
    slave.close()
    master.close()


async def fill(store: FileMessageStore, count: int, *, start: int = 0) -> list[PutResult]:
    """Messages of 1-3 KiB over two topics and three queues, with keys."""
    messages = [
        make_message(
            "Orders" if i % 2 else "Audit",
            bytes([i % 251]) * (1024 + (i * 37) % 2048),
            queue_id=i % 3,
            keys=f"k{i}",
        )
        for i in range(start, start + count)
    ]
    async with asyncio.timeout(HANG_GUARD_S):
        return list(await asyncio.gather(*(store.put_message(m) for m in messages)))


def copy(master: FileMessageStore, slave: FileMessageStore, sizes: Iterator[int]) -> int:
    """What a slave's HA client does with each transfer, in chunks of `sizes`; transfers made."""
    transfers = 0
    while (end := slave.commitlog.max_offset) < master.commitlog.max_offset:
        chunk = master.replication_data(end, next(sizes))
        assert chunk, f"the master has nothing at {end}"
        slave.append_replicated(end, chunk)
        transfers += 1
    return transfers


def commitlog_files(store: FileMessageStore) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(store.config.commitlog_dir.iterdir())}


def bodies(store: FileMessageStore, topic: str, queue_id: int) -> list[bytes]:
    found: list[bytes] = []
    offset = store.min_offset(topic, queue_id)
    while True:
        got = store.get_messages("g", topic, queue_id, offset, 32)
        if got.status is not GetStatus.FOUND:
            return found
        found += [record.body for record in decode_records(got.body())]
        offset = got.next_begin_offset


def queues(store: FileMessageStore) -> dict[tuple[str, int], list[tuple[int, int, int, int]]]:
    return {key: list(queue.iter_entries()) for key, queue in store.consume_queues.items()}


async def test_a_slave_copy_is_byte_identical_and_readable(
    pair: tuple[FileMessageStore, FileMessageStore],
) -> None:
    master, slave = pair
    await fill(master, 400)  # about 3 files
    assert len(master.commitlog.log.files) >= 3

    transfers = copy(master, slave, itertools.cycle([1, 7, 999, 32 * 1024, 50_000]))

    assert transfers > 50
    master.commitlog.log.flush()
    slave.commitlog.log.flush()
    assert commitlog_files(slave) == commitlog_files(master)
    assert queues(slave) == queues(master)
    assert slave.commitlog.queue_offsets == master.commitlog.queue_offsets
    for topic, queue_id in master.consume_queues:
        assert bodies(slave, topic, queue_id) == bodies(master, topic, queue_id)
    (found,) = slave.query_by_key("Orders", "k301", 4).physical_offsets
    assert found == master.query_by_key("Orders", "k301", 4).physical_offsets[0]


async def test_a_record_cut_by_a_transfer_is_dispatched_when_its_rest_arrives(
    pair: tuple[FileMessageStore, FileMessageStore],
) -> None:
    master, slave = pair
    _, second = await fill(master, 2)
    cut = second.physical_offset + 100

    slave.append_replicated(0, master.replication_data(0, cut) or b"")
    assert slave.max_offset("Audit", 0) == 1
    assert slave.max_offset("Orders", 1) == 0  # the second record is not whole yet

    slave.append_replicated(cut, master.replication_data(cut, FILE) or b"")
    assert slave.max_offset("Orders", 1) == 1
    assert bodies(slave, "Orders", 1) == bodies(master, "Orders", 1)
    assert bodies(slave, "Audit", 0) == bodies(master, "Audit", 0)


async def test_a_slave_refuses_every_put(pair: tuple[FileMessageStore, FileMessageStore]) -> None:
    _, slave = pair
    result = await slave.put_message(make_message("Orders", "no"))
    assert result.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert result.remark == SLAVE_REFUSAL
    assert slave.commitlog.max_offset == 0


async def test_an_ahead_slave_truncates_says_what_it_dropped_and_continues(
    pair: tuple[FileMessageStore, FileMessageStore], clock: ManualClock
) -> None:
    master, slave = pair
    results = await fill(master, 300)
    copy(master, slave, itertools.repeat(32 * 1024))
    keep = results[200].physical_offset  # as if the master had lost its last 100 messages
    before = {key: queue.max_offset for key, queue in slave.consume_queues.items()}

    truncation = slave.truncate_replica(keep)

    assert truncation.offset == keep
    assert truncation.dropped_bytes == master.commitlog.max_offset - keep
    assert truncation.records == 100
    assert sum(end - first for first, end in truncation.queues.values()) == 100
    for key, queue in slave.consume_queues.items():
        first, end = truncation.queues[f"{key[0]}/{key[1]}"]
        assert (queue.max_offset, end) == (first, before[key])
        assert slave.commitlog.queue_offsets[key] == first
    assert slave.query_by_key("Orders", "k299", 4).physical_offsets == []
    assert "100 messages" in truncation.describe()

    # The master's bytes past `keep` are the same: copying again restores identity,
    # and a restart of the slave recovers the same store (the checkpoint fits the cut).
    copy(master, slave, itertools.repeat(32 * 1024))
    slave.close()
    reopened = opened(dataclasses.replace(slave.config), clock)
    try:
        master.commitlog.log.flush()
        assert commitlog_files(reopened) == commitlog_files(master)
        assert queues(reopened) == queues(master)
    finally:
        reopened.close()


async def test_an_empty_slave_starts_at_the_masters_oldest_file(
    tmp_path: Path, clock: ManualClock
) -> None:
    master = opened(small_config(tmp_path / "master"), clock)
    slave = opened(small_config(tmp_path / "slave", replica=True), clock)
    try:
        await fill(master, 400)
        master.commitlog.log.delete_first()  # retention took the oldest file
        oldest = master.commitlog.min_offset
        assert oldest == FILE

        slave.append_replicated(oldest, master.replication_data(oldest, FILE) or b"")
        copy(master, slave, itertools.repeat(FILE))

        assert slave.commitlog.min_offset == oldest
        master.commitlog.log.flush()
        assert commitlog_files(slave) == commitlog_files(master)
        orders = bodies(slave, "Orders", 1)
        assert orders and orders == bodies(master, "Orders", 1)[-len(orders) :]
    finally:
        slave.close()
        master.close()


async def test_a_slave_restarted_mid_record_resumes_from_its_last_whole_record(
    tmp_path: Path, clock: ManualClock
) -> None:
    master = opened(small_config(tmp_path / "master"), clock)
    config = small_config(tmp_path / "slave", replica=True)
    slave = opened(config, clock)
    try:
        results = await fill(master, 50)
        cut = results[30].physical_offset + 10
        slave.append_replicated(0, master.replication_data(0, cut) or b"")
        slave.close()  # a crash would leave the same bytes; recovery cuts the torn tail

        slave = opened(config, clock)
        assert slave.commitlog.max_offset == results[30].physical_offset
        copy(master, slave, itertools.repeat(4096))
        master.commitlog.log.flush()
        assert commitlog_files(slave) == commitlog_files(master)
        assert queues(slave) == queues(master)
    finally:
        slave.close()
        master.close()


# -- a SYNC_MASTER's store waiting for its slaves ------------------------------------


class Gate:
    """A ReplicaGate answering as told, counting the waits."""

    def __init__(self, answer: PutStatus | None) -> None:
        self.answer = answer
        self.waits: list[int] = []
        self.futures: list[asyncio.Future[PutStatus]] = []

    def wait_replicated(self, end: int) -> PutStatus | asyncio.Future[PutStatus]:
        self.waits.append(end)
        if self.answer is not None:
            return self.answer
        future: asyncio.Future[PutStatus] = asyncio.get_running_loop().create_future()
        self.futures.append(future)
        return future


@pytest.mark.parametrize("flush", [FlushMode.ASYNC, FlushMode.SYNC])
async def test_concurrent_sends_share_one_replica_wait(
    tmp_path: Path, clock: ManualClock, flush: FlushMode
) -> None:
    master = opened(small_config(tmp_path, flush_mode=flush), clock)
    gate = Gate(None)
    master.replication = gate
    try:
        sends = asyncio.gather(
            *(master.put_message(make_message("T", f"m{i}", queue_id=i % 2)) for i in range(40))
        )
        async with asyncio.timeout(HANG_GUARD_S):
            while not gate.futures:
                await asyncio.sleep(0)  # let the group commit run (no time passes)
        assert len(gate.waits) == 1
        assert gate.waits[0] == master.commitlog.max_offset
        assert not sends.done()
        gate.futures[0].set_result(PutStatus.PUT_OK)
        async with asyncio.timeout(HANG_GUARD_S):
            results = await sends
        assert all(r.status is PutStatus.PUT_OK for r in results)
    finally:
        master.close()


@pytest.mark.parametrize("flush", [FlushMode.ASYNC, FlushMode.SYNC])
@pytest.mark.parametrize("answer", [PutStatus.SLAVE_NOT_AVAILABLE, PutStatus.FLUSH_SLAVE_TIMEOUT])
async def test_a_send_without_a_slave_is_stored_and_says_so(
    tmp_path: Path, clock: ManualClock, answer: PutStatus, flush: FlushMode
) -> None:
    master = opened(small_config(tmp_path, flush_mode=flush), clock)
    gate = Gate(answer)
    master.replication = gate
    try:
        async with asyncio.timeout(HANG_GUARD_S):
            # A loop of awaited sends: in async-flush mode a lone writer skips
            # the group's tick, never the slave's wait.
            singles = [await master.put_message(make_message("T", f"s{i}")) for i in range(3)]
            batch = await master.put_messages([make_message("T", "b1"), make_message("T", "b2")])
        assert [r.status for r in singles] == [answer] * 3
        assert all(r.stored and r.remark == REPLICA_REMARKS[answer] for r in singles)
        assert batch.status is answer and [r.status for r in batch.results] == [answer] * 2
        assert len(gate.waits) == 4
        assert bodies(master, "T", 0) == [b"s0", b"s1", b"s2", b"b1", b"b2"]
    finally:
        master.close()


async def test_a_fenced_store_refuses_writes_until_unfenced(
    pair: tuple[FileMessageStore, FileMessageStore],
) -> None:
    """A master the controller replaced fences its store: nothing more is written."""
    master, _ = pair
    stored = await fill(master, 2)
    assert all(r.status is PutStatus.PUT_OK for r in stored)
    end = master.commitlog.max_offset
    master.fence("replica 2 is the master now (epoch 3)")
    refused = await master.put_message(make_message("Orders", b"late"))
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert refused.remark == "replica 2 is the master now (epoch 3)"
    assert master.commitlog.max_offset == end
    master.fence(None)
    assert (await master.put_message(make_message("Orders", b"again"))).status is PutStatus.PUT_OK
