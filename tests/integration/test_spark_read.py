"""The `tidemq` PySpark source against a real `tidemq serve`: batch reads equal
what was produced, filters are pushed down, offsets and timestamps bound
the read, streams respect maxMessagesPerTrigger and commit a group's
offsets, and lost offsets fail clearly or are skipped. One local Spark
session for the module."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tidemq.client.producer import make_message
from tidemq.common.message import MessageQueue
from tidemq.spark.session import java_available, local_session
from tidemq.testing.client_support import create_topic, produce
from tidemq.testing.processes import ServerProcess, serve, server_env
from tidemq.testing.waiting import unique_name, wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not java_available(), reason="PySpark needs Java 17"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("spark-read") / "data") as process:
        yield process


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with local_session("test_spark_read") as session:
        yield session


def read(spark: Any, server: ServerProcess, **options: str) -> Any:
    reader = spark.read.format("tidemq").option("namesrv", server.namesrv)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def fill(server: ServerProcess, topic: str, count: int, queues: int = 4) -> list[MessageQueue]:
    """`count` messages m0.. with tags A/B/C by number, keys k<n>, property n=<n>."""
    mqs = asyncio.run(create_topic(server.namesrv, topic, queues=queues))
    messages = [
        make_message(topic, f"m{i}", tags="ABC"[i % 3], keys=f"k{i}", properties={"n": str(i)})
        for i in range(count)
    ]
    asyncio.run(produce(server.namesrv, messages, batch_size=50))
    return mqs


def test_batch_read_equals_what_was_produced(spark: Any, server: ServerProcess) -> None:
    topic = unique_name("SparkRead")
    before_ms = int(time.time() * 1000) - 1000
    fill(server, topic, 300)
    rows = read(spark, server, topic=topic).collect()
    assert sorted(r.body for r in rows) == sorted(f"m{i}".encode() for i in range(300))
    by_body = {r.body.decode(): r for r in rows}
    for i in (0, 1, 2, 299):
        row = by_body[f"m{i}"]
        assert row.topic == topic and row.broker == "broker-a"
        assert (row.tags, row.keys) == ("ABC"[i % 3], f"k{i}")
        assert row.properties["n"] == str(i)
        assert "MIN_OFFSET" not in row.properties and "MAX_OFFSET" not in row.properties
        assert row.msg_id == row.properties["UNIQ_KEY"]
        assert row.reconsume_times == 0
        assert row.born_timestamp.timestamp() * 1000 >= before_ms
        assert row.store_timestamp >= row.born_timestamp
    # (queue, offset) identifies a row, offsets are dense per queue
    per_queue: dict[int, list[int]] = {}
    for r in rows:
        per_queue.setdefault(r.queue_id, []).append(r.queue_offset)
    assert sorted(per_queue) == [0, 1, 2, 3]
    for offsets in per_queue.values():
        assert sorted(offsets) == list(range(len(offsets)))
    # a second read of the same range gives the same rows
    again = read(spark, server, topic=topic).collect()
    assert sorted(map(tuple, again)) == sorted(map(tuple, rows))


def test_an_empty_topic_reads_as_no_rows(spark: Any, server: ServerProcess) -> None:
    topic = unique_name("SparkEmpty")
    asyncio.run(create_topic(server.namesrv, topic, queues=2))
    assert read(spark, server, topic=topic).count() == 0


def test_filters_are_pushed_down(spark: Any, server: ServerProcess) -> None:
    topic = unique_name("SparkFilter")
    fill(server, topic, 90)
    tagged = read(spark, server, topic=topic, filter="A || C").collect()
    assert sorted(r.body.decode() for r in tagged) == sorted(
        f"m{i}" for i in range(90) if i % 3 != 1
    )
    sql = read(spark, server, topic=topic, sql="n >= 80 AND TAGS = 'B'").collect()
    assert sorted(r.body.decode() for r in sql) == sorted(
        f"m{i}" for i in range(80, 90) if i % 3 == 1
    )
    with pytest.raises(Exception, match="position"):
        read(spark, server, topic=topic, sql="n > AND").collect()


def test_offsets_and_timestamps_bound_a_batch_read(spark: Any, server: ServerProcess) -> None:
    topic = unique_name("SparkRange")
    mq = asyncio.run(create_topic(server.namesrv, topic, queues=1))[0]
    first = [make_message(topic, f"early{i}") for i in range(20)]
    asyncio.run(produce(server.namesrv, first, batch_size=20))
    stored_by = int(time.time() * 1000)  # every early message is stored by now

    def next_millisecond() -> int | None:
        now_ms = int(time.time() * 1000)
        return now_ms if now_ms > stored_by else None

    middle_ms = wait_until(next_millisecond, "the next millisecond", interval=0.0005)
    later = [make_message(topic, f"late{i}") for i in range(10)]
    asyncio.run(produce(server.namesrv, later, batch_size=10))
    key = f"{mq.broker_name}:{mq.queue_id}"
    window = read(
        spark,
        server,
        topic=topic,
        startingOffsets=json.dumps({topic: {key: 5}}),
        endingOffsets=json.dumps({topic: {key: 12}}),
    ).collect()
    assert sorted(r.queue_offset for r in window) == list(range(5, 12))
    since = read(spark, server, topic=topic, startingTimestamp=str(middle_ms)).collect()
    assert sorted(r.body.decode() for r in since) == sorted(f"late{i}" for i in range(10))
    with pytest.raises(Exception, match="does not have"):
        read(
            spark, server, topic=topic, startingOffsets=json.dumps({topic: {"nope:0": 1}})
        ).collect()
    with pytest.raises(Exception, match="option topic is required"):
        spark.read.format("tidemq").option("namesrv", server.namesrv).load().collect()


def test_stream_respects_max_messages_per_trigger_and_commits_the_group(
    spark: Any, server: ServerProcess, tmp_path: Path
) -> None:
    topic = unique_name("SparkStream")
    group = unique_name("SparkGroup")
    fill(server, topic, 250)
    query = (
        spark.readStream.format("tidemq")
        .option("namesrv", server.namesrv)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "60")
        .option("consumerGroup", group)
        .load()
        .writeStream.format("memory")
        .queryName("bounded")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 250
    assert max(sizes) <= 60 and len(sizes) >= 5
    bodies = [r.body.decode() for r in spark.sql("select body from bounded").collect()]
    assert sorted(bodies) == sorted(f"m{i}" for i in range(250))
    progress = subprocess.run(
        [
            sys.executable,
            "-m",
            "tidemq.cli.main",
            "consumer",
            "progress",
            group,
            "--json",
            "--namesrv",
            server.namesrv,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=server_env(server.home),
        check=True,
    )
    queues = json.loads(progress.stdout)
    rows = queues if isinstance(queues, list) else queues.get("queues", [])
    assert rows, progress.stdout
    assert sum(int(q["consumer_offset"]) for q in rows) == 250
    assert all(int(q["lag"]) == 0 for q in rows)


EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))


def test_lost_offsets_fail_clearly_or_are_skipped(spark: Any, tmp_path: Path) -> None:
    """Retention removes the oldest commitlog files (128 KiB each, kept 0 hours,
    deleted at any hour): a read from offset 0 then fails, or skips the gap."""
    from tidemq.spark.connection import Connection

    settings = {
        "commitlog_file_size": 128 * 1024,
        "file_reserved_hours": 0,
        "delete_when": EVERY_HOUR,
    }
    with serve(tmp_path / "data", settings=settings) as server:
        topic = unique_name("SparkLoss")
        mq = asyncio.run(create_topic(server.namesrv, topic, queues=1))[0]
        body = "x" * 1000
        messages = [make_message(topic, f"{i:04d}{body}") for i in range(600)]
        asyncio.run(produce(server.namesrv, messages, batch_size=20))

        def first_offset() -> int:
            with Connection(server.namesrv) as conn:
                return conn.min_offsets([mq])[mq]

        low = wait_until(first_offset, "retention (every 10 s) to remove a file", interval=0.5)
        key = f"{mq.broker_name}:{mq.queue_id}"
        from_zero = json.dumps({topic: {key: 0}})
        with pytest.raises(Exception, match=f"are gone .*starts at {low}.*failOnDataLoss=false"):
            read(spark, server, topic=topic, startingOffsets=from_zero).collect()
        rows = read(
            spark, server, topic=topic, startingOffsets=from_zero, failOnDataLoss="false"
        ).collect()
        offsets = sorted(r.queue_offset for r in rows)
        assert offsets[0] >= low and offsets == list(range(offsets[0], 600))
        assert all(r.body.decode()[:4] == f"{r.queue_offset:04d}" for r in rows)


def test_stream_picks_up_queues_added_later(
    spark: Any, server: ServerProcess, tmp_path: Path
) -> None:
    from tidemq.client.admin import AdminClient

    topic = unique_name("SparkGrow")
    queues = asyncio.run(create_topic(server.namesrv, topic, queues=2))
    asyncio.run(produce(server.namesrv, [make_message(topic, f"old{i}") for i in range(10)]))
    query = (
        spark.readStream.format("tidemq")
        .option("namesrv", server.namesrv)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("memory")
        .queryName("grow")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:

        def bodies() -> set[str]:
            return {r.body.decode() for r in spark.sql("select body from grow").collect()}

        def arrived(wanted: set[str]) -> bool:
            assert query.exception() is None, query.exception()
            return bodies() >= wanted

        first = {f"old{i}" for i in range(10)}
        wait_until(lambda: arrived(first), "the first messages", timeout=120, interval=0.3)

        async def grow() -> None:
            async with AdminClient(server.namesrv) as admin:
                await admin.update_topic(topic, queues=4)

        asyncio.run(grow())
        new_queues = [
            MessageQueue(topic, queues[0].broker_name, 2),
            MessageQueue(topic, queues[0].broker_name, 3),
        ]
        for mq in new_queues:
            sent = [make_message(topic, f"new{mq.queue_id}-{i}") for i in range(5)]
            asyncio.run(produce(server.namesrv, sent, queue=mq))
        wanted = first | {f"new{q}-{i}" for q in (2, 3) for i in range(5)}
        wait_until(lambda: arrived(wanted), "the messages of the new queues", interval=0.3)
        assert bodies() == wanted
        rows = spark.sql("select queue_id, queue_offset from grow where queue_id >= 2").collect()
        assert sorted((r.queue_id, r.queue_offset) for r in rows) == [
            (q, o) for q in (2, 3) for o in range(5)
        ]
    finally:
        query.stop()
