"""DelayScheduler: parking, delivery when due, ordering, progress, failures.

Time is a ManualClock; the scheduler is woken with `notify_parked` after the
clock moves, and every wait polls a condition under a deadline.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from tidemq.broker.schedule import DelayScheduler, delivery_message
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.clock import ManualClock
from tidemq.common.message import MessageExt
from tidemq.common.properties import edit_properties
from tidemq.record.codec import decode_record
from tidemq.store.api import MessageToStore, PutResult, PutStatus
from tidemq.store.config import DEFAULT_DELAY_LEVELS, SCHEDULE_TOPIC, parse_delay_levels
from tidemq.store.file_store import FileMessageStore
from tidemq.store.memory import MemoryMessageStore
from tidemq.testing.stores import make_message, small_config
from tidemq.testing.waiting import eventually

LEVELS = parse_delay_levels(DEFAULT_DELAY_LEVELS)
POLL_S = 0.02
Store = FileMessageStore | MemoryMessageStore
Put = Callable[[MessageToStore], Awaitable[PutResult]]


class Harness:
    """A store, a scheduler whose `put` writes into that store and records
    every call, and helpers to park messages and move time."""

    def __init__(self, store: Store, clock: ManualClock, progress: Path) -> None:
        self.store = store
        self.clock = clock
        self.progress_path = progress
        self.calls: list[MessageToStore] = []
        self.stored: list[tuple[MessageToStore, PutResult]] = []
        self.put_override: Put | None = None
        self.scheduler = self.new_scheduler()

    def new_scheduler(
        self,
        *,
        poll_interval_s: float = POLL_S,
        idle_poll_s: float = POLL_S,
        failure_backoff_s: float = 0.01,
        persist_interval_s: float = 10.0,
    ) -> DelayScheduler:
        return DelayScheduler(
            self.store,
            LEVELS,
            self.progress_path,
            self.clock,
            self.put,
            poll_interval_s=poll_interval_s,
            idle_poll_s=idle_poll_s,
            failure_backoff_s=failure_backoff_s,
            persist_interval_s=persist_interval_s,
        )

    async def put(self, message: MessageToStore) -> PutResult:
        self.calls.append(message)
        if self.put_override is not None:
            result = await self.put_override(message)
        else:
            result = await self.store.put_message(message)
        if result.status in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT):
            self.stored.append((message, result))
        return result

    async def park(self, message: MessageToStore, level: int) -> PutResult:
        result = await self.store.put_message(self.scheduler.schedule(message, level))
        assert result.ok
        self.scheduler.notify_parked(level)
        return result

    def bodies(self, topic: str | None = None) -> list[bytes]:
        return [m.body for m, _ in self.stored if topic is None or m.topic == topic]

    async def settle(self, *levels: int) -> None:
        """Let `levels` (all when none) each finish a pass that started after now."""
        scheduler = self.scheduler
        chosen = levels or tuple(scheduler.levels)
        before = {level: scheduler.passes(level) for level in chosen}
        for level in chosen:
            scheduler.notify_parked(level)
        await eventually(
            lambda: all(scheduler.passes(lv) >= before[lv] + 2 for lv in chosen),
            f"two passes of levels {chosen} after the wake-up",
        )

    async def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        await self.settle()

    def records(self, topic: str, queue_id: int) -> list[MessageExt]:
        result = self.store.get_messages("test", topic, queue_id, 0, 1000)
        return [decode_record(buf)[0] for buf in result.buffers]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock) -> Iterator[Store]:
    config = small_config(tmp_path / "store")
    instance: Store
    if request.param == "file":
        instance = FileMessageStore(config, clock=clock)
    else:
        instance = MemoryMessageStore(config, clock=clock)
    instance.open()
    yield instance
    instance.close()


@pytest.fixture
def memory_store(tmp_path: Path, clock: ManualClock) -> Iterator[MemoryMessageStore]:
    instance = MemoryMessageStore(small_config(tmp_path / "store"), clock=clock)
    yield instance
    instance.close()


@pytest.fixture
async def harness(
    memory_store: MemoryMessageStore, clock: ManualClock, tmp_path: Path
) -> AsyncIterator[Harness]:
    h = Harness(memory_store, clock, tmp_path / "config" / "delayOffset.json")
    yield h
    await h.scheduler.stop()


# -- parking (pure) -------------------------------------------------------------------


def test_schedule_parks_in_the_level_queue(tmp_path: Path, clock: ManualClock) -> None:
    store = MemoryMessageStore(small_config(tmp_path), clock=clock)
    scheduler = DelayScheduler(store, LEVELS, tmp_path / "p.json", clock, store.put_message)
    original = make_message(
        "TopicTest",
        b"hello",
        queue_id=3,
        tags="TagA",
        properties={props.DELAY: "3", props.REAL_TOPIC: "stale", "\x01x": "y"},
        flag=7,
        sys_flag=sysflag.COMPRESSED,
        reconsume_times=2,
        tags_code=99,
    )
    parked = scheduler.schedule(original, 3)
    assert parked.topic == SCHEDULE_TOPIC
    assert parked.queue_id == 2
    assert parked.tags_code is None
    assert (parked.body, parked.flag, parked.sys_flag, parked.reconsume_times) == (
        b"hello",
        7,
        sysflag.COMPRESSED,
        2,
    )
    parsed = props.decode_properties(parked.properties)
    assert parsed[props.REAL_TOPIC] == "TopicTest"
    assert parsed[props.REAL_QID] == "3"
    assert parsed[props.DELAY] == "3"
    assert parsed[props.TAGS] == "TagA"
    assert parked.properties.startswith(f"{props.TAGS}\x01TagA\x02")  # others kept in order
    assert parked.properties.count(props.REAL_TOPIC) == 1
    # pure: the original is untouched
    assert original.topic == "TopicTest" and original.tags_code == 99
    with pytest.raises(ValueError, match="already parked"):
        scheduler.schedule(parked, 1)


@pytest.mark.parametrize(("level", "queue_id"), [(-5, 0), (0, 0), (1, 0), (18, 17), (19, 17)])
def test_schedule_clamps_the_level(
    tmp_path: Path, clock: ManualClock, level: int, queue_id: int
) -> None:
    store = MemoryMessageStore(small_config(tmp_path), clock=clock)
    scheduler = DelayScheduler(store, LEVELS, tmp_path / "p.json", clock, store.put_message)
    parked = scheduler.schedule(make_message("T", b"x"), level)
    assert parked.queue_id == queue_id
    assert props.decode_properties(parked.properties)[props.DELAY] == str(queue_id + 1)


def test_edit_properties_keeps_other_pairs_verbatim() -> None:
    raw = "A\x011\x02\x01\x02DELAY\x013\x02B\x01x\x01y\x02"
    assert (
        edit_properties(raw, {"DELAY": None, "C": "2"})
        == "A\x011\x02\x01\x02B\x01x\x01y\x02C\x012\x02"
    )
    assert edit_properties("", {"K": "v"}) == "K\x01v\x02"
    assert edit_properties("A\x011", {}) == "A\x011\x02"


def test_delivery_message_rejects_a_record_without_its_real_queue() -> None:
    record = MessageExt(topic=SCHEDULE_TOPIC, born_host="127.0.0.1:1")
    with pytest.raises(ValueError, match="REAL_TOPIC"):
        delivery_message(record)
    record.properties = {props.REAL_TOPIC: "T", props.REAL_QID: "x"}
    with pytest.raises(ValueError, match="REAL_QID"):
        delivery_message(record)
    record.properties = {props.REAL_TOPIC: "T", props.REAL_QID: "2", props.DELAY: "1", "k": "v"}
    message = delivery_message(record)
    assert (message.topic, message.queue_id) == ("T", 2)
    assert props.decode_properties(message.properties) == {
        props.REAL_TOPIC: "T",
        props.REAL_QID: "2",
        "k": "v",
    }


# -- delivery ----------------------------------------------------------------------------


async def test_levels_deliver_when_due_in_order_with_the_message_intact(
    store: Store, clock: ManualClock, tmp_path: Path
) -> None:
    h = Harness(store, clock, tmp_path / "delayOffset.json")
    t0 = clock.now_ms()
    for level in (1, 2, 3):
        for n in range(2):
            await h.park(
                make_message(
                    f"Topic{level}",
                    f"L{level}-{n}",
                    queue_id=n,
                    tags=f"Tag{n}",
                    keys="k1 k2",
                    properties={"user": "u"},
                    flag=level,
                    sys_flag=sysflag.COMPRESSED if n else 0,
                    born_timestamp=t0 - 5,
                    born_host=b"\x0a\x00\x00\x07",
                    born_port=4242,
                    reconsume_times=n,
                ),
                level,
            )
    parked = h.records(SCHEDULE_TOPIC, 0)
    await h.scheduler.start()
    try:
        await h.settle()
        assert h.calls == []
        await h.advance(0.999)
        assert h.calls == []
        await h.advance(0.001)  # level 1 (1 s) is due
        assert h.bodies() == [b"L1-0", b"L1-1"]
        await h.advance(3.999)
        assert h.bodies() == [b"L1-0", b"L1-1"]
        await h.advance(0.001)  # level 2 (5 s)
        assert h.bodies() == [b"L1-0", b"L1-1", b"L2-0", b"L2-1"]
        await h.advance(5)  # level 3 (10 s)
        assert h.bodies() == [b"L1-0", b"L1-1", b"L2-0", b"L2-1", b"L3-0", b"L3-1"]
        assert h.scheduler.progress() == {lv: 2 if lv <= 3 else 0 for lv in range(1, 19)}
    finally:
        await h.scheduler.stop()

    for level, due_s in ((1, 1), (2, 5), (3, 10)):
        for n in range(2):
            (record,) = h.records(f"Topic{level}", n)
            assert record.body == f"L{level}-{n}".encode()
            assert record.queue_offset == 0  # a new offset in the real queue
            assert record.flag == level
            assert record.sys_flag & sysflag.COMPRESSED == (sysflag.COMPRESSED if n else 0)
            assert record.born_timestamp == t0 - 5
            assert record.born_host == "10.0.0.7:4242"
            assert record.reconsume_times == n
            assert record.store_timestamp == t0 + due_s * 1000
            assert record.properties == {
                props.TAGS: f"Tag{n}",
                props.KEYS: "k1 k2",
                "user": "u",
                props.REAL_TOPIC: f"Topic{level}",
                props.REAL_QID: str(n),
            }
    delivered_ids = {r.msg_id for r in h.records("Topic1", 0) + h.records("Topic1", 1)}
    assert delivered_ids.isdisjoint({r.msg_id for r in parked})
    # the tag index of the real topic works (the store recomputed the tag code)
    tagged = store.query_by_key("Topic1", "k1", 10)
    assert len(tagged.buffers) == 2


async def test_a_head_not_due_blocks_its_level_but_not_the_others(harness: Harness) -> None:
    h, clock = harness, harness.clock
    t0 = clock.now_ms()
    await h.park(make_message("Slow", b"head"), 3)  # due t0 + 10 s
    clock.advance(5)
    # A later message of level 3 that is due earlier (an explicit tag slot,
    # within now + the level's delay so it is believed): it must wait.
    behind = dataclasses.replace(
        h.scheduler.schedule(make_message("Slow", b"behind"), 3), tags_code=t0 + 6000
    )
    assert (await h.store.put_message(behind)).ok
    await h.park(make_message("Fast", b"fast"), 1)  # due t0 + 6 s
    await h.scheduler.start()
    await h.advance(2)  # now t0 + 7 s
    assert h.bodies() == [b"fast"]
    assert h.scheduler.progress()[3] == 0
    await h.advance(3)  # t0 + 10 s: the head is due, then the one behind it
    assert h.bodies() == [b"fast", b"head", b"behind"]
    assert h.scheduler.progress()[3] == 2


async def test_a_level_above_the_max_is_clamped(harness: Harness) -> None:
    h = harness
    await h.park(make_message("T", b"late"), 42)
    assert h.store.max_offset(SCHEDULE_TOPIC, 17) == 1
    await h.scheduler.start()
    await h.advance(2 * 3600 - 1)
    assert h.calls == []
    await h.advance(1)
    assert h.bodies("T") == [b"late"]
    assert h.scheduler.progress()[18] == 1


async def test_a_delivery_time_beyond_the_level_delay_means_now(harness: Harness) -> None:
    # Java's correctDeliverTimestamp: the clock went back since the message was parked.
    h = harness
    far = dataclasses.replace(
        h.scheduler.schedule(make_message("T", b"x"), 1),
        tags_code=h.clock.now_ms() + 3_600_000,
    )
    assert (await h.store.put_message(far)).ok
    await h.scheduler.start()
    await h.settle(1)
    assert h.bodies() == [b"x"]


async def test_an_empty_level_waits_for_an_arrival_not_the_poll_interval(
    harness: Harness,
) -> None:
    """Level 3 has a head that is not due and looks again every poll
    interval; empty level 2 makes no pass meanwhile (it waits for an
    arrival, or its idle poll), then one at once when a message is parked."""
    h = harness
    h.scheduler = h.new_scheduler(poll_interval_s=POLL_S, idle_poll_s=3600.0)
    h.store.add_arrival_listener(h.scheduler.on_arrival)
    await h.park(make_message("Slow", b"head"), 3)  # due in 10 s; the clock stands still
    await h.scheduler.start()
    await eventually(lambda: h.scheduler.passes(2) >= 1, "the first pass of level 2")
    idle_passes = h.scheduler.passes(2)
    slow_passes = h.scheduler.passes(3)
    await eventually(
        lambda: h.scheduler.passes(3) >= slow_passes + 5, "five polls of level 3's head"
    )
    assert h.scheduler.passes(2) == idle_passes, "an empty level polled"

    parked = h.scheduler.schedule(make_message("T", b"x"), 2)
    assert (await h.store.put_message(parked)).ok  # the arrival listener wakes level 2
    await eventually(lambda: h.scheduler.passes(2) > idle_passes, "a pass woken by the arrival")


async def test_the_arrival_listener_wakes_a_level(harness: Harness) -> None:
    h = harness
    h.scheduler = h.new_scheduler(poll_interval_s=30.0, idle_poll_s=30.0)
    h.store.add_arrival_listener(h.scheduler.on_arrival)
    await h.scheduler.start()
    await eventually(lambda: h.scheduler.passes(2) >= 1, "the first pass of level 2")
    before = h.scheduler.passes(2)
    parked = h.scheduler.schedule(make_message("T", b"x"), 2)
    assert (await h.store.put_message(parked)).ok  # no notify_parked: the listener does it
    # Well inside the 30 s poll interval: only the arrival listener can have woken it.
    await eventually(
        lambda: h.scheduler.passes(2) > before, "a pass woken by the arrival", timeout=10.0
    )


# -- failures ------------------------------------------------------------------------


async def test_a_failing_put_is_retried_and_never_skipped(harness: Harness) -> None:
    h = harness
    attempts: list[bytes] = []
    failing = True

    async def flaky(message: MessageToStore) -> PutResult:
        attempts.append(message.body)
        if failing:
            if len(attempts) % 2:
                return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="disk full")
            raise OSError("boom")
        return await h.store.put_message(message)

    h.put_override = flaky
    for n in range(3):
        await h.park(make_message("T", f"m{n}"), 1)
    await h.scheduler.start()
    h.clock.advance(1)
    h.scheduler.notify_parked(1)
    await eventually(lambda: len(attempts) >= 6, "six attempts at the failing put")
    assert set(attempts) == {b"m0"}  # stuck on the first, nothing behind it tried
    assert h.scheduler.progress()[1] == 0
    assert h.stored == []
    failing = False
    await eventually(lambda: len(h.stored) == 3, "the three messages stored")
    assert h.bodies() == [b"m0", b"m1", b"m2"]
    assert [m.body for m in h.calls[-3:]] == [b"m0", b"m1", b"m2"]
    assert h.scheduler.progress()[1] == 3
    assert [r.body for r in h.records("T", 0)] == [b"m0", b"m1", b"m2"]


async def test_a_cancelled_put_is_a_failure_not_the_end_of_the_level(harness: Harness) -> None:
    h = harness
    cancelled = False

    async def cancelled_once(message: MessageToStore) -> PutResult:
        nonlocal cancelled
        if not cancelled:
            cancelled = True
            raise asyncio.CancelledError
        return await h.store.put_message(message)

    h.put_override = cancelled_once
    await h.park(make_message("T", b"x"), 1)
    await h.scheduler.start()
    h.clock.advance(1)
    h.scheduler.notify_parked(1)
    await eventually(lambda: h.bodies() == [b"x"], "x delivered after the cancelled put")
    assert h.scheduler.running
    assert h.scheduler.progress()[1] == 1


async def test_a_flush_timeout_counts_as_stored(harness: Harness) -> None:
    h = harness

    async def slow_disk(message: MessageToStore) -> PutResult:
        result = await h.store.put_message(message)
        return dataclasses.replace(result, status=PutStatus.FLUSH_DISK_TIMEOUT)

    h.put_override = slow_disk
    await h.park(make_message("T", b"once"), 1)
    await h.scheduler.start()
    await h.advance(1)
    await h.settle(1)
    assert [r.body for r in h.records("T", 0)] == [b"once"]
    assert h.scheduler.progress()[1] == 1


async def test_an_undeliverable_record_is_logged_and_skipped(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h = harness
    broken = make_message(SCHEDULE_TOPIC, b"no real topic", properties={props.DELAY: "1"})
    assert (await h.store.put_message(broken)).ok
    await h.park(make_message("T", b"fine"), 1)
    await h.scheduler.start()
    with caplog.at_level(logging.ERROR, logger="tidemq.broker.schedule"):
        await h.advance(1)
    assert h.bodies() == [b"fine"]
    assert h.scheduler.progress()[1] == 2
    assert "cannot be delivered" in caplog.text


# -- progress ------------------------------------------------------------------------


async def test_progress_survives_stop_and_start(harness: Harness) -> None:
    h = harness
    for n in range(3):
        await h.park(make_message("T", f"a{n}"), 1)
    await h.scheduler.start()
    await h.advance(1)
    assert h.bodies() == [b"a0", b"a1", b"a2"]
    await h.scheduler.stop()
    saved = json.loads(h.progress_path.read_text())
    assert saved["offsetTable"]["1"] == 3
    assert saved["offsetTable"]["2"] == 0

    for n in range(2):
        await h.park(make_message("T", f"b{n}"), 1)
    h.scheduler = h.new_scheduler()
    assert h.scheduler.progress()[1] == 3
    await h.scheduler.start()
    await h.advance(1)
    # After a clean stop nothing is delivered twice and nothing is lost.
    assert h.bodies() == [b"a0", b"a1", b"a2", b"b0", b"b1"]
    assert [r.body for r in h.records("T", 0)] == [b"a0", b"a1", b"a2", b"b0", b"b1"]


async def test_after_a_crash_only_deliveries_since_the_last_persist_repeat(
    harness: Harness,
) -> None:
    h = harness
    for n in range(4):
        await h.park(make_message("T", f"m{n}"), 1)
    h.clock.advance(1)
    h.put_override = None
    gate = asyncio.Event()

    async def gated(message: MessageToStore) -> PutResult:
        if message.body == b"m2":
            await gate.wait()
        return await h.store.put_message(message)

    h.put_override = gated
    await h.scheduler.start()
    h.scheduler.notify_parked(1)
    await eventually(lambda: h.scheduler.progress()[1] == 2, "progress 2 on level 1")
    h.scheduler.persist()  # the periodic persist runs here ...
    crash_snapshot = h.progress_path.read_bytes()
    gate.set()
    await eventually(lambda: h.scheduler.progress()[1] == 4, "progress 4 on level 1")
    await h.scheduler.stop()
    # ... and the broker crashes before the next one: the file is the snapshot.
    h.progress_path.write_bytes(crash_snapshot)

    h.put_override = None
    h.scheduler = h.new_scheduler()
    await h.scheduler.start()
    await h.settle(1)
    # No loss; m2 and m3 (delivered after the last persist) are delivered twice.
    assert [r.body for r in h.records("T", 0)] == [b"m0", b"m1", b"m2", b"m3", b"m2", b"m3"]


async def test_stop_lets_a_put_in_flight_finish_and_records_it(harness: Harness) -> None:
    h = harness
    gate = asyncio.Event()
    entered = asyncio.Event()

    async def slow(message: MessageToStore) -> PutResult:
        entered.set()
        await gate.wait()
        return await h.store.put_message(message)

    h.put_override = slow
    await h.park(make_message("T", b"x"), 1)
    await h.scheduler.start()
    h.clock.advance(1)
    h.scheduler.notify_parked(1)
    await asyncio.wait_for(entered.wait(), 2)
    stopping = asyncio.create_task(h.scheduler.stop())
    await eventually(lambda: not h.scheduler.running, "the scheduler stopping")
    gate.set()
    await asyncio.wait_for(stopping, 2)
    assert h.scheduler.progress()[1] == 1
    assert json.loads(h.progress_path.read_text())["offsetTable"]["1"] == 1


async def test_the_progress_is_persisted_periodically(harness: Harness) -> None:
    h = harness
    h.scheduler = h.new_scheduler(persist_interval_s=0.05)
    await h.park(make_message("T", b"x"), 1)
    await h.scheduler.start()
    await h.advance(1)

    def persisted() -> bool:
        if not h.progress_path.exists():
            return False
        return bool(json.loads(h.progress_path.read_text())["offsetTable"]["1"] == 1)

    await eventually(persisted, "the progress file recording offset 1")
    assert not h.progress_path.with_name(h.progress_path.name + ".tmp").exists()


async def test_progress_beyond_an_empty_queue_restarts_at_zero(harness: Harness) -> None:
    # The store was replaced but the progress file kept: new parked messages
    # start at offset 0 and must not be skipped.
    h = harness
    h.progress_path.parent.mkdir(parents=True, exist_ok=True)
    h.progress_path.write_text(json.dumps({"offsetTable": {"1": 5, "99": 7}}))
    h.scheduler = h.new_scheduler()
    assert h.scheduler.progress()[1] == 5
    await h.scheduler.start()
    await h.park(make_message("T", b"new"), 1)
    await h.advance(1)
    assert h.bodies() == [b"new"]
    assert h.scheduler.progress()[1] == 1
    await h.scheduler.stop()
    assert json.loads(h.progress_path.read_text())["offsetTable"]["99"] == 7  # kept


async def test_progress_beyond_the_queue_end_moves_back_to_it(harness: Harness) -> None:
    h = harness
    await h.park(make_message("T", b"old"), 1)
    h.progress_path.parent.mkdir(parents=True, exist_ok=True)
    h.progress_path.write_text(json.dumps({"offsetTable": {"1": 9}}))
    h.scheduler = h.new_scheduler()
    await h.scheduler.start()
    await h.settle(1)
    assert h.scheduler.progress()[1] == 1
    await h.park(make_message("T", b"new"), 1)
    await h.advance(1)
    assert h.bodies() == [b"new"]


def test_an_unreadable_progress_file_is_an_error(tmp_path: Path, clock: ManualClock) -> None:
    store = MemoryMessageStore(small_config(tmp_path), clock=clock)
    path = tmp_path / "delayOffset.json"
    for text in ("{not json", '{"offsetTable": []}', '{"offsetTable": {"1": -1}}', "{}"):
        path.write_text(text)
        with pytest.raises(ValueError, match="delay progress"):
            DelayScheduler(store, LEVELS, path, clock, store.put_message)


def test_bad_configuration_is_refused(tmp_path: Path, clock: ManualClock) -> None:
    store = MemoryMessageStore(small_config(tmp_path), clock=clock)
    with pytest.raises(ValueError):
        DelayScheduler(store, (), tmp_path / "p", clock, store.put_message)
    with pytest.raises(ValueError):
        DelayScheduler(store, (1000,), tmp_path / "p", clock, store.put_message, batch_size=0)
    with pytest.raises(ValueError):
        DelayScheduler(store, (1000,), tmp_path / "p", clock, store.put_message, idle_poll_s=0)
