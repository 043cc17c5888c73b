"""The timer figures /metrics shows (RocketMQ's rocketmq_timer_* and
rocketmq_timing_messages): what waits where, what is due and not delivered."""

from __future__ import annotations

from pathlib import Path

from timer_rig import START_MS, TimerRig

from tidemq.testing.waiting import eventually
from tidemq.timer import TimerService
from tidemq.timer.buckets import TimerFiles, Unit, UnitKind
from tidemq.timer.wheel import TimerWheel, WheelEntry


def entry(eff_ms: int, source: int) -> WheelEntry:
    return WheelEntry(eff_ms, source, source, 0)


def test_the_wheel_counts_what_is_due_at_a_time() -> None:
    wheel = TimerWheel(precision_ms=100)
    for eff_ms, source in ((1_000, 1), (1_050, 2), (1_099, 3), (1_150, 4), (5_000, 5)):
        wheel.add(entry(eff_ms, source))
    assert wheel.count_due(999) == 0
    assert wheel.count_due(1_050) == 2  # same slot as 1_099, which is not due yet
    assert wheel.count_due(1_150) == 4
    assert wheel.count_due(10_000) == 5
    wheel.pop_due(1_060)
    assert wheel.count_due(1_150) == 2


def test_timer_files_count_their_units_from_sizes_then_as_they_change(tmp_path: Path) -> None:
    files = TimerFiles(tmp_path, span_ms=10_000)
    files.append([Unit(12_000, 0, 1, 0, UnitKind.NORMAL), Unit(25_000, 1, 2, 0, UnitKind.NORMAL)])
    assert TimerFiles(tmp_path, span_ms=10_000).unit_counts() == {10_000: 1, 20_000: 1}
    assert files.unit_counts() == {10_000: 1, 20_000: 1}
    files.append([Unit(13_000, 2, 3, 0, UnitKind.NORMAL)])
    files.delete(20_000)
    assert files.unit_counts() == {10_000: 2}


async def test_timing_counts_the_wheel_and_the_files_further_out(rig: TimerRig) -> None:
    service = await rig.start()
    await rig.park("NEAR", START_MS + 2_000)
    await rig.park("FAR", START_MS + 3_600_000)
    await eventually(lambda: service.stats()["enqueued"] == 2, "both timers enqueued")
    lag = service.lag(START_MS)
    assert (lag.timing, lag.enqueue_lag, lag.dequeue_lag) == (2, 0, 0)
    assert lag.dequeue_latency_ms == 0


async def test_a_due_timer_not_delivered_yet_is_dequeue_lag(rig: TimerRig) -> None:
    service = await rig.start()
    await rig.park("A", START_MS + 1_000)
    await eventually(lambda: service.stats()["pending_in_wheel"] == 1, "A in the wheel")
    # the clock moves without waking the service: A is due and still waits
    rig.clock.advance(3)
    lag = service.lag(START_MS + 3_000)
    assert (lag.dequeue_lag, lag.dequeue_latency_ms) == (1, 2_000)
    service.wake()
    await eventually(lambda: rig.keys() == ["A"], "A delivered")
    assert service.lag(rig.clock.now_ms()).timing == 0


async def test_parked_messages_not_read_yet_are_enqueue_lag(rig: TimerRig) -> None:
    store = rig.open_store()
    await rig.park("EARLY", START_MS + 60_000)
    await rig.park("LATER", START_MS + 90_000)
    rig.clock.advance(4)
    idle = TimerService(store, rig.root / "idle", rig.clock, store.put_messages, rig.settings)
    lag = idle.lag(rig.clock.now_ms())  # nothing read them in: both wait to be enqueued
    assert (lag.enqueue_lag, lag.enqueue_latency_ms, lag.timing) == (2, 4_000, 2)
    service = await rig.start()  # a running service reads them at start
    assert service.lag(rig.clock.now_ms()).enqueue_lag == 0
    assert service.lag(rig.clock.now_ms()).timing == 2
