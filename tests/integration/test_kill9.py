"""kill -9 a sync-flush writer mid-stream: every acknowledged append survives
recovery exactly once."""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tidemq.record.codec import decode_records
from tidemq.store.api import GetStatus
from tidemq.store.file_store import FileMessageStore
from tidemq.testing.crash_writer import QUEUES, TOPIC, crash_config

pytestmark = pytest.mark.slow


def run_and_kill(root: Path, first_seq: int, kill_after_acks: int) -> set[int]:
    """Start a writer, SIGKILL it once it has acknowledged enough, return its acks."""
    command = [
        sys.executable,
        "-m",
        "tidemq.testing.crash_writer",
        str(root),
        "--first-seq",
        str(first_seq),
        "--seconds",
        "60",
    ]
    acked: set[int] = set()
    enough = threading.Event()
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        stdout = process.stdout

        def read_acks() -> None:
            for line in stdout:
                acked.add(int(line))
                if len(acked) >= kill_after_acks:
                    enough.set()
            enough.set()

        reader = threading.Thread(target=read_acks, daemon=True)
        reader.start()
        assert enough.wait(timeout=60), "the writer acknowledged too little in time"
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        reader.join(timeout=10)
        errors = process.stderr.read()
    assert process.returncode == -signal.SIGKILL, errors
    assert "ready" in errors
    return acked


def stored_sequences(root: Path) -> collections.Counter[int]:
    store = FileMessageStore(crash_config(root))
    store.open()
    try:
        seen: collections.Counter[int] = collections.Counter()
        for queue_id in range(QUEUES):
            offset = 0
            while True:
                got = store.get_messages("check", TOPIC, queue_id, offset, 256)
                if got.status is not GetStatus.FOUND:
                    break
                for message in decode_records(got.body()):
                    seen[int(message.body.split(b"-")[1])] += 1
                offset = got.next_begin_offset
        return seen
    finally:
        store.close()


def test_acknowledged_appends_survive_kill9_exactly_once(tmp_path: Path) -> None:
    rng = random.Random(20261122)
    acked: set[int] = set()
    for round_number in range(3):
        acked |= run_and_kill(tmp_path, round_number * 1_000_000, rng.randrange(300, 1500))

    stored = stored_sequences(tmp_path)

    assert len(acked) >= 900
    missing = sorted(acked - set(stored))
    assert missing == [], f"{len(missing)} acknowledged messages lost, e.g. {missing[:5]}"
    duplicated = [seq for seq, count in stored.items() if count > 1]
    assert duplicated == []
