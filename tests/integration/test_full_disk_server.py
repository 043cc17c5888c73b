"""A real `tidemq serve` on a small tmpfs that fills up (issue #14, hazards 4 and 5).

Hazard 4: the mapped files were sparse and written through memory, so a full
disk meant SIGBUS: the server died, producers saw "connection refused", and
a restart on the still-full disk died again in recovery. Now sends are
refused with SERVICE_NOT_AVAILABLE, everything acknowledged stays readable,
the server keeps serving (pull, commit, admin), a restart on the full disk
comes up, and sends succeed again once space is freed.

Hazard 5: forced retention (disk above the force ratio) deletes unread
messages; it is logged at WARNING with the queue offsets it took, and
counted in the broker's runtime figures that `tidemq cluster list` shows.

Each test mounts its own tmpfs (root only; skipped otherwise) as the data
directory and unmounts it at the end.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tidemq import ConsumeFromWhere, LitePullConsumer, Producer, make_message
from tidemq.client.errors import ClientError
from tidemq.protocol import ResponseCode
from tidemq.testing.processes import ServerProcess, serve, server_env
from tidemq.testing.waiting import wait_until

pytestmark = pytest.mark.slow

MiB = 1 << 20
DISK_MB = 96
BODY = 4000
TOPIC = "FullDisk"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A fresh tmpfs of DISK_MB MiB to be the data directory, unmounted
    afterwards (the server's log goes beside it, on a disk with room)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    command = ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(mount)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {result.stderr.strip() or result.returncode}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], check=False)


def fill_leaving(disk: Path, filler: Path, leave: int) -> None:
    """Grow `filler` until only `leave` bytes are free on `disk`."""
    stats = os.statvfs(disk)
    free = stats.f_bavail * stats.f_frsize
    with filler.open("ab") as handle:
        handle.write(b"\1" * max(0, free - leave))


def producer(server: ServerProcess) -> Producer:
    return Producer(
        "full-disk-producers",
        namesrv=server.namesrv,
        send_timeout_s=10.0,
        retry_times_when_send_failed=0,
        send_latency_fault_enable=False,
    )


def body(n: int) -> bytes:
    head = f"m-{n}-".encode()
    return head + b"x" * (BODY - len(head))


def send_until_refused(
    sender: Producer, first: int, refusals_wanted: int, limit: int = 20_000
) -> tuple[list[bytes], list[ClientError]]:
    """Send one by one (bounded in count and time) until `refusals_wanted` refusals."""
    acked: list[bytes] = []
    refused: list[ClientError] = []
    deadline = time.monotonic() + 60
    for n in range(first, first + limit):
        if time.monotonic() > deadline:
            break
        try:
            sender.send(make_message(TOPIC, body(n), keys=f"key-{n}"))
        except ClientError as exc:
            refused.append(exc)
            if len(refused) >= refusals_wanted:
                break
        else:
            acked.append(body(n))
    return acked, refused


def read_all(server: ServerProcess, group: str, expected: int) -> list[bytes]:
    """Every message of the topic from the first offset (assigned, not subscribed)."""
    with LitePullConsumer(
        group,
        namesrv=server.namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        auto_commit=False,
    ) as consumer:
        queues = consumer.fetch_message_queues(TOPIC)
        consumer.assign(queues)
        for queue in queues:
            consumer.seek_to_begin(queue)
        bodies: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(bodies) < expected and time.monotonic() < deadline:
            bodies += [m.body for m in consumer.poll(timeout_s=1)]
        for _ in range(2):  # nothing more than expected
            bodies += [m.body for m in consumer.poll(timeout_s=0.5)]
        consumer.commit_sync()
        return bodies


def test_a_full_disk_refuses_sends_and_the_server_lives_on(
    small_disk: Path, tmp_path: Path
) -> None:
    data = small_disk
    filler = small_disk / "filler"
    settings = {
        "commitlog_file_size": MiB,
        # Only ENOSPC refuses here (the ratio rule is the next test's and the
        # unit tests'): the disk really runs out, where mmap writes used to SIGBUS.
        "disk_warning_ratio": 1.0,
        "disk_force_clean_ratio": 1.0,
        "clean_file_forcibly": "false",
        "persist_interval_s": 1,
        "retention_interval_s": 1,
    }
    acked: list[bytes] = []
    with serve(data, flush="sync", settings=settings) as server, producer(server) as sender:
        first, refused = send_until_refused(sender, 0, refusals_wanted=0, limit=50)
        assert len(first) == 50 and not refused
        acked += first
        fill_leaving(small_disk, filler, 3 * MiB)

        more, refused = send_until_refused(sender, 50, refusals_wanted=20)
        refusals = len(refused)

        acked += more
        assert refused, "the disk never filled"
        assert server.popen.poll() is None, server.stderr()
        assert {exc.code for exc in refused} == {ResponseCode.SERVICE_NOT_AVAILABLE}
        assert "disk is full" in str(refused[0]) and "no space left writing" in str(refused[0])
        assert re.search(r"CL: (0\.9\d|1\.00) used of ", str(refused[-1])), refused[-1]
        # Still serving: every acknowledged message reads back, offsets commit.
        read = read_all(server, "full-disk-readers", len(acked))
        assert sorted(read) == sorted(acked)
        wait_until(
            lambda: "cannot write consumer offsets" in server.stderr(), "a failed offsets write"
        )
        assert server.popen.poll() is None
        log = server.stderr()
        assert "WARNING tidemq.store.disk_guard" in log
        assert "handler for" not in log, log  # every request was answered
        assert server.stop(signal.SIGTERM) == 0

    # A restart on the still-full disk comes up and serves reads.
    with (
        serve(data, flush="sync", settings=settings, name="again") as server,
        producer(server) as sender,
    ):
        assert sorted(read_all(server, "after-restart", len(acked))) == sorted(acked)
        _, refused = send_until_refused(sender, 100_000, refusals_wanted=1, limit=1000)
        assert refused and refused[0].code == ResponseCode.SERVICE_NOT_AVAILABLE
        refusals += len(refused)

        filler.unlink()  # space freed: sends are taken again, no restart

        def accepted() -> bool:
            try:
                sender.send(make_message(TOPIC, body(200_000), keys="key-after"))
            except ClientError as exc:
                assert exc.code == ResponseCode.SERVICE_NOT_AVAILABLE, exc
                return False
            return True

        wait_until(accepted, "a send accepted after freeing space")
        acked.append(body(200_000))
        later, refused = send_until_refused(sender, 300_000, refusals_wanted=1, limit=20)
        assert len(later) == 20 and not refused
        acked += later
        assert sorted(read_all(server, "at-the-end", len(acked))) == sorted(acked)
        offsets = data / "config" / "consumerOffset.json"
        wait_until(
            lambda: offsets.exists() and "after-restart" in offsets.read_text(),
            "offsets committed on the full disk written once space is back",
        )
        print(f"acknowledged and read back: {len(acked)} messages; refused: {refusals}")
        assert server.popen.poll() is None, server.stderr()


def test_above_rocketmqs_warning_ratio_sends_are_refused_until_use_falls(
    small_disk: Path,
) -> None:
    """The ratio rule with RocketMQ's defaults: full above 90 %, OK at 85 %."""
    settings = {"commitlog_file_size": MiB, "clean_file_forcibly": "false"}
    with serve(small_disk, settings=settings) as server, producer(server) as sender:
        acked, _ = send_until_refused(sender, 0, refusals_wanted=1, limit=20)
        assert len(acked) == 20
        stats = os.statvfs(small_disk)
        fill_leaving(small_disk, small_disk / "filler", stats.f_blocks * stats.f_frsize // 20)

        attempts = iter(range(1000, 2000))

        def refusal() -> ClientError | None:
            """One send: its refusal, or None (it was stored: acknowledged)."""
            n = next(attempts)
            sent, refused = send_until_refused(sender, n, refusals_wanted=1, limit=1)
            acked.extend(sent)
            return refused[0] if refused else None

        # One send per try, at most a thousand (`attempts`): 30 s at 0.1 s apart stays within.
        refused_one = wait_until(
            refusal, "a refusal once the disk is 95 % used", timeout=30, interval=0.1
        )
        assert refused_one.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert re.search(r"disk is full \[CL: 0\.9\d used of ", str(refused_one)), refused_one
        assert "writes resume at 0.85 or less" in str(refused_one)
        assert "WARNING tidemq.store.disk_guard" in server.stderr()

        (small_disk / "filler").unlink()
        wait_until(lambda: not refusal(), "sends taken again", timeout=30, interval=0.1)
        assert sorted(read_all(server, "ratio-readers", len(acked))) == sorted(acked)
        assert server.popen.poll() is None


def cli_json(home: Path, namesrv: str, *args: str) -> Any:
    result = subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", *args, "--namesrv", namesrv, "--json"],
        capture_output=True,
        text=True,
        env=server_env(home),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_forced_retention_is_logged_counted_and_shown_by_cluster_list(
    small_disk: Path,
) -> None:
    data = small_disk
    settings = {
        "commitlog_file_size": MiB,
        "disk_max_used_ratio": 0.5,
        "disk_force_clean_ratio": 0.6,
        "disk_warning_ratio": 0.97,
        "retention_interval_s": 1,
    }
    with serve(data, settings=settings) as server, producer(server) as sender:
        _, refused = send_until_refused(sender, 0, refusals_wanted=1, limit=20)
        assert not refused
        with LitePullConsumer(  # a group that read a little and committed it
            "slow-readers",
            namesrv=server.namesrv,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            auto_commit=False,
        ) as consumer:
            queues = consumer.fetch_message_queues(TOPIC)
            consumer.assign(queues)
            wait_until(lambda: consumer.poll(timeout_s=1), "a first message")
            consumer.commit_sync()
        stats = os.statvfs(small_disk)
        total = stats.f_blocks * stats.f_frsize
        fill_leaving(small_disk, small_disk / "filler", int(total * 0.32))  # ~68 % used
        _, refused = send_until_refused(sender, 20, refusals_wanted=1, limit=1500)
        assert not refused, refused[0]

        def forced() -> dict[str, Any] | None:
            (row,) = cli_json(server.home, server.namesrv, "cluster", "list")
            files = row["forced_deleted_files"]
            return row if files else None

        row = wait_until(forced, "a forced deletion in cluster list")
        assert 0.6 <= row["disk_ratio"] <= 1.0
        assert row["disk_full"] is False
        assert row["flush_trouble"] is None  # forced deletion is no flush trouble
        assert row["forced_deleted_messages"] > 0
        assert row["runtime"]["commitLogDiskRatio"] == str(row["disk_ratio"])
        log = server.stderr()
        assert "commitlog files that had not expired" in log
        assert f"{TOPIC}/" in log and "[0, " in log
        assert "consumer groups slow-readers had not consumed" in log

        table = subprocess.run(
            [
                sys.executable,
                "-m",
                "tidemq.cli.main",
                "cluster",
                "list",
                "--namesrv",
                server.namesrv,
            ],
            capture_output=True,
            text=True,
            env={**server_env(server.home), "COLUMNS": "200"},
            timeout=60,
            check=False,
        )
        assert table.returncode == 0, table.stderr
        print(table.stdout)
        assert "disk" in table.stdout and "forced_deleted" in table.stdout
        assert f"{row['forced_deleted_files']} files" in table.stdout
        print(
            f"forced deletions: {row['forced_deleted_files']} files, "
            f"{row['forced_deleted_messages']} messages; disk {row['disk_ratio']}"
        )
        assert server.popen.poll() is None
