"""Timer messages, in process: a FileMessageStore (async flush) + TimerService.

    .venv/bin/python benchmarks/timer_bench.py [--quick] [--json] [--only steady|burst|memory]

- steady: messages parked 2 s ahead at a steady 5,000/s, so 5,000 fall due
  every second for `--seconds`; lateness = store timestamp of the delivered
  record - requested delivery time (p50/p99/max; early deliveries counted,
  must be 0). Target p99 <= 100 ms.
- burst: 100,000 messages due in the same second (spread over it). The clock
  (real time plus an offset) is moved to 5 s before that second once they are
  enqueued, so the bucket is loaded as it would be, then real time runs on.
  Reported: from the start of the due second to the last delivery. Target 3 s.
- memory: 1,000,000 timers due 1-3 days ahead are parked and enqueued; RSS
  (anonymous and file-backed, /proc/self/status) and the Python heap
  (tracemalloc) before and after. Target: flat.

Every loop is bounded by count and a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path

from tidemq.common import properties as props
from tidemq.common.clock import SystemClock
from tidemq.record.codec import peek_header, peek_properties
from tidemq.store.api import GetStatus, MessageToStore
from tidemq.store.config import StoreConfig
from tidemq.store.file_store import FileMessageStore
from tidemq.timer import TimerService, TimerSettings, park

TOPIC = "TimerBench"
BODY = b"x" * 256
DEADLINE_S = 300.0


class ShiftedClock(SystemClock):
    """Real time plus an offset the benchmark can move forward."""

    def __init__(self) -> None:
        self.offset_ms = 0

    def now_ms(self) -> int:
        return super().now_ms() + self.offset_ms


def proc_status() -> dict[str, int]:
    """VmRSS / RssAnon / RssFile in KiB."""
    out: dict[str, int] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0])
    return out


def message(i: int, deliver_ms: int) -> MessageToStore:
    real = MessageToStore(
        topic=TOPIC,
        queue_id=i % 4,
        body=BODY,
        properties=props.encode_properties({props.UNIQ_KEY: f"B{i:012d}", props.TAGS: "T"}),
    )
    return park(real, deliver_ms)


class Rig:
    def __init__(self, root: Path, settings: TimerSettings) -> None:
        self.clock = ShiftedClock()
        self.store = FileMessageStore(StoreConfig(root=root / "store"), clock=self.clock)
        self.store.open()
        self.service = TimerService(
            self.store, root / "store" / "timer", self.clock, self.store.put_messages, settings
        )
        self.store.add_arrival_listener(self.service.on_arrival)

    async def wait(self, condition: object, what: str, limit: float = DEADLINE_S) -> None:
        deadline = time.monotonic() + limit
        while not condition():  # type: ignore[operator]
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}")
            await asyncio.sleep(0.01)

    def enqueued_at_least(self, count: int) -> object:
        return lambda: self.service.stats()["enqueued"] >= count

    def delivered(self) -> int:
        return sum(max(self.store.max_offset(TOPIC, q), 0) for q in range(4))

    def records(self) -> list[tuple[int, int]]:
        """(store timestamp, TIMER_OUT_MS) of every delivered record."""
        late: list[tuple[int, int]] = []
        for queue_id in range(4):
            offset = 0
            while True:
                result = self.store.get_messages("bench", TOPIC, queue_id, offset, 1024)
                if result.status is not GetStatus.FOUND:
                    break
                for buf in result.buffers:
                    stored = peek_header(buf).store_timestamp
                    due = int(props.PropertyView(peek_properties(buf))[props.TIMER_OUT_MS])
                    late.append((stored, due))
                offset = result.next_begin_offset
        return late

    async def close(self) -> None:
        await self.service.stop()
        self.store.close()


def percentile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0


async def steady(root: Path, seconds: int, rate: int) -> dict[str, float]:
    rig = Rig(root, TimerSettings())
    await rig.service.start()
    total = seconds * rate
    tick_s = 0.01
    per_tick = rate * tick_s
    lead_ms = 2_000
    try:
        start = time.monotonic()
        sent = 0
        while sent < total:
            target = min(total, int((time.monotonic() - start) / tick_s * per_tick) + 1)
            if target > sent:
                now = rig.clock.now_ms()
                batch = [message(i, now + lead_ms) for i in range(sent, target)]
                result = await rig.store.put_messages(batch)
                assert result.ok, result
                sent = target
            await asyncio.sleep(tick_s / 2)
        await rig.wait(lambda: rig.delivered() >= total, "steady deliveries")
        late = [stored - due for stored, due in rig.records()]
        stats = rig.service.stats()
    finally:
        await rig.close()
    return {
        "messages": total,
        "rate_per_s": rate,
        "seconds": seconds,
        "lateness_p50_ms": percentile(late, 0.50),
        "lateness_p99_ms": percentile(late, 0.99),
        "lateness_max_ms": max(late),
        "early": sum(1 for x in late if x < 0),
        "puts": stats["puts"],
    }


async def burst(root: Path, count: int) -> dict[str, float]:
    rig = Rig(root, TimerSettings())
    await rig.service.start()
    try:
        due_second = rig.clock.now_ms() + 600_000
        due_second -= due_second % 1000
        t0 = time.monotonic()
        for start in range(0, count, 512):
            batch = [
                message(i, due_second + (i * 1000) // count)
                for i in range(start, min(count, start + 512))
            ]
            assert (await rig.store.put_messages(batch)).ok
        park_s = time.monotonic() - t0
        await rig.wait(lambda: rig.service.stats()["enqueued"] >= count, "burst enqueue")
        enqueue_s = time.monotonic() - t0
        rig.clock.offset_ms += due_second - 5_000 - rig.clock.now_ms()
        rig.service.wake()
        await rig.wait(lambda: rig.service.stats()["pending_in_wheel"] >= count, "bucket load")
        load_s = time.monotonic() - t0 - enqueue_s
        await rig.wait(lambda: rig.delivered() >= count, "burst deliveries")
        records = rig.records()
        stats = rig.service.stats()
    finally:
        await rig.close()
    late = [stored - due for stored, due in records]
    return {
        "messages": count,
        "park_s": round(park_s, 2),
        "park_and_enqueue_s": round(enqueue_s, 2),
        "bucket_load_s": round(load_s, 2),
        "last_delivery_after_due_second_start_ms": max(s for s, _ in records) - due_second,
        "lateness_p50_ms": percentile(late, 0.50),
        "lateness_p99_ms": percentile(late, 0.99),
        "lateness_max_ms": max(late),
        "early": sum(1 for x in late if x < 0),
        "puts": stats["puts"],
    }


async def memory(root: Path, count: int) -> dict[str, float]:
    rig = Rig(root, TimerSettings())
    await rig.service.start()
    samples: list[dict[str, int]] = []
    try:
        now = rig.clock.now_ms()
        day = 86_400_000
        gc.collect()
        before = proc_status()
        tracemalloc.start()
        heap_before = tracemalloc.get_traced_memory()[0]
        t0 = time.monotonic()
        step = count // 4
        for start in range(0, count, 1024):
            batch = [
                message(i, now + day + (i * 7_919 % count) * (2 * day // count))
                for i in range(start, min(count, start + 1024))
            ]
            assert (await rig.store.put_messages(batch)).ok
            done = start + len(batch)
            if (start + 1024) % step < 1024:
                await rig.wait(rig.enqueued_at_least(done), "memory enqueue")
                samples.append({"timers": done, **proc_status()})
        await rig.wait(lambda: rig.service.stats()["enqueued"] >= count, "memory enqueue")
        elapsed = time.monotonic() - t0
        gc.collect()
        heap_after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        after = proc_status()
        stats = rig.service.stats()
        buckets = len(list((root / "store" / "timer" / "buckets").iterdir()))
    finally:
        await rig.close()
    return {
        "timers": count,
        "seconds": round(elapsed, 1),
        "rss_kib_before": before["VmRSS"],
        "rss_kib_after": after["VmRSS"],
        "rss_anon_kib_before": before["RssAnon"],
        "rss_anon_kib_after": after["RssAnon"],
        "rss_file_kib_after": after["RssFile"],
        "python_heap_growth_bytes": heap_after - heap_before,
        "heap_bytes_per_timer": round((heap_after - heap_before) / count, 3),
        "pending_in_wheel": stats["pending_in_wheel"],
        "timer_files": buckets,
        "samples": samples,  # type: ignore[dict-item]
    }


async def main_async(args: argparse.Namespace) -> dict[str, object]:
    results: dict[str, object] = {}
    root = Path(tempfile.mkdtemp(prefix="tidemq-timer-bench-"))
    try:
        if args.only in (None, "steady"):
            seconds = 5 if args.quick else args.seconds
            results["steady"] = await steady(root / "steady", seconds, args.rate)
        if args.only in (None, "burst"):
            results["burst"] = await burst(root / "burst", 20_000 if args.quick else 100_000)
        if args.only in (None, "memory"):
            results["memory"] = await memory(root / "memory", 100_000 if args.quick else 1_000_000)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts (a smoke run)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", choices=("steady", "burst", "memory"))
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--rate", type=int, default=5_000)
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for name, values in results.items():
        print(f"== {name}")
        assert isinstance(values, dict)
        for key, value in values.items():
            print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
