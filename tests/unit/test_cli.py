"""The `tidemq` command, through click's runner (no subprocess needed)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tidemq.cli.main import cli


def test_store_demo_writes_reads_and_queries(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        cli, ["store", "demo", "--data-dir", str(tmp_path), "--messages", "500", "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["written"] == 500
    assert summary["read"] == 500
    assert summary["query_by_key"].endswith("found")
    assert not summary["query_by_key"].endswith("NOT FOUND")

    inspect = runner.invoke(cli, ["store", "inspect", "--data-dir", str(tmp_path), "--json"])
    assert inspect.exit_code == 0, inspect.output
    info = json.loads(inspect.output)
    assert info["queues"] == [
        {"topic": "DemoTopic", "queue": 0, "min_offset": 0, "max_offset": 500}
    ]


def test_inspect_of_a_missing_store_fails_readably(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["store", "inspect", "--data-dir", str(tmp_path / "nope")])
    assert result.exit_code != 0
    assert "no store at" in result.output


def test_demo_rejects_a_bad_count(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["store", "demo", "--data-dir", str(tmp_path), "--messages", "0"]
    )
    assert result.exit_code != 0
    assert "--messages must be at least 1" in result.output
