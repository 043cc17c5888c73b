"""ConsumeOrderlyService on a real ConsumerContext, ProcessQueues and a file
offset store; the broker is replaced only where the service would talk to it
(the lock callable, a recording lock service and ``send_back``)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from tidemq.client._core.process_queue import ProcessQueue
from tidemq.client.consumer import consume_orderly
from tidemq.client.consumer.consume_orderly import ConsumeOrderlyService, plan_failed_batch
from tidemq.client.consumer.context import ConsumerContext, ConsumerSettings
from tidemq.client.consumer.listener import (
    CONSUME_CONTEXT_TYPE,
    ConsumeHookContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageModel,
)
from tidemq.client.consumer.offset_store import LocalFileOffsetStore
from tidemq.client.consumer.queue_locks import QueueLockService
from tidemq.client.instance import ClientConfig, ClientInstance
from tidemq.common.clock import SYSTEM_CLOCK, Clock, ManualClock
from tidemq.common.message import MessageExt, MessageQueue
from tidemq.common.tasks import TaskSet
from tidemq.testing.waiting import eventually

SUCCESS = ConsumeOrderlyStatus.SUCCESS
SUSPEND = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
Q0 = MessageQueue("T", "broker-a", 0)
Q1 = MessageQueue("T", "broker-a", 1)


def msg(mq: MessageQueue, offset: int) -> MessageExt:
    return MessageExt(
        topic=mq.topic,
        body=f"{mq.queue_id}:{offset}".encode(),
        queue_id=mq.queue_id,
        queue_offset=offset,
        msg_id=f"id-{mq.queue_id}-{offset}",
        commit_log_offset=1000 * mq.queue_id + offset,
    )


class RecordingLocks:
    """Stands in for QueueLockService: records unlocks and shutdown calls."""

    def __init__(self) -> None:
        self.unlocked: list[MessageQueue] = []
        self.events: list[str] = []

    def start(self) -> None:
        self.events.append("start")

    async def stop(self) -> None:
        self.events.append("stop")

    async def lock(self, mq: MessageQueue) -> bool:
        return True

    async def unlock(self, mq: MessageQueue, *, oneway: bool = False) -> None:
        self.unlocked.append(mq)

    async def unlock_all(self, *, oneway: bool = False) -> None:
        self.events.append("unlock_all")


class Harness:
    def __init__(
        self,
        tmp_path: Path,
        listener: Callable[..., Any],
        *,
        clock: Clock = SYSTEM_CLOCK,
        broadcasting: bool = False,
        batch: int = 1,
        max_reconsume_times: int = -1,
        lock: Callable[[MessageQueue], Awaitable[bool]] | None = None,
        max_consume_continuously_ms: int = 60_000,
    ) -> None:
        self.clock = clock
        instance = ClientInstance(ClientConfig(namesrv="127.0.0.1:9", clock=clock))
        settings = ConsumerSettings(
            message_model=MessageModel.BROADCASTING if broadcasting else MessageModel.CLUSTERING,
            orderly=True,
            consume_message_batch_max_size=batch,
            max_reconsume_times=max_reconsume_times,
            suspend_current_queue_time_ms=10,
            consume_thread_count=4,
        )
        self.store = LocalFileOffsetStore("cg", instance.client_id, tmp_path)
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.tasks = TaskSet("test")
        self.ctx = ConsumerContext(
            instance=instance,
            group="cg",
            settings=settings,
            offset_store=self.store,
            process_queues=self.process_queues,
            clock=clock,
            tasks=self.tasks,
            lock=lock,
        )
        self.sent_back: list[tuple[int, int, int]] = []
        self.send_back_results: list[bool] = []
        self.ctx.send_back = self._send_back  # type: ignore[method-assign]
        self.locks = RecordingLocks()
        self.service = ConsumeOrderlyService(
            self.ctx,
            listener,
            lock_service=None if broadcasting else cast(QueueLockService, self.locks),
            max_consume_continuously_ms=max_consume_continuously_ms,
        )

    async def _send_back(self, message: MessageExt, delay_level: int, broker_name: str) -> bool:
        self.sent_back.append((message.queue_offset, delay_level, message.reconsume_times))
        return self.send_back_results.pop(0) if self.send_back_results else True

    def add_queue(self, mq: MessageQueue, *, locked: bool = True) -> ProcessQueue:
        pq = ProcessQueue(self.clock)
        if locked:
            pq.mark_locked()
        self.process_queues[mq] = pq
        return pq

    def deliver(self, mq: MessageQueue, offsets: Sequence[int]) -> None:
        pq = self.process_queues[mq]
        batch = [msg(mq, offset) for offset in offsets]
        self.service.submit(batch, pq, mq, pq.put(batch))

    async def close(self) -> None:
        await self.service.shutdown(1.0)
        await self.tasks.cancel_all()
        self.ctx.close_executor()


# -- pure ------------------------------------------------------------------------------------


def test_plan_failed_batch_splits_by_reconsume_times_in_offset_order() -> None:
    batch = [msg(Q0, 5), msg(Q0, 3), msg(Q0, 4)]
    batch[0].reconsume_times = 2
    batch[1].reconsume_times = 1
    plan = plan_failed_batch(batch, 2)
    assert [m.queue_offset for m in plan.retry_locally] == [3, 4]
    assert [m.queue_offset for m in plan.to_dlq] == [5]
    assert plan_failed_batch(batch, 2**31 - 1).to_dlq == []


# -- consumption -----------------------------------------------------------------------------


async def test_each_queue_is_consumed_in_offset_order_one_batch_at_a_time(tmp_path: Path) -> None:
    seen: dict[MessageQueue, list[int]] = {Q0: [], Q1: []}
    running: set[MessageQueue] = set()
    overlaps: list[MessageQueue] = []

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        if context.mq in running:
            overlaps.append(context.mq)
        running.add(context.mq)
        await asyncio.sleep(0)
        seen[context.mq].extend(m.queue_offset for m in msgs)
        running.discard(context.mq)
        return SUCCESS

    h = Harness(tmp_path, listener, batch=3)
    for mq in (Q0, Q1):
        h.add_queue(mq)
    for start in range(0, 20, 5):
        h.deliver(Q0, range(start, start + 5))
        h.deliver(Q1, range(start, start + 5))
    await eventually(lambda: len(seen[Q0]) == 20 and len(seen[Q1]) == 20, "40 messages")
    assert seen[Q0] == list(range(20)) and seen[Q1] == list(range(20))
    assert overlaps == []
    assert h.store.table() == {Q0: 20, Q1: 20}
    assert h.process_queues[Q0].count == 0
    await h.close()


async def test_sync_listener_runs_in_the_thread_pool(tmp_path: Path) -> None:
    threads: list[str] = []

    def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        threads.append(threading.current_thread().name)
        return SUCCESS

    h = Harness(tmp_path, listener)
    h.add_queue(Q0)
    h.deliver(Q0, [0, 1])
    await eventually(lambda: len(threads) == 2, "two calls")
    assert all(name.startswith("tidemq-consume-cg") for name in threads)
    await h.close()


async def test_suspend_retries_the_same_message_locally_then_moves_on(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    failures = {2: 2}  # offset 2 fails twice: SUSPEND, then an exception

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        message = msgs[0]
        calls.append((message.queue_offset, message.reconsume_times))
        if failures.get(message.queue_offset, 0) > 0:
            failures[message.queue_offset] -= 1
            if failures[message.queue_offset] == 0:
                raise RuntimeError("boom")
            return SUSPEND
        return SUCCESS

    h = Harness(tmp_path, listener)
    h.add_queue(Q0)
    h.deliver(Q0, range(5))
    await eventually(lambda: len(calls) == 7, "7 calls")
    assert calls == [(0, 0), (1, 0), (2, 0), (2, 1), (2, 2), (3, 0), (4, 0)]
    assert h.sent_back == []
    await eventually(lambda: h.store.table() == {Q0: 5}, "offset 5")
    await h.close()


async def test_none_result_counts_as_suspend(tmp_path: Path) -> None:
    calls: list[int] = []

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        calls.append(msgs[0].reconsume_times)
        return None if len(calls) == 1 else SUCCESS

    h = Harness(tmp_path, listener)
    h.add_queue(Q0)
    h.deliver(Q0, [0])
    await eventually(lambda: h.store.table() == {Q0: 1}, "offset 1")
    assert calls == [0, 1]
    await h.close()


async def test_suspend_waits_the_time_the_listener_asks_for(tmp_path: Path) -> None:
    stamps: list[float] = []

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        stamps.append(time.monotonic())
        context.suspend_current_queue_time_ms = 200
        return SUSPEND if len(stamps) == 1 else SUCCESS

    h = Harness(tmp_path, listener)
    h.add_queue(Q0)
    h.deliver(Q0, [0])
    await eventually(lambda: len(stamps) == 2, "the retry")
    assert stamps[1] - stamps[0] >= 0.19
    await h.close()


async def test_message_goes_to_the_dlq_after_max_reconsume_times(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        calls.extend((m.queue_offset, m.reconsume_times) for m in msgs)
        return SUSPEND if any(m.queue_offset == 1 for m in msgs) else SUCCESS

    h = Harness(tmp_path, listener, max_reconsume_times=2)
    h.add_queue(Q0)
    h.deliver(Q0, range(4))
    await eventually(lambda: h.store.table() == {Q0: 4}, "offset 4")
    assert calls == [(0, 0), (1, 0), (1, 1), (1, 2), (2, 0), (3, 0)]
    assert h.sent_back == [(1, consume_orderly.DLQ_DELAY_LEVEL, 2)]
    await h.close()


async def test_failed_dlq_send_back_is_retried_locally(tmp_path: Path) -> None:
    calls: list[int] = []

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        calls.append(msgs[0].reconsume_times)
        return SUSPEND

    h = Harness(tmp_path, listener, max_reconsume_times=1)
    h.send_back_results = [False, True]
    h.add_queue(Q0)
    h.deliver(Q0, [0])
    await eventually(lambda: h.store.table() == {Q0: 1}, "offset 1")
    assert calls == [0, 1, 2]
    assert [(offset, times) for offset, _, times in h.sent_back] == [(0, 1), (0, 2)]
    await h.close()


async def test_dlq_in_a_batch_keeps_the_rest_in_order(tmp_path: Path) -> None:
    calls: list[list[tuple[int, int]]] = []

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        calls.append([(m.queue_offset, m.reconsume_times) for m in msgs])
        return SUCCESS if len(calls) >= 3 else SUSPEND

    h = Harness(tmp_path, listener, batch=2, max_reconsume_times=1)
    h.add_queue(Q0)
    pq = h.process_queues[Q0]
    first = [msg(Q0, 0), msg(Q0, 1)]
    first[0].reconsume_times = 1  # already failed once elsewhere: next failure -> DLQ
    h.service.submit(first, pq, Q0, pq.put(first))
    await eventually(lambda: h.store.table() == {Q0: 2}, "offset 2")
    assert calls[0] == [(0, 1), (1, 0)]
    assert calls[1] == [(1, 1)]  # offset 0 went to the DLQ, 1 retried
    assert h.sent_back[0][:2] == (0, consume_orderly.DLQ_DELAY_LEVEL)
    await h.close()


async def test_hooks_see_each_batch_before_and_after(tmp_path: Path) -> None:
    events: list[tuple[str, list[int], str | None, bool]] = []

    class Hook:
        def consume_message_before(self, context: ConsumeHookContext) -> None:
            offsets = [m.queue_offset for m in context.messages]
            events.append(("before", offsets, context.status, context.orderly))

        def consume_message_after(self, context: ConsumeHookContext) -> None:
            offsets = [m.queue_offset for m in context.messages]
            events.append(("after", offsets, context.status, context.success))

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        if msgs[0].reconsume_times == 0 and msgs[0].queue_offset == 1:
            raise ValueError("once")
        return SUCCESS

    h = Harness(tmp_path, listener)
    h.ctx.hooks.append(Hook())
    h.add_queue(Q0)
    h.deliver(Q0, [0, 1])
    await eventually(lambda: h.store.table() == {Q0: 2}, "offset 2")
    assert events == [
        ("before", [0], None, True),
        ("after", [0], "SUCCESS", True),
        ("before", [1], None, True),
        ("after", [1], "EXCEPTION", False),
        ("before", [1], None, True),
        ("after", [1], "SUCCESS", True),
    ]
    await h.close()


async def test_the_after_hook_sees_the_consume_return_type(tmp_path: Path) -> None:
    # ConsumeMessageOrderlyService: SUSPEND -> FAILED, an exception -> EXCEPTION,
    # None -> RETURNNULL, SUCCESS -> SUCCESS (MixAll.CONSUME_CONTEXT_TYPE).
    seen: list[str | None] = []
    outcomes: list[object] = [SUSPEND, RuntimeError("x"), None, SUCCESS]

    class Hook:
        def consume_message_before(self, context: ConsumeHookContext) -> None:
            pass

        def consume_message_after(self, context: ConsumeHookContext) -> None:
            seen.append(context.properties.get(CONSUME_CONTEXT_TYPE))

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        context.suspend_current_queue_time_ms = 10
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    h = Harness(tmp_path, listener)
    h.ctx.hooks.append(Hook())
    h.add_queue(Q0)
    h.deliver(Q0, [0])
    await eventually(lambda: h.store.table() == {Q0: 1}, "offset 1")
    assert seen == ["FAILED", "EXCEPTION", "RETURNNULL", "SUCCESS"]
    await h.close()


# -- locks -----------------------------------------------------------------------------------


async def test_clustering_consumes_only_after_the_lock_is_won(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consume_orderly, "RETRY_AFTER_LOCK_REFUSED_S", 0.05)
    answers = [False, True]
    seen: list[int] = []
    h: Harness

    async def lock(mq: MessageQueue) -> bool:
        granted = answers.pop(0)
        if granted:
            h.process_queues[mq].mark_locked()
        return granted

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        assert h.process_queues[context.mq].locked
        seen.append(msgs[0].queue_offset)
        return SUCCESS

    h = Harness(tmp_path, listener, lock=lock)
    h.add_queue(Q0, locked=False)
    h.deliver(Q0, [0, 1])
    await eventually(lambda: seen == [0, 1], "both messages")
    assert answers == []
    await h.close()


async def test_expired_client_lock_stops_the_run_until_relocked(tmp_path: Path) -> None:
    clock = ManualClock()
    lock_calls: list[MessageQueue] = []
    seen: list[int] = []
    h: Harness

    async def lock(mq: MessageQueue) -> bool:
        lock_calls.append(mq)
        h.process_queues[mq].mark_locked()
        return True

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        seen.append(msgs[0].queue_offset)
        clock.advance(31)  # past the 30 s client-side lock life
        return SUCCESS

    h = Harness(tmp_path, listener, clock=clock, lock=lock)
    h.add_queue(Q0)
    h.deliver(Q0, range(3))
    await eventually(lambda: seen == [0, 1, 2], "three messages")
    assert len(lock_calls) >= 2  # re-locked after each expiry
    await h.close()


async def test_broadcasting_needs_no_lock_and_yields_after_the_continuous_cap(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    tasks: list[asyncio.Task[Any] | None] = []
    seen: list[int] = []

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        tasks.append(asyncio.current_task())
        seen.append(msgs[0].queue_offset)
        clock.advance(61)
        return SUCCESS

    h = Harness(tmp_path, listener, clock=clock, broadcasting=True)
    assert h.service.lock_service is None
    h.add_queue(Q0, locked=False)
    h.deliver(Q0, range(3))
    await eventually(lambda: seen == [0, 1, 2], "three messages")
    assert len(set(map(id, tasks))) == 3  # a new task after every 60 s run
    await h.close()


async def test_dropped_queue_is_not_consumed(tmp_path: Path) -> None:
    seen: list[int] = []

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        seen.append(msgs[0].queue_offset)
        return SUCCESS

    h = Harness(tmp_path, listener)
    pq = h.add_queue(Q0)
    pq.dropped = True
    h.deliver(Q0, [0])
    await h.service.shutdown(1.0)  # waits for nothing: no batch may have started
    assert seen == [] and len(pq) == 1
    await h.close()


# -- release and shutdown --------------------------------------------------------------------


async def test_try_release_waits_for_the_batch_in_flight(tmp_path: Path) -> None:
    gate = asyncio.Event()
    seen: list[int] = []

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        seen.append(msgs[0].queue_offset)
        await gate.wait()
        return SUCCESS

    h = Harness(tmp_path, listener)
    await h.store.load()
    pq = h.add_queue(Q0)
    h.deliver(Q0, [0, 1, 2])
    await eventually(lambda: seen == [0], "the first batch")
    assert not await h.service.try_release(Q0, pq, wait_s=0.05)
    assert not pq.dropped  # kept: the caller retries at the next rebalance
    releasing = asyncio.create_task(h.service.try_release(Q0, pq, wait_s=5.0))
    await asyncio.sleep(0)
    gate.set()
    assert await releasing
    assert pq.dropped
    assert seen == [0]  # no batch after the release started
    assert h.locks.unlocked == [Q0]
    reread = LocalFileOffsetStore("cg", h.ctx.instance.client_id, tmp_path)
    await reread.load()
    assert reread.table() == {Q0: 1}  # persisted before the unlock
    await h.close()


async def test_release_with_a_dead_lettered_message_pending_unlocks_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consume_orderly, "UNLOCK_DELAY_S", 0.05)
    calls: list[list[int]] = []

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        calls.append([m.queue_offset for m in msgs])
        context.suspend_current_queue_time_ms = 30_000  # no retry within the test
        return SUSPEND

    h = Harness(tmp_path, listener, batch=2, max_reconsume_times=1)
    pq = h.add_queue(Q0)
    batch = [msg(Q0, 0), msg(Q0, 1)]
    batch[0].reconsume_times = 1  # this failure sends it to the DLQ
    h.service.submit(batch, pq, Q0, pq.put(batch))
    await eventually(lambda: len(h.sent_back) == 1 and len(pq) == 1, "offset 0 dead-lettered")
    assert pq.has_consuming()  # offset 0: not committed until offset 1 succeeds
    assert await h.service.try_release(Q0, pq)
    del h.process_queues[Q0]  # what the rebalancer does on True
    assert h.locks.unlocked == []
    await eventually(lambda: h.locks.unlocked == [Q0], "the delayed unlock")
    assert calls == [[0, 1]]
    await h.close()


async def test_shutdown_waits_for_in_flight_batches_then_persists_and_unlocks(
    tmp_path: Path,
) -> None:
    started = asyncio.Event()
    release = asyncio.Event()
    finished: list[int] = []

    async def listener(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> object:
        started.set()
        await release.wait()
        finished.append(msgs[0].queue_offset)
        return SUCCESS

    h = Harness(tmp_path, listener)
    await h.store.load()
    h.service.start()
    h.add_queue(Q0)
    h.deliver(Q0, [0, 1, 2])
    await started.wait()
    stopping = asyncio.create_task(h.service.shutdown(5.0))
    await asyncio.sleep(0)  # shutdown's first step: no new batch from here on
    assert not stopping.done()  # it waits for the batch in flight ...
    release.set()
    await stopping
    assert finished == [0]  # ... which finished; no new one started
    assert h.locks.events == ["start", "stop", "unlock_all"]
    reread = LocalFileOffsetStore("cg", h.ctx.instance.client_id, tmp_path)
    await reread.load()
    assert reread.table() == {Q0: 1}
    h.deliver(Q0, [3])  # after shutdown: ignored
    await h.close()
    assert finished == [0]
