"""A streaming copy (tidemq source -> exactly-once tidemq sink) killed with
SIGKILL in the middle, Spark driver JVM and all, then restarted from its
checkpoint: every message arrives downstream exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidemq.spark.session import java_available
from tidemq.testing.client_support import create_topic, numbered_messages, produce, read_topic
from tidemq.testing.processes import ServerProcess, serve, server_env
from tidemq.testing.waiting import unique_name, wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not java_available(), reason="PySpark needs Java 17"),
]

COUNT = 3000


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with serve(tmp_path / "data", flush="sync") as process:
        yield process


def child(server: ServerProcess, args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "tidemq.testing.spark_stream_child", server.namesrv, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=server_env(server.home),
            start_new_session=True,  # one process group: the JVM dies with it
        )


def bodies(server: ServerProcess, topic: str) -> list[str]:
    return [m.body.decode() for m in asyncio.run(read_topic(server.namesrv, topic))]


def test_kill9_mid_stream_then_restart_copies_exactly_once(
    server: ServerProcess, tmp_path: Path
) -> None:
    source, target = unique_name("StreamSrc"), unique_name("StreamDst")
    asyncio.run(create_topic(server.namesrv, source, queues=4))
    asyncio.run(create_topic(server.namesrv, target, queues=4))
    asyncio.run(produce(server.namesrv, numbered_messages(source, COUNT), batch_size=100))
    args = [source, target, str(tmp_path / "ckpt"), "--max-per-trigger", "150"]

    first = child(server, args, tmp_path / "first.log")
    try:

        def copied_450() -> list[str] | None:
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            copied = bodies(server, target)
            return copied if len(copied) >= 450 else None

        copied = wait_until(copied_450, "the first run to copy 450", timeout=240, interval=0.2)
        os.killpg(first.pid, signal.SIGKILL)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
    at_kill = bodies(server, target)
    assert len(at_kill) < COUNT, "killed too late to test anything"
    assert len(set(at_kill)) == len(at_kill)

    second = child(server, [*args, "--available-now"], tmp_path / "second.log")
    try:
        assert second.wait(timeout=300) == 0, (tmp_path / "second.log").read_text()[-3000:]
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
    final = Counter(bodies(server, target))
    assert final == Counter(f"m{i}" for i in range(COUNT)), {
        "missing": COUNT - len(final),
        "duplicated": [b for b, n in final.items() if n > 1][:10],
    }
    assert len(copied) >= 450
