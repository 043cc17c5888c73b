"""A broadcasting consumer killed with SIGKILL resumes from its `offsets.json`:
after a restart (same instance name and offset directory) each queue starts
exactly at the offset the file held at the kill, so nothing is lost and only
the unpersisted window is delivered again."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
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
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.producer import AsyncProducer
from tidemq.common.message import Message, MessageExt
from tidemq.testing.processes import ServerProcess, serve

pytestmark = pytest.mark.slow

QUEUES = 2
FIRST, SECOND = 600, 200

CHILD = textwrap.dedent(
    """
    import asyncio, sys, threading, time
    from tidemq.client._core.rebalance import ConsumeFromWhere
    from tidemq.client.consumer.listener import ConsumeStatus, MessageModel
    from tidemq.client.consumer.push import AsyncPushConsumer

    namesrv, group, topic, out, directory = sys.argv[1:6]
    lock = threading.Lock()
    sink = open(out, "a", encoding="utf-8")

    def listener(messages, context):
        time.sleep(0.003)  # slow enough to be killed mid-stream
        lines = "".join(f"{m.queue_id} {m.queue_offset}\\n" for m in messages)
        with lock:
            sink.write(lines)
            sink.flush()
        return ConsumeStatus.CONSUME_SUCCESS

    async def main():
        push = AsyncPushConsumer(
            group, namesrv, listener=listener,
            message_model=MessageModel.BROADCASTING,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            instance_name="crashy", offset_store_dir=directory,
            persist_interval_s=0.2, consume_thread_count=1,
        )
        push.subscribe(topic)
        await push.start()
        print("ready", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with serve(tmp_path / "data", flush="async") as process:
        yield process


def lines(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 2:
            rows.append((int(parts[0]), int(parts[1])))
    return rows


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


async def wait_for(check: object, what: str, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def produce(server: ServerProcess, topic: str, start: int, count: int) -> None:
    producer = AsyncProducer(f"bp_{start}", server.namesrv)
    await producer.start()
    try:
        for first in range(start, start + count, 20):
            await producer.send_batch(
                [Message(topic, body=f"m{i}".encode()) for i in range(first, first + 20)]
            )
    finally:
        await producer.shutdown()


async def test_broadcasting_consumer_resumes_from_offsets_json_after_sigkill(
    server: ServerProcess, tmp_path: Path
) -> None:
    topic, group = "BroadcastCrash", "broadcast_crash_group"
    async with AdminClient(server.namesrv) as admin:
        await admin.create_topic(topic, queues=QUEUES)
    out, directory = tmp_path / "child.txt", tmp_path / "offsets"
    await produce(server, topic, 0, FIRST)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, server.namesrv, group, topic, str(out), str(directory)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert (await asyncio.to_thread(child.stdout.readline)).strip() == "ready"
        # kill it mid-stream, once some offsets were persisted
        await wait_for(
            lambda: len(lines(out)) > FIRST // 3 and list(directory.rglob("offsets.json")),
            "the child consuming and persisting",
        )
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        if child.stdout is not None:
            child.stdout.close()
    before = lines(out)
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

        await wait_for(everything_seen, "every message once the consumer is back")
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
