"""Spark's own ceiling for a Python data source read on this machine: the
same schema and the same query as `spark_bench.py`'s batch read, from a data
source that yields ready-made Arrow batches (no broker, no pull, no decode).

    .venv/bin/python benchmarks/spark_ceiling.py [--messages N] [--schema full|body] [--json]

What tidemq's reader adds on top of this is the pull and the records-to-Arrow
step; what this script measures is what is left when both cost nothing: the
Python workers' Arrow stream to the JVM, the JVM's conversion of those
columns to rows, and the aggregation (`count(*)`, `sum(length(body))`).
`--schema full` is the tidemq read schema (12 columns with a properties map),
`--schema body` one binary column, to show what the other columns cost.
Reported: rows/s and the CPU per row of every process of the run (Spark's
JVM, its Python workers and planners, this driver), as `spark_bench.py`
reports them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_bench import CpuMeter, progress
from tidemq.spark.columns import READ_SCHEMA, arrow_schema
from tidemq.spark.session import local_session

PARTITIONS = 8
ROWS_PER_BATCH = 2_000
"""About 2 MiB of bodies per Arrow batch, as tidemq's reader builds them."""
BODY = b"x" * 1024


def ready_batch(schema_name: str) -> Any:
    """One Arrow batch of ROWS_PER_BATCH rows shaped like pulled messages."""
    import datetime as dt

    import pyarrow as pa

    n = ROWS_PER_BATCH
    bodies = pa.array([BODY] * n, pa.binary())
    if schema_name == "body":
        return pa.RecordBatch.from_arrays([bodies], names=["body"])
    now = dt.datetime.now(dt.UTC)
    properties = [
        [("UNIQ_KEY", f"7F0000010001{i:020X}"), ("WAIT", "true"), ("CLUSTER", "DefaultCluster")]
        for i in range(n)
    ]
    columns = [
        pa.array(["SparkBenchRead"] * n),
        pa.array(["broker-a"] * n),
        pa.array([i % PARTITIONS for i in range(n)], pa.int32()),
        pa.array(range(n), pa.int64()),
        pa.array([f"7F00000100002A9F00000000{i:08X}" for i in range(n)]),
        pa.nulls(n, pa.string()),
        pa.nulls(n, pa.string()),
        pa.array(properties, pa.map_(pa.string(), pa.string())),
        bodies,
        pa.array([now] * n, pa.timestamp("us", tz="UTC")),
        pa.array([now] * n, pa.timestamp("us", tz="UTC")),
        pa.array([0] * n, pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema())


def register_ceiling(spark: Any, schema_name: str, rows_per_partition: int) -> None:
    """Register format("ceiling"): PARTITIONS partitions of ready batches."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    schema_text = READ_SCHEMA if schema_name == "full" else "body binary"

    class CeilingReader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(i) for i in range(PARTITIONS)]

        def read(self, partition: InputPartition) -> Any:
            batch = ready_batch(schema_name)
            left = rows_per_partition
            while left > 0:
                take = min(left, batch.num_rows)
                yield batch if take == batch.num_rows else batch.slice(0, take)
                left -= take

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "ceiling"

        def schema(self) -> str:
            return schema_text

        def reader(self, schema: Any) -> DataSourceReader:
            return CeilingReader()

    spark.dataSource.register(CeilingSource)


def read_all(spark: Any, count: int) -> dict[str, Any]:
    frame = spark.read.format("ceiling").load()
    started = time.perf_counter()
    row = frame.selectExpr("count(*) AS n", "sum(length(body)) AS bytes").collect()[0]
    seconds = time.perf_counter() - started
    assert row.n == count and row.bytes == count * len(BODY), row
    return {"messages": count, "seconds": round(seconds, 2), "msgs_per_s": round(count / seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--schema", choices=("full", "body"), default="full")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    per_partition = -(-args.messages // PARTITIONS)
    count = per_partition * PARTITIONS
    runs = []
    with local_session("spark_ceiling") as spark:
        register_ceiling(spark, args.schema, per_partition)
        progress("warm-up (the first job of a session starts the JVM's and workers' caches)")
        register_ceiling(spark, args.schema, 2_500)
        read_all(spark, 2_500 * PARTITIONS)
        register_ceiling(spark, args.schema, per_partition)
        for i in range(args.repeat):
            meter = CpuMeter(server_pid=-1)
            with meter:
                row = read_all(spark, count)
            runs.append(meter.per_message(row))
            progress(f"run {i + 1}/{args.repeat}: {runs[-1]}")
    best = sorted(runs, key=lambda r: r["msgs_per_s"])[len(runs) // 2]
    result = {"schema": args.schema, "median": best, "runs": runs}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"ceiling ({args.schema} schema): {best['msgs_per_s']:,} rows/s  {best}")


if __name__ == "__main__":
    main()
