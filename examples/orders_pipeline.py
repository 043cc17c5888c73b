"""Orders to revenue: an end-to-end pipeline on tidemq and Spark, in one command.

    make pipeline                       # or: .venv/bin/python examples/orders_pipeline.py
    python examples/orders_pipeline.py --seconds 30 --rate 40 --out pipeline-output

1. starts a standalone tidemq (a temporary data directory, free ports);
2. a producer thread sends order events to the topic `Orders`: JSON bodies,
   the tag is the event type (created, paid, shipped), the message group is
   the order id (so one order's events stay in order), event time runs 6x
   faster than the clock so a short run spans several minutes;
3. Spark Structured Streaming reads `Orders` with the tag filter
   `paid || tick` pushed down to the broker, keeps revenue per region per
   event-time minute with a 30 s watermark, and writes each finished
   window to the topic `RegionRevenue` through the exactly-once sink;
4. a second query copies `RegionRevenue` into Parquet files under --out;
5. every few seconds it prints the finished windows and the lag of the
   source's consumer group `orders-pipeline`;
6. when the producer is done it sends a `tick` event past the last window
   (which moves the watermark on, so the last windows close), waits until
   the Parquet output holds every window, checks the totals against what
   was produced, and stops: exit 0 when they match.

Everything is bounded: the producer by --seconds, the wait for the output
by --deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from tidemq import AdminClient, AsyncProducer, SendStatus, make_message
from tidemq.spark.session import local_session
from tidemq.testing.client_support import create_topic
from tidemq.testing.processes import serve

REGIONS = ("eu", "us", "apac", "latam")
SPEEDUP = 6
"""Event time runs this many times faster than the wall clock."""
GROUP = "orders-pipeline"
WATERMARK = "30 seconds"


class OrderFeed:
    """Sends order events and remembers the paid revenue per (minute, region)."""

    def __init__(self, namesrv: str, seconds: float, rate: int, seed: int) -> None:
        self.namesrv = namesrv
        self.seconds = seconds
        self.rate = rate
        self.random = random.Random(seed)
        self.expected: dict[tuple[int, str], float] = defaultdict(float)
        self.sent = 0
        self.error: BaseException | None = None
        self.last_event_ms = 0
        self.done = threading.Event()

    def run(self) -> None:
        try:
            asyncio.run(self._produce())
        except BaseException as exc:
            self.error = exc
        finally:
            self.done.set()

    async def _produce(self) -> None:
        start_wall = time.time()
        base_ms = int(start_wall * 1000)
        pending: dict[str, tuple[str, float, str]] = {}  # order id -> (region, amount, next step)
        async with AsyncProducer("orders-feed", self.namesrv) as producer:
            number = 0
            while (elapsed := time.time() - start_wall) < self.seconds:
                event_ms = base_ms + int(elapsed * 1000 * SPEEDUP)
                if pending and self.random.random() < 0.6:
                    order_id = self.random.choice(list(pending))
                    region, amount, step = pending[order_id]
                else:
                    number += 1
                    order_id = f"o{number}"
                    region = self.random.choice(REGIONS)
                    amount = round(self.random.uniform(5, 500), 2)
                    step = "created"
                await self._send(producer, order_id, region, amount, step, event_ms)
                if step == "paid":
                    minute = event_ms // 60_000 * 60_000
                    self.expected[minute, region] = round(self.expected[minute, region] + amount, 2)
                following = {"created": "paid", "paid": "shipped"}.get(step)
                if following is None:
                    del pending[order_id]
                else:
                    pending[order_id] = (region, amount, following)
                await asyncio.sleep(1 / self.rate)
            # a tick two minutes on: the watermark passes every window sent so far
            tick_ms = base_ms + int(self.seconds * 1000 * SPEEDUP) + 120_000
            await self._send(producer, "tick", "-", 0.0, "tick", tick_ms)

    async def _send(
        self,
        producer: AsyncProducer,
        order_id: str,
        region: str,
        amount: float,
        kind: str,
        event_ms: int,
    ) -> None:
        body = {"order_id": order_id, "region": region, "amount": amount, "event_ms": event_ms}
        message = make_message("Orders", json.dumps(body), tags=kind, keys=order_id)
        result = await producer.send(message, sharding_key=order_id)
        if result.status is not SendStatus.SEND_OK:
            raise RuntimeError(f"order event answered {result.status}")
        self.sent += 1
        self.last_event_ms = event_ms


def start_queries(spark: Any, namesrv: str, work: Path, out: Path) -> list[Any]:
    from pyspark.sql import functions as F

    event = "order_id string, region string, amount double, event_ms long"
    orders = (
        spark.readStream.format("tidemq")
        .option("namesrv", namesrv)
        .option("topic", "Orders")
        .option("startingOffsets", "earliest")
        .option("filter", "paid || tick")  # pushed down: created/shipped never leave the broker
        .option("consumerGroup", GROUP)
        .load()
    )
    revenue = (
        orders.select(F.from_json(F.col("body").cast("string"), event).alias("e"))
        .select("e.*")
        .withColumn("event_time", F.timestamp_millis("event_ms"))
        .withWatermark("event_time", WATERMARK)
        # no filter on the tick here: Spark would push it below the watermark, which then
        # would never see the tick; the tick's own window ("-") never closes anyway
        .groupBy(F.window("event_time", "1 minute"), "region")
        .agg(F.round(F.sum("amount"), 2).alias("revenue"), F.count("*").alias("orders"))
        .select(
            F.to_json(
                F.struct(
                    F.unix_millis(F.col("window.start")).alias("minute_ms"),
                    "region",
                    "revenue",
                    "orders",
                )
            ).alias("body"),
            F.col("region").alias("tags"),
        )
    )
    to_topic = (
        revenue.writeStream.format("tidemq")
        .option("namesrv", namesrv)
        .option("topic", "RegionRevenue")
        .option("checkpointLocation", str(work / "revenue-ckpt"))
        .outputMode("append")
        .trigger(processingTime="2 seconds")
        .start()
    )
    row = "minute_ms long, region string, revenue double, orders long"
    to_parquet = (
        spark.readStream.format("tidemq")
        .option("namesrv", namesrv)
        .option("topic", "RegionRevenue")
        .option("startingOffsets", "earliest")
        .load()
        .select(F.from_json(F.col("body").cast("string"), row).alias("r"))
        .select("r.*")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(work / "parquet-ckpt"))
        .trigger(processingTime="2 seconds")
        .start()
    )
    return [to_topic, to_parquet]


def finished_windows(spark: Any, out: Path) -> dict[tuple[int, str], tuple[float, int]]:
    if not any(out.glob("*.parquet")):
        return {}
    rows = spark.read.schema("minute_ms long, region string, revenue double, orders long").parquet(
        str(out)
    )
    return {(r.minute_ms, r.region): (r.revenue, r.orders) for r in rows.collect()}


def group_lag(namesrv: str) -> int | None:
    async def ask() -> int:
        async with AdminClient(namesrv) as admin:
            return sum(q.lag for q in await admin.consumer_progress(GROUP, "Orders"))

    try:
        return asyncio.run(ask())
    except Exception:  # the group commits after its first batch
        return None


def show(
    windows: dict[tuple[int, str], tuple[float, int]], lag: int | None, feed: OrderFeed
) -> None:
    stamp = time.strftime("%H:%M:%S")
    shown = "-" if lag is None else lag
    print(f"\n[{stamp}] orders sent {feed.sent:,}   group {GROUP} lag {shown}")
    if not windows:
        print("  (no window has closed yet: the watermark trails event time by 30 s)")
        return
    print(f"  {'minute (UTC)':<18}" + "".join(f"{r:>12}" for r in REGIONS))
    for minute in sorted({m for m, _ in windows})[-6:]:
        label = time.strftime("%Y-%m-%d %H:%M", time.gmtime(minute / 1000))
        cells = "".join(
            f"{windows[minute, r][0]:>12,.2f}" if (minute, r) in windows else f"{'':>12}"
            for r in REGIONS
        )
        print(f"  {label:<18}{cells}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="how long to produce")
    parser.add_argument("--rate", type=int, default=40, help="order events per second")
    parser.add_argument("--out", type=Path, default=Path("pipeline-output"), help="Parquet dir")
    parser.add_argument("--deadline", type=float, default=240.0, help="max seconds to wait")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if args.out.exists() and any(args.out.iterdir()):
        print(f"{args.out} is not empty: give another --out", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="orders-pipeline-") as tmp:
        work = Path(tmp)
        print("starting tidemq ...", flush=True)
        with serve(work / "data") as server:
            namesrv = server.namesrv
            print(f"tidemq ready: name server {namesrv}, broker {server.broker}")
            asyncio.run(create_topic(namesrv, "Orders", queues=4))
            asyncio.run(create_topic(namesrv, "RegionRevenue", queues=2))
            feed = OrderFeed(namesrv, args.seconds, args.rate, args.seed)
            producer = threading.Thread(target=feed.run, name="order-feed", daemon=True)
            print("starting Spark (local[2]) ...", flush=True)
            with local_session("orders_pipeline") as spark:
                queries = start_queries(spark, namesrv, work, args.out)
                producer.start()
                deadline = time.monotonic() + args.seconds + args.deadline
                try:
                    while True:
                        for query in queries:
                            if query.exception() is not None:
                                raise RuntimeError(f"query failed: {query.exception()}")
                        windows = finished_windows(spark, args.out)
                        show(windows, group_lag(namesrv), feed)
                        if feed.error is not None:
                            raise RuntimeError(f"the producer failed: {feed.error}")
                        if feed.done.is_set() and set(feed.expected) <= set(windows):
                            break
                        if time.monotonic() > deadline:
                            missing = len(set(feed.expected) - set(windows))
                            print(f"\ngave up: {missing} windows still open", file=sys.stderr)
                            return 1
                        time.sleep(3)
                finally:
                    for query in queries:
                        query.stop()
                wrong = {
                    key: (windows[key][0], total)
                    for key, total in feed.expected.items()
                    if abs(windows[key][0] - total) > 0.005
                }
                extra = set(windows) - set(feed.expected)
                print(
                    f"\n{len(windows)} windows in {args.out}, {feed.sent:,} events sent, "
                    f"lag {group_lag(namesrv)}"
                )
                if wrong or extra:
                    print(f"MISMATCH: {wrong} extra {sorted(extra)}", file=sys.stderr)
                    return 1
                print("verified: every window's revenue equals what was produced")
                return 0


if __name__ == "__main__":
    sys.exit(main())
