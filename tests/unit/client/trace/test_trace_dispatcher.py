"""The trace dispatcher with a recording sender: batching by traced topic,
the keys a trace message is found by, a full queue dropping and counting
instead of blocking, failures counted and never raised, shutdown sending
what is queued (AsyncTraceDispatcher's behaviour, see dispatcher.py)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

from tidemq.client.trace.dispatcher import (
    MAX_BATCH_SIZE,
    MAX_TRACE_KEYS_CHARS,
    TraceDispatcher,
    TraceEntry,
    trace_messages,
)
from tidemq.client.trace.records import (
    PubRecord,
    SubBeforeRecord,
    TraceMessageType,
    decode_trace_data,
    encode_record,
)
from tidemq.common.message import Message
from tidemq.testing.waiting import HANG_GUARD_S, eventually


def pub(msg_id: str, topic: str = "Orders", keys: str | None = None) -> PubRecord:
    return PubRecord(
        1, "DefaultRegion", "P", topic, msg_id, None, keys, "h:1", 1, 1,
        TraceMessageType.NORMAL, "off", True,
    )  # fmt: skip


def entry(msg_id: str, topic: str = "Orders", keys: str | None = None) -> TraceEntry:
    return TraceEntry(topic, (pub(msg_id, topic, keys),))


class Recorder:
    """A trace sender keeping what it was given."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def __call__(self, message: Message) -> None:
        self.messages.append(message)


def test_entries_are_grouped_by_traced_topic_and_keyed_by_ids_and_keys() -> None:
    entries = [entry("A", keys="k1 k2"), entry("B", "Payments"), entry("C", keys="k2")]
    messages = trace_messages("RMQ_SYS_TRACE_TOPIC", entries)
    assert [m.topic for m in messages] == ["RMQ_SYS_TRACE_TOPIC"] * 2
    orders, payments = messages
    assert orders.keys == ["A", "C", "k1", "k2"]
    assert payments.keys == ["B"]
    assert orders.body.decode() == encode_record(pub("A", keys="k1 k2")) + encode_record(
        pub("C", keys="k2")
    )
    assert orders.tags is None


def test_a_trace_message_is_cut_after_it_passes_the_size_limit() -> None:
    one = len(encode_record(pub("A")))
    messages = trace_messages("T", [entry(c) for c in "ABCDE"], max_body_chars=2 * one)
    assert [m.keys for m in messages] == [["A", "B"], ["C", "D"], ["E"]]


def test_keys_stay_under_their_limit_msg_ids_first() -> None:
    many = " ".join(f"key-{i:05}" for i in range(3000))
    [message] = trace_messages("T", [entry("ID", keys=many)])
    assert message.keys[0] == "ID"
    assert len(message.properties["KEYS"]) <= MAX_TRACE_KEYS_CHARS
    assert 1 < len(message.keys) < 3001


def test_batch_size_is_capped_as_java_caps_it() -> None:
    assert TraceDispatcher(Recorder(), batch_size=500).batch_size == MAX_BATCH_SIZE


def test_a_full_queue_drops_and_counts_without_blocking(caplog: pytest.LogCaptureFixture) -> None:
    started = threading.Event()
    never = threading.Event()

    async def stuck(message: Message) -> None:  # pragma: no cover - never started here
        started.set()
        never.wait()

    dispatcher = TraceDispatcher(stuck, capacity=3, drop_log_every=4)
    caplog.set_level(logging.WARNING, "tidemq.client.trace.dispatcher")
    began = time.monotonic()
    results = [dispatcher.append(entry(str(i))) for i in range(12)]
    assert time.monotonic() - began < HANG_GUARD_S
    assert results == [True] * 3 + [False] * 9
    assert (dispatcher.queued, dispatcher.dropped) == (3, 9)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 3  # drops 1, 5 and 9: once every drop_log_every
    assert "1 trace entries dropped so far" in warnings[0]
    assert "9 trace entries dropped so far" in warnings[2]
    assert not started.is_set()


async def test_a_full_batch_is_sent_without_waiting_for_the_interval() -> None:
    sender = Recorder()
    dispatcher = TraceDispatcher(sender, batch_size=4, flush_interval_s=3600)
    dispatcher.start()
    try:
        for i in range(3):
            dispatcher.append(entry(f"M{i}"))
        await asyncio.sleep(0)  # a chance to send early, which it must not take
        assert sender.messages == []
        dispatcher.append(entry("M3"))
        await eventually(lambda: sender.messages, "the batch sent")
        [message] = sender.messages
        assert message.keys == ["M0", "M1", "M2", "M3"]
        assert dispatcher.sent == 1
    finally:
        await dispatcher.shutdown()


async def test_appends_from_other_threads_are_all_sent() -> None:
    sender = Recorder()
    dispatcher = TraceDispatcher(sender, batch_size=10, flush_interval_s=3600)
    dispatcher.start()

    def produce(thread: int) -> None:
        for i in range(50):
            assert dispatcher.append(entry(f"T{thread}-{i}"))

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        await asyncio.to_thread(t.join)
    await dispatcher.shutdown()
    ids = [r.msg_id for m in sender.messages for r in decode_trace_data(m.body).records]
    assert sorted(ids) == sorted(f"T{t}-{i}" for t in range(4) for i in range(50))
    assert dispatcher.dropped == 0


async def test_a_failing_sender_is_counted_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    async def broken(message: Message) -> None:
        raise RuntimeError("no route to the trace topic")

    closed = asyncio.Event()

    async def on_close() -> None:
        closed.set()

    dispatcher = TraceDispatcher(broken, batch_size=1, on_close=on_close)
    dispatcher.start()
    assert dispatcher.append(entry("X"))
    await eventually(lambda: dispatcher.failed == 1, "the failure counted")
    assert "no route to the trace topic" in caplog.text
    await dispatcher.shutdown()
    assert closed.is_set()
    assert not dispatcher.append(entry("Y"))  # shut down: refused, not queued


async def test_shutdown_sends_what_is_queued() -> None:
    sender = Recorder()
    dispatcher = TraceDispatcher(sender, batch_size=20, flush_interval_s=3600)
    dispatcher.start()
    for i in range(5):
        dispatcher.append(entry(f"Q{i}", topic="A" if i % 2 else "B"))
    await dispatcher.shutdown()
    sent = sorted(r.msg_id for m in sender.messages for r in decode_trace_data(m.body).records)
    assert sent == ["Q0", "Q1", "Q2", "Q3", "Q4"]
    assert len(sender.messages) == 2  # one per traced topic
    assert dispatcher.queued == 0


async def test_shutdown_gives_up_on_a_stuck_send_after_its_timeout() -> None:
    entered = asyncio.Event()

    async def stuck(message: Message) -> None:
        entered.set()
        await asyncio.Event().wait()

    dispatcher = TraceDispatcher(stuck, batch_size=1)
    dispatcher.start()
    dispatcher.append(entry("S"))
    await eventually(entered.is_set, "the send started")
    async with asyncio.timeout(HANG_GUARD_S):
        await dispatcher.shutdown(timeout_s=0.2)
    assert dispatcher.sent == 0


async def test_records_other_than_pub_travel_too() -> None:
    sender = Recorder()
    dispatcher = TraceDispatcher(sender, batch_size=1)
    dispatcher.start()
    before = SubBeforeRecord(5, "r", "G", "req", "M", 1, "k")
    dispatcher.append(TraceEntry("Orders", (before,)))
    await dispatcher.shutdown()
    [message] = sender.messages
    assert decode_trace_data(message.body).records == (before,)
    assert message.keys == ["M", "k"]
