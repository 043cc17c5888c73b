"""Storage engine throughput, 1 KiB messages, one process.

    .venv/bin/python benchmarks/store_bench.py [--messages N] [--json] [--profile NAME]

Cases (issue #2 targets in brackets):
- append-batch-async: batches of 32 through `put_messages` (one MessageToStore each), async flush
- append-batch-body-async: batches of 32 as the broker stores a SEND_BATCH_MESSAGE, from the
  request body in one call (`put_batch`, compiled core), async flush, UNIQ_KEY index kept
  [issue #16: >= 300,000 msgs/s]
- append-batch-body-sync: the same with sync flush (group commit of concurrent appends)
- append-single-async: one message per `put_message`, async flush (for reference)
- append-single-async-16: 16 concurrent writers, one message per `put_message`, async
  flush (group commit without fsync: how close single sends in flight get to batches)
- sync-group-commit-16: 16 concurrent writers, one message each per call, sync flush
  with group commit [>= 100,000 msgs/s]
- sync-group-commit-16x32: 16 concurrent writers, batches of 32, sync flush
- fsync-floor-16: no store: 16 KiB written and fdatasync'd per round, the rate
  16 / round time; the ceiling of sync-group-commit-16 on this disk (16
  writers with one message each in flight cannot share a round with more)
- read-pages-32: `get_messages` pages of 32 over everything written [>= 1,000,000 msgs/s]
- read-pages-32-tag-filter: the same with a tag filter that matches half
- read-pages-32-sql92-10pct: the same with the SQL92 filter of a pull subscription,
  3 clauses matching 10 % (`SQL92_EXPRESSION`); the rate counts scanned messages
  [issue #5: >= 200,000 scanned msgs/s]

Every loop is bounded by a message count and a time limit. Each row shows
the rate and the CPU time per message of the whole process (the flush thread
included), which stays comparable when other work shares the cores. The
writers run on the event loop `tidemq serve` runs (uvloop when installed;
`TIDEMQ_EVENT_LOOP=asyncio` for asyncio's own, see `tidemq.common.event_loop`).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from tidemq.broker.sql_filter import sql92_message_filter
from tidemq.common import event_loop
from tidemq.common import properties as props
from tidemq.common.message import Message
from tidemq.common.properties import decode_properties
from tidemq.filter.sql92 import compile_sql92
from tidemq.record.codec import encode_batch
from tidemq.store.api import BatchToStore, GetStatus, MessageToStore
from tidemq.store.config import FlushMode, StoreConfig
from tidemq.store.file_store import FileMessageStore
from tidemq.store.filters import TagFilter

BODY = os.urandom(1024)
TIME_LIMIT = 60.0
QUEUES = 8


SQL92_EXPRESSION = "a < 20 AND region IN ('eu', 'us') AND kind = 'order'"
"""a is i % 100 (20 % below 20), region cycles over 4 values (half match), kind
is always 'order': 10 % of the messages match."""
REGIONS = ("eu", "cn", "us", "br")


class Measured(NamedTuple):
    rate: float
    """Messages per second."""
    cpu_us: float
    """CPU microseconds per message, every thread of the process (comparable
    when other work shares the machine's cores)."""


class Timing:
    """Wall time and process CPU time from its creation."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()

    def result(self, messages: int) -> Measured:
        wall = time.perf_counter() - self.wall
        cpu = time.process_time() - self.cpu
        return Measured(messages / wall, 1e6 * cpu / max(messages, 1))


def message(i: int) -> MessageToStore:
    tags = "TagA" if i % 2 == 0 else "TagB"
    return MessageToStore(
        topic="BenchTopic",
        queue_id=i % QUEUES,
        body=BODY,
        properties=props.encode_properties({props.TAGS: tags, props.UNIQ_KEY: f"U{i:012d}"}),
    )


def sql92_properties(k: int) -> dict[str, str]:
    """The properties of the k-th message of a queue: SQL92_EXPRESSION selects
    every tenth (a and region vary independently along the queue)."""
    return {"a": str((k // 4) % 100), "region": REGIONS[k % 4], "kind": "order"}


def message_with_properties(i: int) -> MessageToStore:
    item = message(i)
    item.properties += props.encode_properties(sql92_properties(i // QUEUES))
    return item


def open_store(root: Path, mode: FlushMode) -> FileMessageStore:
    store = FileMessageStore(StoreConfig(root=root, flush_mode=mode))
    store.open()
    return store


def bench_append_batch(root: Path, count: int, batch: int = 32) -> Measured:
    store = open_store(root, FlushMode.ASYNC)
    batches = [[message(i + j) for j in range(batch)] for i in range(0, count, batch)]

    async def run() -> Measured:
        timing = Timing()
        deadline = timing.wall + TIME_LIMIT
        done = 0
        for items in batches:
            result = await store.put_messages(items)
            assert result.ok, result.remark
            done += len(items)
            if time.perf_counter() > deadline:
                break
        return timing.result(done)

    try:
        return event_loop.run(run())
    finally:
        store.close()


def batch_body(first: int, batch: int) -> bytes:
    """The SEND_BATCH_MESSAGE body a producer sends for messages first.. (same
    properties as `message`: TAGS and a UNIQ_KEY each)."""
    return encode_batch(
        [
            Message("BenchTopic", BODY, properties=decode_properties(message(i).properties))
            for i in range(first, first + batch)
        ]
    )


def bench_append_batch_body(
    root: Path, count: int, batch: int = 32, mode: FlushMode = FlushMode.ASYNC
) -> Measured:
    """The broker's SEND_BATCH path: `put_batch` encodes every record from the
    request body in one call (compiled unless TIDEMQ_NO_EXTENSIONS=1)."""
    store = open_store(root, mode)
    bodies = [batch_body(i, batch) for i in range(0, count, batch)]
    cluster = b"CLUSTER\x01DefaultCluster\x02"
    stamp = b"MSG_REGION\x01DefaultRegion\x02TRACE_ON\x01true\x02"  # as the broker's send stamp

    async def run() -> Measured:
        timing = Timing()
        deadline = timing.wall + TIME_LIMIT
        done = 0
        for n, body in enumerate(bodies):
            request = BatchToStore(
                "BenchTopic", n % QUEUES, body, 0, 0, b"\x7f\0\0\1", 1, cluster, stamp
            )
            result = await store.put_batch(request)
            assert result is not None and result.ok, result
            done += result.count
            if time.perf_counter() > deadline:
                break
        return timing.result(done)

    try:
        return event_loop.run(run())
    finally:
        store.close()


def bench_append_single(root: Path, count: int) -> Measured:
    store = open_store(root, FlushMode.ASYNC)
    items = [message(i) for i in range(count)]

    async def run() -> Measured:
        timing = Timing()
        for item in items:
            result = await store.put_message(item)
            assert result.ok
        return timing.result(count)

    try:
        return event_loop.run(run())
    finally:
        store.close()


def bench_append_single_concurrent(root: Path, count: int, writers: int = 16) -> Measured:
    store = open_store(root, FlushMode.ASYNC)
    per_writer = count // writers
    items = [message(i) for i in range(per_writer * writers)]

    async def run() -> Measured:
        timing = Timing()
        deadline = timing.wall + TIME_LIMIT

        async def writer(w: int) -> None:
            for item in items[w * per_writer : (w + 1) * per_writer]:
                result = await store.put_message(item)
                assert result.ok, result.remark
                if time.perf_counter() > deadline:
                    break

        async with asyncio.TaskGroup() as group:
            for w in range(writers):
                group.create_task(writer(w))
        total = sum(store.max_offset("BenchTopic", q) for q in range(QUEUES))
        return timing.result(total)

    try:
        return event_loop.run(run())
    finally:
        store.close()


def bench_sync_group_commit(root: Path, count: int, writers: int = 16, batch: int = 1) -> Measured:
    """Each writer's calls are built before the clock starts (as in the other
    cases): the rate is the store's, not the building of MessageToStore. A
    writer of single messages calls `put_message`, as the broker's send does."""
    store = open_store(root, FlushMode.SYNC)
    per_writer = count // writers
    calls = [
        [
            [message(w * per_writer + sent + j) for j in range(batch)]
            for sent in range(0, per_writer - batch + 1, batch)
        ]
        for w in range(writers)
    ]

    async def run() -> Measured:
        timing = Timing()
        deadline = timing.wall + TIME_LIMIT

        async def writer(w: int) -> None:
            for items in calls[w]:
                result = await store.put_messages(items)
                assert result.ok, result.remark
                if time.perf_counter() > deadline:
                    break

        async def single_writer(w: int) -> None:
            for items in calls[w]:
                result = await store.put_message(items[0])
                assert result.ok, result.remark
                if time.perf_counter() > deadline:
                    break

        async with asyncio.TaskGroup() as group:
            for w in range(writers):
                group.create_task(single_writer(w) if batch == 1 else writer(w))
        total = sum(store.max_offset("BenchTopic", q) for q in range(QUEUES))
        return timing.result(total)

    try:
        rate = event_loop.run(run())
        print(f"  ({store.flush.flush_count} fsync rounds)", file=sys.stderr)
        return rate
    finally:
        store.close()


def bench_fsync_floor(root: Path, count: int, writers: int = 16) -> Measured:
    """The ceiling of sync-group-commit-16 on this disk, with no CPU cost at all:
    each round writes `writers` 1 KiB records to a preallocated file and
    fdatasyncs it, as one group commit does; the rate is writers / round time.
    With one message in flight per writer no round can cover more than
    `writers` messages, so no store can beat this figure here."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "fsync-floor"
    size = 64 * 1024 * 1024
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
        os.fsync(fd)
        group = BODY * writers
        rounds = max(1, min(count // writers, 2_000))
        timing = Timing()
        offset = 0
        for _ in range(rounds):
            if offset + len(group) > size:
                offset = 0
            os.pwrite(fd, group, offset)
            os.fdatasync(fd)
            offset += len(group)
        return timing.result(rounds * writers)
    finally:
        os.close(fd)


def bench_read(root: Path, count: int, tag_filter: bool = False, sql92: bool = False) -> Measured:
    """Messages read per second; with `sql92`, messages scanned per second."""
    store = open_store(root, FlushMode.ASYNC)
    make = message_with_properties if sql92 else message
    items = [make(i) for i in range(count)]
    for i in range(0, count, 256):
        assert store.append(items[i : i + 256]).ok
    message_filter: TagFilter | None = None
    if tag_filter:
        message_filter = TagFilter.from_expression("TagA")
    elif sql92:
        message_filter = sql92_message_filter(SQL92_EXPRESSION)
    try:
        timing = Timing()
        read = 0
        for queue_id in range(QUEUES):
            offset = 0
            while True:
                got = store.get_messages(
                    "bench", "BenchTopic", queue_id, offset, 32, message_filter
                )
                if got.status is not GetStatus.FOUND:
                    break
                read += got.message_count
                offset = got.next_begin_offset
        measured = timing.result(count if sql92 else read)
        expected = count // 2 if tag_filter else count
        if sql92:
            selects = compile_sql92(SQL92_EXPRESSION).evaluate
            expected = sum(selects(sql92_properties(i // QUEUES)) for i in range(count))
        assert read == expected, (read, expected)
        return measured
    finally:
        store.close()


CASES: dict[str, Callable[[Path, int], Measured]] = {
    "append-batch-async": bench_append_batch,
    "append-batch-body-async": bench_append_batch_body,
    "append-batch-body-sync": lambda root, n: bench_append_batch_body(root, n, mode=FlushMode.SYNC),
    "append-single-async": bench_append_single,
    "append-single-async-16": bench_append_single_concurrent,
    "sync-group-commit-16": lambda root, n: bench_sync_group_commit(root, n // 4),
    "sync-group-commit-16x32": lambda root, n: bench_sync_group_commit(root, n, batch=32),
    "fsync-floor-16": bench_fsync_floor,
    "read-pages-32": bench_read,
    "read-pages-32-tag-filter": lambda root, n: bench_read(root, n, tag_filter=True),
    "read-pages-32-sql92-10pct": lambda root, n: bench_read(root, n, sql92=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--dir", type=Path, default=None, help="Where to put the stores.")
    parser.add_argument("--only", action="append", choices=sorted(CASES))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--profile", choices=sorted(CASES), help="Profile one case.")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tidemq-bench-", dir=args.dir))
    results: dict[str, dict[str, float]] = {}
    try:
        for name in args.only or list(CASES):
            root = work / name
            print(f"{name} ...", file=sys.stderr)
            if args.profile == name:
                profiler = cProfile.Profile()
                rate = profiler.runcall(CASES[name], root, args.messages)
                pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(15)
            else:
                rate = CASES[name](root, args.messages)
            results[name] = {
                "msgs_per_s": round(rate.rate),
                "cpu_us_per_msg": round(rate.cpu_us, 2),
            }
            shutil.rmtree(root, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        width = max(map(len, results))
        for name, row in results.items():
            print(
                f"{name:<{width}}  {row['msgs_per_s']:>12,} msgs/s"
                f"  {row['cpu_us_per_msg']:>7.2f} us CPU/msg"
            )


if __name__ == "__main__":
    main()
