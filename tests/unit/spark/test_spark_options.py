"""The tidemq data source's options: defaults, and a clear error per mistake."""

from __future__ import annotations

import pytest

from tidemq.common.message import MessageQueue
from tidemq.spark.options import read_options, write_options


def test_read_defaults_follow_the_kafka_source() -> None:
    batch = read_options({"topic": "A, B", "namesrv": "h:1"}, streaming=False)
    stream = read_options({"topic": "A"}, streaming=True)
    assert batch.topics == ("A", "B")
    assert (batch.starting, batch.ending, stream.starting) == ("earliest", "latest", "latest")
    assert batch.fail_on_data_loss is True
    assert batch.expression == ("*", "TAG")
    assert batch.max_messages_per_trigger is None


def test_options_are_case_insensitive_and_typed() -> None:
    opts = read_options(
        {
            "TOPIC": "T",
            "startingoffsets": '{"T": {"broker-a:1": 5}}',
            "MaxMessagesPerTrigger": "10",
            "failondataloss": "FALSE",
            "sql": "a > 1",
            "consumerGroup": "g1",
        },
        streaming=True,
    )
    assert opts.starting == {MessageQueue("T", "broker-a", 1): 5}
    assert opts.max_messages_per_trigger == 10
    assert opts.fail_on_data_loss is False
    assert opts.expression == ("a > 1", "SQL92")
    assert opts.consumer_group == "g1"


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({}, False, "option topic is required"),
        ({"topic": "T", "startingOffsets": "first"}, False, "startingOffsets must be"),
        ({"topic": "T", "endingOffsets": "latest"}, True, "batch reads only"),
        ({"topic": "T", "endingOffsets": "earliest"}, False, "endingOffsets must be"),
        ({"topic": "T", "startingOffsets": '{"U": {"b:0": 1}}'}, False, "not read: U"),
        ({"topic": "T", "maxMessagesPerTrigger": "0"}, True, "must be positive"),
        ({"topic": "T", "maxMessagesPerTrigger": "ten"}, True, "whole number"),
        ({"topic": "T", "failOnDataLoss": "maybe"}, False, "true or false"),
        ({"topic": "T", "filter": "A", "sql": "a = 1"}, False, "not both"),
        ({"topic": "T", "sql": " "}, False, "sql is empty"),
        ({"topic": "T", "startingTimestamp": "yesterday"}, False, "epoch milliseconds"),
        ({"topic": "T", "consumerGroup": "bad group"}, False, "consumer group"),
    ],
)
def test_read_mistakes(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        read_options(options, streaming=streaming)


def test_write_options_and_the_sink_id() -> None:
    plain = write_options({"topic": "T"}, streaming=False)
    assert plain.topic == "T" and plain.sink_id is None
    a = write_options({"checkpointLocation": "/tmp/a"}, streaming=True)
    b = write_options({"checkpointLocation": "/tmp/b"}, streaming=True)
    assert a.sink_id and b.sink_id and a.sink_id != b.sink_id
    assert a.sink_id == write_options({"checkpointLocation": "/tmp/a"}, streaming=True).sink_id
    assert write_options({"sinkId": "orders"}, streaming=True).sink_id == "orders"
    with pytest.raises(ValueError, match="checkpointLocation"):
        write_options({}, streaming=True)
    with pytest.raises(ValueError, match="sink id"):
        write_options({"sinkId": "no spaces"}, streaming=True)
