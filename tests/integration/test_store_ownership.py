"""Issue #14 hazard 2: one process owns a data directory.

Before the fix a second `tidemq serve` on the same `--data-dir` ran happily,
both appended at the same commitlog offsets, and after a restart none of the
first server's messages were left; `tidemq store inspect` on a live store
ran crash recovery and deleted the live server's `abort` marker.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from cli_support import run_tidemq

from tidemq.testing.client_support import create_topic, numbered_messages, produce, read_topic
from tidemq.testing.processes import ServerProcess, serve, serve_args

pytestmark = pytest.mark.slow

TOPIC = "Owned"


def test_second_server_on_a_data_dir_is_refused_and_nothing_is_lost(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = data / "store"
    with serve(data, flush="sync") as first:
        asyncio.run(create_topic(first.namesrv, TOPIC, queues=2))
        sent = asyncio.run(produce(first.namesrv, numbered_messages(TOPIC, 50)))

        second = ServerProcess(serve_args(data, flush="sync"), tmp_path, tmp_path / "second.log")
        try:
            code = second.popen.wait(timeout=60)
        finally:
            second.kill()
        assert code != 0
        log = (tmp_path / "second.log").read_text()
        errors = [line for line in log.splitlines() if line.startswith("Error")]
        assert errors == [
            f"Error: cannot start the broker: the store {store} is in use by process "
            f"{first.popen.pid}; stop it first, or give this server its own --data-dir"
        ]

        # the live store is only looked at, whatever the first server is doing
        abort_marker = store / "abort"
        stamp = abort_marker.stat().st_mtime_ns
        inspected = run_tidemq(tmp_path, "store", "inspect", "--data-dir", str(store), "--json")
        assert inspected.returncode == 0, inspected.stderr
        info = json.loads(inspected.stdout)
        assert info["in_use_by_pid"] == first.popen.pid
        assert info["recovery"].startswith("not run: the store is in use by process")
        maxima = {q["queue"]: q["max_offset"] for q in info["queues"] if q["topic"] == TOPIC}
        assert sum(maxima.values()) == 50
        assert abort_marker.stat().st_mtime_ns == stamp

        got = asyncio.run(read_topic(first.namesrv, TOPIC))
        assert sorted(m.body.decode() for m in got) == sorted(sent)
        more = asyncio.run(produce(first.namesrv, numbered_messages(TOPIC, 10, start=50)))
        assert first.stop() == 0
    with serve(data, flush="sync", name="again") as again:
        got = asyncio.run(read_topic(again.namesrv, TOPIC))
        assert sorted(m.body.decode() for m in got) == sorted(sent + more)

    # stopped: inspect owns the store for its run (it may recover) and lets go
    inspected = run_tidemq(tmp_path, "store", "inspect", "--data-dir", str(store), "--json")
    assert inspected.returncode == 0, inspected.stderr
    assert json.loads(inspected.stdout)["in_use_by_pid"] is None
    assert not (store / "abort").exists()


def test_a_read_only_data_dir_is_named_in_the_error(tmp_path: Path) -> None:
    """The newcomer's report: `cannot start the broker on 127.0.0.1:0: read-only
    file system` named the port; the path is what is wrong."""
    data = tmp_path / "readonly"
    data.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(data)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        result = run_tidemq(tmp_path, *serve_args(data))
    finally:
        subprocess.run(["umount", str(data)], check=True)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"Error: cannot start the broker: {data}")
    assert lines[0].endswith(": read-only file system")
