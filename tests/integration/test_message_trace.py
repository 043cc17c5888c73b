"""Message traces against a real `tidemq serve`: clients with enable_trace=True
write RocketMQ trace records to RMQ_SYS_TRACE_TOPIC, and `tidemq message
trace MSGID` (and trace_timeline) reads them back: a send and two deliveries
of a message consumed after one retry, orderly and lite pull consumers, a
dead letter, a transaction's end (local and from a broker check), a trace
written in Java's format by another client, tracing that changes no send
result and never fails a send, and the broker's trace_topic_enable."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.admin import AdminClient
from tidemq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    ConsumeStatus,
)
from tidemq.client.consumer.lite_pull import AsyncLitePullConsumer
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.model import PERM_READ, SendStatus
from tidemq.client.producer import AsyncProducer, Producer, make_message
from tidemq.client.trace import Timeline, trace_timeline
from tidemq.client.transaction import AsyncTransactionProducer, LocalTransactionState
from tidemq.common.message import Message, MessageExt
from tidemq.testing.client_support import create_topic, traced_push_consumer
from tidemq.testing.processes import FAST_DELAY_LEVELS, ServerProcess, serve
from tidemq.testing.waiting import eventually, unique_name, wait_until

pytestmark = pytest.mark.slow

SETTINGS = {
    "delay_levels": FAST_DELAY_LEVELS,
    "transaction_timeout_ms": 1000,
    "transaction_check_interval_ms": 500,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("trace") / "data", settings=SETTINGS) as process:
        yield process


async def traced(server: ServerProcess, msg_id: str, check: Any, what: str) -> Timeline:
    """The message's Timeline once `check(timeline)` holds."""

    async def read() -> Timeline | None:
        timeline = await trace_timeline(server.namesrv, msg_id)
        return timeline if check(timeline) else None

    return await eventually(read, what)


def push(
    server: ServerProcess, group: str, topic: str, listener: Any, **options: Any
) -> AsyncPushConsumer:
    return traced_push_consumer(server.namesrv, group, topic, listener, **options)


class FailFirst:
    """Fails a message's first delivery, takes its second (a concurrent listener)."""

    def __init__(self) -> None:
        self.deliveries: list[int] = []

    def __call__(
        self, messages: list[MessageExt], context: ConsumeConcurrentlyContext
    ) -> ConsumeStatus:
        self.deliveries.extend(m.reconsume_times for m in messages)
        if messages[0].reconsume_times == 0:
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS


async def test_a_retried_message_shows_its_send_and_both_deliveries(server: ServerProcess) -> None:
    topic, group = unique_name("TraceT"), unique_name("TraceG")
    await create_topic(server.namesrv, topic)
    listener = FailFirst()
    consumer = push(server, group, topic, listener)
    await consumer.start()
    try:
        async with AsyncProducer(
            unique_name("TraceP"), server.namesrv, enable_trace=True
        ) as producer:
            message = make_message(topic, "order 7", tags="TagA", keys="order-7")
            sent = await producer.send(message)
        await eventually(lambda: listener.deliveries == [0, 1], "a failed and a retried delivery")
    finally:
        await consumer.shutdown()  # its last trace records go out now

    def complete(t: Timeline) -> bool:
        g = t.group(group)
        return bool(t.sent and g and len(g.deliveries) == 2 and g.deliveries[1].success)

    timeline = await traced(server, sent.msg_id, complete, "the whole trace")
    [step] = timeline.sent
    assert (step.topic, step.tags, step.keys, step.success) == (topic, "TagA", "order-7", True)
    assert step.offset_msg_id == sent.offset_msg_id
    assert timeline.stored is not None
    assert (timeline.stored.queue_id, timeline.stored.queue_offset) == (
        sent.queue_id,
        sent.queue_offset,
    )
    consumed = timeline.group(group)
    assert consumed is not None and consumed.status == "consumed"
    first, second = consumed.deliveries
    assert (first.retry_times, first.success, first.return_type) == (0, False, "FAILED")
    assert (second.retry_times, second.success, second.return_type) == (1, True, "SUCCESS")
    assert first.timestamp_ms <= second.timestamp_ms

    shown = server.cli("message", "trace", sent.msg_id)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(f"message {sent.msg_id} of topic {topic}")
    assert any(
        line.strip().startswith("sent") and f"group {producer.group}" in line for line in lines
    )
    assert any(line.strip().startswith("stored") and sent.offset_msg_id in line for line in lines)
    assert f"consumer group {group}: consumed (2 deliveries, 1 retry)" in shown.stdout
    [failed_line] = [line for line in lines if line.strip().startswith("#1")]
    [ok_line] = [line for line in lines if line.strip().startswith("#2")]
    assert "retry 0" in failed_line and "failed (FAILED)" in failed_line
    assert "retry 1" in ok_line and "succeeded (SUCCESS)" in ok_line

    as_json = server.cli("message", "trace", sent.msg_id, "--json")
    assert as_json.returncode == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    assert document["found"] and document["msg_id"] == sent.msg_id
    assert [s["group"] for s in document["sent"]] == [producer.group]
    [group_json] = document["groups"]
    assert (group_json["group"], group_json["status"], group_json["retries"]) == (
        group,
        "consumed",
        1,
    )
    assert [(d["retry_times"], d["success"]) for d in group_json["deliveries"]] == [
        (0, False),
        (1, True),
    ]

    # the offset msg id a send also prints leads to the same trace
    by_offset = server.cli("message", "trace", sent.offset_msg_id, "--json")
    assert by_offset.returncode == 0, by_offset.stderr
    assert json.loads(by_offset.stdout)["msg_id"] == sent.msg_id


async def test_an_orderly_consumer_traces_its_local_retry(server: ServerProcess) -> None:
    topic, group = unique_name("TraceOrderT"), unique_name("TraceOrderG")
    await create_topic(server.namesrv, topic, queues=1)
    calls: list[int] = []

    def listener(
        messages: list[MessageExt], context: ConsumeOrderlyContext
    ) -> ConsumeOrderlyStatus:
        calls.append(messages[0].reconsume_times)
        if len(calls) == 1:
            context.suspend_current_queue_time_ms = 10
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    consumer = push(server, group, topic, listener, orderly=True)
    await consumer.start()
    try:
        async with AsyncProducer(unique_name("TraceP"), server.namesrv) as producer:
            sent = await producer.send(make_message(topic, "step 1"))  # the producer is not traced
        await eventually(lambda: len(calls) >= 2, "a suspended and a repeated call")
    finally:
        await consumer.shutdown()
    timeline = await traced(
        server,
        sent.msg_id,
        lambda t: t.group(group) and len(t.group(group).deliveries) == 2,
        "2 deliveries",
    )
    assert timeline.sent == ()  # only the consumer traced
    deliveries = timeline.group(group).deliveries  # type: ignore[union-attr]
    assert [(d.retry_times, d.success, d.return_type) for d in deliveries] == [
        (0, False, "FAILED"),
        (1, True, "SUCCESS"),
    ]


async def test_a_lite_pull_consumer_traces_each_poll(server: ServerProcess) -> None:
    topic, group = unique_name("TracePullT"), unique_name("TracePullG")
    await create_topic(server.namesrv, topic)
    async with AsyncProducer(unique_name("TraceP"), server.namesrv, enable_trace=True) as producer:
        sent = await producer.send(make_message(topic, "pulled"))
    consumer = AsyncLitePullConsumer(
        group,
        server.namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        enable_trace=True,
    )
    consumer.subscribe(topic)
    async with consumer:
        got = await eventually(lambda: consumer.poll(timeout_s=1), "the message polled")
        assert [m.unique_key for m in got] == [sent.msg_id]
    timeline = await traced(
        server, sent.msg_id, lambda t: t.sent and t.group(group), "the poll traced"
    )
    [delivery] = timeline.group(group).deliveries  # type: ignore[union-attr]
    assert (delivery.retry_times, delivery.success, delivery.return_type) == (0, True, "SUCCESS")


async def test_a_message_whose_retries_ran_out_is_dead_lettered(server: ServerProcess) -> None:
    topic, group = unique_name("TraceDlqT"), unique_name("TraceDlqG")
    await create_topic(server.namesrv, topic)
    failures: list[int] = []

    def always_fail(
        messages: list[MessageExt], context: ConsumeConcurrentlyContext
    ) -> ConsumeStatus:
        failures.extend(m.reconsume_times for m in messages)
        return ConsumeStatus.RECONSUME_LATER

    consumer = push(server, group, topic, always_fail, max_reconsume_times=1)
    await consumer.start()
    try:
        async with AsyncProducer(
            unique_name("TraceP"), server.namesrv, enable_trace=True
        ) as producer:
            sent = await producer.send(make_message(topic, "poison"))
        await eventually(lambda: failures == [0, 1], "two failed deliveries")
    finally:
        await consumer.shutdown()
    timeline = await traced(
        server,
        sent.msg_id,
        lambda t: t.group(group) and t.group(group).status == "dead-lettered",
        "the DLQ",
    )
    dead = timeline.group(group)
    assert dead is not None and dead.dead_letter is not None
    assert dead.dead_letter.topic == f"%DLQ%{group}"
    assert [d.success for d in dead.deliveries] == [False, False]
    shown = server.cli("message", "trace", sent.msg_id)
    assert f"consumer group {group}: dead-lettered (2 deliveries, 1 retry)" in shown.stdout
    assert "dead letter" in shown.stdout and f"%DLQ%{group}" in shown.stdout


class Transactions:
    """Commits a transaction at once, or answers UNKNOW and commits when checked."""

    def __init__(self) -> None:
        self.later: set[str] = set()

    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        if arg == "later":
            return LocalTransactionState.UNKNOW
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


async def test_a_transaction_end_is_traced_locally_and_from_a_check(server: ServerProcess) -> None:
    topic = unique_name("TraceTxT")
    await create_topic(server.namesrv, topic)
    producer = AsyncTransactionProducer(
        unique_name("TraceTxP"), server.namesrv, listener=Transactions(), enable_trace=True
    )
    async with producer:
        now = await producer.send_message_in_transaction(make_message(topic, "pay now"))
        later = await producer.send_message_in_transaction(
            make_message(topic, "pay later"), "later"
        )
        ended = await traced(
            server, later.msg_id, lambda t: len(t.transactions) == 2, "the checked end"
        )
    committed = await traced(server, now.msg_id, lambda t: t.transactions, "the end")
    [half] = committed.sent
    assert half.message_type == "Trans_Msg_Half"
    [end] = committed.transactions
    assert (end.state, end.from_transaction_check, end.group) == (
        "COMMIT_MESSAGE",
        False,
        producer.group,
    )
    assert end.transaction_id == now.transaction_id
    assert [(e.state, e.from_transaction_check) for e in ended.transactions] == [
        ("UNKNOW", False),
        ("COMMIT_MESSAGE", True),
    ]
    shown = server.cli("message", "trace", now.msg_id)
    assert "end transaction" in shown.stdout and "COMMIT_MESSAGE" in shown.stdout


async def test_a_trace_written_in_javas_format_reads_the_same(server: ServerProcess) -> None:
    # What a Java producer's AsyncTraceDispatcher sends: the records' text as the
    # body, the traced msgId and keys as the trace message's KEYS.
    msg_id = uuid.uuid4().hex.upper()
    C, F = "\x01", "\x02"
    pub = C.join(
        ["Pub", "1700000000123", "DefaultRegion", "JavaProducers", "JavaOrders", msg_id, "TagA",
         "order-1", "192.168.1.1:10911", "11", "5", "0", "C0A8010100002A9F000000000003C2A0", "true"]
    ) + F  # fmt: skip
    before = C.join(
        ["SubBefore", "1700000001000", "DefaultRegion", "JavaConsumers", "REQ1", msg_id, "0",
         "order-1"]
    ) + F  # fmt: skip
    after = (
        C.join(
            [
                "SubAfter",
                "REQ1",
                msg_id,
                "3",
                "true",
                "order-1",
                "0",
                "1700000001003",
                "JavaConsumers",
            ]
        )
        + F
    )
    async with AsyncProducer(unique_name("JavaLike"), server.namesrv) as producer:
        for body in (pub, before + after):
            message = Message("RMQ_SYS_TRACE_TOPIC", body.encode())
            message.keys = [msg_id, "order-1"]
            assert (await producer.send(message)).status is SendStatus.SEND_OK
    timeline = await traced(server, msg_id, lambda t: t.sent and t.groups, "the Java trace")
    [step] = timeline.sent
    assert (step.group, step.timestamp_ms, step.cost_ms, step.store_host) == (
        "JavaProducers",
        1700000000123,
        5,
        "192.168.1.1:10911",
    )
    [delivery] = timeline.group("JavaConsumers").deliveries  # type: ignore[union-attr]
    assert (delivery.timestamp_ms, delivery.cost_ms, delivery.success) == (1700000001000, 3, True)
    assert any("could not be read" in note for note in timeline.notes)  # no such stored message


async def test_tracing_changes_no_send_result_and_adds_nothing_to_the_messages(
    server: ServerProcess,
) -> None:
    topic = unique_name("TraceSameT")
    await create_topic(server.namesrv, topic, queues=1)
    results = {}
    for traced_on in (False, True):
        group = unique_name("TraceSameP")
        async with AsyncProducer(group, server.namesrv, enable_trace=traced_on) as producer:
            one = await producer.send(make_message(topic, "a", tags="T", keys="k"))
            batch = await producer.send_batch([make_message(topic, "b"), make_message(topic, "c")])
            later = await producer.send_async(make_message(topic, "d"))
            results[traced_on] = (one, batch, later)
    for plain, with_trace in zip(results[False], results[True], strict=True):
        assert (plain.status, plain.topic, plain.region_id, plain.trace_on) == (
            with_trace.status,
            with_trace.topic,
            with_trace.region_id,
            with_trace.trace_on,
        )
        assert with_trace.queue_offset == plain.queue_offset + 4  # stored after the 4 plain ones
    async with AdminClient(server.namesrv) as admin:
        plain_stored = await admin.view_by_id(results[False][0].offset_msg_id)
        traced_stored = await admin.view_by_id(results[True][0].offset_msg_id)
    assert set(plain_stored.properties) == set(traced_stored.properties)


async def test_a_trace_topic_that_takes_no_message_never_fails_a_send(
    server: ServerProcess,
) -> None:
    topic, traces = unique_name("TraceBlockedT"), unique_name("ReadOnlyTraces")
    await create_topic(server.namesrv, topic)
    async with AdminClient(server.namesrv) as admin:
        await admin.create_topic(traces, queues=1, perm=PERM_READ)  # no writable queue
    producer = AsyncProducer(
        unique_name("TraceP"), server.namesrv, enable_trace=True, trace_topic=traces
    )
    async with producer:
        sends = [await producer.send(make_message(topic, f"m{i}")) for i in range(3)]
        assert [s.status for s in sends] == [SendStatus.SEND_OK] * 3
        dispatcher = producer.trace_dispatcher
        assert dispatcher is not None
        assert await dispatcher.flush()
        assert dispatcher.failed >= 1 and dispatcher.sent == 0


def test_no_trace_is_a_clear_failure(server: ServerProcess) -> None:
    unknown = server.cli("message", "trace", "0123456789ABCDEF0123456789ABCDEF")
    assert unknown.returncode == 1
    assert "no trace of message 0123456789ABCDEF0123456789ABCDEF" in unknown.stderr
    nowhere = server.cli(
        "message", "trace", "ABC", "--trace-topic", unique_name("NoTraces"), "--json"
    )
    assert nowhere.returncode == 1
    error = json.loads(nowhere.stdout or nowhere.stderr)
    assert error["code"] == 208 and "does not exist" in error["error"]


def test_the_broker_creates_its_trace_topic_with_trace_topic_enable(tmp_path: Path) -> None:
    settings = {"trace_topic_enable": "true", "msg_trace_topic_name": "BrokerTraces"}
    with serve(tmp_path / "data", settings=settings, name="traced") as traced_server:

        async def check() -> None:
            async with AdminClient(traced_server.namesrv) as admin:
                route = await admin.topic_route("BrokerTraces")
            assert [(q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [(1, 1)]
            topic = unique_name("T")
            await create_topic(traced_server.namesrv, topic)
            producer = AsyncProducer(
                unique_name("P"),
                traced_server.namesrv,
                enable_trace=True,
                trace_topic="BrokerTraces",
            )
            async with producer:
                sent = await producer.send(make_message(topic, "x"))
            timeline = await eventually(
                lambda: _found(traced_server, sent.msg_id, "BrokerTraces"), "the trace"
            )
            assert timeline.trace_topic == "BrokerTraces" and timeline.sent

        asyncio.run(check())
        deleted = traced_server.cli("topic", "delete", "BrokerTraces")
        assert deleted.returncode != 0 and "system topic" in deleted.stderr


async def _found(server: ServerProcess, msg_id: str, trace_topic: str) -> Timeline | None:
    timeline = await trace_timeline(server.namesrv, msg_id, trace_topic)
    return timeline if timeline.found else None


def test_every_kind_of_blocking_send_is_traced(server: ServerProcess) -> None:
    topic, group = unique_name("TraceKindsT"), unique_name("TraceKindsP")
    asyncio.run(create_topic(server.namesrv, topic))
    with Producer(group, server.namesrv, enable_trace=True) as producer:
        on_thread = producer.send(make_message(topic, "sync"))  # the calling thread's socket
        via_loop = producer.send(make_message(topic, "chosen"), sharding_key="k")
        later = producer.send_async(make_message(topic, "async")).result(timeout=60)
        batch = producer.send_batch([make_message(topic, "b1"), make_message(topic, "b2")])
        producer.send_oneway(make_message(topic, "oneway"))  # no answer: not traced (Java)
    ids = [on_thread.msg_id, via_loop.msg_id, later.msg_id, *batch.msg_id.split(",")]
    for msg_id in ids:
        timeline = wait_until(
            lambda msg_id=msg_id: asyncio.run(_found(server, msg_id, "RMQ_SYS_TRACE_TOPIC")),
            f"the trace of {msg_id}",
        )
        [step] = timeline.sent
        assert (step.group, step.topic, step.success) == (group, topic, True)
    first, second = (
        asyncio.run(trace_timeline(server.namesrv, msg_id)).sent[0] for msg_id in ids[3:]
    )
    assert first.offset_msg_id != second.offset_msg_id  # each message of the batch its own Pub
