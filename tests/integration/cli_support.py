"""The `tidemq` command run as a newcomer runs it: a subprocess against a name server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tidemq.testing.processes import server_env

CLI_DEADLINE_S = 60.0


class Cli:
    """`tidemq ARGS --namesrv NAMESRV` in `home`'s environment."""

    def __init__(self, home: Path, namesrv: str) -> None:
        self.home = home
        self.namesrv = namesrv

    def run(
        self, *args: str, namesrv: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "tidemq.cli.main", *args]
        command += ["--namesrv", namesrv or self.namesrv]
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            env={**server_env(self.home), **(env or {})},
            timeout=CLI_DEADLINE_S,
            check=False,
        )

    def json(self, *args: str) -> Any:
        result = self.run(*args, "--json")
        assert result.returncode == 0, f"{args}: {result.stderr}"
        return json.loads(result.stdout)

    def json_lines(self, *args: str) -> list[Any]:
        result = self.run(*args, "--json")
        assert result.returncode == 0, f"{args}: {result.stderr}"
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
