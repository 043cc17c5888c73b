"""The records the clients write, as Java's trace hooks build them
(SendMessageTraceHookImpl, ConsumeMessageTraceHookImpl,
EndTransactionTraceHookImpl), with a manual clock and a recording sender."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tidemq.client.consumer.listener import (
    CONSUME_CONTEXT_TYPE,
    ConsumeHookContext,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    consume_return_type,
)
from tidemq.client.model import SendResult, SendStatus
from tidemq.client.trace.dispatcher import TraceDispatcher
from tidemq.client.trace.hooks import ConsumeTracer, SendTracer, message_type_of
from tidemq.client.trace.records import (
    ConsumeReturnType,
    EndTransactionRecord,
    PubRecord,
    SubAfterRecord,
    SubBeforeRecord,
    TraceMessageType,
    TraceRecord,
    decode_trace_data,
)
from tidemq.common.clock import ManualClock
from tidemq.common.message import Message, MessageExt, MessageQueue

BROKERS = {"broker-a": "10.0.0.1:10911"}


class Traces:
    """A dispatcher whose sends are kept, read back as records."""

    def __init__(self, trace_topic: str = "RMQ_SYS_TRACE_TOPIC") -> None:
        self.messages: list[Message] = []

        async def send(message: Message) -> None:
            self.messages.append(message)

        self.dispatcher = TraceDispatcher(send, trace_topic, batch_size=20)

    async def records(self) -> list[TraceRecord]:
        await self.dispatcher.flush()
        return [r for m in self.messages for r in decode_trace_data(m.body).records]


@pytest.fixture
async def traces() -> AsyncIterator[Traces]:
    made = Traces()
    made.dispatcher.start()
    yield made
    await made.dispatcher.shutdown()


def result(topic: str = "Orders", **changes: object) -> SendResult:
    fields: dict[str, object] = {
        "status": SendStatus.SEND_OK,
        "msg_id": "ID1",
        "offset_msg_id": "OFF1",
        "topic": topic,
        "broker_name": "broker-a",
        "queue_id": 1,
        "queue_offset": 7,
        "region_id": "DefaultRegion",
    }
    fields.update(changes)
    return SendResult(**fields)  # type: ignore[arg-type]


def message(topic: str = "Orders", **properties: str) -> Message:
    return Message(topic, b"body", properties=dict(properties))


async def test_a_send_is_one_pub_record(traces: Traces) -> None:
    clock = ManualClock(1_000)
    tracer = SendTracer(traces.dispatcher, "P", clock, BROKERS.get)
    sent = message(TAGS="TagA", KEYS="k1 k2")
    clock.advance(0.004)
    tracer.sent(sent, 4, result(), started_ms=1_000)
    assert await traces.records() == [
        PubRecord(
            1_000,
            "DefaultRegion",
            "P",
            "Orders",
            "ID1",
            "TagA",
            "k1 k2",
            "10.0.0.1:10911",
            4,
            4,
            TraceMessageType.NORMAL,
            "OFF1",
            True,
        )
    ]
    assert traces.messages[0].keys == ["ID1", "k1", "k2"]


async def test_a_status_other_than_send_ok_is_a_failed_pub(traces: Traces) -> None:
    tracer = SendTracer(traces.dispatcher, "P", ManualClock(0), BROKERS.get)
    tracer.sent(message(), 4, result(status=SendStatus.FLUSH_DISK_TIMEOUT), 0)
    [record] = await traces.records()
    assert isinstance(record, PubRecord)
    assert not record.success


async def test_no_trace_when_the_broker_says_trace_off_or_for_the_trace_topic(
    traces: Traces,
) -> None:
    tracer = SendTracer(traces.dispatcher, "P", ManualClock(), BROKERS.get)
    tracer.sent(message(), 4, result(trace_on=False), 0)
    tracer.sent(message("RMQ_SYS_TRACE_TOPIC"), 4, result("RMQ_SYS_TRACE_TOPIC"), 0)
    tracer.transaction_ended(
        message("RMQ_SYS_TRACE_TOPIC"), "M", None, "UNKNOW", from_check=False, broker_address="h"
    )
    assert await traces.records() == []


async def test_a_batch_is_one_pub_per_message_under_its_own_id(traces: Traces) -> None:
    tracer = SendTracer(traces.dispatcher, "P", ManualClock(0), BROKERS.get)
    batch = [message(KEYS="a"), message(KEYS="b")]
    tracer.sent_batch(batch, result(msg_id="ID1,ID2", offset_msg_id="O1,O2"), 0)
    records = await traces.records()
    assert [(r.msg_id, r.offset_msg_id, r.keys) for r in records if isinstance(r, PubRecord)] == [
        ("ID1", "O1", "a"),
        ("ID2", "O2", "b"),
    ]
    assert traces.messages[0].keys == ["ID1", "ID2", "a", "b"]


@pytest.mark.parametrize(
    ("properties", "kind"),
    [
        ({}, TraceMessageType.NORMAL),
        ({"TRAN_MSG": "true"}, TraceMessageType.TRANS_HALF),
        ({"DELAY": "3"}, TraceMessageType.DELAY),
        ({"__STARTDELIVERTIME": "1"}, TraceMessageType.DELAY),
        ({"TIMER_DELIVER_MS": "1"}, TraceMessageType.DELAY),
        ({"TIMER_DELAY_SEC": "1", "TRAN_MSG": "true"}, TraceMessageType.DELAY),
    ],
)
def test_message_types_as_send_kernel_sets_them(
    properties: dict[str, str], kind: TraceMessageType
) -> None:
    assert message_type_of(message(**properties)) is kind


async def test_a_transaction_end_is_an_end_transaction_record(traces: Traces) -> None:
    clock = ManualClock(5_000)
    tracer = SendTracer(traces.dispatcher, "Pay", clock, BROKERS.get)
    tracer.transaction_ended(
        message(TAGS="T", TRAN_MSG="true"),
        "ID1",
        "TX1",
        "ROLLBACK_MESSAGE",
        from_check=True,
        broker_address="10.0.0.1:10911",
    )
    assert await traces.records() == [
        EndTransactionRecord(
            5_000,
            "DefaultRegion",
            "Pay",
            "Orders",
            "ID1",
            "T",
            None,
            "10.0.0.1:10911",
            TraceMessageType.TRANS_COMMIT,
            "TX1",
            "ROLLBACK_MESSAGE",
            True,
        )
    ]


async def test_a_cost_stays_a_java_int(traces: Traces) -> None:
    tracer = SendTracer(traces.dispatcher, "P", ManualClock(2**40), BROKERS.get)
    tracer.sent(message(), 4, result(), started_ms=0)
    tracer.sent(message(), 4, result(), started_ms=2**41)  # the clock stepped back
    assert [r.cost_ms for r in await traces.records() if isinstance(r, PubRecord)] == [2**31 - 1, 0]


def consumed(msg_id: str, reconsume: int = 0, **properties: str) -> MessageExt:
    return MessageExt(
        "Orders",
        b"x",
        properties={"UNIQ_KEY": msg_id, **properties},
        reconsume_times=reconsume,
        msg_id="OFFSET-" + msg_id,
    )


async def test_a_listener_call_is_sub_before_and_sub_after_per_message(traces: Traces) -> None:
    clock = ManualClock(10_000)
    tracer = ConsumeTracer(traces.dispatcher, clock)
    batch = [consumed("A", 2, KEYS="ka", MSG_REGION="east"), consumed("B", MSG_REGION="west")]
    context = ConsumeHookContext("G", MessageQueue("Orders", "broker-a", 0), batch, orderly=False)
    tracer.consume_message_before(context)
    clock.advance(0.010)
    context.success = False
    context.properties[CONSUME_CONTEXT_TYPE] = "EXCEPTION"
    tracer.consume_message_after(context)
    records = await traces.records()
    befores = [r for r in records if isinstance(r, SubBeforeRecord)]
    afters = [r for r in records if isinstance(r, SubAfterRecord)]
    request = befores[0].request_id
    # one region for the call: the last traced message's (Java sets the
    # context's regionId from each message in turn)
    assert befores == [
        SubBeforeRecord(10_000, "west", "G", request, "A", 2, "ka"),
        SubBeforeRecord(10_000, "west", "G", request, "B", 0, None),
    ]
    # the cost is the call's time divided by its messages (Java)
    assert afters == [
        SubAfterRecord(request, "A", 5, False, "ka", ConsumeReturnType.EXCEPTION, 10_010, "G"),
        SubAfterRecord(request, "B", 5, False, None, ConsumeReturnType.EXCEPTION, 10_010, "G"),
    ]


async def test_untraced_messages_are_left_out(traces: Traces) -> None:
    tracer = ConsumeTracer(traces.dispatcher, ManualClock())
    batch = [consumed("OFF", TRACE_ON="false"), MessageExt("RMQ_SYS_TRACE_TOPIC", b"x")]
    context = ConsumeHookContext("G", MessageQueue("Orders", "b", 0), batch, orderly=True)
    tracer.consume_message_before(context)
    tracer.consume_message_after(context)
    tracer.polled("G", batch)
    assert await traces.records() == []


async def test_a_consumption_without_a_region_is_not_traced(traces: Traces) -> None:
    """Java's dispatcher skips a context whose regionId (the last traced
    message's MSG_REGION) is null: no SubBefore, no SubAfter."""
    tracer = ConsumeTracer(traces.dispatcher, ManualClock())
    batch = [consumed("A", MSG_REGION="east"), consumed("B")]
    context = ConsumeHookContext("G", MessageQueue("Orders", "b", 0), batch, orderly=False)
    tracer.consume_message_before(context)
    tracer.consume_message_after(context)
    tracer.polled("G", batch)
    tracer.polled("G", [consumed("C")])
    assert await traces.records() == []
    # the region of the last message that is traced counts (TRACE_ON=false is skipped)
    tracer.polled("G", [consumed("D", MSG_REGION="east"), consumed("E", TRACE_ON="false")])
    before, _ = await traces.records()
    assert (before.region_id, before.msg_id) == ("east", "D")  # type: ignore[union-attr]


async def test_a_poll_is_a_delivery_that_succeeded_at_once(traces: Traces) -> None:
    tracer = ConsumeTracer(traces.dispatcher, ManualClock(7))
    tracer.polled("Pullers", [consumed("A", MSG_REGION="eu-1")])
    before, after = await traces.records()
    assert before == SubBeforeRecord(7, "eu-1", "Pullers", before.request_id, "A", 0, None)  # type: ignore[union-attr]
    assert after == SubAfterRecord(before.request_id, "A", 0, True, None, 0, 7, "Pullers")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("result", "raised", "elapsed", "expected"),
    [
        (ConsumeStatus.CONSUME_SUCCESS, False, 5, "SUCCESS"),
        (ConsumeStatus.RECONSUME_LATER, False, 5, "FAILED"),
        (ConsumeOrderlyStatus.SUCCESS, False, 5, "SUCCESS"),
        (ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, False, 5, "FAILED"),
        (None, True, 5, "EXCEPTION"),
        (None, False, 5, "RETURNNULL"),
        ("done", False, 5, "RETURNNULL"),
        (ConsumeStatus.CONSUME_SUCCESS, False, 900_000, "TIME_OUT"),
        (None, False, 900_000, "RETURNNULL"),
    ],
)
def test_consume_return_type_as_the_java_consume_services_decide(
    result: object, raised: bool, elapsed: int, expected: str
) -> None:
    assert consume_return_type(result, raised, elapsed, 900_000) == expected
