"""A writer process for the kill -9 test.

Opens (and so recovers) a sync-flush store, then appends from many concurrent
tasks and prints each acknowledged sequence number on its own line, only
after the store answered PUT_OK (that is, after fsync). The test kills this
process at a random moment and checks the printed numbers against the disk.
Bounded: stops by itself after `--count` messages or `--seconds`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from pathlib import Path

from tidemq.store.config import FlushMode, StoreConfig
from tidemq.store.file_store import FileMessageStore
from tidemq.testing.stores import make_message

TOPIC = "CrashTopic"
QUEUES = 4


def crash_config(root: Path) -> StoreConfig:
    return StoreConfig(
        root=root,
        flush_mode=FlushMode.SYNC,
        commitlog_file_size=1 << 20,
        max_message_size=64 * 1024,
        consumequeue_entries_per_file=1000,
        index_max_hash_slots=1024,
        index_max_count=20_000,
    )


async def write(root: Path, first_seq: int, count: int, seconds: float, writers: int) -> None:
    store = FileMessageStore(crash_config(root))
    report = store.open()
    print(f"recovered: {report.summary()}", file=sys.stderr, flush=True)
    sequence = itertools.count(first_seq)
    deadline = time.monotonic() + seconds
    last = first_seq + count
    out = sys.stdout

    async def writer() -> None:
        while time.monotonic() < deadline:
            seq = next(sequence)
            if seq >= last:
                return
            body = f"seq-{seq}-".encode() * (1 + seq % 7)
            message = make_message(TOPIC, body, queue_id=seq % QUEUES, keys=f"s{seq}")
            result = await store.put_message(message)
            if result.ok:
                out.write(f"{seq}\n")
                out.flush()

    print("ready", file=sys.stderr, flush=True)
    async with asyncio.TaskGroup() as group:
        for _ in range(writers):
            group.create_task(writer())
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("root", type=Path)
    parser.add_argument("--first-seq", type=int, default=0)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--writers", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(write(args.root, args.first_seq, args.count, args.seconds, args.writers))


if __name__ == "__main__":
    main()
