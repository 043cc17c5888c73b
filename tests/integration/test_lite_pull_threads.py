"""The blocking LitePullConsumer's poll runs on the application's thread, apart
from the loop thread that pulls, releases queues and commits. Against a real
`tidemq serve`: polls racing a reassignment and a rebalance never return a
queue the consumer no longer holds, and the committed offset never runs ahead
of what poll returned (and catches up with it)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.admin import AdminClient
from tidemq.client.consumer.lite_pull import LitePullConsumer
from tidemq.common.message import MessageQueue
from tidemq.testing.client_support import create_topic, numbered_messages
from tidemq.testing.client_support import produce as produce_messages
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.waiting import HANG_GUARD_S, unique_name, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("lite-threads") / "data") as process:
        yield process


def make_topic(server: ServerProcess, queues: int) -> list[MessageQueue]:
    return asyncio.run(create_topic(server.namesrv, unique_name("LiteThreads"), queues=queues))


def fill(server: ServerProcess, queues: list[MessageQueue], per_queue: int) -> None:
    async def send() -> None:
        for mq in queues:
            messages = numbered_messages(mq.topic, per_queue, body=f"q{mq.queue_id}-{{}}")
            await produce_messages(server.namesrv, messages, queue=mq, batch_size=50)

    asyncio.run(send())


def broker_offsets(server: ServerProcess, group: str, topic: str) -> dict[int, int]:
    async def read() -> dict[int, int]:
        async with AdminClient(server.namesrv) as admin:
            progress = await admin.consumer_progress(group, topic)
        return {row.queue_id: row.consumer_offset for row in progress}

    return asyncio.run(read())


def consumer(server: ServerProcess, group: str, **options: object) -> LitePullConsumer:
    settings: dict[str, object] = {
        "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        "rebalance_interval_s": 1.0,
    }
    settings.update(options)
    return LitePullConsumer(group, server.namesrv, **settings)  # type: ignore[arg-type]


def test_polls_racing_a_reassignment_never_return_the_released_queue(
    server: ServerProcess,
) -> None:
    """Each round: q0 has batches buffered, the poller is let go and at the same
    time q0 is released. A poll that starts after ``assign([q1])`` returned
    must not return q0's messages, and (auto-commit) q0's committed offset is
    then exactly what the polls returned of it: the release settles every
    batch polled before it and nothing more."""
    q0, q1 = make_topic(server, queues=2)
    fill(server, [q0, q1], 400)
    group = unique_name("cg_race_assign")
    lite = consumer(server, group, pull_batch_size=5, auto_commit=True)
    lite.assign([q0, q1])
    released = threading.Event()  # set once assign([q1]) returned
    go = threading.Event()
    stop = threading.Event()
    late: list[str] = []  # q0 messages from polls that started after the release
    returned: dict[int, int] = {}  # queue id -> next offset after what polls returned
    polls_after_release = [0]

    def poller() -> None:
        deadline = time.monotonic() + HANG_GUARD_S
        while not stop.is_set() and time.monotonic() < deadline:
            if not go.wait(0.05):
                continue
            was_released = released.is_set()
            for message in lite.poll(0.01):
                if was_released and message.queue_id == q0.queue_id:
                    late.append(message.body.decode())
                returned[message.queue_id] = message.queue_offset + 1
            if was_released:
                polls_after_release[0] += 1

    with lite:
        thread = threading.Thread(target=poller)
        thread.start()
        try:
            wait_until(lambda: lite.buffered(q0) >= 50, "batches of q0 buffered")
            go.set()  # the poller starts taking while q0 is released
            lite.assign([q1])
            released.set()
            wait_until(lambda: polls_after_release[0] >= 20, "twenty polls after the release")
        finally:
            stop.set()
            thread.join(HANG_GUARD_S)
        assert not thread.is_alive()
        assert not late, f"{len(late)} messages of the released queue polled: {late[:5]}"
        assert returned.get(q1.queue_id, 0) > 0  # the consumer kept working on q1
        position = returned.get(q0.queue_id, 0)
        # The release committed (and persisted) q0's position: all it polled, no more.
        wait_until(
            lambda: broker_offsets(server, group, q0.topic).get(q0.queue_id) == position,
            f"q0's offset {position} stored at the release",
        )


def test_a_release_commits_every_batch_polled_before_it(server: ServerProcess) -> None:
    """The interleaving the race above only sometimes hits, made certain: the
    loop thread is held still (on purpose) while the release of q0 is queued on
    it and then the application polls q0's batches, so the release runs before
    the loop heard of those polls. With auto-commit the release must still
    commit everything polled (it settles first), not the older position."""
    q0, q1 = make_topic(server, queues=2)
    fill(server, [q0, q1], 100)
    group = unique_name("cg_release_settles")
    lite = consumer(server, group, pull_batch_size=5, auto_commit_interval_s=3600.0)
    lite.assign([q0, q1])
    with lite:
        wait_until(lambda: lite.buffered(q0) >= 50, "batches of q0 buffered")
        frozen, thaw = threading.Event(), threading.Event()

        async def hold_the_loop() -> None:
            frozen.set()
            thaw.wait(HANG_GUARD_S)  # blocks the loop thread: nothing runs there meanwhile

        lite._loop.submit(hold_the_loop())
        assert frozen.wait(HANG_GUARD_S)
        lite._loop.loop.call_soon_threadsafe(lite.core.assign, [q1])  # runs first after thaw
        position = 0
        for _ in range(40):  # polls need no loop: they take from the buffer
            for message in lite.poll(0):
                if message.queue_id == q0.queue_id:
                    position = message.queue_offset + 1
            if position >= 10:
                break
        thaw.set()
        assert position >= 10
        wait_until(lambda: lite.assignment() == {q1}, "q0 released")
        wait_until(
            lambda: broker_offsets(server, group, q0.topic).get(q0.queue_id) == position,
            f"q0's offset {position} stored at the release",
        )


def test_polls_racing_a_rebalance_return_only_queues_held_when_they_started(
    server: ServerProcess,
) -> None:
    """A second member joins while the first polls a full buffer: the queues it
    takes over are released by the first on its loop thread, at any moment
    between two polls or during one. A poll may only return queues the first
    held when the poll started, or that it took (back) meanwhile."""
    queues = make_topic(server, queues=4)
    topic = queues[0].topic
    fill(server, queues, 1000)
    group = unique_name("cg_race_rebalance")
    first = consumer(server, group, pull_batch_size=5)
    second = consumer(server, group, pull_batch_size=5)
    first.subscribe(topic)
    second.subscribe(topic)
    go = threading.Event()
    stop = threading.Event()
    strays: list[tuple[int, int, set[int], set[int]]] = []
    polled: list[int] = []  # queue ids, one per message polled

    def poll_first() -> None:
        deadline = time.monotonic() + HANG_GUARD_S
        while not stop.is_set() and time.monotonic() < deadline:
            if not go.wait(0.05):
                continue
            before = {mq.queue_id for mq in first.assignment()}
            batch = first.poll(0.05)
            after = {mq.queue_id for mq in first.assignment()}
            for message in batch:
                polled.append(message.queue_id)
                if message.queue_id not in before | after:
                    strays.append((message.queue_id, message.queue_offset, before, after))

    with first:
        wait_until(
            lambda: all(first.buffered(mq) >= 500 for mq in queues),
            "the first member's buffer filled from every queue",
        )
        thread = threading.Thread(target=poll_first)
        thread.start()
        try:
            go.set()  # the poller drains while the second member joins
            with second:
                wait_until(
                    lambda: len(first.assignment()) == 2 and len(second.assignment()) == 2,
                    "the two members sharing the queues",
                )
                at_split = len(polled)
                wait_until(lambda: len(polled) >= at_split + 200, "more polls after the rebalance")
                stop.set()  # before the second member leaves (its queues come back)
                thread.join(HANG_GUARD_S)
        finally:
            stop.set()
            thread.join(HANG_GUARD_S)
    assert not thread.is_alive()
    assert not strays, f"{len(strays)} messages of queues not held: {strays[:5]}"
    # The queues moved while the first still buffered batches of them: 500 or
    # more of each were buffered, and fewer than 1000 messages polled in all.
    assert at_split < 1000, at_split


def test_the_auto_commit_never_runs_ahead_of_the_polls(server: ServerProcess) -> None:
    """Auto-commit at a short interval while one thread polls a backlog: after
    each poll the committed offset is at most where the polls before it had
    got (a batch counts as consumed when the next poll is asked for), and once
    the polls stop it catches up exactly."""
    (mq,) = make_topic(server, queues=1)
    total = 3000
    fill(server, [mq], total)
    group = unique_name("cg_auto_lag")
    lite = consumer(server, group, pull_batch_size=10, auto_commit_interval_s=0.01)
    lite.assign([mq])
    with lite:
        position = 0
        commits: set[int] = set()
        deadline = time.monotonic() + HANG_GUARD_S
        while position < total and time.monotonic() < deadline:
            before = position
            for message in lite.poll(0.5):
                assert message.queue_offset == position  # in order, nothing skipped
                position += 1
            committed = lite.committed(mq)
            assert committed <= before, (committed, before, position)
            commits.add(committed)
        assert position == total
        assert len(commits) >= 2  # the auto-commit did run as the polls went on

        def caught_up() -> bool:
            assert lite.poll(0.01) == []
            return lite.committed(mq) == total

        wait_until(caught_up, "the auto-commit catching up with the last poll")
    assert broker_offsets(server, group, mq.topic) == {mq.queue_id: total}
