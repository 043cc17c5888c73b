"""The `tidemq` PySpark data source's throughput: one `tidemq serve`, one
local Spark session (`local[2]`, the machine's two cores).

    .venv/bin/python benchmarks/spark_bench.py [--messages N] [--write-messages N] [--json]

- batch-read: a topic of 8 queues prefilled with N 1 KiB messages (batch
  sends, not timed; a 20,000-message read first warms the session up), then
  `spark.read.format("tidemq")` aggregated over the
  body (count and total length, so every row and body is materialised);
  timed from the action's start to its result [target >= 300,000 msgs/s
  for 1,000,000 messages].
- stream-write: a streaming query from Spark's `rate` source (50,000 rows/s
  offered, 2 partitions, a trigger every 2 s) to the exactly-once tidemq
  sink; the messages committed per second of wall time until N are in the
  topic, and the rows per second of the batches' addBatch time (the sink's
  own speed) [target >= 100,000 msgs/s].
- batch-write: the same rows written with `df.write.format("tidemq")`
  (at least once), for comparison.

Every phase is bounded by a message count and a time limit, and reports
progress on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tidemq.client.producer import AsyncProducer
from tidemq.common.message import Message
from tidemq.spark.connection import Connection
from tidemq.spark.session import local_session
from tidemq.testing.client_support import create_topic
from tidemq.testing.processes import serve

BODY = b"x" * 1024
TIME_LIMIT_S = 600.0


def progress(text: str) -> None:
    print(f"[spark_bench] {text}", file=sys.stderr, flush=True)


async def prefill(namesrv: str, topic: str, count: int) -> None:
    await create_topic(namesrv, topic, queues=8)
    async with AsyncProducer("SparkBenchFill", namesrv) as producer:
        sent, in_flight, started = 0, set(), time.monotonic()
        while sent < count:
            chunk = min(64, count - sent)
            batch = [Message(topic, BODY) for _ in range(chunk)]
            in_flight.add(asyncio.ensure_future(producer.send_batch(batch)))
            sent += chunk
            if len(in_flight) >= 8:
                done, in_flight = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()
            if sent % 100_000 < chunk:
                progress(
                    f"prefill {sent:,}/{count:,} ({sent / (time.monotonic() - started):,.0f}/s)"
                )
        for task in in_flight:
            await task


def batch_read(spark: Any, namesrv: str, topic: str, count: int) -> dict[str, Any]:
    frame = spark.read.format("tidemq").option("namesrv", namesrv).option("topic", topic).load()
    started = time.perf_counter()
    row = frame.selectExpr("count(*) AS n", "sum(length(body)) AS bytes").collect()[0]
    seconds = time.perf_counter() - started
    assert row.n == count and row.bytes == count * len(BODY), row
    return {"messages": count, "seconds": round(seconds, 2), "msgs_per_s": round(count / seconds)}


def total_in(namesrv: str, topic: str) -> int:
    with Connection(namesrv) as conn:
        return sum(conn.max_offsets(conn.read_queues([topic])).values())


def stream_write(spark: Any, namesrv: str, topic: str, count: int, tmp: Path) -> dict[str, Any]:
    asyncio.run(create_topic(namesrv, topic, queues=8))
    rate = 50_000  # more than the sink takes: the query always has a backlog
    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", str(rate))
        .option("numPartitions", "2")
        .load()
        .selectExpr("repeat('x', 1024) AS body")
        .writeStream.format("tidemq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("checkpointLocation", str(tmp / "ckpt"))
        .trigger(processingTime="2 seconds")
        .start()
    )
    started = time.monotonic()
    try:
        while (written := total_in(namesrv, topic)) < count:
            if time.monotonic() - started > TIME_LIMIT_S:
                break
            if query.exception() is not None:
                raise RuntimeError(query.exception())
            progress(f"stream-write {written:,}/{count:,}")
            time.sleep(2)
    finally:
        query.stop()
    seconds = time.monotonic() - started
    written = total_in(namesrv, topic)
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    busy = sum(p["durationMs"].get("addBatch", 0) for p in batches) / 1000
    rows = sum(p["numInputRows"] for p in batches)
    return {
        "messages": written,
        "seconds": round(seconds, 2),
        "msgs_per_s": round(written / seconds),
        "rows_per_busy_s": round(rows / busy) if busy else None,
        "rate_offered": rate,
    }


def batch_write(spark: Any, namesrv: str, topic: str, count: int) -> dict[str, Any]:
    asyncio.run(create_topic(namesrv, topic, queues=8))
    frame = spark.range(count, numPartitions=2).selectExpr("repeat('x', 1024) AS body")
    started = time.perf_counter()
    frame.write.format("tidemq").option("namesrv", namesrv).option("topic", topic).mode(
        "append"
    ).save()
    seconds = time.perf_counter() - started
    assert total_in(namesrv, topic) == count
    return {"messages": count, "seconds": round(seconds, 2), "msgs_per_s": round(count / seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--write-messages", type=int, default=200_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="spark-bench-") as tmp_name:
        tmp = Path(tmp_name)
        with serve(tmp / "data") as server, local_session("spark_bench") as spark:
            progress(f"prefilling {args.messages:,} messages")
            asyncio.run(prefill(server.namesrv, "SparkBenchRead", args.messages))
            progress(
                "warm-up (the first Spark job of a session starts the JVM's and workers' caches)"
            )
            asyncio.run(prefill(server.namesrv, "SparkBenchWarm", 20_000))
            batch_read(spark, server.namesrv, "SparkBenchWarm", 20_000)
            progress("batch-read")
            results["batch-read"] = batch_read(
                spark, server.namesrv, "SparkBenchRead", args.messages
            )
            progress(f"batch-read: {results['batch-read']}")
            results["batch-write"] = batch_write(
                spark, server.namesrv, "SparkBenchBatch", args.write_messages
            )
            progress(f"batch-write: {results['batch-write']}")
            results["stream-write"] = stream_write(
                spark, server.namesrv, "SparkBenchStream", args.write_messages, tmp
            )
            progress(f"stream-write: {results['stream-write']}")
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for name, row in results.items():
            print(f"{name:13} {row['msgs_per_s']:>10,} msgs/s  {row}")


if __name__ == "__main__":
    main()
