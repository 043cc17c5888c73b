"""The lite pull consumer against a real `tidemq serve` process: assign + poll,
seeks, commits (sync, async, auto), pause/resume, poll timeouts, errors,
subscribe mode with two consumers sharing a topic across a rebalance,
broadcasting with offsets.json, and the blocking wrapper."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.admin import AdminClient
from tidemq.client.consumer.listener import MessageModel
from tidemq.client.consumer.lite_pull import AsyncLitePullConsumer, LitePullConsumer
from tidemq.client.errors import ClientError
from tidemq.common.message import MessageExt, MessageQueue
from tidemq.protocol import ResponseCode
from tidemq.testing.client_support import create_topic, numbered_messages
from tidemq.testing.client_support import produce as produce_messages
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.waiting import HANG_GUARD_S, eventually, unique_name, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("lite") / "data") as process:
        yield process


async def make_topic(server: ServerProcess, queues: int = 2) -> list[MessageQueue]:
    return await create_topic(server.namesrv, unique_name("LiteTopic"), queues=queues)


async def produce(
    server: ServerProcess,
    queues: Sequence[MessageQueue],
    per_queue: int,
    *,
    tag: str | None = None,
    prefix: str = "m",
) -> list[str]:
    """`per_queue` messages to each queue; their bodies."""
    bodies: list[str] = []
    for mq in queues:
        body = f"{prefix}-{mq.queue_id}-{{}}"
        messages = numbered_messages(mq.topic, per_queue, body=body, tags=tag)
        bodies += await produce_messages(server.namesrv, messages, queue=mq)
    return bodies


def lite(server: ServerProcess, group: str, **options: object) -> AsyncLitePullConsumer:
    settings: dict[str, object] = {
        "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        "poll_timeout_s": 1.0,
        "rebalance_interval_s": 2.0,
    }
    settings.update(options)
    return AsyncLitePullConsumer(group, server.namesrv, **settings)  # type: ignore[arg-type]


async def poll_until(
    consumer: AsyncLitePullConsumer, count: int, batch_sizes: list[int] | None = None
) -> list[MessageExt]:
    """Poll until `count` messages arrived (AssertionError at the deadline)."""
    got: list[MessageExt] = []

    async def enough() -> bool:
        batch = await consumer.poll(0.5)
        if batch and batch_sizes is not None:
            batch_sizes.append(len(batch))
        got.extend(batch)
        return len(got) >= count

    await eventually(enough, f"{count} messages polled")
    return got


async def committed_on_broker(server: ServerProcess, group: str, topic: str) -> dict[int, int]:
    async with AdminClient(server.namesrv) as admin:
        return {r.queue_id: r.consumer_offset for r in await admin.consumer_progress(group, topic)}


async def test_assign_poll_in_order_and_commit_sync(server: ServerProcess) -> None:
    queues = await make_topic(server)
    bodies = await produce(server, queues, 6)
    group = unique_name("cg_assign")
    consumer = lite(server, group, auto_commit=False, pull_batch_size=4)
    consumer.assign(queues)
    await consumer.start()
    try:
        assert consumer.assignment() == set(queues)
        sizes: list[int] = []
        got = await poll_until(consumer, len(bodies), batch_sizes=sizes)
        assert sorted(m.body.decode() for m in got) == sorted(bodies)
        for mq in queues:
            offsets = [m.queue_offset for m in got if m.queue_id == mq.queue_id]
            assert offsets == list(range(6))
        assert max(sizes) <= 4  # pull_batch_size
        await consumer.commit_sync()
        assert await consumer.committed(queues[0]) == 6
        assert await committed_on_broker(server, group, queues[0].topic) == {0: 6, 1: 6}
        # Explicit offsets, asynchronously, with a callback.
        outcomes: list[BaseException | None] = []
        await consumer.commit_async({queues[1]: 2}, outcomes.append)
        assert outcomes == [None]
        assert (await committed_on_broker(server, group, queues[0].topic))[1] == 2
    finally:
        await consumer.shutdown()
    # auto_commit is off: shutdown persisted what was committed, nothing more.
    assert await committed_on_broker(server, group, queues[0].topic) == {0: 6, 1: 2}


async def test_restart_resumes_from_the_committed_offset(server: ServerProcess) -> None:
    queues = await make_topic(server, queues=1)
    await produce(server, queues, 5)
    group = unique_name("cg_resume")
    first = lite(server, group, auto_commit=False)
    first.assign(queues)
    await first.start()
    try:
        got = await poll_until(first, 5)
        await first.commit_sync({queues[0]: got[2].queue_offset + 1})
    finally:
        await first.shutdown()
    second = lite(server, group, auto_commit=False)
    second.assign(queues)
    await second.start()
    try:
        again = await poll_until(second, 2)
        assert [m.queue_offset for m in again] == [3, 4]
    finally:
        await second.shutdown()


async def test_seeks(server: ServerProcess) -> None:
    queues = await make_topic(server, queues=1)
    mq = queues[0]
    await produce(server, queues, 10)
    consumer = lite(server, unique_name("cg_seek"), auto_commit=False, pull_batch_size=32)
    consumer.assign([mq])
    await consumer.start()
    try:
        everything = await poll_until(consumer, 10)
        assert [m.queue_offset for m in everything] == list(range(10))

        await consumer.seek(mq, 5)
        after_seek = await poll_until(consumer, 5)
        assert [m.queue_offset for m in after_seek] == list(range(5, 10))

        await consumer.seek_to_begin(mq)
        from_begin = await poll_until(consumer, 10)
        assert [m.queue_offset for m in from_begin] == list(range(10))

        # By timestamp: the first offset stored at or after message 6's time.
        stamp = everything[6].store_timestamp
        target = await consumer.offset_for_timestamp(mq, stamp)
        assert everything[target].store_timestamp >= stamp
        assert target == 0 or everything[target - 1].store_timestamp < stamp
        await consumer.seek(mq, target)
        by_time = await poll_until(consumer, 10 - target)
        assert by_time[0].queue_offset == target

        await consumer.seek_to_end(mq)
        assert await consumer.poll(0.3) == []
        await produce(server, queues, 1, prefix="late")
        late = await poll_until(consumer, 1)
        assert [(m.queue_offset, m.body) for m in late] == [(10, b"late-0-0")]

        for bad in (-1, 12, 1000):
            with pytest.raises(ClientError, match="outside its range") as error:
                await consumer.seek(mq, bad)
            assert error.value.code == ResponseCode.INVALID_PARAMETER
        other = MessageQueue(mq.topic, mq.broker_name, 7)
        with pytest.raises(ClientError, match="not assigned"):
            await consumer.seek(other, 0)
    finally:
        await consumer.shutdown()


async def test_seek_then_commit_sets_the_group_offset(server: ServerProcess) -> None:
    queues = await make_topic(server, queues=1)
    mq = queues[0]
    await produce(server, queues, 4)
    group = unique_name("cg_seek_commit")
    consumer = lite(server, group, auto_commit=False)
    consumer.assign([mq])
    await consumer.start()
    try:
        await poll_until(consumer, 4)
        await consumer.seek(mq, 1)
        await consumer.commit_sync()
        assert (await committed_on_broker(server, group, mq.topic))[0] == 1
    finally:
        await consumer.shutdown()


async def test_auto_commit_commits_what_was_polled(server: ServerProcess) -> None:
    queues = await make_topic(server, queues=1)
    await produce(server, queues, 3)
    group = unique_name("cg_auto")
    consumer = lite(server, group, auto_commit=True, auto_commit_interval_s=0.2)
    consumer.assign(queues)
    await consumer.start()
    try:
        await poll_until(consumer, 3)

        async def committed() -> bool:
            await consumer.poll(0.1)  # a poll after the interval commits
            return (await committed_on_broker(server, group, queues[0].topic)).get(0) == 3

        await eventually(committed, "the auto-commit of the polled messages")
        await produce(server, queues, 2, prefix="more")
        await poll_until(consumer, 2)
    finally:
        await consumer.shutdown()  # auto-commit: the last polled batch is committed
    assert (await committed_on_broker(server, group, queues[0].topic))[0] == 5


async def test_poll_timeout_returns_empty_after_the_timeout(server: ServerProcess) -> None:
    queues = await make_topic(server, queues=1)
    consumer = lite(server, unique_name("cg_timeout"))
    consumer.assign(queues)
    await consumer.start()
    try:
        for timeout in (0.0, 0.5):
            started = time.monotonic()
            async with asyncio.timeout(HANG_GUARD_S):  # a hang guard, not a speed claim
                assert await consumer.poll(timeout) == []
            assert time.monotonic() - started + 0.01 >= timeout
    finally:
        await consumer.shutdown()


async def test_pause_and_resume(server: ServerProcess) -> None:
    q0, q1 = await make_topic(server)
    consumer = lite(server, unique_name("cg_pause"), auto_commit=False)
    consumer.assign([q0, q1])
    await consumer.start()
    try:
        consumer.pause([q0])
        await produce(server, [q0, q1], 4)
        got = await poll_until(consumer, 4)
        assert {m.queue_id for m in got} == {q1.queue_id}
        assert await consumer.poll(1.0) == []  # q0 stays held back
        info = consumer.running_info()["mqTable"]
        assert info[f"{q0.topic}@{q0.broker_name}@{q0.queue_id}"]["paused"] is True
        assert info[f"{q1.topic}@{q1.broker_name}@{q1.queue_id}"]["consumedOffset"] == 4
        consumer.resume([q0])
        resumed = await poll_until(consumer, 4)
        assert [m.queue_offset for m in resumed if m.queue_id == q0.queue_id] == [0, 1, 2, 3]
    finally:
        await consumer.shutdown()


async def test_tag_filter_and_unmatched_records_move_the_position(server: ServerProcess) -> None:
    queues = await make_topic(server, queues=1)
    group = unique_name("cg_tags")
    await produce(server, queues, 3, tag="TagB", prefix="b")
    await produce(server, queues, 2, tag="TagA", prefix="a")
    await produce(server, queues, 3, tag="TagB", prefix="b2")
    consumer = lite(server, group, auto_commit=False)
    consumer.subscribe(queues[0].topic, "TagA")
    await consumer.start()
    try:
        got = await poll_until(consumer, 2)
        assert [m.body for m in got] == [b"a-0-0", b"a-0-1"]
        assert await consumer.poll(1.0) == []
        await consumer.commit_sync()  # past the trailing TagB records too
        assert (await committed_on_broker(server, group, queues[0].topic))[0] == 8
    finally:
        await consumer.shutdown()


async def test_mode_errors_and_bad_arguments(server: ServerProcess) -> None:
    queues = await make_topic(server, queues=1)
    consumer = lite(server, unique_name("cg_errors"))
    consumer.subscribe(queues[0].topic)
    with pytest.raises(ClientError, match="mutually exclusive"):
        consumer.assign(queues)
    with pytest.raises(ClientError, match="start"):
        await consumer.poll(0)
    with pytest.raises(ValueError, match="empty tag"):
        consumer.subscribe(queues[0].topic, "TagA ||")
    await consumer.shutdown()
    with pytest.raises(ClientError, match="shut down"):
        consumer.subscribe(queues[0].topic)

    assigned = lite(server, unique_name("cg_errors"))
    assigned.assign(queues)
    with pytest.raises(ClientError, match="mutually exclusive"):
        assigned.subscribe(queues[0].topic)
    await assigned.start()
    try:
        with pytest.raises(ClientError, match="not assigned"):
            await assigned.commit_sync({MessageQueue(queues[0].topic, "nobroker", 0): 1})
        with pytest.raises(ValueError, match=">= 0"):
            await assigned.commit_sync({queues[0]: -5})
        with pytest.raises(ValueError, match=">= 0"):
            assigned.commit_async({queues[0]: -5})  # bad input fails at once
        with pytest.raises(ValueError, match="must be an int"):
            await assigned.seek(queues[0], "3")  # type: ignore[arg-type]
        with pytest.raises(ClientError) as missing:
            await assigned.fetch_message_queues("NoSuchLiteTopic")
        assert missing.value.code == ResponseCode.TOPIC_NOT_EXIST
        assert await assigned.fetch_message_queues(queues[0].topic) == queues
    finally:
        await assigned.shutdown()

    for bad_group in ("", "has space", "DEFAULT_CONSUMER"):
        with pytest.raises(ValueError):
            AsyncLitePullConsumer(bad_group, server.namesrv)
    with pytest.raises(ValueError, match="pull_batch_size"):
        AsyncLitePullConsumer("cg_ok", server.namesrv, pull_batch_size=0)
    with pytest.raises(ValueError, match="yyyyMMddHHmmss"):
        AsyncLitePullConsumer("cg_ok", server.namesrv, consume_timestamp="yesterday")


async def test_two_subscribers_share_queues_and_survive_a_rebalance(
    server: ServerProcess,
) -> None:
    queues = await make_topic(server, queues=4)
    topic = queues[0].topic
    group = unique_name("cg_share")
    first = lite(server, group, auto_commit=False)
    second = lite(server, group, auto_commit=False)
    first.subscribe(topic)
    second.subscribe(topic)
    await first.start()
    await second.start()
    try:

        async def balanced() -> bool:
            a, b = first.assignment(), second.assignment()
            return len(a) == 2 and len(b) == 2 and a | b == set(queues)

        await eventually(balanced, "two consumers holding two queues each")
        bodies = await produce(server, queues, 5)
        polled: list[MessageExt] = []

        async def both_polled_all() -> bool:
            for consumer in (first, second):
                batch = await consumer.poll(0.2)
                assert {(m.topic, m.queue_id) for m in batch} <= {
                    (q.topic, q.queue_id) for q in consumer.assignment()
                }
                polled.extend(batch)
            return len(polled) >= len(bodies)

        await eventually(both_polled_all, "every message polled by the two consumers")
        counts = Counter(m.body.decode() for m in polled)
        assert set(counts) == set(bodies)
        assert max(counts.values()) == 1  # each message once while both commit
        await first.commit_sync()
        await second.commit_sync()
        moved = second.assignment()
    finally:
        await second.shutdown()

    try:

        async def took_over() -> bool:
            return first.assignment() == set(queues)

        await eventually(took_over, "the first consumer holding every queue")
        more = await produce(server, queues, 3, prefix="after")
        later: list[MessageExt] = []

        async def polled_after() -> bool:
            later.extend(await first.poll(0.5))
            return set(more) <= {m.body.decode() for m in later}

        await eventually(polled_after, "the messages sent after the rebalance polled")
        repeated = [m for m in later if not m.body.decode().startswith("after")]
        # Redelivery only from queues that moved (at-least-once across a rebalance).
        assert {m.queue_id for m in repeated} <= {q.queue_id for q in moved}
    finally:
        await first.shutdown()


async def test_broadcasting_each_consumer_gets_everything_and_keeps_offsets_json(
    server: ServerProcess, tmp_path: Path
) -> None:
    queues = await make_topic(server)
    group = unique_name("cg_bcast")
    bodies = await produce(server, queues, 3)
    consumers = [
        lite(
            server,
            group,
            message_model=MessageModel.BROADCASTING,
            offset_store_dir=tmp_path,
            instance_name=f"bcast{i}",
            auto_commit=False,
        )
        for i in range(2)
    ]
    for consumer in consumers:
        consumer.subscribe(queues[0].topic)
        await consumer.start()
    try:
        for consumer in consumers:
            got = await poll_until(consumer, len(bodies))
            assert sorted(m.body.decode() for m in got) == sorted(bodies)
            await consumer.commit_sync()
            path = consumer.offset_store.path  # type: ignore[union-attr]
            table = json.loads(path.read_text())["offsetTable"]
            assert table == {f"{q.topic}@{q.broker_name}@{q.queue_id}": 3 for q in queues}
    finally:
        for consumer in consumers:
            await consumer.shutdown()
    # A restart with the same instance name resumes from offsets.json.
    await produce(server, queues[:1], 1, prefix="new")
    again = lite(
        server,
        group,
        message_model=MessageModel.BROADCASTING,
        offset_store_dir=tmp_path,
        instance_name="bcast0",
    )
    again.subscribe(queues[0].topic)
    await again.start()
    try:
        got = await poll_until(again, 1)
        assert [m.body for m in got] == [b"new-0-0"]
        assert await again.poll(0.5) == []
    finally:
        await again.shutdown()


def test_blocking_consumer(server: ServerProcess) -> None:
    queues = asyncio.run(make_topic(server, queues=1))
    bodies = asyncio.run(produce(server, queues, 3))
    group = unique_name("cg_blocking")
    consumer = LitePullConsumer(
        group,
        server.namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        auto_commit=False,
    )
    consumer.assign(queues)
    with consumer:
        assert consumer.assignment() == set(queues)

        def polled(into: list[MessageExt], count: int) -> bool:
            into.extend(consumer.poll(0.5))
            return len(into) >= count

        got: list[MessageExt] = []
        wait_until(lambda: polled(got, 3), "three messages")
        assert [m.body.decode() for m in got] == bodies
        consumer.commit_async().result(timeout=10)
        assert consumer.committed(queues[0]) == 3
        consumer.seek_to_begin(queues[0])
        again: list[MessageExt] = []
        wait_until(lambda: polled(again, 3), "the three messages again")
        assert [m.queue_offset for m in again] == [0, 1, 2]
    assert asyncio.run(committed_on_broker(server, group, queues[0].topic)) == {0: 3}


async def test_flow_control_pauses_pulling_and_polls_resume_it(
    server: ServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tidemq.client")
    queues = await make_topic(server, queues=1)
    mq = queues[0]
    bodies = await produce(server, queues, 30)
    consumer = lite(
        server,
        unique_name("cg_flow"),
        auto_commit=False,
        pull_batch_size=2,
        pull_threshold_for_queue=5,
    )
    consumer.assign(queues)
    await consumer.start()
    try:

        async def saturated() -> bool:
            return consumer.buffered(mq) > 5

        await eventually(saturated, "the queue's buffer to pass its threshold")
        # Over the threshold nothing more is pulled (5 + one batch at most) while the
        # pull loop turns ten pulls down.
        refused = consumer._flow_control_count

        def held_back() -> bool:
            assert consumer.buffered(mq) <= 5 + 2
            return consumer._flow_control_count >= refused + 10

        await eventually(held_back, "ten pulls refused by flow control", interval=0.01)
        got = await poll_until(consumer, 30)
        assert [m.body.decode() for m in got] == bodies
        assert consumer.buffered() == 0
    finally:
        await consumer.shutdown()
    # Reading a backlog is normal backpressure: logged at INFO (once per 1000, as
    # Java does), never as a warning a user would see printed.
    flow_lines = [r for r in caplog.records if "flow control on" in r.getMessage()]
    assert flow_lines and all(r.levelno == logging.INFO for r in flow_lines)


async def test_reassign_while_running(server: ServerProcess) -> None:
    q0, q1 = await make_topic(server)
    group = unique_name("cg_reassign")
    consumer = lite(server, group, auto_commit=True)
    consumer.assign([q0])
    await consumer.start()
    try:
        await produce(server, [q0, q1], 2)
        first = await poll_until(consumer, 2)
        assert {m.queue_id for m in first} == {q0.queue_id}
        consumer.assign([q1])
        assert consumer.assignment() == {q1}
        second = await poll_until(consumer, 2)
        assert {m.queue_id for m in second} == {q1.queue_id}

        async def released() -> bool:  # auto-commit: the dropped queue's position is stored
            return (await committed_on_broker(server, group, q0.topic)).get(q0.queue_id) == 2

        await eventually(released, "the released queue's offset")
    finally:
        await consumer.shutdown()


async def test_admin_reset_offset_moves_a_running_consumer(server: ServerProcess) -> None:
    queues = await make_topic(server, queues=1)
    mq = queues[0]
    await produce(server, queues, 4)
    group = unique_name("cg_reset")
    consumer = lite(server, group, auto_commit=False)
    consumer.subscribe(mq.topic)
    await consumer.start()
    try:
        first = await poll_until(consumer, 4)
        assert [m.queue_offset for m in first] == [0, 1, 2, 3]
        await consumer.commit_sync()
        stamp = first[2].store_timestamp
        expected = next(m.queue_offset for m in first if m.store_timestamp >= stamp)
        async with AdminClient(server.namesrv) as admin:
            await admin.reset_offset(group, mq.topic, stamp)
        again = await poll_until(consumer, 1)
        assert again[0].queue_offset == expected
        assert await consumer.committed(mq) == expected
    finally:
        await consumer.shutdown()


async def test_a_consumer_joining_mid_stream_loses_nothing(server: ServerProcess) -> None:
    queues = await make_topic(server, queues=4)
    topic = queues[0].topic
    group = unique_name("cg_join")
    members = [lite(server, group, auto_commit=True, auto_commit_interval_s=0.2) for _ in range(2)]
    for member in members:
        member.subscribe(topic)
        await member.start()
    polled: list[tuple[int, MessageExt]] = []  # (consumer index, message)
    stop = asyncio.Event()

    async def drain(index: int, member: AsyncLitePullConsumer) -> None:
        while not stop.is_set():
            polled.extend((index, m) for m in await member.poll(0.2))

    drains = [asyncio.create_task(drain(i, m)) for i, m in enumerate(members)]
    joiner = lite(server, group, auto_commit=True, auto_commit_interval_s=0.2)
    try:
        bodies = await produce(server, queues, 10, prefix="before")
        joiner.subscribe(topic)
        await joiner.start()
        drains.append(asyncio.create_task(drain(2, joiner)))
        everyone = [*members, joiner]

        async def three_way() -> bool:
            held = [c.assignment() for c in everyone]
            return all(held) and sum(map(len, held)) == 4 and set().union(*held) == set(queues)

        await eventually(three_way, "the three consumers sharing the four queues")
        bodies += await produce(server, queues, 10, prefix="after")

        async def all_polled() -> bool:
            return set(bodies) <= {m.body.decode() for _, m in polled}

        await eventually(all_polled, "every message polled at least once")
    finally:
        stop.set()
        await asyncio.gather(*drains)
        for member in [*members, joiner]:
            await member.shutdown()
    counts = Counter(m.body.decode() for _, m in polled)
    repeated = {body for body, n in counts.items() if n > 1}
    # Duplicates come only from before the join, when queues moved to the joiner.
    assert all(body.startswith("before") for body in repeated)
    assert not [b for b in counts if b not in bodies]
