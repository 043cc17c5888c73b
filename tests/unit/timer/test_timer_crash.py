"""kill -9 of a process running the timer service (sync flush): every
acknowledged timer message is delivered exactly once after restarts."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tidemq.record.codec import decode_records
from tidemq.store.api import GetStatus
from tidemq.testing.timer_crash_child import TOPIC, open_service

COUNT = 240


def spawn(mode: str, root: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tidemq.testing.timer_crash_child", mode, str(root), *extra],
        stdout=subprocess.PIPE,
        text=True,
    )


def kill_after(
    child: subprocess.Popen[str],
    delivered_at_least: int,
    *,
    parks: bool = False,
    timeout: float = 60,
) -> int:
    """Read the child's progress; SIGKILL it once it reports that many
    deliveries (and, with `parks`, that every message was parked and
    acknowledged). Returns the last count it reported."""
    assert child.stdout is not None
    deadline = time.monotonic() + timeout
    last = 0
    fd = child.stdout.fileno()
    buffer = ""
    parked = not parks
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        chunk = os.read(fd, 65536).decode()
        if not chunk:
            raise AssertionError(f"child ended early with {child.wait()} at {last}")
        buffer += chunk
        *lines, buffer = buffer.split("\n")
        for line in lines:
            if line.startswith("delivered "):
                last = int(line.split()[1])
            elif line.startswith("parked "):
                parked = True
        if parked and last >= delivered_at_least:
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
            return last
    child.kill()
    child.wait()
    raise AssertionError(f"child reported only {last} deliveries in {timeout} s")


def delivered_keys(root: Path) -> list[str]:
    store, _ = open_service(root)
    try:
        keys: list[str] = []
        offset = 0
        while True:
            result = store.get_messages("check", TOPIC, 0, offset, 256)
            if result.status is not GetStatus.FOUND:
                return keys
            keys.extend(m.properties["UNIQ_KEY"] for m in decode_records(result.body()))
            offset = result.next_begin_offset
    finally:
        store.close()


@pytest.mark.slow
def test_kill9_delivers_every_timer_exactly_once(tmp_path: Path) -> None:
    first_due = int(time.time() * 1000) + 2_500
    child = spawn(
        "park",
        tmp_path,
        f"--count={COUNT}",
        f"--first-due-ms={first_due}",
        "--spacing-ms=12",
    )
    first = kill_after(child, COUNT // 4, parks=True)
    assert first < COUNT
    child = spawn("resume", tmp_path, f"--count={COUNT}")
    second = kill_after(child, COUNT * 2 // 3)
    assert second < COUNT
    child = spawn("resume", tmp_path, f"--count={COUNT}")
    output, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    assert f"delivered {COUNT}" in output
    keys = delivered_keys(tmp_path)
    counts = Counter(keys)
    duplicates = {key: n for key, n in counts.items() if n > 1}
    assert duplicates == {}
    assert set(keys) == {f"T{i}" for i in range(COUNT)}
