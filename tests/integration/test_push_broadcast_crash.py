"""A broadcasting consumer killed with SIGKILL resumes from its `offsets.json`:
after a restart (same instance name and offset directory) each queue starts
exactly at the offset the file held at the kill, so nothing is lost and only
the unpersisted window is delivered again."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeStatus,
    MessageModel,
)
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.common.message import MessageExt
from tidemq.testing.client_support import create_topic, numbered_messages
from tidemq.testing.client_support import produce as produce_messages
from tidemq.testing.consumer_child import ConsumerChild
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.waiting import eventually

pytestmark = pytest.mark.slow

QUEUES = 2
FIRST, SECOND = 600, 200


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with serve(tmp_path / "data", flush="async") as process:
        yield process


def lines(child: ConsumerChild) -> list[tuple[int, int]]:
    return [(record.queue_id, record.offset) for record in child.records()]


def file_offsets(directory: Path, topic: str) -> dict[int, int]:
    """queue id -> offset of `topic` in the one offsets.json under `directory`."""
    (path,) = directory.rglob("offsets.json")
    document = json.loads(path.read_text(encoding="utf-8"))
    table = document.get("offsetTable", document)
    found: dict[int, int] = {}
    for key, value in table.items():
        if isinstance(key, str) and key.startswith(f"{topic}@"):
            found[int(key.rsplit("@", 1)[1])] = int(value)
    return found


async def produce(server: ServerProcess, topic: str, start: int, count: int) -> None:
    messages = numbered_messages(topic, count, start=start)
    await produce_messages(server.namesrv, messages, batch_size=20)


async def test_broadcasting_consumer_resumes_from_offsets_json_after_sigkill(
    server: ServerProcess, tmp_path: Path
) -> None:
    topic, group = "BroadcastCrash", "broadcast_crash_group"
    await create_topic(server.namesrv, topic, queues=QUEUES)
    out, directory = tmp_path / "child.txt", tmp_path / "offsets"
    await produce(server, topic, 0, FIRST)
    options = [
        "--broadcasting",
        "--instance-name=crashy",
        f"--offset-store-dir={directory}",
        "--persist-interval-s=0.2",
        "--consume-thread-count=1",
        "--delay-s=0.003",  # slow enough to be killed mid-stream
    ]
    child = ConsumerChild(server.namesrv, group, topic, out, options=options)
    with contextlib.closing(child):
        await child.start()
        # kill it mid-stream, once some offsets were persisted
        await eventually(
            lambda: len(lines(child)) > FIRST // 3 and list(directory.rglob("offsets.json")),
            "the child consuming and persisting",
        )
        child.kill()
    before = lines(child)
    persisted = file_offsets(directory, topic)
    assert persisted, "offsets.json holds the topic's queues"
    assert len(before) < FIRST  # it really died mid-stream

    await produce(server, topic, FIRST, SECOND)
    after: list[tuple[int, int]] = []
    lock = threading.Lock()

    def listener(messages: list[MessageExt], context: ConsumeConcurrentlyContext) -> ConsumeStatus:
        with lock:
            after.extend((m.queue_id, m.queue_offset) for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    push = AsyncPushConsumer(
        group,
        server.namesrv,
        listener=listener,
        message_model=MessageModel.BROADCASTING,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        instance_name="crashy",
        offset_store_dir=directory,
    )
    push.subscribe(topic)
    await push.start()
    try:
        total = FIRST + SECOND

        def everything_seen() -> bool:
            with lock:
                return len(set(before) | set(after)) == total

        await eventually(everything_seen, "every message once the consumer is back")
    finally:
        await push.shutdown()
    with lock:
        resumed = list(after)
    for queue_id in range(QUEUES):
        offsets = sorted(offset for q, offset in resumed if q == queue_id)
        # resumed exactly at the persisted offset: no gap, nothing older
        assert offsets[0] == persisted.get(queue_id, 0), (queue_id, offsets[:3], persisted)
        assert offsets == list(range(offsets[0], offsets[-1] + 1))
    redelivered = set(before) & set(resumed)
    # only the unpersisted window came again: offsets the child consumed past the file
    assert all(offset >= persisted.get(q, 0) for q, offset in redelivered)
