"""The chaos checker, short: a SYNC_MASTER loses no acknowledged message when its
master is SIGKILLed at random points (restarted, or its machine lost), and
benchmarks/chaos_check.py runs, reports progress and says the same in JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tidemq.testing.chaos import ChaosConfig, run_chaos

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CHECK_DEADLINE_S = 300.0


@pytest.mark.parametrize("mode", ["kill", "machine-loss"])
async def test_a_sync_master_loses_no_acknowledged_message(tmp_path: Path, mode: str) -> None:
    lines: list[str] = []
    config = ChaosConfig(mode=mode, role="SYNC_MASTER", rounds=3, seed=7, ha_delay_s=0.005)
    result = await run_chaos(config, tmp_path / "cluster", lines.append)
    assert result.acked >= 3 * 5  # every round killed a master taking writes
    assert result.lost == 0, result.lost_keys
    assert result.unconsumed == 0  # the consumer received every one too
    assert result.consumed >= result.acked
    assert result.statuses["error"] > 0  # sends were in flight at the kills
    assert len(lines) == 3 and lines[-1].startswith(f"round 3/3 {mode} SYNC_MASTER")
    assert not (tmp_path / "cluster" / "cluster.json").exists()  # the cluster is down


async def test_a_failover_loses_no_acknowledged_message(tmp_path: Path) -> None:
    lines: list[str] = []
    config = ChaosConfig(mode="failover", role="SYNC_MASTER", rounds=2, seed=3)
    result = await run_chaos(config, tmp_path / "cluster", lines.append)
    assert result.acked >= 2 * 5
    assert result.lost == 0, result.lost_keys
    assert len(lines) == 2


def test_the_benchmark_cli_reports_in_json(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "chaos_check.py"), "--rounds", "2",
         "--mode", "kill", "--role", "SYNC_MASTER", "--json"],
        capture_output=True, text=True, timeout=CHECK_DEADLINE_S, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)
    assert (row["mode"], row["role"], row["rounds"], row["lost"]) == ("kill", "SYNC_MASTER", 2, 0)
    assert row["acked"] > 0
    assert "[chaos_check] round 2/2 kill SYNC_MASTER" in result.stderr
