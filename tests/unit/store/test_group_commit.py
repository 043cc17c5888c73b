"""Group commit: concurrent puts share one append and one flush wait."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Sequence
from pathlib import Path

import pytest

from tidemq.common.clock import ManualClock
from tidemq.common.message import Message
from tidemq.record.codec import decode_records, encode_batch
from tidemq.store.api import (
    BatchPutResult,
    BatchToStore,
    GetStatus,
    MessageToStore,
    PutResult,
    PutStatus,
)
from tidemq.store.config import FlushMode, StoreConfig
from tidemq.store.file_store import FileMessageStore
from tidemq.store.flush import FlushService
from tidemq.store.fs import CrashPlan, FaultyFileSystem
from tidemq.store.group_commit import DEFAULT_ALONE_BATCH, DEFAULT_MAX_MESSAGES, GroupCommitter
from tidemq.testing.stores import StuckFileSystem, make_message, small_config
from tidemq.testing.waiting import HANG_GUARD_S, eventually


def open_store(config: StoreConfig, clock: ManualClock, **kwargs: object) -> FileMessageStore:
    store = FileMessageStore(config, clock=clock, **kwargs)  # type: ignore[arg-type]
    store.open()
    return store


def sync_config(root: Path, **overrides: object) -> StoreConfig:
    return small_config(root, flush_mode=FlushMode.SYNC, **overrides)


def stuck_store(
    tmp_path: Path, clock: ManualClock, timeout_ms: int
) -> tuple[FileMessageStore, StuckFileSystem]:
    """A sync-flush store whose fsyncs hang from now until `fs.release` is set."""
    fs = StuckFileSystem()
    store = open_store(sync_config(tmp_path, sync_flush_timeout_ms=timeout_ms), clock, fs=fs)
    fs.stuck = True
    return store, fs


def bodies_in(store: FileMessageStore, topic: str, queue_id: int) -> list[bytes]:
    """Every body of a queue, in queue order."""
    bodies: list[bytes] = []
    offset = store.min_offset(topic, queue_id)
    while True:
        got = store.get_messages("check", topic, queue_id, offset, 32)
        if got.status is not GetStatus.FOUND:
            return bodies
        bodies.extend(record.body for record in decode_records(got.body()))
        offset = got.next_begin_offset


async def put_all(store: FileMessageStore, messages: Sequence[MessageToStore]) -> list[PutResult]:
    async with asyncio.timeout(HANG_GUARD_S):
        return list(await asyncio.gather(*(store.put_message(m) for m in messages)))


def assert_in_call_order(results: Sequence[PutResult]) -> None:
    offsets = [r.physical_offset for r in results]
    assert offsets == sorted(offsets)
    for before, after in itertools.pairwise(results):
        assert after.physical_offset == before.physical_offset + before.size


# -- grouping -------------------------------------------------------------------


async def test_concurrent_puts_are_one_append_in_call_order(
    tmp_path: Path, clock: ManualClock
) -> None:
    store = open_store(small_config(tmp_path), clock)
    try:
        committer = store.group_commit
        groups = committer.groups
        messages = [make_message("T", f"m{i}", queue_id=i % 3) for i in range(50)]

        results = await put_all(store, messages)

        assert committer.groups == groups + 1
        assert all(r.ok for r in results)
        assert_in_call_order(results)
        assert len({r.msg_id for r in results}) == 50
        for queue_id in range(3):
            mine = [r.queue_offset for i, r in enumerate(results) if i % 3 == queue_id]
            assert mine == list(range(len(mine)))
            assert bodies_in(store, "T", queue_id) == [
                f"m{i}".encode() for i in range(queue_id, 50, 3)
            ]
    finally:
        store.close()


async def test_a_group_is_capped_and_the_cap_keeps_call_order(
    tmp_path: Path, clock: ManualClock
) -> None:
    store = open_store(small_config(tmp_path), clock)
    try:
        committer = store.group_commit
        groups = committer.groups
        count = DEFAULT_MAX_MESSAGES + 44

        results = await put_all(store, [make_message("T", f"m{i}") for i in range(count)])

        assert committer.groups == groups + 2
        assert committer.largest_group == DEFAULT_MAX_MESSAGES
        assert [r.queue_offset for r in results] == list(range(count))
        assert_in_call_order(results)
    finally:
        store.close()


async def test_batches_join_the_group_as_consecutive_records(
    tmp_path: Path, clock: ManualClock
) -> None:
    store = open_store(small_config(tmp_path), clock)
    try:
        groups = store.group_commit.groups
        async with asyncio.timeout(HANG_GUARD_S):
            single_a, batch, single_b = await asyncio.gather(
                store.put_message(make_message("T", "a")),
                store.put_messages([make_message("T", "b1"), make_message("T", "b2")]),
                store.put_message(make_message("T", "c")),
            )

        assert store.group_commit.groups == groups + 1
        assert isinstance(batch, BatchPutResult) and batch.ok
        assert [r.queue_offset for r in (single_a, *batch.results, single_b)] == [0, 1, 2, 3]
        assert bodies_in(store, "T", 0) == [b"a", b"b1", b"b2", b"c"]
    finally:
        store.close()


async def test_a_large_batch_goes_at_once_after_the_pending_group(
    tmp_path: Path, clock: ManualClock
) -> None:
    store = open_store(sync_config(tmp_path), clock)
    try:
        groups = store.group_commit.groups
        large = [make_message("T", f"b{i}") for i in range(DEFAULT_ALONE_BATCH)]
        async with asyncio.timeout(HANG_GUARD_S):
            first, batch, last = await asyncio.gather(
                store.put_message(make_message("T", "first")),
                store.put_messages(large),
                store.put_message(make_message("T", "last")),
            )

        assert store.group_commit.groups == groups + 3
        assert isinstance(batch, BatchPutResult) and batch.ok
        offsets = [first.queue_offset, *(r.queue_offset for r in batch.results), last.queue_offset]
        assert offsets == list(range(DEFAULT_ALONE_BATCH + 2))
    finally:
        store.close()


async def test_a_lone_writer_is_not_held_back(tmp_path: Path, clock: ManualClock) -> None:
    """A loop of awaited puts gets its results at once, each its own append."""
    store = open_store(small_config(tmp_path), clock)
    try:
        groups = store.group_commit.groups
        results = []
        async with asyncio.timeout(HANG_GUARD_S):
            for i in range(20):
                results.append(await store.put_message(make_message("T", f"m{i}")))

        assert store.group_commit.groups == groups + 20
        assert [r.queue_offset for r in results] == list(range(20))
        assert_in_call_order(results)
    finally:
        store.close()


async def test_a_cancelled_caller_leaves_the_others_their_results(
    tmp_path: Path, clock: ManualClock
) -> None:
    store = open_store(small_config(tmp_path), clock)
    try:
        tasks = [
            asyncio.create_task(store.put_message(make_message("T", f"m{i}"))) for i in range(3)
        ]
        await asyncio.sleep(0)  # one turn: all three wait in the group
        assert store.group_commit.pending_messages == 3
        tasks[1].cancel()
        async with asyncio.timeout(HANG_GUARD_S):
            outcome = await asyncio.gather(*tasks, return_exceptions=True)

        assert isinstance(outcome[1], asyncio.CancelledError)
        first, third = outcome[0], outcome[2]
        assert isinstance(first, PutResult) and isinstance(third, PutResult)
        assert (first.queue_offset, third.queue_offset) == (0, 2)
        assert bodies_in(store, "T", 0) == [b"m0", b"m1", b"m2"]  # stored all the same
    finally:
        store.close()


# -- sync flush ------------------------------------------------------------------


async def test_sync_mode_waits_for_one_flush_per_group(tmp_path: Path, clock: ManualClock) -> None:
    store = open_store(sync_config(tmp_path), clock)
    try:
        committer = store.group_commit
        groups, waits = committer.groups, committer.flush_waits

        results = await put_all(store, [make_message("T", f"m{i}") for i in range(16)])

        assert committer.groups == groups + 1
        assert committer.flush_waits == waits + 1
        assert all(r.ok for r in results)
        last = results[-1]
        assert store.flush.flushed_offset >= last.physical_offset + last.size
    finally:
        store.close()


async def test_a_group_not_flushed_in_time_is_answered_flush_disk_timeout(
    tmp_path: Path, clock: ManualClock
) -> None:
    store, fs = stuck_store(tmp_path, clock, 200)
    try:
        async with asyncio.timeout(HANG_GUARD_S):
            single, batch = await asyncio.gather(
                store.put_message(make_message("T", "a")),
                store.put_messages([make_message("T", "b1"), make_message("T", "b2")]),
            )

        assert store.group_commit.flush_waits >= 1
        assert single.status is PutStatus.FLUSH_DISK_TIMEOUT and "flush" in single.remark
        assert single.queue_offset == 0 and single.msg_id
        assert batch.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert [r.status for r in batch.results] == [PutStatus.FLUSH_DISK_TIMEOUT] * 2
        assert [r.queue_offset for r in batch.results] == [1, 2]
        assert store.max_offset("T", 0) == 3  # stored, only not known durable
    finally:
        fs.release.set()
        store.close()


# -- failures --------------------------------------------------------------------


async def test_an_illegal_message_is_refused_alone(tmp_path: Path, clock: ManualClock) -> None:
    store = open_store(small_config(tmp_path), clock)
    try:
        messages = [make_message("T", f"m{i}") for i in range(10)]
        messages[4] = make_message("T", "bad", queue_id=-1)
        too_big = b"x" * (store.config.max_message_size + 1)
        async with asyncio.timeout(HANG_GUARD_S):
            outcome = await asyncio.gather(
                *(store.put_message(m) for m in messages),
                store.put_messages([make_message("T", "batch-ok"), make_message("T", too_big)]),
                store.put_message(make_message("T", "last")),
            )
        singles = outcome[:10]
        batch = outcome[10]
        last = outcome[11]

        assert singles[4].status is PutStatus.MESSAGE_ILLEGAL
        assert "negative" in singles[4].remark
        assert isinstance(batch, BatchPutResult)
        assert batch.status is PutStatus.MESSAGE_ILLEGAL and not batch.results
        stored = [r for i, r in enumerate(singles) if i != 4] + [last]
        assert all(isinstance(r, PutResult) and r.ok for r in stored)
        assert [r.queue_offset for r in stored if isinstance(r, PutResult)] == list(range(10))
        expected = [f"m{i}".encode() for i in range(10) if i != 4] + [b"last"]
        assert bodies_in(store, "T", 0) == expected
    finally:
        store.close()


def test_an_exception_before_anything_is_written_stays_with_its_caller() -> None:
    """With the store seen only as `append`: a message whose append raises
    without writing is retried alone, and only its caller gets the error."""
    appends: list[list[str]] = []
    written = [0]

    def append(messages: Sequence[MessageToStore]) -> BatchPutResult:
        bodies = [m.body.decode() for m in messages]
        appends.append(bodies)
        if "boom" in bodies:
            raise ValueError("cannot encode boom")
        results = []
        for _ in bodies:
            results.append(PutResult(PutStatus.PUT_OK, written[0], 10, written[0] // 10))
            written[0] += 10
        return BatchPutResult(PutStatus.PUT_OK, tuple(results))

    flush = FlushService(sync_mode=False, flush_commitlog=lambda: 0, flush_derived=lambda: None)
    committer = GroupCommitter(append, flush, sync_timeout_s=1.0, written_end=lambda: written[0])

    async def put(body: str) -> PutResult:
        outcome = committer.submit(make_message("T", body))
        return outcome if isinstance(outcome, PutResult) else await outcome

    async def run() -> list[PutResult | BaseException]:
        async with asyncio.timeout(HANG_GUARD_S):
            return await asyncio.gather(
                *(put(b) for b in ("a", "boom", "c")), return_exceptions=True
            )

    a, boom, c = asyncio.run(run())

    assert appends == [["a", "boom", "c"], ["a"], ["boom"], ["c"]]
    assert isinstance(boom, ValueError)
    assert isinstance(a, PutResult) and a.physical_offset == 0
    assert isinstance(c, PutResult) and c.physical_offset == 10


def test_the_byte_cap_commits_a_full_group_before_the_next_write() -> None:
    sizes: list[int] = []

    def append(messages: Sequence[MessageToStore]) -> BatchPutResult:
        sizes.append(len(messages))
        return BatchPutResult(
            PutStatus.PUT_OK, tuple(PutResult(PutStatus.PUT_OK, i, 1) for i in range(len(messages)))
        )

    flush = FlushService(sync_mode=False, flush_commitlog=lambda: 0, flush_derived=lambda: None)
    committer = GroupCommitter(
        append, flush, sync_timeout_s=1.0, written_end=lambda: 0, max_bytes=2500
    )

    async def run() -> None:
        futures = [committer.submit(make_message("T", b"x" * 1000)) for _ in range(5)]
        async with asyncio.timeout(HANG_GUARD_S):
            await asyncio.gather(*(f for f in futures if isinstance(f, asyncio.Future)))

    asyncio.run(run())

    assert sizes == [2, 2, 1]  # a third 1000-byte body would pass 2500 bytes


# -- closing and recovery ----------------------------------------------------------


@pytest.mark.parametrize("mode", [FlushMode.ASYNC, FlushMode.SYNC])
async def test_closing_with_puts_pending_answers_them(
    tmp_path: Path, clock: ManualClock, mode: FlushMode
) -> None:
    config = small_config(tmp_path, flush_mode=mode)
    store = open_store(config, clock)
    tasks = [
        asyncio.create_task(store.put_message(make_message("T", f"m{i}", queue_id=i % 2)))
        for i in range(30)
    ]
    await asyncio.sleep(0)  # one turn: every put has joined the group, none is committed
    assert store.group_commit.pending_messages == 30
    assert not any(task.done() for task in tasks)

    store.close()
    async with asyncio.timeout(HANG_GUARD_S):
        results = await asyncio.gather(*tasks)

    assert all(r.ok for r in results)
    again = open_store(config, clock)
    try:
        for queue_id in range(2):
            assert bodies_in(again, "T", queue_id) == [
                f"m{i}".encode() for i in range(queue_id, 30, 2)
            ]
    finally:
        again.close()


async def test_puts_after_close_are_refused_not_left_waiting(
    tmp_path: Path, clock: ManualClock
) -> None:
    store = open_store(small_config(tmp_path), clock)
    store.close()

    results = await put_all(store, [make_message("T", f"m{i}") for i in range(3)])

    assert [r.status for r in results] == [PutStatus.SERVICE_NOT_AVAILABLE] * 3


async def test_every_acknowledged_message_survives_a_crash(
    tmp_path: Path, clock: ManualClock
) -> None:
    fs = FaultyFileSystem(seed=3)
    config = dataclasses.replace(
        sync_config(tmp_path),
        flush_interval_commitlog_ms=60_000,
        flush_interval_consumequeue_ms=60_000,
    )
    store = open_store(config, clock, fs=fs)
    sent: list[MessageToStore] = []
    for round_ in range(5):
        batch = [make_message("T", f"r{round_}-{i}", queue_id=i % 4) for i in range(40)]
        results = await put_all(store, batch)
        assert all(r.ok for r in results)
        sent.extend(batch)
    assert store.group_commit.groups < len(sent)
    store.flush.stop()
    fs.crash(CrashPlan(keep_probability=0.0, tear_probability=0.0))

    again = open_store(config, clock)
    try:
        for queue_id in range(4):
            expected = [m.body for i, m in enumerate(sent) if i % 40 % 4 == queue_id]
            assert bodies_in(again, "T", queue_id) == expected
    finally:
        again.close()


# -- WAIT=false: answered once appended --------------------------------------------


async def test_a_put_that_does_not_wait_is_answered_while_its_group_waits_for_the_flush(
    tmp_path: Path, clock: ManualClock
) -> None:
    store, fs = stuck_store(tmp_path, clock, 60_000)
    try:
        # Two tasks started in the same loop pass: one group, in this order.
        waiting = asyncio.ensure_future(store.put_message(make_message("T", "waits")))
        hasty_put = asyncio.ensure_future(
            store.put_message(make_message("T", "does not", wait_store=False))
        )
        async with asyncio.timeout(HANG_GUARD_S):
            hasty = await hasty_put  # the fsync is stuck: only an answer without it returns

        assert store.group_commit.largest_group == 2
        assert hasty.status is PutStatus.PUT_OK and hasty.queue_offset == 1
        assert not waiting.done()
        fs.release.set()
        async with asyncio.timeout(HANG_GUARD_S):
            assert (await waiting).status is PutStatus.PUT_OK
        assert bodies_in(store, "T", 0) == [b"waits", b"does not"]
    finally:
        fs.release.set()
        store.close()


async def test_a_batch_body_that_does_not_wait_is_answered_without_the_flush(
    tmp_path: Path, clock: ManualClock
) -> None:
    store, fs = stuck_store(tmp_path, clock, 60_000)
    body = encode_batch([Message("T", b"one"), Message("T", b"two")])
    try:
        async with asyncio.timeout(HANG_GUARD_S):
            result = await store.put_batch(BatchToStore("T", 0, body, wait_store=False))

        assert result is not None and result.status is PutStatus.PUT_OK
        assert result.count == 2 and result.queue_offset == 0
        assert bodies_in(store, "T", 0) == [b"one", b"two"]
    finally:
        fs.release.set()
        store.close()


async def test_a_put_that_does_not_wait_has_the_flush_thread_sync_it_soon(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Nobody waits for its flush, and the flush thread's pauses are a minute
    long here: only the wake-up gets it synced within the deadline."""
    config = sync_config(
        tmp_path, flush_interval_commitlog_ms=60_000, flush_interval_consumequeue_ms=60_000
    )
    store = open_store(config, clock)
    try:
        flushes = store.flush.flush_count
        result = await store.put_message(make_message("T", "hurried", wait_store=False))
        end = result.physical_offset + result.size

        await eventually(lambda: store.flush.flushed_offset >= end, "the hurried flush", timeout=20)
        assert store.flush.flush_count > flushes
    finally:
        store.close()
