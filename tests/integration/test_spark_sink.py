"""Writing to tidemq from Spark against a real `tidemq serve`: batch writes
with every column, clear errors for bad frames, and the exactly-once
streaming sink through a failed batch, a replayed batch id and a crash
between its ledger record and its commits."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tidemq.common import properties as props
from tidemq.common.message import MessageExt
from tidemq.spark.connection import Connection
from tidemq.spark.ledger import CommitRecord
from tidemq.spark.options import write_options
from tidemq.spark.session import java_available, local_session
from tidemq.spark.sink import Ledger, SentMessages, TidemqStreamWriter
from tidemq.testing.client_support import create_topic, read_topic
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.waiting import unique_name, wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not java_available(), reason="PySpark needs Java 17"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("spark-sink") / "data", flush="sync") as process:
        yield process


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with local_session("test_spark_sink") as session:
        yield session


def topic_bodies(server: ServerProcess, topic: str) -> list[str]:
    return [m.body.decode() for m in topic_messages(server, topic)]


def topic_messages(server: ServerProcess, topic: str) -> list[MessageExt]:
    return asyncio.run(read_topic(server.namesrv, topic))


def test_batch_write_with_every_column(spark: Any, server: ServerProcess) -> None:
    topic = unique_name("SparkWrite")
    asyncio.run(create_topic(server.namesrv, topic, queues=4))
    due = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=12)).replace(microsecond=0)
    rows = [
        (f"b{i}", f"T{i % 2}", f"k{i}", {"i": str(i)}, f"g{i % 3}", None) for i in range(60)
    ] + [("later", "T9", None, None, None, due)]
    frame = spark.createDataFrame(
        rows,
        "body string, tags string, keys string, properties map<string,string>, "
        "message_group string, deliver_at timestamp",
    )
    frame.write.format("tidemq").option("namesrv", server.namesrv).option("topic", topic).mode(
        "append"
    ).save()
    stored = topic_messages(server, topic)
    assert sorted(m.body.decode() for m in stored) == sorted(f"b{i}" for i in range(60))
    by_body = {m.body.decode(): m for m in stored}
    assert by_body["b7"].tags == "T1" and by_body["b7"].keys == ["k7"]
    assert by_body["b7"].properties["i"] == "7"
    assert by_body["b7"].properties[props.SHARDING_KEY] == "g1"
    # a message group lands on one queue, in row order
    for group in ("g0", "g1", "g2"):
        members = [m for m in stored if m.properties[props.SHARDING_KEY] == group]
        assert len({m.queue_id for m in members}) == 1
        ordered = sorted(members, key=lambda m: m.queue_offset)
        assert [int(m.body.decode()[1:]) for m in ordered] == sorted(
            int(m.body.decode()[1:]) for m in members
        )
    # the timer row shows up at its time, not before (looked for from now on, 12 s early
    # unless the write was slow; an early delivery is seen at the first look)
    later = wait_until(
        lambda: [m for m in topic_messages(server, topic) if m.body == b"later"],
        "the deliver_at row",
        interval=0.2,
    )
    assert dt.datetime.now(dt.UTC) >= due - dt.timedelta(milliseconds=200)
    assert later[0].properties[props.TIMER_DELIVER_MS] == str(int(due.timestamp() * 1000))


def test_bad_frames_get_clear_errors(spark: Any, server: ServerProcess) -> None:
    topic = unique_name("SparkBad")
    writer = (
        spark.createDataFrame([("x",)], "payload string")
        .write.format("tidemq")
        .option("namesrv", server.namesrv)
        .option("topic", topic)
        .mode("append")
    )
    with pytest.raises(Exception, match="needs a 'body' column"):
        writer.save()
    no_topic = spark.createDataFrame([("x",)], "body string").write.format("tidemq")
    with pytest.raises(Exception, match="topic"):
        no_topic.option("namesrv", server.namesrv).mode("append").save()
    nulls = spark.createDataFrame([("x",), (None,)], "body string").write.format("tidemq")
    with pytest.raises(Exception, match="null body"):
        nulls.option("namesrv", server.namesrv).option("topic", topic).mode("append").save()


# -- the exactly-once streaming sink, driven directly --------------------------------------


def writer_for(server: ServerProcess, topic: str, sink_id: str) -> TidemqStreamWriter:
    options = write_options(
        {"namesrv": server.namesrv, "topic": topic, "sinkId": sink_id}, streaming=True
    )
    return TidemqStreamWriter(options)


def batch_of(bodies: list[str]) -> Iterator[pa.RecordBatch]:
    yield pa.RecordBatch.from_pydict({"body": bodies})


def test_a_replayed_batch_id_is_not_written_twice(server: ServerProcess) -> None:
    topic = unique_name("SinkReplay")
    asyncio.run(create_topic(server.namesrv, topic, queues=2))
    writer = writer_for(server, topic, unique_name("replay"))
    first = [writer.write(batch_of([f"a{i}" for i in range(30)]))]
    assert topic_bodies(server, topic) == []  # halves are out of sight
    writer.commit(first, 0)
    assert sorted(topic_bodies(server, topic)) == sorted(f"a{i}" for i in range(30))
    # Spark replays batch 0 (say the driver died before its commit log entry)
    again = [writer.write(batch_of([f"a{i}" for i in range(30)]))]
    writer.commit(again, 0)
    assert Counter(topic_bodies(server, topic)) == Counter(f"a{i}" for i in range(30))
    # the next batch goes through
    writer.commit([writer.write(batch_of(["b0", "b1"]))], 1)
    assert sorted(topic_bodies(server, topic)) == sorted(
        [f"a{i}" for i in range(30)] + ["b0", "b1"]
    )
    # a batch id behind the ledger is a reset checkpoint: refused, nothing written
    stale = [writer.write(batch_of(["stale"]))]
    with pytest.raises(ValueError, match="checkpoint was reset"):
        writer.commit(stale, 0)
    assert "stale" not in topic_bodies(server, topic)


def test_an_aborted_batch_leaves_nothing_visible(server: ServerProcess) -> None:
    topic = unique_name("SinkAbort")
    asyncio.run(create_topic(server.namesrv, topic, queues=2))
    writer = writer_for(server, topic, unique_name("abort"))
    written = [writer.write(batch_of(["x0", "x1", "x2"])), None]
    writer.abort(written, 0)
    writer.commit([writer.write(batch_of(["y0"]))], 0)
    assert topic_bodies(server, topic) == ["y0"]


def test_a_crash_between_ledger_and_commits_is_finished_by_the_replay(
    server: ServerProcess,
) -> None:
    """The driver recorded batch 3 in the ledger, then died before any END:
    the replay of batch 3 commits the recorded halves and drops its own."""
    topic = unique_name("SinkCrash")
    sink_id = unique_name("crash")
    asyncio.run(create_topic(server.namesrv, topic, queues=2))
    writer = writer_for(server, topic, sink_id)
    recorded: SentMessages = writer.write(batch_of(["c0", "c1", "c2"]))
    with Connection(server.namesrv) as conn:
        ledger = Ledger(conn, sink_id, writer.options.producer_group)
        ledger.append(CommitRecord(3, tuple(recorded.halves)))
        assert ledger.latest() == CommitRecord(3, tuple(recorded.halves))
    assert topic_bodies(server, topic) == []
    writer.commit([writer.write(batch_of(["c0", "c1", "c2"]))], 3)
    assert Counter(topic_bodies(server, topic)) == Counter(["c0", "c1", "c2"])


# -- through Spark: a failed batch, then the restarted query -----------------------------


def test_streaming_sink_survives_a_failed_batch(
    spark: Any, server: ServerProcess, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    source = unique_name("SinkSource")
    target = unique_name("SinkTarget")
    asyncio.run(create_topic(server.namesrv, source, queues=2))
    asyncio.run(create_topic(server.namesrv, target, queues=2))
    from tidemq.testing.client_support import numbered_messages, produce

    asyncio.run(produce(server.namesrv, numbered_messages(source, 40), batch_size=10))
    armed = tmp_path / "fail-once"
    armed.write_text("armed")
    armed_path = str(armed)

    def maybe_fail(body: bytes) -> str:
        import os

        text = body.decode()
        if text == "m25" and os.path.exists(armed_path):
            os.remove(armed_path)
            raise RuntimeError("injected failure in the middle of a batch")
        return text

    fail_udf = F.udf(maybe_fail, StringType(), useArrow=False)

    def run() -> Any:
        return (
            spark.readStream.format("tidemq")
            .option("namesrv", server.namesrv)
            .option("topic", source)
            .option("startingOffsets", "earliest")
            .option("maxMessagesPerTrigger", "20")
            .load()
            .select(fail_udf("body").alias("body"))
            .writeStream.format("tidemq")
            .option("namesrv", server.namesrv)
            .option("topic", target)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )

    failed = run()
    with pytest.raises(Exception, match="injected failure"):
        failed.awaitTermination(180)
    visible = topic_bodies(server, target)
    assert len(visible) == len(set(visible))
    assert "m25" not in visible  # the failed batch left nothing behind
    restarted = run()
    assert restarted.awaitTermination(180)
    assert Counter(topic_bodies(server, target)) == Counter(f"m{i}" for i in range(40))
