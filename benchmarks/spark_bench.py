"""The `tidemq` PySpark data source's throughput: one `tidemq serve`, one
local Spark session (`local[2]`, the machine's two cores).

    .venv/bin/python benchmarks/spark_bench.py [--messages N] [--write-messages N]
        [--phases batch-read,batch-write,stream-write] [--rows-per-batch N]
        [--source rate --rate ROWS_PER_S] [--json]

- batch-read: a topic of 8 queues prefilled with N 1 KiB messages (batch
  sends, not timed; a 20,000-message read first warms the session up), then
  `spark.read.format("tidemq")` aggregated over the
  body (count and total length, so every row and body is materialised);
  timed from the action's start to its result [target >= 300,000 msgs/s
  for 1,000,000 messages].
- stream-write: a streaming query to the exactly-once tidemq sink from
  Spark's `rate-micro-batch` source: micro-batches of `--rows-per-batch`
  rows (2 partitions), one after the other with no trigger interval, so
  the sink always has the next batch waiting. Reported: the messages
  committed per second of wall time until N are in the topic (polled every
  0.25 s, from the query's start: its first batch's planning included),
  the same from the first committed message on (`steady_msgs_per_s`), and
  the rows per second of the batches' addBatch time (the sink's own speed:
  write tasks plus the driver's commit) [target >= 100,000 msgs/s].
  An untimed streaming write of two 20,000-row batches to another topic
  runs first: as the read's warm-up, it keeps the JVM's first compilation of
  the write path out of the timed query.
  `--source rate` runs the earlier design, Spark's `rate` source offering
  `--rate` rows/s with a trigger every 2 s: the rate then caps what is
  measured, and a rate above the sink's speed grows every batch (the backlog
  comes due at once), until the halves of one batch wait longer than the
  broker's transaction timeout (6 s) and the check-back starts re-appending
  them: it measures the overload, not the sink.
- batch-write: the same rows written with `df.write.format("tidemq")`
  (at least once), for comparison.

Every phase also reports the CPU it cost per message: the broker process
(`server_us_per_msg`), every process of the run together (this driver,
Spark's JVM and Python processes, the broker: `total_us_per_msg`), which
stays comparable when other work shares the cores, and each part's share
(`us_per_msg_by_process`: processes' own CPU time, sampled at the start, at
every poll of the streaming write and at the end).

Every phase is bounded by a message count and a time limit, and reports
progress on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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
PHASES = ("batch-read", "batch-write", "stream-write")
WARM_STREAM_ROWS = 20_000
"""Rows per batch of the untimed streaming write before the timed one (two batches)."""
POLL_S = 0.25


def progress(text: str) -> None:
    print(f"[spark_bench] {text}", file=sys.stderr, flush=True)


def _proc_stat(pid: int) -> tuple[int, int, str] | None:
    """(parent pid, CPU ticks the process used itself, name), Linux /proc."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text.rpartition(")")[2].split()
    return int(fields[1]), int(fields[11]) + int(fields[12]), name


def _worker_kind(pid: int) -> str:
    """Which Spark Python process `pid` is: task workers, the streaming sink's
    commit runner, or the per-query/per-batch planners."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return "python_workers"
    if b"pyspark.daemon pyspark.worker" in command:
        return "python_workers"
    if b"python_streaming_sink_runner" in command:
        return "python_commit_runner"
    return "python_planners"


PARTS = (
    "broker",
    "jvm",
    "python_workers",
    "python_commit_runner",
    "python_planners",
    "driver",
)


def processes(root: int, server: int) -> dict[int, tuple[int, str]]:
    """Every live descendant of `root` (and itself): pid -> (CPU ticks it used
    itself, which part of the run it is: the broker `server`, Spark's JVM,
    Spark's Python processes by kind, this driver)."""
    table: dict[int, tuple[int, int, str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (found := _proc_stat(int(entry))) is not None:
            table[int(entry)] = found
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found_parts: dict[int, tuple[int, str]] = {}
    todo = [(root, "driver")]
    while todo:
        pid, part = todo.pop()
        if pid == server:
            part = "broker"
        elif pid in table and table[pid][2] == "java":
            part = "jvm"
        elif part == "jvm":
            part = _worker_kind(pid)
        if pid in table:
            found_parts[pid] = (table[pid][1], part)
        todo += [(child, part) for child in children.get(pid, [])]
    return found_parts


class CpuMeter:
    """The CPU of every process of the run over one phase, per message: each
    process's own time, sampled at the start, whenever `sample` is called
    (the streaming write does at every poll) and at the end, so a process
    that ends during the phase still counts what it used up to its last
    sample (and nothing is counted twice through a parent's children time)."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self._start: dict[int, int] = {}
        self._last: dict[int, tuple[int, str]] = {}

    def sample(self) -> None:
        for pid, (ticks, part) in processes(os.getpid(), self.server_pid).items():
            self._last[pid] = (ticks, part)

    def __enter__(self) -> CpuMeter:
        self._last = processes(os.getpid(), self.server_pid)
        self._start = {pid: ticks for pid, (ticks, _) in self._last.items()}
        return self

    def __exit__(self, *exc: object) -> None:
        self.sample()
        tick = os.sysconf("SC_CLK_TCK")
        self.used = dict.fromkeys(PARTS, 0.0)
        for pid, (ticks, part) in self._last.items():
            self.used[part] += (ticks - self._start.get(pid, 0)) / tick

    def per_message(self, row: dict[str, Any]) -> dict[str, Any]:
        messages = max(1, int(row["messages"]))
        row["server_us_per_msg"] = round(1e6 * self.used["broker"] / messages, 1)
        row["total_us_per_msg"] = round(1e6 * sum(self.used.values()) / messages, 1)
        row["us_per_msg_by_process"] = {
            part: round(1e6 * seconds / messages, 1) for part, seconds in self.used.items()
        }
        return row


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


def stream_write(
    spark: Any,
    namesrv: str,
    topic: str,
    count: int,
    checkpoint: Path,
    args: argparse.Namespace,
    meter: CpuMeter | None = None,
) -> dict[str, Any]:
    asyncio.run(create_topic(namesrv, topic, queues=8))
    reader = spark.readStream.format(args.source).option("numPartitions", "2")
    if args.source == "rate":
        reader = reader.option("rowsPerSecond", str(args.rate))
        trigger = "2 seconds"
    else:
        reader = reader.option("rowsPerBatch", str(args.rows_per_batch))
        trigger = "0 seconds"
    query = (
        reader.load()
        .selectExpr("repeat('x', 1024) AS body")
        .writeStream.format("tidemq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=trigger)
        .start()
    )
    started = time.monotonic()
    first: tuple[float, int] | None = None
    try:
        while (written := total_in(namesrv, topic)) < count:
            now = time.monotonic()
            if first is None and written:
                first = (now, written)
            if now - started > TIME_LIMIT_S:
                break
            if query.exception() is not None:
                raise RuntimeError(query.exception())
            if int((now - started) / POLL_S) % 8 == 0:
                progress(f"stream-write {written:,}/{count:,}")
            if meter is not None:
                meter.sample()
            time.sleep(POLL_S)
    finally:
        ended = time.monotonic()
        query.stop()
    seconds = ended - started
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    busy = sum(p["durationMs"].get("addBatch", 0) for p in batches) / 1000
    rows = sum(p["numInputRows"] for p in batches)
    steady = None
    if first is not None and ended > first[0]:
        steady = round((written - first[1]) / (ended - first[0]))
    return {
        "messages": written,
        "seconds": round(seconds, 2),
        "msgs_per_s": round(written / seconds),
        "steady_msgs_per_s": steady,
        "rows_per_busy_s": round(rows / busy) if busy else None,
        "batches": [(p["numInputRows"], p["durationMs"].get("addBatch", 0)) for p in batches],
        "source": args.source,
        "offered": args.rate if args.source == "rate" else f"{args.rows_per_batch} rows per batch",
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
    parser.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"comma-separated, any of {', '.join(PHASES)} (default: all)",
    )
    parser.add_argument(
        "--source",
        choices=("rate-micro-batch", "rate"),
        default="rate-micro-batch",
        help="the streaming write's source: fixed batches back to back, or rows per second",
    )
    parser.add_argument(
        "--rows-per-batch",
        type=int,
        default=100_000,
        help="rows per micro-batch of the rate-micro-batch source",
    )
    parser.add_argument(
        "--rate",
        type=int,
        default=50_000,
        help="rows/s the rate source offers, with a trigger every 2 s",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    phases = [p for p in args.phases.split(",") if p]
    unknown = set(phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases: {', '.join(sorted(unknown))}")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="spark-bench-") as tmp_name:
        tmp = Path(tmp_name)
        with serve(tmp / "data") as server, local_session("spark_bench") as spark:
            meter = CpuMeter(server.popen.pid)
            if "batch-read" in phases:
                progress(f"prefilling {args.messages:,} messages")
                asyncio.run(prefill(server.namesrv, "SparkBenchRead", args.messages))
            progress(
                "warm-up (the first Spark job of a session starts the JVM's and workers' caches)"
            )
            asyncio.run(prefill(server.namesrv, "SparkBenchWarm", 20_000))
            batch_read(spark, server.namesrv, "SparkBenchWarm", 20_000)
            if "batch-read" in phases:
                progress("batch-read")
                with meter:
                    row = batch_read(spark, server.namesrv, "SparkBenchRead", args.messages)
                results["batch-read"] = meter.per_message(row)
                progress(f"batch-read: {results['batch-read']}")
            if "batch-write" in phases:
                with meter:
                    row = batch_write(spark, server.namesrv, "SparkBenchBatch", args.write_messages)
                results["batch-write"] = meter.per_message(row)
                progress(f"batch-write: {results['batch-write']}")
            if "stream-write" in phases:
                progress(
                    "warm-up of the streaming write (its first batches compile the JVM's path)"
                )
                warm = argparse.Namespace(**{**vars(args), "rows_per_batch": WARM_STREAM_ROWS})
                stream_write(
                    spark,
                    server.namesrv,
                    "SparkBenchStreamWarm",
                    2 * WARM_STREAM_ROWS,
                    tmp / "warm-ckpt",
                    warm,
                )
                with meter:
                    row = stream_write(
                        spark,
                        server.namesrv,
                        "SparkBenchStream",
                        args.write_messages,
                        tmp / "ckpt",
                        args,
                        meter,
                    )
                results["stream-write"] = meter.per_message(row)
                progress(f"stream-write: {results['stream-write']}")
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for name, row in results.items():
            print(f"{name:13} {row['msgs_per_s']:>10,} msgs/s  {row}")


if __name__ == "__main__":
    main()
