"""ConsumeConcurrentlyService with a fake offset store and send-back (no I/O):
statuses, ackIndex, send-back and its local-retry fallback, broadcasting,
dropped queues, hooks, async listeners and the consume-timeout scan."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tidemq.client._core.process_queue import ProcessQueue
from tidemq.client.consumer import consume_concurrently
from tidemq.client.consumer.consume_concurrently import ConsumeConcurrentlyService, split_jobs
from tidemq.client.consumer.context import ConsumerContext, ConsumerSettings
from tidemq.client.consumer.listener import (
    CONSUME_CONTEXT_TYPE,
    ConsumeConcurrentlyContext,
    ConsumeHookContext,
    ConsumeStatus,
    MessageModel,
)
from tidemq.common import properties as props
from tidemq.common.clock import ManualClock
from tidemq.common.message import MessageExt, MessageQueue
from tidemq.common.tasks import TaskSet
from tidemq.testing.waiting import eventually

MQ = MessageQueue("T", "a", 0)


class FakeStore:
    def __init__(self) -> None:
        self.offsets: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None:
        if increase_only and self.offsets.get(mq, -1) >= offset:
            return
        self.offsets[mq] = offset


class Harness(ConsumerContext):
    """A ConsumerContext whose send-back is recorded instead of sent."""

    def __init__(self, settings: ConsumerSettings, clock: ManualClock | None = None) -> None:
        self.store = FakeStore()
        super().__init__(
            instance=object(),  # type: ignore[arg-type]
            group="G",
            settings=settings,
            offset_store=self.store,  # type: ignore[arg-type]
            process_queues={},
            clock=clock or ManualClock(),
            tasks=TaskSet("test"),
        )
        self.sent_back: list[tuple[int, int]] = []
        self.accept_send_back = True

    async def send_back(self, message: MessageExt, delay_level: int, broker_name: str) -> bool:
        if self.accept_send_back:
            self.sent_back.append((message.queue_offset, delay_level))
        return self.accept_send_back


def messages(*offsets: int, topic: str = "T") -> list[MessageExt]:
    return [MessageExt(topic, body=b"x", queue_offset=o, msg_id=f"id{o}") for o in offsets]


async def settle(
    service: ConsumeConcurrentlyService, condition: Callable[[], bool] = lambda: True
) -> None:
    """Wait until no consume job is in flight and `condition` holds."""
    await eventually(lambda: not service.in_flight and condition(), "the consume jobs to finish")


def setup(
    listener: Callable[..., object], **settings: object
) -> tuple[Harness, ConsumeConcurrentlyService, ProcessQueue]:
    context = Harness(ConsumerSettings(**settings))  # type: ignore[arg-type]
    service = ConsumeConcurrentlyService(context, listener)  # type: ignore[arg-type]
    pq = ProcessQueue(context.clock)
    context.process_queues[MQ] = pq
    return context, service, pq


def submit(service: ConsumeConcurrentlyService, pq: ProcessQueue, batch: list[MessageExt]) -> None:
    service.submit(batch, pq, MQ, pq.put(batch))


async def test_success_commits_max_plus_one() -> None:
    seen: list[int] = []

    def listener(msgs: list[MessageExt], context: ConsumeConcurrentlyContext) -> ConsumeStatus:
        seen.extend(m.queue_offset for m in msgs)
        assert context.mq == MQ
        return ConsumeStatus.CONSUME_SUCCESS

    context, service, pq = setup(listener)
    submit(service, pq, messages(5, 6, 7))
    await settle(service)
    assert sorted(seen) == [5, 6, 7]
    assert context.store.offsets[MQ] == 8
    assert pq.count == 0
    assert service.consumed_ok == 3


@pytest.mark.parametrize("outcome", ["later", "none", "raise"])
async def test_failures_are_sent_back_with_the_requested_delay_level(outcome: str) -> None:
    def listener(msgs: list[MessageExt], context: ConsumeConcurrentlyContext) -> object:
        context.delay_level_when_next_consume = 4
        if outcome == "raise":
            raise RuntimeError("boom")
        return ConsumeStatus.RECONSUME_LATER if outcome == "later" else None

    context, service, pq = setup(listener)
    submit(service, pq, messages(0, 1))
    await settle(service)
    assert sorted(context.sent_back) == [(0, 4), (1, 4)]
    assert context.store.offsets[MQ] == 2  # sent back = done here
    assert service.consumed_failed == 2


async def test_ack_index_splits_a_successful_batch() -> None:
    def listener(msgs: list[MessageExt], context: ConsumeConcurrentlyContext) -> ConsumeStatus:
        context.ack_index = 0
        return ConsumeStatus.CONSUME_SUCCESS

    context, service, pq = setup(listener, consume_message_batch_max_size=3)
    submit(service, pq, messages(0, 1, 2))
    await settle(service)
    assert context.sent_back == [(1, 0), (2, 0)]
    assert service.consumed_ok == 1


async def test_send_back_failure_keeps_the_message_and_consumes_it_again_locally(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(consume_concurrently, "LOCAL_RETRY_AFTER_SEND_BACK_FAILURE_MS", 20)
    attempts: list[tuple[int, int]] = []

    def listener(msgs: list[MessageExt], context: ConsumeConcurrentlyContext) -> ConsumeStatus:
        attempts.extend((m.queue_offset, m.reconsume_times) for m in msgs)
        if msgs[0].queue_offset == 1 and msgs[0].reconsume_times == 0:
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    context, service, pq = setup(listener)
    context.accept_send_back = False
    submit(service, pq, messages(0, 1, 2))
    await settle(service, lambda: (1, 1) in attempts)
    await settle(service, lambda: pq.count == 0)
    assert sorted(attempts) == [(0, 0), (1, 0), (1, 1), (2, 0)]
    assert context.store.offsets[MQ] == 3


async def test_send_back_failure_holds_the_committed_offset() -> None:
    def listener(msgs: list[MessageExt], context: ConsumeConcurrentlyContext) -> ConsumeStatus:
        if msgs[0].queue_offset == 1:
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    context, service, pq = setup(listener)
    context.accept_send_back = False
    submit(service, pq, messages(0, 1, 2))
    await settle(service, lambda: pq.count == 1)
    assert context.store.offsets[MQ] == 1  # the smallest offset still held
    assert pq.min_offset == 1
    await service.shutdown(1.0)


async def test_broadcasting_failures_are_not_retried() -> None:
    context, service, pq = setup(
        lambda msgs, ctx: ConsumeStatus.RECONSUME_LATER,
        message_model=MessageModel.BROADCASTING,
    )
    submit(service, pq, messages(0, 1))
    await settle(service)
    assert context.sent_back == []
    assert context.store.offsets[MQ] == 2


async def test_results_of_a_dropped_queue_are_ignored() -> None:
    release = asyncio.Event()

    async def listener(
        msgs: list[MessageExt], context: ConsumeConcurrentlyContext
    ) -> ConsumeStatus:
        await release.wait()
        return ConsumeStatus.CONSUME_SUCCESS

    context, service, pq = setup(listener)
    submit(service, pq, messages(0))
    await asyncio.sleep(0)
    pq.dropped = True
    release.set()
    await settle(service)
    assert MQ not in context.store.offsets


async def test_async_listener_and_hooks() -> None:
    events: list[tuple[str, str | None, bool]] = []

    class Hook:
        def consume_message_before(self, context: ConsumeHookContext) -> None:
            events.append(("before", context.status, context.success))

        def consume_message_after(self, context: ConsumeHookContext) -> None:
            events.append(("after", context.status, context.success))

    async def listener(
        msgs: list[MessageExt], context: ConsumeConcurrentlyContext
    ) -> ConsumeStatus:
        return ConsumeStatus.CONSUME_SUCCESS

    context, service, pq = setup(listener)
    context.hooks.append(Hook())
    submit(service, pq, messages(0))
    await settle(service)
    assert events == [("before", None, False), ("after", "CONSUME_SUCCESS", True)]
    assert context.store.offsets[MQ] == 1


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [("ok", "SUCCESS"), ("later", "FAILED"), ("none", "RETURNNULL"), ("raise", "EXCEPTION")],
)
async def test_the_after_hook_sees_the_consume_return_type(outcome: str, expected: str) -> None:
    # Java's ConsumeMessageConcurrentlyService puts MixAll.CONSUME_CONTEXT_TYPE in the
    # hook context's props; message traces record it as the SubAfter's contextCode.
    seen: list[str | None] = []

    class Hook:
        def consume_message_before(self, context: ConsumeHookContext) -> None:
            seen.append(context.properties.get(CONSUME_CONTEXT_TYPE))

        def consume_message_after(self, context: ConsumeHookContext) -> None:
            seen.append(context.properties.get(CONSUME_CONTEXT_TYPE))

    def listener(msgs: list[MessageExt], context: ConsumeConcurrentlyContext) -> object:
        if outcome == "raise":
            raise RuntimeError("boom")
        return {"ok": ConsumeStatus.CONSUME_SUCCESS, "later": ConsumeStatus.RECONSUME_LATER}.get(
            outcome
        )

    context, service, pq = setup(listener)
    context.hooks.append(Hook())
    submit(service, pq, messages(0))
    await settle(service, lambda: len(seen) == 2)
    assert seen == [None, expected]


async def test_retry_topic_messages_get_their_original_topic_back() -> None:
    topics: list[str] = []

    def listener(msgs: list[MessageExt], context: ConsumeConcurrentlyContext) -> ConsumeStatus:
        topics.extend(m.topic for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    context, service, _ = setup(listener)
    retry_mq = MessageQueue("%RETRY%G", "a", 0)
    pq = ProcessQueue(context.clock)
    batch = messages(0, 1, topic="%RETRY%G")
    batch[0].properties[props.RETRY_TOPIC] = "Orders"
    service.submit(batch, pq, retry_mq, pq.put(batch))
    await settle(service)
    assert sorted(topics) == ["%RETRY%G", "Orders"]  # no RETRY_TOPIC: left alone


async def test_messages_consumed_for_too_long_are_sent_back_and_removed() -> None:
    clock = ManualClock()
    context = Harness(ConsumerSettings(consume_timeout_min=1), clock)
    service = ConsumeConcurrentlyService(context, lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)
    pq = ProcessQueue(clock)
    context.process_queues[MQ] = pq
    batch = messages(0, 1)
    pq.put(batch)
    batch[0].properties[props.CONSUME_START_TIME] = str(clock.now_ms())
    clock.advance(61)
    assert await service.clean_expired() == 1
    assert context.sent_back == [(0, 3)]
    assert pq.count == 1 and pq.min_offset == 1
    assert context.store.offsets[MQ] == 1


async def test_stopped_service_takes_no_work() -> None:
    _, service, pq = setup(lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)
    await service.shutdown(1.0)
    submit(service, pq, messages(0))
    assert service.in_flight == 0
    assert pq.count == 1  # stays buffered, never committed


def test_split_jobs_keeps_order_and_sizes_within_one() -> None:
    batches = [messages(i) for i in range(10)]
    for jobs in range(-1, 13):
        groups = split_jobs(batches, jobs)
        assert [b for g in groups for b in g] == batches
        assert len(groups) == max(1, min(jobs, 10))
        sizes = [len(g) for g in groups]
        assert max(sizes) - min(sizes) <= 1
