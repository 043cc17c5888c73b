"""commitlog_floor: nothing stored at or after the time lies before it, and it is as late as
the queues can tell (the latest record stored before the time)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.common.clock import ManualClock
from tidemq.record.codec import peek_header
from tidemq.store.api import MessageStore
from tidemq.store.file_store import FileMessageStore
from tidemq.store.memory import MemoryMessageStore
from tidemq.testing.stores import make_message, small_config
from tidemq.timer.scan_floor import commitlog_floor

START_MS = 1_700_000_000_000

# (topic index, queue id, milliseconds since the previous put)
puts = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 5_000)), max_size=40)


async def fill(store: MessageStore, clock: ManualClock, plan: list[tuple[int, int, int]]) -> None:
    for topic, queue_id, gap_ms in plan:
        clock.advance(gap_ms / 1000)
        message = make_message(f"T{topic}", b"x" * (topic * 50), queue_id=queue_id)
        assert (await store.put_message(message)).ok


def stored(store: MessageStore) -> list[tuple[int, int]]:
    """(physical offset, store time) of every record, from the queues."""
    records = []
    for topic, queue_ids in store.queues().items():
        for queue_id in queue_ids:
            for offset in range(
                store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
            ):
                records.append(
                    (
                        store.physical_offset(topic, queue_id, offset),
                        store.store_time(topic, queue_id, offset),
                    )
                )
    return sorted(records)


def check(store: MessageStore, timestamp_ms: int) -> None:
    floor = commitlog_floor(store, timestamp_ms)
    records = stored(store)
    assert all(physical >= floor for physical, time_ms in records if time_ms >= timestamp_ms)
    before = [physical for physical, time_ms in records if time_ms < timestamp_ms]
    assert floor == (max(before) if before else 0)


@settings(max_examples=60, deadline=None)
@given(plan=puts, probe_ms=st.integers(-1_000, 200_000))
async def test_the_floor_of_a_memory_store(plan: list[tuple[int, int, int]], probe_ms: int) -> None:
    clock = ManualClock(START_MS)
    store = MemoryMessageStore(clock=clock)
    await fill(store, clock, plan)
    check(store, START_MS + probe_ms)


async def test_the_floor_of_a_file_store(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    store = FileMessageStore(small_config(tmp_path), clock=clock)
    store.open()
    try:
        plan = [(i % 3, i % 2, 1_000 if i % 10 == 0 else 0) for i in range(300)]
        await fill(store, clock, plan)
        for probe_ms in (-1, 0, 1, 5_000, 15_000, 29_000, 30_000, 31_000):
            check(store, START_MS + probe_ms)
        assert commitlog_floor(store, START_MS + 31_000) > 0
        record = store.read_by_physical_offset(commitlog_floor(store, START_MS + 15_000))
        assert record is not None
        assert peek_header(record).store_timestamp < START_MS + 15_000
    finally:
        store.close()
