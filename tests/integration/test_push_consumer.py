"""The push consumer against a real `tidemq serve` process: tag filtering,
graceful shutdown resuming exactly after the last consumed message, retries
with restored topics and the DLQ, flow control, suspend / resume,
broadcasting with `offsets.json`."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.admin import AdminClient
from tidemq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeStatus,
    MessageModel,
)
from tidemq.client.consumer.push import AsyncPushConsumer, PushConsumer
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig
from tidemq.common.message import MessageExt
from tidemq.testing.client_support import create_topic, numbered_messages
from tidemq.testing.client_support import produce as produce_messages
from tidemq.testing.processes import FAST_DELAY_LEVELS, ServerProcess, free_port, serve
from tidemq.testing.waiting import eventually, unique_name

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("push") / "data"
    settings = {"delay_levels": FAST_DELAY_LEVELS, "max_reconsume_times": 3}
    with serve(data, flush="async", settings=settings) as process:
        yield process


async def produce(
    server: ServerProcess,
    topic: str,
    count: int,
    *,
    tags: str | None = "TagA",
    start: int = 0,
    keys: bool = False,
) -> None:
    messages = numbered_messages(
        topic, count, start=start, tags=tags or None, keys="k{}" if keys else None
    )
    await produce_messages(server.namesrv, messages)


class Recorder:
    """A concurrent listener recording bodies (thread-safe: it runs in the pool)."""

    def __init__(self, status: ConsumeStatus = ConsumeStatus.CONSUME_SUCCESS) -> None:
        self.status = status
        self.bodies: list[str] = []
        self.messages: list[MessageExt] = []
        self._lock = threading.Lock()

    def __call__(
        self, messages: list[MessageExt], context: ConsumeConcurrentlyContext
    ) -> ConsumeStatus:
        with self._lock:
            self.messages.extend(messages)
            self.bodies.extend(m.body.decode() for m in messages)
        return self.status

    def distinct(self) -> set[str]:
        with self._lock:
            return set(self.bodies)


def consumer(
    server: ServerProcess,
    group: str,
    topic: str,
    listener: object,
    expression: str = "*",
    **kwargs: object,
) -> AsyncPushConsumer:
    options: dict[str, object] = {
        "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        "rebalance_interval_s": 2.0,
    }
    options.update(kwargs)
    push = AsyncPushConsumer(group, server.namesrv, listener=listener, **options)  # type: ignore[arg-type]
    push.subscribe(topic, expression)
    return push


async def test_consumes_every_message_with_exact_tag_filter(server: ServerProcess) -> None:
    topic, group = unique_name("T"), unique_name("G")
    await create_topic(server.namesrv, topic)
    await produce(server, topic, 30, tags="TagA")
    await produce(server, topic, 30, tags="TagB", start=30)
    await produce(server, topic, 30, tags="TagC", start=60)
    recorder = Recorder()
    push = consumer(server, group, topic, recorder, "TagA || TagC")
    await push.start()
    try:
        wanted = {f"m{i}" for i in itertools.chain(range(30), range(60, 90))}
        await eventually(lambda: recorder.distinct() >= wanted, "TagA and TagC messages")
        assert all(m.tags in ("TagA", "TagC") for m in recorder.messages)
        assert all(m.topic == topic for m in recorder.messages)
        # The topic's 4 queues and the retry queue; the retry topic's route can
        # arrive after the messages have been consumed, so wait for it.
        await eventually(lambda: len(push.assigned_queues()) == 4 + 1, "5 queues assigned")
        info = push.running_info()  # what GET_CONSUMER_RUNNING_INFO answers
        assert info["properties"]["consumerGroup"] == group
        assert len(info["mqTable"]) == 5
        assert {s["topic"] for s in info["subscriptionSet"]} == {topic, f"%RETRY%{group}"}
    finally:
        await push.shutdown()
    assert not recorder.distinct() & {f"m{i}" for i in range(30, 60)}


async def test_graceful_shutdown_persists_offsets_for_the_next_consumer(
    server: ServerProcess,
) -> None:
    topic, group = unique_name("T"), unique_name("G")
    await create_topic(server.namesrv, topic)
    await produce(server, topic, 40)
    first = Recorder()
    push = consumer(server, group, topic, first)
    await push.start()
    await eventually(lambda: len(first.distinct()) == 40, "the first 40 messages")
    await push.shutdown()
    assert len(first.bodies) == 40  # nothing consumed twice

    await produce(server, topic, 25, start=40)
    second = Recorder()
    # LAST_OFFSET would skip everything if the offsets were lost (and FIRST
    # would re-deliver): the stored offsets must decide.
    push = consumer(
        server,
        group,
        topic,
        second,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    await push.start()
    try:
        await eventually(lambda: len(second.distinct()) == 25, "the 25 new messages")
    finally:
        await push.shutdown()
    assert sorted(second.bodies) == sorted(f"m{i}" for i in range(40, 65))


async def test_blocking_push_consumer(server: ServerProcess) -> None:
    topic, group = unique_name("T"), unique_name("G")
    await create_topic(server.namesrv, topic)
    await produce(server, topic, 20)
    recorder = Recorder()
    push = PushConsumer(
        group,
        server.namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    push.subscribe(topic, "*")
    push.register_listener(recorder)
    await asyncio.to_thread(push.start)
    try:
        await eventually(lambda: len(recorder.distinct()) == 20, "20 messages")
        assert len(await asyncio.to_thread(push.assigned_queues)) == 5
    finally:
        await asyncio.to_thread(push.shutdown)


async def test_failed_messages_come_back_then_land_in_the_dlq(server: ServerProcess) -> None:
    topic, group = unique_name("T"), unique_name("G")
    await create_topic(server.namesrv, topic, queues=2)
    seen: list[tuple[str, int, str]] = []
    lock = threading.Lock()

    def listener(messages: list[MessageExt], context: ConsumeConcurrentlyContext) -> ConsumeStatus:
        message = messages[0]
        body = message.body.decode()
        with lock:
            seen.append((body, message.reconsume_times, message.topic))
        if body == "m0":
            return ConsumeStatus.RECONSUME_LATER
        if body == "m1":
            raise RuntimeError("listener failure counts as RECONSUME_LATER")
        return ConsumeStatus.CONSUME_SUCCESS

    push = consumer(server, group, topic, listener, max_reconsume_times=2)
    await push.start()
    try:
        await produce(server, topic, 3, keys=True)

        def attempts(body: str) -> list[int]:
            with lock:
                return [times for b, times, _ in seen if b == body]

        await eventually(
            lambda: attempts("m0") == [0, 1, 2] and attempts("m1") == [0, 1, 2],
            "three attempts of m0 and m1",
        )
        with lock:
            assert {t for _, _, t in seen} == {topic}  # the original topic is restored
        assert attempts("m2") == [0]

        async with AdminClient(server.namesrv) as admin:

            async def in_dlq() -> bool:
                found = set()
                for key in ("k0", "k1"):
                    try:
                        hits = await admin.query_by_key(f"%DLQ%{group}", key, 8)
                    except Exception:
                        return False
                    found.update(m.body.decode() for m in hits)
                return found == {"m0", "m1"}

            await eventually(in_dlq, "m0 and m1 in the DLQ")
        # no fourth attempt
        assert attempts("m0") == [0, 1, 2]
    finally:
        await push.shutdown()


async def test_flow_control_pauses_and_resumes(server: ServerProcess) -> None:
    topic, group = unique_name("T"), unique_name("G")
    await create_topic(server.namesrv, topic, queues=1)
    await produce(server, topic, 150)
    threshold, batch = 10, 8
    cached: list[int] = []
    bodies: set[str] = set()
    holder: list[AsyncPushConsumer] = []

    def flow_controlled() -> bool:
        pull = holder[0].pull_service
        return pull is not None and pull.flow_control_times > 0

    async def slow(
        messages: list[MessageExt], context: ConsumeConcurrentlyContext
    ) -> ConsumeStatus:
        pq = holder[0].process_queue(context.mq)
        if pq is not None:
            cached.append(pq.count)
        # Consume nothing until the buffer is full: pulling has been paused once.
        await eventually(flow_controlled, "flow control to pause the pulling")
        bodies.update(m.body.decode() for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    push = consumer(
        server,
        group,
        topic,
        slow,
        pull_threshold_for_queue=threshold,
        pull_batch_size=batch,
        consume_thread_count=2,
    )
    holder.append(push)
    await push.start()
    try:
        await eventually(lambda: len(bodies) == 150, "every message despite flow control")
        pull = push.pull_service
        assert pull is not None
        assert pull.flow_control_times > 0  # pulling paused ...
        assert pull.messages_pulled >= 150  # ... and resumed
        assert max(cached) <= threshold + batch
        assert max(cached) > threshold  # the buffer did fill up to the limit
    finally:
        await push.shutdown()


async def test_suspend_sends_no_new_pull_and_resume_pulls_again(server: ServerProcess) -> None:
    topic, group = unique_name("T"), unique_name("G")
    [mq] = await create_topic(server.namesrv, topic, queues=1)
    await produce(server, topic, 5)
    recorder = Recorder()
    push = consumer(server, group, topic, recorder)
    await push.start()
    try:
        await eventually(lambda: len(recorder.distinct()) == 5, "m0..m4 consumed")
        held = push.assigned_queues()
        pull = push.pull_service
        assert pull is not None
        request = pull.request(mq)
        assert request is not None
        push.suspend()
        assert push.suspended
        # the long poll already at the broker completes (with m5), as in Java
        await produce(server, topic, 1, start=5)
        await eventually(lambda: request.suspended_waits >= 1, "the pull loop suspended")
        await produce(server, topic, 5, start=6)
        looks = request.suspended_waits
        await eventually(
            lambda: request.suspended_waits >= looks + 2, "two more looks while suspended"
        )
        assert not recorder.distinct() & {f"m{i}" for i in range(6, 11)}  # never pulled
        assert push.assigned_queues() == held
        push.resume()
        await eventually(lambda: len(recorder.distinct()) == 11, "m5..m10 after resume")
    finally:
        await push.shutdown()


async def test_broadcasting_delivers_everything_to_everyone_and_resumes(
    server: ServerProcess, tmp_path: Path
) -> None:
    topic, group = unique_name("T"), unique_name("G")
    await create_topic(server.namesrv, topic, queues=3)
    await produce(server, topic, 45)
    recorders = [Recorder() for _ in range(3)]

    def make(index: int, recorder: Recorder) -> AsyncPushConsumer:
        return consumer(
            server,
            group,
            topic,
            recorder,
            message_model=MessageModel.BROADCASTING,
            instance_name=f"bc{index}",
            offset_store_dir=tmp_path,
        )

    pushes = [make(i, r) for i, r in enumerate(recorders)]
    for push in pushes:
        await push.start()
    everything = {f"m{i}" for i in range(45)}
    try:
        for recorder in recorders:
            await eventually(lambda r=recorder: r.distinct() == everything, "all 45 each")
    finally:
        for push in pushes:
            await push.shutdown()
    files = sorted(tmp_path.rglob("offsets.json"))
    assert len(files) == 3

    await produce(server, topic, 30, start=45)
    again = [Recorder() for _ in range(3)]
    pushes = [make(i, r) for i, r in enumerate(again)]
    for push in pushes:
        await push.start()
    fresh = {f"m{i}" for i in range(45, 75)}
    try:
        for recorder in again:
            await eventually(lambda r=recorder: r.distinct() >= fresh, "the 30 new ones each")
    finally:
        for push in pushes:
            await push.shutdown()
    for recorder in again:
        # resumed from offsets.json: nothing of the first 45 again (FIRST_OFFSET
        # would re-deliver them all if the file were not used)
        assert sorted(recorder.bodies) == sorted(fresh)


async def test_start_refuses_bad_setups(server: ServerProcess) -> None:
    with pytest.raises(ValueError, match="consume_thread_count"):
        AsyncPushConsumer(unique_name("G"), server.namesrv, consume_thread_count=0)
    with pytest.raises(ValueError, match="yyyyMMddHHmmss"):
        AsyncPushConsumer(unique_name("G"), server.namesrv, consume_timestamp="2026-01-01")
    with pytest.raises(ValueError, match="group"):
        AsyncPushConsumer(" ", server.namesrv)
    push = AsyncPushConsumer(unique_name("G"), server.namesrv)
    push.subscribe(unique_name("T"))
    with pytest.raises(ValueError, match="listener"):
        await push.start()
    push = AsyncPushConsumer(unique_name("G"), server.namesrv, listener=Recorder())
    with pytest.raises(ValueError, match="subscribe"):
        await push.start()
    with pytest.raises(ValueError, match="empty tag"):
        push.subscribe("T", "TagA || ")
    push.subscribe(unique_name("T"))
    dead = f"127.0.0.1:{free_port()}"
    push = AsyncPushConsumer(
        unique_name("G"), listener=Recorder(), client_config=ClientConfig(namesrv=dead)
    )
    push.subscribe(unique_name("T"))
    with pytest.raises(ClientError) as caught:
        await push.start()
    assert caught.value.transport_failure and dead in str(caught.value)
    await push.shutdown()  # harmless after a failed start


async def test_a_consumer_started_before_its_topic_exists_consumes_once_created(
    server: ServerProcess,
) -> None:
    topic, group = unique_name("Later"), unique_name("G")
    recorder = Recorder()
    push = consumer(
        server,
        group,
        topic,
        recorder,
        rebalance_interval_s=600.0,  # the new route alone must trigger the rebalance
        client_config=ClientConfig(namesrv=server.namesrv, poll_namesrv_interval_s=0.5),
    )
    await push.start()  # only a warning: the topic does not exist yet
    try:
        await produce(server, topic, 12)  # auto-creates the topic
        everything = {f"m{i}" for i in range(12)}
        await eventually(lambda: recorder.distinct() == everything, "the 12 messages")
    finally:
        await push.shutdown()


async def test_admin_reset_offset_replays_the_history(server: ServerProcess) -> None:
    topic, group = unique_name("T"), unique_name("G")
    await create_topic(server.namesrv, topic, queues=2)
    await produce(server, topic, 15)
    recorder = Recorder()
    push = consumer(server, group, topic, recorder)
    await push.start()
    try:
        everything = {f"m{i}" for i in range(15)}
        await eventually(lambda: recorder.distinct() == everything, "the 15 messages")
        assert len(recorder.bodies) == 15
        async with AdminClient(server.namesrv) as admin:
            # RESET_CONSUMER_CLIENT_OFFSET reaches the running consumer
            await admin.reset_offset(group, topic, 0)
        await eventually(lambda: len(recorder.bodies) == 30, "the replayed history")
        assert sorted(recorder.bodies) == sorted([*everything, *everything])
    finally:
        await push.shutdown()


async def test_broadcasting_resumes_without_an_instance_name_and_refuses_a_shared_file(
    server: ServerProcess, tmp_path: Path
) -> None:
    topic, group = unique_name("T"), unique_name("G")
    await create_topic(server.namesrv, topic, queues=2)
    await produce(server, topic, 10)

    def make(recorder: Recorder) -> AsyncPushConsumer:
        return consumer(
            server,
            group,
            topic,
            recorder,
            message_model=MessageModel.BROADCASTING,
            offset_store_dir=tmp_path,
        )

    first = Recorder()
    push = make(first)
    await push.start()
    try:
        await eventually(lambda: len(first.distinct()) == 10, "the first 10")
        twin = make(Recorder())
        with pytest.raises(ClientError, match="instance_name"):
            await twin.start()
        await twin.shutdown()
    finally:
        await push.shutdown()
    (owner,) = [p.name for p in tmp_path.iterdir()]
    assert owner.endswith("@DEFAULT")

    await produce(server, topic, 5, start=10)
    second = Recorder()
    push = make(second)
    await push.start()
    try:
        fresh = {f"m{i}" for i in range(10, 15)}
        await eventually(lambda: second.distinct() >= fresh, "the 5 new ones")
    finally:
        await push.shutdown()
    assert sorted(second.bodies) == sorted(fresh)
