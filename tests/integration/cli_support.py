"""The `tidemq` command run as a newcomer runs it: a subprocess against a name server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tidemq.testing.processes import server_env

CLI_DEADLINE_S = 60.0


def run_tidemq(
    home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = CLI_DEADLINE_S
) -> subprocess.CompletedProcess[str]:
    """`tidemq ARGS` in a fresh process, in `home`'s environment (plus `env`)."""
    return subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", *args],
        capture_output=True,
        text=True,
        env={**server_env(home), **(env or {})},
        timeout=timeout,
        check=False,
    )


class Cli:
    """`tidemq ARGS --namesrv NAMESRV` in `home`'s environment."""

    def __init__(self, home: Path, namesrv: str) -> None:
        self.home = home
        self.namesrv = namesrv

    def run(
        self, *args: str, namesrv: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run_tidemq(self.home, *args, "--namesrv", namesrv or self.namesrv, env=env)

    def json(self, *args: str) -> Any:
        result = self.run(*args, "--json")
        assert result.returncode == 0, f"{args}: {result.stdout}{result.stderr}"
        return json.loads(result.stdout)

    def json_lines(self, *args: str) -> list[Any]:
        result = self.run(*args, "--json")
        assert result.returncode == 0, f"{args}: {result.stdout}{result.stderr}"
        return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def serve_args(data: Path) -> list[str]:
    """`tidemq serve` on free ports with its data in `data`."""
    return [
        "serve",
        "--data-dir", str(data),
        "--namesrv-port", "0",
        "--broker-port", "0",
        "--grpc-port", "0",
    ]  # fmt: skip
