"""Delivery puts that fail, raise after storing, or are refused: retried,
never duplicated, never blocking the rest."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from timer_rig import START_MS, TOPIC, TimerRig

from tidemq.common.clock import ManualClock
from tidemq.store.api import BatchPutResult, MessageToStore, PutStatus
from tidemq.testing.stores import make_message
from tidemq.testing.waiting import eventually
from tidemq.timer import TimerService, TimerSettings, park


class FlakyPut:
    """Wraps the store's batch put: scripted failures first, then the real put."""

    def __init__(self, rig: TimerRig, script: list[str]) -> None:
        self.rig = rig
        self.script = list(script)
        self.calls = 0

    async def __call__(self, messages: Sequence[MessageToStore]) -> BatchPutResult:
        assert self.rig.store is not None
        self.calls += 1
        step = self.script.pop(0) if self.script else "ok"
        if step == "unavailable":
            return BatchPutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="scripted")
        if step == "raise":
            raise OSError("scripted failure before storing")
        if step == "store-then-raise":
            await self.rig.store.put_messages(messages)
            raise OSError("scripted failure after storing")
        if step == "refuse-bad":
            self.script.insert(0, "refuse-bad")  # every time, not once
            if any("BAD\x011" in m.properties for m in messages):
                return BatchPutResult(PutStatus.MESSAGE_ILLEGAL, remark="scripted")
        return await self.rig.store.put_messages(messages)


async def start_with(rig: TimerRig, put: FlakyPut) -> TimerService:
    store = rig.store or rig.open_store()
    service = TimerService(store, rig.root / "store" / "timer", rig.clock, put, rig.settings)
    store.add_arrival_listener(service.on_arrival)
    await service.start()
    rig.service = service
    return service


async def park_many(rig: TimerRig, count: int, due: int) -> list[str]:
    keys = [f"M{i}" for i in range(count)]
    for key in keys:
        await rig.park(key, due)
    return keys


async def test_failed_puts_are_retried_in_order(rig: TimerRig) -> None:
    put = FlakyPut(rig, ["unavailable", "raise", "unavailable"])
    service = await start_with(rig, put)
    keys = await park_many(rig, 10, START_MS + 1_000)
    await eventually(lambda: service.stats()["enqueued"] == 10, 'service.stats()["enqueued"] == 10')
    rig.advance_to(START_MS + 1_000)
    await eventually(lambda: rig.keys() == keys, "rig.keys() == keys")
    assert put.calls >= 4
    assert service.stats()["put_failures"] == 3
    assert service.stats()["delivered"] == 10


async def test_put_that_raised_after_storing_is_not_repeated(rig: TimerRig) -> None:
    put = FlakyPut(rig, ["store-then-raise"])
    service = await start_with(rig, put)
    keys = await park_many(rig, 5, START_MS + 1_000)
    await eventually(lambda: service.stats()["enqueued"] == 5, 'service.stats()["enqueued"] == 5')
    rig.advance_to(START_MS + 1_000)
    await eventually(lambda: service.stats()["delivered"] == 5, 'service.stats()["delivered"] == 5')
    await rig.park("NEXT", START_MS + 2_000)
    rig.advance_to(START_MS + 2_000)
    await eventually(lambda: len(rig.keys()) == 6, "len(rig.keys()) == 6")
    assert rig.keys() == [*keys, "NEXT"]


async def test_a_refused_message_is_skipped_and_the_rest_delivered(rig: TimerRig) -> None:
    put = FlakyPut(rig, ["refuse-bad"])
    service = await start_with(rig, put)
    await rig.park("GOOD1", START_MS + 1_000)
    await rig.park("BAD", START_MS + 1_000, properties={"BAD": "1"})
    await rig.park("GOOD2", START_MS + 1_000)
    await eventually(lambda: service.stats()["enqueued"] == 3, 'service.stats()["enqueued"] == 3')
    rig.advance_to(START_MS + 1_000)
    await eventually(lambda: rig.keys() == ["GOOD1", "GOOD2"], 'rig.keys() == ["GOOD1", "GOOD2"]')
    assert service.stats()["undeliverable"] == 1


async def test_parked_record_without_real_topic_is_skipped(rig: TimerRig) -> None:
    service = await rig.start()
    assert rig.store is not None
    broken = park(make_message(TOPIC, "x", unique_key="NOREAL"), START_MS + 500)
    broken.properties = broken.properties.replace(f"REAL_TOPIC\x01{TOPIC}\x02", "")
    assert (await rig.store.put_message(broken)).ok
    await rig.park("FINE", START_MS + 600)
    rig.advance_to(START_MS + 1_000)
    await eventually(lambda: rig.keys() == ["FINE"], 'rig.keys() == ["FINE"]')
    assert service.stats()["undeliverable"] == 1


async def test_torn_tails_are_cut_and_nothing_is_lost(tmp_path: Path) -> None:
    settings = TimerSettings(
        precision_ms=10,
        bucket_span_ms=10_000,
        checkpoint_interval_s=30,
        idle_poll_s=0.02,
        fsync=False,
    )
    rig = TimerRig(tmp_path, ManualClock(START_MS), settings)
    service = await rig.start()
    keys = await park_many(rig, 8, START_MS + 5_000)
    await eventually(lambda: service.stats()["enqueued"] == 8, 'service.stats()["enqueued"] == 8')
    await rig.stop()  # clean: checkpoint covers everything
    timer_dir = tmp_path / "store" / "timer"
    # Forget the checkpoint and tear the ends of the timer log and the timer file.
    (timer_dir / "checkpoint.json").unlink()
    (segment,) = (timer_dir / "timerlog").iterdir()
    (bucket,) = (timer_dir / "buckets").iterdir()
    segment.write_bytes(segment.read_bytes()[:-7])
    bucket.write_bytes(bucket.read_bytes()[:-13])
    rig.open_store()
    await rig.start()
    rig.advance_to(START_MS + 5_000)
    await eventually(
        lambda: sorted(rig.keys()) == sorted(keys), "sorted(rig.keys()) == sorted(keys)"
    )
    assert len(rig.keys()) == 8
    await rig.stop()
