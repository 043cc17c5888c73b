"""Filtered pull over the wire: a SQL92 subscription scanning a topic through a real
`tidemq serve` (async flush), the client pulling with PULL_MESSAGE in a loop.

    .venv/bin/python benchmarks/filter_pull_bench.py [--messages N] [--json]

The topic (4 queues, 1 KiB bodies, one pull loop per queue) is filled with
messages whose properties make `store_bench.SQL92_EXPRESSION` (3 clauses)
match 10 %; the rate counts queue entries the broker scanned per second of
pulling (issue #5 target: >= 200,000 scanned msgs/s). The store-level number
of the same filter is `store_bench.py --only read-pages-32-sql92-10pct`.
Bounded by count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from store_bench import SQL92_EXPRESSION, sql92_properties
from tidemq.client.consumer.pull_api import PullStatus, pull_message
from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.client.instance import ClientConfig, ClientInstance
from tidemq.client.producer import make_message
from tidemq.common.message import MessageQueue
from tidemq.filter.sql92 import compile_sql92
from tidemq.testing.client_support import create_topic, produce
from tidemq.testing.processes import serve

TIME_LIMIT_S = 120.0
BODY = b"x" * 1024
PULL_BATCH = 32
"""Messages per pull (the client default, pullBatchSize)."""


QUEUES = 4
"""Queues of the topic, each pulled by its own loop (one pull in flight per
queue, as a push consumer does)."""


async def scan_queue(
    instance: ClientInstance, queue: MessageQueue, spec: SubscriptionSpec, size: int
) -> tuple[int, int, int]:
    """Pull `queue` from 0 to `size`: (entries scanned, messages matched, pulls)."""
    matched, offset, pulls = 0, 0, 0
    deadline = time.perf_counter() + TIME_LIMIT_S
    while offset < size and time.perf_counter() < deadline:
        result = await pull_message(
            instance,
            group="FilterBenchGroup",
            mq=queue,
            subscription=spec,
            offset=offset,
            suspend_ms=0,
            max_nums=PULL_BATCH,
        )
        pulls += 1
        if result.status is PullStatus.FOUND:
            matched += len(result.messages)
        elif result.status is PullStatus.NO_NEW_MSG:
            break
        offset = result.next_begin_offset
    return offset, matched, pulls


async def run(namesrv: str, count: int) -> dict[str, float]:
    topic = "FilterBench"
    queues = await create_topic(namesrv, topic, queues=QUEUES)
    per_queue = count // QUEUES
    for queue in queues:
        messages = [
            make_message(topic, BODY, tags="TagA", properties=sql92_properties(k))
            for k in range(per_queue)
        ]
        await produce(namesrv, messages, queue=queue, batch_size=64)
    spec = SubscriptionSpec.parse(topic, SQL92_EXPRESSION, "SQL92", sub_version=1)
    instance = ClientInstance(ClientConfig(namesrv=namesrv))
    try:
        await instance.route(topic)
        start = time.perf_counter()
        results = await asyncio.gather(
            *(scan_queue(instance, queue, spec, per_queue) for queue in queues)
        )
        elapsed = time.perf_counter() - start
    finally:
        await instance.close()
    selects = compile_sql92(SQL92_EXPRESSION).evaluate
    expected = QUEUES * sum(selects(sql92_properties(k)) for k in range(per_queue))
    scanned = sum(r[0] for r in results)
    matched = sum(r[1] for r in results)
    assert scanned >= QUEUES * per_queue and matched == expected, (scanned, matched, expected)
    return {
        "scanned_per_s": round(scanned / elapsed),
        "matched_per_s": round(matched / elapsed),
        "pulls": sum(r[2] for r in results),
        "seconds": round(elapsed, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="tidemq-filter-bench-") as work,
        serve(Path(work) / "data", flush="async") as server,
    ):
        result = asyncio.run(run(server.namesrv, args.messages))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"sql92 pull (3 clauses, 10 % match): {result['scanned_per_s']:,} scanned msgs/s, "
            f"{result['matched_per_s']:,} matched msgs/s, {result['pulls']} pulls"
        )


if __name__ == "__main__":
    main()
