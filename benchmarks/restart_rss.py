"""Resident memory of an idle `tidemq serve` after a restart.

    .venv/bin/python benchmarks/restart_rss.py [--messages N] [--json]

Writes N messages of 1 KiB (batches of 100, 4 queues) into a fresh store with
the default 1 GiB commitlog files, then restarts the server twice, after a
kill -9 (recovery scans from the checkpoint) and after a clean stop, and
reports the server's VmRSS once it is idle (ready, then 2 s without
requests), next to its RSS right after the writes. A restart should touch
only what recovery must read: before issue #14 the recovery read the whole
unwritten rest of the last 1 GiB file and an idle server showed ~800 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from tidemq.testing.client_support import create_topic, numbered_messages, produce
from tidemq.testing.processes import ServerProcess, serve_args

IDLE_S = 2.0


def rss_mib(pid: int) -> int:
    """VmRSS of `pid` in MiB (file-backed pages of mapped store files included)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def idle_rss_after_start(data: Path, home: Path, name: str) -> tuple[ServerProcess, int]:
    server = ServerProcess(serve_args(data), home, home / f"{name}.log")
    server.wait_ready()
    time.sleep(IDLE_S)  # the measured state is "idle for a while", not a condition
    return server, rss_mib(server.popen.pid)


def measure(messages: int) -> dict[str, int]:
    home = Path(tempfile.mkdtemp(prefix="tidemq-rss-"))
    data = home / "data"
    data.mkdir()
    server = ServerProcess(serve_args(data), home, home / "writer.log")
    server.wait_ready()
    try:
        asyncio.run(create_topic(server.namesrv, "Rss", queues=4))
        body = "x" * 1000 + "{}"
        asyncio.run(
            produce(server.namesrv, numbered_messages("Rss", messages, body=body), batch_size=100)
        )
        result = {"messages": messages, "rss_after_writes_mib": rss_mib(server.popen.pid)}
    finally:
        server.kill()  # kill -9: the next start recovers from the checkpoint
    after_kill, result["rss_idle_after_kill9_restart_mib"] = idle_rss_after_start(
        data, home, "after-kill"
    )
    after_kill.stop()
    after_kill.kill()
    clean, result["rss_idle_after_clean_restart_mib"] = idle_rss_after_start(
        data, home, "after-clean"
    )
    clean.stop()
    clean.kill()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.messages)
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:36} {value:>10,}")


if __name__ == "__main__":
    main()
