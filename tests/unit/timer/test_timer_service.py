"""TimerService over a real FileMessageStore (files in tmp_path, manual clock)."""

from __future__ import annotations

import shutil

import pytest
from timer_rig import START_MS, TOPIC, TimerRig

from tidemq.broker.timer_progress import TimerProgress, read_progress
from tidemq.record.codec import decode_records
from tidemq.testing.stores import make_message
from tidemq.testing.waiting import eventually
from tidemq.timer import RecallOutcome, TimerSettings, park
from tidemq.timer.service import InheritedProgress


async def test_delivers_at_not_before_its_time(rig: TimerRig) -> None:
    service = await rig.start()
    await rig.park("A", START_MS + 5_000)
    await rig.park("B", START_MS + 3_000)
    await eventually(lambda: service.stats()["enqueued"] == 2, 'service.stats()["enqueued"] == 2')
    rig.advance_to(START_MS + 2_999)
    await rig.settle()
    assert rig.keys() == []
    rig.advance_to(START_MS + 3_000)
    await eventually(lambda: rig.keys() == ["B"], 'rig.keys() == ["B"]')
    rig.advance_to(START_MS + 4_999)
    await rig.settle()
    assert rig.keys() == ["B"]
    rig.advance_to(START_MS + 5_000)
    await eventually(lambda: rig.keys() == ["B", "A"], 'rig.keys() == ["B", "A"]')


async def test_far_future_timer_waits_in_files_until_its_window(rig: TimerRig) -> None:
    service = await rig.start()
    due = START_MS + 3_600_000  # an hour ahead: 360 spans of 10 s away
    await rig.park("FAR", due)
    await eventually(lambda: service.stats()["enqueued"] == 1, 'service.stats()["enqueued"] == 1')
    assert service.stats()["pending_in_wheel"] == 0
    buckets = sorted(p.name for p in (rig.root / "store" / "timer" / "buckets").iterdir())
    assert buckets == [f"{due - due % 10_000:020d}"]
    rig.advance_to(due - 6_000)  # preload is half a span (5 s) before the bucket starts
    await rig.settle()
    assert service.stats()["pending_in_wheel"] == 0
    rig.advance_to(due - 5_000)
    await eventually(
        lambda: service.stats()["pending_in_wheel"] == 1, 'service.stats()["pending_in_wheel"] == 1'
    )
    assert rig.keys() == []
    rig.advance_to(due)
    await eventually(lambda: rig.keys() == ["FAR"], 'rig.keys() == ["FAR"]')


async def test_recall_near_and_far_before_delivery(rig: TimerRig) -> None:
    service = await rig.start()
    near, far = START_MS + 2_000, START_MS + 86_400_000
    for key, when in (("N1", near), ("N2", near), ("F1", far), ("F2", far)):
        await rig.park(key, when)
    await eventually(lambda: service.stats()["enqueued"] == 4, 'service.stats()["enqueued"] == 4')
    assert await service.recall(TOPIC, "N1", near) is RecallOutcome.RECALLED
    assert await service.recall(TOPIC, "F1", far) is RecallOutcome.RECALLED
    await eventually(
        lambda: service.stats()["recall_units"] == 2, 'service.stats()["recall_units"] == 2'
    )
    assert service.stats()["pending_recalls"] == 0
    rig.advance_to(near)
    await eventually(lambda: rig.keys() == ["N2"], 'rig.keys() == ["N2"]')
    rig.advance_to(far)
    await eventually(lambda: rig.keys() == ["N2", "F2"], 'rig.keys() == ["N2", "F2"]')
    await rig.settle()
    assert rig.keys() == ["N2", "F2"]
    assert service.stats()["pending_in_wheel"] == 0


async def test_recall_before_enqueue_still_holds(rig: TimerRig) -> None:
    service = await rig.start()
    due = START_MS + 1_000
    await rig.park("EARLY", due)
    outcome = await service.recall(TOPIC, "EARLY", due)  # no await between park and decision
    assert outcome is RecallOutcome.RECALLED
    await rig.park("OTHER", due)
    rig.advance_to(due + 10)
    await eventually(lambda: rig.keys() == ["OTHER"], 'rig.keys() == ["OTHER"]')


async def test_recall_refused_once_due_or_delivered(rig: TimerRig) -> None:
    service = await rig.start()
    due = START_MS + 1_000
    await rig.park("D", due)
    rig.advance_to(due)
    await eventually(lambda: rig.keys() == ["D"], 'rig.keys() == ["D"]')
    assert await service.recall(TOPIC, "D", due) is RecallOutcome.ALREADY_DELIVERED
    later = START_MS + 5_000
    await rig.park("L", later)
    rig.advance_to(later + 1)  # due, maybe not dispatched yet: too late either way
    assert await service.recall(TOPIC, "L", later) in (
        RecallOutcome.TOO_LATE,
        RecallOutcome.ALREADY_DELIVERED,
    )
    await eventually(lambda: rig.keys() == ["D", "L"], 'rig.keys() == ["D", "L"]')


async def test_restart_delivers_each_exactly_once(rig: TimerRig) -> None:
    service = await rig.start()
    keys = [f"R{i}" for i in range(40)]
    for i, key in enumerate(keys):
        await rig.park(key, START_MS + 1_000 + i * 500)  # across several buckets
    await eventually(lambda: service.stats()["enqueued"] == 40, 'service.stats()["enqueued"] == 40')
    rig.advance_to(START_MS + 1_000 + 15 * 500)
    await eventually(lambda: len(rig.keys()) == 16, "len(rig.keys()) == 16")
    await rig.stop(close_store=False)
    service = await rig.start()
    assert rig.keys() == keys[:16]
    rig.advance_to(START_MS + 30_000)
    await eventually(lambda: len(rig.keys()) == 40, "len(rig.keys()) == 40")
    await rig.stop()
    rig.open_store()
    service = await rig.start()
    rig.advance_to(START_MS + 60_000)
    await rig.settle()
    assert rig.keys() == keys
    assert service.stats()["delivered"] == 0


async def test_recall_survives_restart(rig: TimerRig) -> None:
    service = await rig.start()
    due = START_MS + 7_200_000
    await rig.park("GONE", due)
    await rig.park("KEPT", due)
    await eventually(lambda: service.stats()["enqueued"] == 2, 'service.stats()["enqueued"] == 2')
    assert await service.recall(TOPIC, "GONE", due) is RecallOutcome.RECALLED
    await rig.stop()
    rig.open_store()
    await rig.start()
    rig.advance_to(due)
    await eventually(lambda: rig.keys() == ["KEPT"], 'rig.keys() == ["KEPT"]')
    await rig.settle()
    assert rig.keys() == ["KEPT"]


async def test_late_entries_are_delivered_at_once(rig: TimerRig) -> None:
    service = await rig.start()
    await rig.park("PAST", START_MS - 60_000)
    await eventually(lambda: rig.keys() == ["PAST"], 'rig.keys() == ["PAST"]')
    await rig.park("DOWN", START_MS + 2_000)
    await eventually(lambda: service.stats()["enqueued"] == 2, 'service.stats()["enqueued"] == 2')
    await rig.stop()
    rig.clock.advance(3_600)  # the broker was down for an hour
    rig.open_store()
    await rig.start()
    await eventually(lambda: rig.keys() == ["PAST", "DOWN"], 'rig.keys() == ["PAST", "DOWN"]')


async def test_delivery_properties(rig: TimerRig) -> None:
    service = await rig.start()
    due = START_MS + 100
    await rig.park("P", due, tags="TagA", keys="k1 k2", properties={"custom": "v\x01x"})
    rig.advance_to(due)
    await eventually(lambda: rig.keys() == ["P"], 'rig.keys() == ["P"]')
    assert rig.store is not None
    result = rig.store.get_messages("t", TOPIC, 0, 0, 1)
    (record,) = decode_records(result.body())
    assert record.body == b"body-P"
    assert record.properties["TAGS"] == "TagA"
    assert record.properties["KEYS"] == "k1 k2"
    assert record.properties["custom"] == "v\x01x"
    assert record.properties["TIMER_OUT_MS"] == str(due)
    assert "REAL_TOPIC" not in record.properties
    assert int(record.properties["TIMER_SOURCE_OFFSET"]) >= 0
    assert record.store_timestamp >= due
    assert service.stats()["delivered"] == 1


async def test_retirement_deletes_delivered_buckets_and_segments(rig: TimerRig) -> None:
    service = await rig.start()
    body = "x" * 2_000  # ~2 KB records: 64 KiB segments roll every ~30
    for i in range(120):
        assert rig.store is not None
        message = make_message(TOPIC, body, unique_key=f"S{i}")
        assert (await rig.store.put_message(park(message, START_MS + 1_000 + i * 250))).ok
    await eventually(
        lambda: service.stats()["enqueued"] == 120, 'service.stats()["enqueued"] == 120'
    )
    timer_dir = rig.root / "store" / "timer"
    assert len(list((timer_dir / "timerlog").iterdir())) >= 3
    assert len(list((timer_dir / "buckets").iterdir())) >= 3
    rig.advance_to(START_MS + 120_000)
    await eventually(lambda: len(rig.keys()) == 120, "len(rig.keys()) == 120")
    await eventually(
        lambda: not list((timer_dir / "buckets").iterdir()),
        'not list((timer_dir / "buckets").iterdir())',
    )
    await eventually(
        lambda: len(list((timer_dir / "timerlog").iterdir())) == 1,
        'len(list((timer_dir / "timerlog").iterdir())) == 1',
    )
    assert service.stats()["segments_retired"] >= 2


def test_settings_are_validated() -> None:
    assert TimerSettings().preload == 30_000
    assert TimerSettings(precision_ms=70).precision_ms == 70  # any 10..1000, as the broker allows
    for bad in (
        {"precision_ms": 5},
        {"precision_ms": 1001},
        {"bucket_span_ms": 999},
        {"put_chunk": 0},
        {"checkpoint_interval_s": 0},
        {"preload_ms": 0},
    ):
        with pytest.raises(ValueError):
            TimerSettings(**bad)  # type: ignore[arg-type]


async def test_a_service_starts_once(rig: TimerRig) -> None:
    service = await rig.start()
    await service.stop()
    with pytest.raises(RuntimeError, match="starts once"):
        await service.start()


async def checkpoint_past(rig: TimerRig, read_time_ms: int) -> TimerProgress:
    """The timer's progress as a slave copies it, once it has read up to `read_time_ms`."""

    def checkpointed() -> TimerProgress | None:
        progress = read_progress(rig.directory)
        return progress if progress.last_read_time_ms >= read_time_ms else None

    return await eventually(checkpointed, f"a checkpoint past {read_time_ms}")


async def test_a_promoted_slave_delivers_what_its_master_left_exactly_once(
    rig: TimerRig,
) -> None:
    """The store is the slave's copy (same records); the timer state is gone,
    as a slave runs no timer; the progress is the master's checkpoint as
    GET_TIMER_CHECK_POINT serves it, copied before the master's last delivery."""
    service = await rig.start()
    keys = [f"P{i}" for i in range(10)]
    for i, key in enumerate(keys):
        await rig.park(key, START_MS + 1_000 + i * 1_000)
    await eventually(lambda: service.stats()["enqueued"] == 10, "the ten entries enqueued")
    rig.advance_to(START_MS + 4_500)
    await eventually(lambda: len(rig.keys()) == 4, "P0..P3 delivered")

    copied = await checkpoint_past(rig, START_MS + 4_000)
    rig.advance_to(START_MS + 5_500)  # delivered after the copy: found in the commitlog
    await eventually(lambda: len(rig.keys()) == 5, "P4 delivered")
    await rig.stop(close_store=False)
    shutil.rmtree(rig.directory)

    service = await rig.start(
        inherited=InheritedProgress(copied.master_timer_queue_offset, copied.last_read_time_ms)
    )
    stats = service.stats()
    assert stats["inherited_skipped"] == 4  # P0..P3, due before the copied read time
    rig.advance_to(START_MS + 20_000)
    await eventually(lambda: len(rig.keys()) == 10, "P5..P9 delivered")
    await rig.settle()
    assert rig.keys() == keys  # each once, in order
    assert service.stats()["deduplicated"] == 1  # P4, delivered by the old master


async def test_own_timer_state_wins_over_an_inherited_progress(rig: TimerRig) -> None:
    """A broker that ran its timer before (a master restarted, or one that was
    a master before it was a slave) starts from its own checkpoint."""
    await rig.start()
    await rig.park("OWN", START_MS + 1_000)
    rig.advance_to(START_MS + 2_000)
    await eventually(lambda: rig.keys() == ["OWN"], "OWN delivered")
    await rig.stop(close_store=False)

    service = await rig.start(inherited=InheritedProgress(0, 0))
    rig.advance_to(START_MS + 3_000)
    await rig.settle()
    assert rig.keys() == ["OWN"]
    assert service.stats()["inherited_skipped"] == 0


async def test_a_timer_parked_long_ago_does_not_make_the_promotion_read_the_whole_log(
    rig: TimerRig,
) -> None:
    """A timer due in 30 days was parked before an hour of other traffic: the
    search for the old master's deliveries starts where records stored at the
    earliest re-enqueued delivery time begin, not at that parked timer."""
    service = await rig.start()
    await rig.park("FAR", START_MS + 30 * 86_400_000)
    assert rig.store is not None
    rig.advance_to(START_MS + 3_600_000)
    traffic_start = rig.store.commitlog_max_offset()
    for i in range(200):
        filler = make_message("Filler", "f" * 1_000, unique_key=f"F{i}")
        assert (await rig.store.put_message(filler)).ok
    traffic_end = rig.store.commitlog_max_offset()
    now = START_MS + 7_200_000
    rig.advance_to(now)
    keys = [f"P{i}" for i in range(5)]
    for i, key in enumerate(keys):
        await rig.park(key, now + 1_000 + i * 1_000)
    await eventually(lambda: service.stats()["enqueued"] == 6, "the six entries enqueued")
    rig.advance_to(now + 2_500)
    await eventually(lambda: rig.keys() == ["P0", "P1"], "P0 and P1 delivered")

    copied = await checkpoint_past(rig, now + 2_000)
    rig.advance_to(now + 3_500)  # delivered after the copy: found in the commitlog
    await eventually(lambda: len(rig.keys()) == 3, "P2 delivered")
    await rig.stop(close_store=False)
    shutil.rmtree(rig.directory)

    service = await rig.start(
        inherited=InheritedProgress(copied.master_timer_queue_offset, copied.last_read_time_ms)
    )
    stats = service.stats()
    assert stats["inherited_skipped"] == 2  # P0, P1
    traffic = traffic_end - traffic_start  # 200 KB the search no longer reads
    assert 0 < stats["inherited_scanned_bytes"] < traffic / 10
    rig.advance_to(now + 20_000)
    await eventually(lambda: len(rig.keys()) == 5, "P3 and P4 delivered")
    await rig.settle()
    assert rig.keys() == keys  # each once, FAR still waiting
    assert service.stats()["deduplicated"] == 1  # P2, delivered by the old master


async def test_an_idle_timer_writes_and_syncs_no_checkpoint(rig: TimerRig) -> None:
    service = await rig.start()
    await rig.park("P", START_MS + 100)
    rig.advance_to(START_MS + 200)
    await eventually(lambda: rig.keys() == ["P"], "P delivered")
    stats = service.stats
    await eventually(lambda: stats()["checkpoints_skipped"] >= 1, "an idle checkpoint pass")
    written, skipped = stats()["checkpoints"], stats()["checkpoints_skipped"]
    await eventually(lambda: stats()["checkpoints_skipped"] >= skipped + 3, "three idle passes")
    assert stats()["checkpoints"] == written
    await rig.park("Q", START_MS + 300)  # something to keep: written at the next pass
    await eventually(lambda: stats()["checkpoints"] > written, "a checkpoint after new work")
