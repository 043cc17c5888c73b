"""The broker's send stamp against a real `tidemq serve`: every message stored
from a send carries MSG_REGION = `region_id` and TRACE_ON = `trace_on`
(single, batch, transactional, delayed sends of the Python client, replacing
values the client set); the region shows in the trace timeline; and with
`trace_on=false` tidemq's clients trace nothing. (ali-ons and the official
5.x gRPC client: tests/interop/test_interop_send_stamp.py.)"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from doc_examples import DOCS

from tidemq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeStatus
from tidemq.client.model import SendResult
from tidemq.client.producer import AsyncProducer, make_message
from tidemq.client.trace import Timeline, trace_timeline
from tidemq.client.trace.dispatcher import TraceDispatcher
from tidemq.client.transaction import AsyncTransactionProducer, LocalTransactionState
from tidemq.common import properties as props
from tidemq.common.message import Message, MessageExt
from tidemq.testing.client_support import create_topic, read_topic, traced_push_consumer
from tidemq.testing.processes import FAST_DELAY_LEVELS, ServerProcess, serve
from tidemq.testing.waiting import eventually, unique_name

pytestmark = pytest.mark.slow

REGION = "eu-1"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    settings = {"region_id": REGION, "delay_levels": FAST_DELAY_LEVELS}
    with serve(tmp_path_factory.mktemp("stamp") / "data", settings=settings) as process:
        yield process


class Commit:
    """A transaction listener that commits at once."""

    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


class Collect:
    """A concurrent listener that keeps what it is given and takes it."""

    def __init__(self) -> None:
        self.consumed: list[MessageExt] = []

    def __call__(
        self, messages: list[MessageExt], context: ConsumeConcurrentlyContext
    ) -> ConsumeStatus:
        self.consumed.extend(messages)
        return ConsumeStatus.CONSUME_SUCCESS


async def send_and_consume(
    server: ServerProcess, group: str
) -> tuple[SendResult, MessageExt, tuple[TraceDispatcher | None, ...]]:
    """One message sent by a traced producer to a new topic and consumed by a
    traced push consumer of `group`, both shut down after (their trace
    records go out then): the send result, the message as consumed, and the
    producer's and the consumer's trace dispatchers."""
    topic = unique_name("StampTraceT")
    await create_topic(server.namesrv, topic)
    listener = Collect()
    consumer = traced_push_consumer(server.namesrv, group, topic, listener)
    await consumer.start()
    try:
        async with AsyncProducer(unique_name("StampP"), server.namesrv, enable_trace=True) as p:
            sent = await p.send(make_message(topic, "traced"))
            producer_traces = p.trace_dispatcher
        await eventually(lambda: len(listener.consumed) == 1, "the message consumed")
        consumer_traces = consumer.trace_dispatcher
    finally:
        await consumer.shutdown()
    return sent, listener.consumed[0], (producer_traces, consumer_traces)


def documented_settings() -> dict[str, str]:
    """The `--set` settings of docs/trace.md's `tidemq serve --set region_id=...`
    line: the trace_on test runs the documented command (on free ports)."""
    [line] = [
        line
        for line in (DOCS / "trace.md").read_text().splitlines()
        if line.startswith("tidemq serve --set region_id=")
    ]
    words = shlex.split(line)[2:]
    assert words[::2] == ["--set"] * (len(words) // 2), line
    return dict(word.split("=", 1) for word in words[1::2])


def stamp_of(message: MessageExt) -> tuple[str | None, str | None]:
    return message.properties.get(props.MSG_REGION), message.properties.get(props.TRACE_ON)


async def test_every_kind_of_send_is_stored_with_the_brokers_stamp(server: ServerProcess) -> None:
    topic = unique_name("StampT")
    await create_topic(server.namesrv, topic)
    async with AsyncProducer(unique_name("StampP"), server.namesrv) as producer:
        single = await producer.send(make_message(topic, "single"))
        batch = await producer.send_batch([make_message(topic, f"batch-{i}") for i in range(3)])
        client_set = make_message(topic, "client-set")
        client_set.properties[props.MSG_REGION] = "client-region"
        client_set.properties[props.TRACE_ON] = "false"
        await producer.send(client_set)
        in_batch = make_message(topic, "client-set-in-batch")
        in_batch.properties[props.MSG_REGION] = "client-region"
        await producer.send_batch([in_batch, make_message(topic, "batch-plain")])
        delayed = make_message(topic, "delayed")
        delayed.properties[props.DELAY] = "1"  # stored in SCHEDULE_TOPIC_XXXX, then copied
        await producer.send(delayed)
    async with AsyncTransactionProducer(
        unique_name("StampTx"), server.namesrv, listener=Commit()
    ) as transactional:
        await transactional.send_message_in_transaction(make_message(topic, "committed"))
    async with AsyncProducer(unique_name("StampH"), server.namesrv) as halves:
        [queue] = await create_topic(server.namesrv, unique_name("StampHalves"), queues=1)
        half_batch = await halves.send_halves([make_message(queue.topic, "half")], queue)
    assert (single.region_id, single.trace_on) == (REGION, True)  # the send answer
    assert (batch.region_id, half_batch.region_id) == (REGION, REGION)

    expected = {
        "single",
        "batch-0",
        "batch-1",
        "batch-2",
        "client-set",
        "client-set-in-batch",
        "batch-plain",
        "delayed",
        "committed",
    }

    async def all_stored() -> list[MessageExt] | None:
        found = await read_topic(server.namesrv, topic)
        return found if {m.body.decode() for m in found} == expected else None

    stored = await eventually(all_stored, "every message, the delayed one delivered")
    assert {m.body.decode(): stamp_of(m) for m in stored} == dict.fromkeys(
        expected, (REGION, "true")
    )


async def test_the_region_shows_in_the_trace_timeline(server: ServerProcess) -> None:
    group = unique_name("StampTraceG")
    sent, _, _ = await send_and_consume(server, group)

    def complete(timeline: Timeline) -> bool:
        traced = timeline.group(group)
        return bool(timeline.sent and traced and traced.deliveries[-1].success)

    async def read() -> Timeline | None:
        timeline = await trace_timeline(server.namesrv, sent.msg_id)
        return timeline if complete(timeline) else None

    timeline = await eventually(read, "the send and the delivery traced")
    traced = timeline.group(group)
    assert traced is not None
    assert [step.region_id for step in timeline.sent] == [REGION]  # from the send answer
    assert [d.region_id for d in traced.deliveries] == [REGION]  # from the stored message

    shown = server.cli("message", "trace", sent.msg_id)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    [sent_line] = [line for line in lines if line.strip().startswith("sent")]
    [delivery_line] = [line for line in lines if line.strip().startswith("#1")]
    assert f"region {REGION}" in sent_line and f"region {REGION}" in delivery_line
    as_json = server.cli("message", "trace", sent.msg_id, "--json")
    assert as_json.returncode == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    assert document["sent"][0]["region_id"] == REGION
    assert document["groups"][0]["deliveries"][0]["region_id"] == REGION


async def test_a_broker_with_trace_on_false_turns_client_traces_off(tmp_path: Path) -> None:
    settings = documented_settings()
    assert settings == {"region_id": "eu-1", "trace_on": "false"}
    with serve(tmp_path / "data", settings=settings, name="untraced") as untraced:
        sent, consumed, dispatchers = await send_and_consume(untraced, unique_name("UntracedG"))
        assert sent.trace_on is False
        assert stamp_of(consumed) == ("eu-1", "false")
        for dispatcher in dispatchers:
            assert dispatcher is not None
            assert (dispatcher.sent, dispatcher.failed, dispatcher.dropped) == (0, 0, 0)
        timeline = await trace_timeline(untraced.namesrv, sent.msg_id)
        assert not timeline.found
