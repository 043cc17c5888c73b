"""`tidemq cluster up|status|down`: real processes that outlive the command, found
again through the data directory, stopped by `down`; and docs/replication.md's
shell block, run as written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from doc_examples import blocks

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
DEADLINE_S = 180.0


def shell_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TIDEMQ_NAMESRV"}
    env.update(PATH=f"{BIN}:/usr/bin:/bin", COLUMNS="200", PYTHONUNBUFFERED="1")
    return env


def tidemq(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        env=shell_env(),
        check=False,
    )
    if check:
        assert result.returncode == 0, f"{args}:\n{result.stdout}{result.stderr}"
    return result


def servers_under(directory: Path) -> list[psutil.Process]:
    """Live processes whose command line names a file under `directory`."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = process.info["cmdline"] or []
        if process.info["status"] != psutil.STATUS_ZOMBIE and any(
            str(directory) in arg for arg in cmdline
        ):
            found.append(process)
    return found


def test_the_guide_starts_lists_and_stops_a_cluster(tmp_path: Path) -> None:
    (script,) = blocks("replication.md", "sh")
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        env=shell_env(),
        check=False,
    )
    try:
        assert result.returncode == 0, result.stdout + result.stderr
        out = result.stdout
        assert out.count("SYNC_MASTER") >= 4  # 2 masters in `up`'s table and in `list`'s
        assert "SEND_OK" in out
        # both slaves in sync in `cluster list`
        assert out.count("bytes behind, in sync") == 2, out
        assert out.count("stopped") >= 5, out  # 4 brokers and the name server
        assert "broker-a at name server" in out and "no longer offered for writes" in out
        assert "writable again" in out
        assert out.count("brokerPermission=4") == 2  # broker-a's master and its slave
        assert not (tmp_path / "cluster-data" / "cluster.json").exists()
        assert servers_under(tmp_path) == []
    finally:
        for process in servers_under(tmp_path):
            process.kill()


def test_up_outlives_the_command_and_down_stops_exactly_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    up = tidemq("cluster", "up", "--data-dir", str(data), "--replicas", "2", "--json")
    try:
        started: dict[str, Any] = json.loads(up.stdout)
        roles = {node["name"]: node["role"] for node in started["nodes"]}
        assert roles == {"namesrv": "-", "broker-a-0": "SYNC_MASTER", "broker-a-1": "SLAVE"}
        pids = [node["pid"] for node in started["nodes"]]
        assert all(psutil.pid_exists(pid) for pid in pids)  # the command ended, they did not

        again = tidemq("cluster", "up", "--data-dir", str(data), check=False)
        assert again.returncode != 0 and "already running" in again.stderr

        namesrv = started["namesrv"]
        listed = json.loads(tidemq("cluster", "list", "--json", "--namesrv", namesrv).stdout)
        slave = next(row for row in listed if row["id"] == 1)
        assert (slave["role"], slave["ha_connected"], slave["in_sync"]) == ("SLAVE", True, True)
        assert slave["lag_bytes"] == 0

        status = json.loads(tidemq("cluster", "status", "--data-dir", str(data), "--json").stdout)
        assert all(node["running"] for node in status["nodes"])

        down = json.loads(tidemq("cluster", "down", "--data-dir", str(data), "--json").stdout)
        assert sorted(row["outcome"] for row in down) == ["stopped"] * 3
        assert [row["name"] for row in down][-1] == "namesrv"  # brokers first
        assert servers_under(tmp_path) == []
    finally:
        for process in servers_under(tmp_path):
            process.kill()

    gone = tidemq("cluster", "status", "--data-dir", str(data), "--json", check=False)
    assert gone.returncode != 0
    assert "no cluster in" in json.loads(gone.stdout)["error"]


def test_bad_options_are_refused_with_a_readable_line(tmp_path: Path) -> None:
    for args, said in (
        (["--brokers", "0"], "--brokers"),
        (["--role", "SLAVE"], "--role"),
        (["--set", "no_such_setting=1"], "no_such_setting"),
    ):
        result = tidemq("cluster", "up", "--data-dir", str(tmp_path), *args, check=False)
        assert result.returncode != 0 and said in result.stderr, result.stderr
    assert servers_under(tmp_path) == []
