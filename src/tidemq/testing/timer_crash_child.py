"""A timer-service process for the kill -9 test of timer messages.

`park`: opens (and so recovers) a sync-flush store, starts a TimerService,
parks `--count` timer messages due from `--first-due-ms` on, `--spacing-ms`
apart (UNIQ_KEY T<i>), prints "parked <n>" once all are acknowledged, then
keeps delivering. `resume`: only runs the service. Both print
"delivered <n>" (records in the real topic, read with get_messages) every
few ms, and exit by themselves once all `--count` are delivered (failing
after `--seconds`). The test SIGKILLs the process part way and checks the disk.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from tidemq.common.clock import SYSTEM_CLOCK
from tidemq.store.api import GetStatus
from tidemq.store.config import FlushMode, StoreConfig
from tidemq.store.file_store import FileMessageStore
from tidemq.testing.stores import make_message
from tidemq.testing.waiting import eventually
from tidemq.timer import TimerService, TimerSettings, park

TOPIC = "TimerCrashTopic"
REPORT_EVERY_S = 0.005
"""How often progress is printed: often, so the test's kill lands where it asked."""


def crash_config(root: Path) -> StoreConfig:
    return StoreConfig(
        root=root,
        flush_mode=FlushMode.SYNC,
        commitlog_file_size=64 * 1024,
        max_message_size=16 * 1024,
        consumequeue_entries_per_file=256,
        index_max_hash_slots=1024,
        index_max_count=20_000,
    )


def crash_settings() -> TimerSettings:
    return TimerSettings(
        precision_ms=10,
        bucket_span_ms=2_000,
        checkpoint_interval_s=0.05,
        segment_size=16 * 1024,
        put_chunk=16,
        idle_poll_s=0.05,
    )


def open_service(root: Path) -> tuple[FileMessageStore, TimerService]:
    store = FileMessageStore(crash_config(root / "store"))
    store.open()
    service = TimerService(
        store, root / "store" / "timer", SYSTEM_CLOCK, store.put_messages, crash_settings()
    )
    store.add_arrival_listener(service.on_arrival)
    return store, service


def delivered_count(store: FileMessageStore) -> int:
    result = store.get_messages("crash", TOPIC, 0, 0, 1)
    return 0 if result.status is GetStatus.NO_MATCHED_LOGIC_QUEUE else result.max_offset


async def run(args: argparse.Namespace) -> None:
    store, service = open_service(Path(args.root))
    await service.start()
    try:
        if args.mode == "park":
            for i in range(args.count):
                message = make_message(TOPIC, f"timer-{i}", unique_key=f"T{i}")
                result = await store.put_message(
                    park(message, args.first_due_ms + i * args.spacing_ms)
                )
                if not result.ok:
                    raise SystemExit(f"park {i} failed: {result.status}")
            print(f"parked {args.count}", flush=True)

        wanted: int = args.count

        def report() -> bool:
            count = delivered_count(store)
            print(f"delivered {count}", flush=True)
            return count >= wanted

        await eventually(
            report, f"{wanted} deliveries", timeout=args.seconds, interval=REPORT_EVERY_S
        )
    finally:
        await service.stop()
        store.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=("park", "resume"))
    parser.add_argument("root")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--first-due-ms", type=int, default=0)
    parser.add_argument("--spacing-ms", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    asyncio.run(run(args))
    sys.exit(0)


if __name__ == "__main__":
    main()
