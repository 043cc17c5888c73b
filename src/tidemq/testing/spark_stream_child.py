"""A streaming query in its own process, for kill -9 tests: copies one topic
into another through the `tidemq` source and exactly-once sink.

    python -m tidemq.testing.spark_stream_child NAMESRV SOURCE TARGET CHECKPOINT
        [--max-per-trigger N] [--available-now]

Without --available-now it runs until killed; with it, it stops once what
was there at the start is copied. Prints ``started`` when the query runs.
"""

from __future__ import annotations

import argparse

from tidemq.spark.session import local_session


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("namesrv")
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("checkpoint")
    parser.add_argument("--max-per-trigger", type=int, default=100)
    parser.add_argument("--available-now", action="store_true")
    args = parser.parse_args()
    with local_session("spark_stream_child") as spark:
        writer = (
            spark.readStream.format("tidemq")
            .option("namesrv", args.namesrv)
            .option("topic", args.source)
            .option("startingOffsets", "earliest")
            .option("maxMessagesPerTrigger", str(args.max_per_trigger))
            .load()
            .selectExpr("body", "tags", "keys")
            .writeStream.format("tidemq")
            .option("namesrv", args.namesrv)
            .option("topic", args.target)
            .option("checkpointLocation", args.checkpoint)
        )
        if args.available_now:
            writer = writer.trigger(availableNow=True)
        query = writer.start()
        print("started", flush=True)
        query.awaitTermination()


if __name__ == "__main__":
    main()
