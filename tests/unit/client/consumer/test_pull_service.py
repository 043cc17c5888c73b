"""PullService with a scripted pull (no I/O): put + submit on FOUND, next
offsets, flow control, orderly lock gating and the offset re-read after a
lock, OFFSET_ILLEGAL dropping the queue and fixing its offset, the commit
offset carried in clustering mode, the 3 s back-off after a failure, and
suspend / resume (no new pull while suspended, the one in flight consumed,
pulling again at once on resume)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tidemq.client._core.process_queue import ProcessQueue
from tidemq.client.consumer import pull_service
from tidemq.client.consumer.context import ConsumerContext, ConsumerSettings
from tidemq.client.consumer.listener import MessageModel
from tidemq.client.consumer.offset_store import ReadOffsetType
from tidemq.client.consumer.pull_api import PullResult, PullStatus
from tidemq.client.consumer.pull_service import PullService
from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.client.errors import ClientError
from tidemq.common.clock import ManualClock
from tidemq.common.message import MessageExt, MessageQueue
from tidemq.common.tasks import TaskSet
from tidemq.protocol import ResponseCode
from tidemq.testing.waiting import eventually

MQ = MessageQueue("T", "a", 0)


class FakeStore:
    def __init__(self) -> None:
        self.offsets: dict[MessageQueue, int] = {}
        self.stored: dict[MessageQueue, int] = {}
        self.persisted: list[tuple[MessageQueue, int]] = []

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None:
        if increase_only and self.offsets.get(mq, -1) >= offset:
            return
        self.offsets[mq] = offset

    async def read(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        if how is ReadOffsetType.READ_FROM_MEMORY:
            return self.offsets.get(mq, -1)
        return self.stored.get(mq, -1)

    async def persist(self, mq: MessageQueue) -> None:
        self.persisted.append((mq, self.offsets[mq]))

    def remove(self, mq: MessageQueue) -> None:
        self.offsets.pop(mq, None)


class FakeConsume:
    def __init__(self) -> None:
        self.submitted: list[list[int]] = []

    def start(self) -> None: ...

    async def shutdown(self, await_termination_s: float) -> None: ...

    def submit(
        self, messages: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch: bool
    ) -> None:
        self.submitted.append([m.queue_offset for m in messages])


class Script:
    """Answers pulls from a list; records the calls; blocks when the list runs out."""

    def __init__(self, *answers: PullResult | Exception) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []
        self.idle = asyncio.Event()

    async def __call__(self, instance: object, **kwargs: Any) -> PullResult:
        self.calls.append(kwargs)
        if not self.answers:
            self.idle.set()
            await asyncio.Event().wait()
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def found(*offsets: int) -> PullResult:
    msgs = [MessageExt("T", body=b"x", queue_offset=o) for o in offsets]
    return PullResult(PullStatus.FOUND, offsets[-1] + 1, 0, 100, msgs)


def status(kind: PullStatus, next_offset: int) -> PullResult:
    return PullResult(kind, next_offset, 0, 100, [])


def build(
    monkeypatch: pytest.MonkeyPatch,
    script: Script,
    start_offset: Callable[[MessageQueue], int] = lambda mq: 0,
    **settings: Any,
) -> tuple[PullService, ConsumerContext, FakeStore, FakeConsume]:
    monkeypatch.setattr(pull_service, "pull_message", script)
    store = FakeStore()
    context = ConsumerContext(
        instance=object(),  # type: ignore[arg-type]
        group="G",
        settings=ConsumerSettings(**settings),
        offset_store=store,  # type: ignore[arg-type]
        process_queues={},
        clock=ManualClock(),
        tasks=TaskSet("test"),
    )
    consume = FakeConsume()

    async def compute(mq: MessageQueue) -> int:
        return start_offset(mq)

    subscriptions = {"T": SubscriptionSpec.parse("T", "*", sub_version=1)}
    return PullService(context, subscriptions, consume, compute), context, store, consume


async def test_found_messages_are_buffered_and_submitted_then_pulled_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = Script(found(5, 6), status(PullStatus.NO_NEW_MSG, 7), found(7))
    service, context, _, consume = build(monkeypatch, script)
    pq = ProcessQueue(context.clock)
    context.process_queues[MQ] = pq
    service.add(MQ, pq, 5)
    await asyncio.wait_for(script.idle.wait(), 10)
    assert consume.submitted == [[5, 6], [7]]
    assert [c["offset"] for c in script.calls] == [5, 7, 7, 8]
    assert pq.count == 3
    assert script.calls[0]["max_nums"] == 32 and script.calls[0]["suspend_ms"] == 15_000
    await service.stop()


async def test_the_consume_job_starts_before_the_next_pull_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    order: list[str] = []

    class Recording(Script):
        async def __call__(self, instance: object, **kwargs: Any) -> PullResult:
            order.append(f"pull {kwargs['offset']}")
            return await super().__call__(instance, **kwargs)

    script = Recording(found(5))
    service, context, _, consume = build(monkeypatch, script)
    jobs = TaskSet("jobs")

    async def job() -> None:
        order.append("job")

    def submit(messages: list[MessageExt], *args: Any) -> None:
        order.append("submit")
        jobs.spawn(job())  # as ConsumeConcurrentlyService.submit spawns its jobs

    monkeypatch.setattr(consume, "submit", submit)
    pq = ProcessQueue(context.clock)
    context.process_queues[MQ] = pq
    service.add(MQ, pq, 5)
    await asyncio.wait_for(script.idle.wait(), 10)
    assert order == ["pull 5", "submit", "job", "pull 6"]
    await service.stop()
    await jobs.cancel_all()


async def test_no_new_message_on_an_empty_queue_stores_the_next_offset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = Script(status(PullStatus.NO_MATCHED_MSG, 40))
    service, context, store, _ = build(monkeypatch, script)
    pq = ProcessQueue(context.clock)
    service.add(MQ, pq, 10)
    await asyncio.wait_for(script.idle.wait(), 10)
    assert store.offsets[MQ] == 40
    assert script.calls[-1]["offset"] == 40
    await service.stop()


async def test_commit_offset_rides_along_in_clustering_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for model, expected in ((MessageModel.CLUSTERING, 33), (MessageModel.BROADCASTING, None)):
        script = Script()
        service, context, store, _ = build(monkeypatch, script, message_model=model)
        store.offsets[MQ] = 33
        service.add(MQ, ProcessQueue(context.clock), 40)
        await asyncio.wait_for(script.idle.wait(), 10)
        assert script.calls[0]["commit_offset"] == expected
        await service.stop()


async def test_flow_control_waits_until_the_buffer_drains(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pull_service, "FLOW_CONTROL_DELAY_S", 0.01)
    script = Script()
    service, context, _, _ = build(monkeypatch, script, pull_threshold_for_queue=2)
    pq = ProcessQueue(context.clock)
    held = [MessageExt("T", queue_offset=o) for o in range(3)]
    pq.put(held)
    service.add(MQ, pq, 3)
    await eventually(lambda: service.flow_control_times >= 3, "three flow-control waits")
    assert script.calls == []  # over the limit: no pull
    pq.remove(held)
    await asyncio.wait_for(script.idle.wait(), 10)
    assert script.calls[0]["offset"] == 3
    await service.stop()


async def test_span_limit_applies_to_concurrent_mode_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pull_service, "FLOW_CONTROL_DELAY_S", 0.01)
    for orderly in (False, True):
        script = Script()
        service, context, _, _ = build(
            monkeypatch,
            script,
            consume_concurrently_max_span=5,
            orderly=orderly,
            message_model=MessageModel.BROADCASTING,  # no lock needed
        )
        pq = ProcessQueue(context.clock)
        pq.put([MessageExt("T", queue_offset=0), MessageExt("T", queue_offset=10)])
        service.add(MQ, pq, 11)
        if orderly:
            await asyncio.wait_for(script.idle.wait(), 10)
        else:
            await eventually(lambda s=service: s.flow_control_times >= 2, "two flow-control waits")
            assert script.calls == []
        await service.stop()


async def test_orderly_pulls_only_when_locked_and_rereads_the_offset_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pull_service, "EXCEPTION_DELAY_S", 0.01)
    script = Script()
    service, context, _, _ = build(monkeypatch, script, lambda mq: 77, orderly=True)
    pq = ProcessQueue(context.clock)
    looks = 0
    mark_pulled = pq.mark_pulled

    def counted() -> None:  # each turn of the pull loop starts here
        nonlocal looks
        looks += 1
        mark_pulled()

    monkeypatch.setattr(pq, "mark_pulled", counted)
    service.add(MQ, pq, 5)
    await eventually(lambda: looks >= 3, "three turns of the pull loop")
    assert script.calls == []  # not locked: no pull
    pq.mark_locked()
    await asyncio.wait_for(script.idle.wait(), 10)
    assert script.calls[0]["offset"] == 77  # the store's offset, not the stale 5
    request = service.request(MQ)
    assert request is not None and request.previously_locked
    await service.stop()


async def test_offset_illegal_drops_the_queue_and_fixes_its_offset_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pull_service, "OFFSET_ILLEGAL_FIX_DELAY_S", 0.01)
    script = Script(status(PullStatus.OFFSET_ILLEGAL, 50))
    service, context, store, _ = build(monkeypatch, script)
    pq = ProcessQueue(context.clock)
    context.process_queues[MQ] = pq
    service.add(MQ, pq, 500)
    await eventually(lambda: MQ not in context.process_queues, "the queue dropped")
    assert pq.dropped
    assert store.persisted == [(MQ, 50)]
    assert len(script.calls) == 1  # the loop ended
    await service.stop()


async def test_a_failed_pull_is_retried_after_the_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pull_service, "EXCEPTION_DELAY_S", 0.01)
    script = Script(ClientError("broker gone", ResponseCode.RPC_TIME_OUT), found(0))
    service, context, _, consume = build(monkeypatch, script)
    service.add(MQ, ProcessQueue(context.clock), 0)
    await asyncio.wait_for(script.idle.wait(), 10)
    assert consume.submitted == [[0]]
    assert [c["offset"] for c in script.calls] == [0, 0, 1]
    await service.stop()


async def test_results_arriving_after_a_drop_are_discarded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = Script(found(0))
    service, context, _, consume = build(monkeypatch, script)
    pq = ProcessQueue(context.clock)

    async def pull_then_drop(instance: object, **kwargs: Any) -> PullResult:
        result = await script(instance, **kwargs)
        pq.dropped = True  # rebalance gave the queue away while the pull was out
        return result

    monkeypatch.setattr(pull_service, "pull_message", pull_then_drop)
    service.add(MQ, pq, 0)
    await eventually(lambda: service.request(MQ) is None, "the pull request gone")
    assert consume.submitted == []
    assert pq.count == 0
    assert len(script.calls) == 1
    await service.stop()


async def test_a_request_resumes_where_it_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    script = Script(found(0, 1))
    service, context, _, consume = build(monkeypatch, script)
    pq = ProcessQueue(context.clock)

    async def pull_then_drop(instance: object, **kwargs: Any) -> PullResult:
        result = await script(instance, **kwargs)
        pq.dropped = True  # looks dropped (a release in progress) ...
        return result

    monkeypatch.setattr(pull_service, "pull_message", pull_then_drop)
    request = service.add(MQ, pq, 0)
    await eventually(lambda: not request.running, "the pull loop ended")
    pq.dropped = False  # ... but the release failed: the queue is still ours
    monkeypatch.setattr(pull_service, "pull_message", script)
    service.restart(request)
    service.restart(request)  # idempotent while running
    await asyncio.wait_for(script.idle.wait(), 10)
    assert [c["offset"] for c in script.calls] == [0, 0]  # the first result was discarded
    assert consume.submitted == []
    assert service.request(MQ) is request and request.running
    await service.stop()


async def test_suspended_no_new_pull_is_sent_but_one_in_flight_is_consumed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pull_service, "SUSPENDED_DELAY_S", 0.01)
    script = Script(found(0, 1))
    service, context, _, consume = build(monkeypatch, script)
    in_flight = asyncio.Event()
    answer = asyncio.Event()

    async def held_pull(instance: object, **kwargs: Any) -> PullResult:
        in_flight.set()
        await answer.wait()
        return await script(instance, **kwargs)

    monkeypatch.setattr(pull_service, "pull_message", held_pull)
    pq = ProcessQueue(context.clock)
    service.add(MQ, pq, 0)
    await asyncio.wait_for(in_flight.wait(), 10)
    service.suspend()
    assert service.suspended
    answer.set()
    # Java: the pull already sent completes, its messages are buffered and consumed
    await eventually(lambda: consume.submitted == [[0, 1]], "the in-flight batch consumed")
    assert pq.count == 2
    # ... and then the loop only looks again now and then, sending nothing
    await eventually(lambda: service.suspended_waits >= 3, "three looks while suspended")
    assert [c["offset"] for c in script.calls] == [0]
    await service.stop()


async def test_resume_pulls_again_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pull_service, "SUSPENDED_DELAY_S", 3600.0)
    script = Script(found(0))
    service, context, _, consume = build(monkeypatch, script)
    service.suspend()
    pq = ProcessQueue(context.clock)
    service.add(MQ, pq, 0)
    await eventually(lambda: service.suspended_waits == 1, "the loop suspended")
    assert script.calls == []
    service.resume()
    await asyncio.wait_for(script.idle.wait(), 10)  # woken, not after the hour
    assert consume.submitted == [[0]]
    assert [c["offset"] for c in script.calls] == [0, 1]
    assert not service.suspended
    await service.stop()
