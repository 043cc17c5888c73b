"""The README's walkthrough, as a newcomer types it: its `tidemq` commands run
in order against a real `tidemq serve` (the name server address added), and
each must exit 0."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tidemq.testing.processes import serve
from tidemq.testing.processes import server_env as _env

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)
CLI_DEADLINE_S = 60.0


def walkthrough() -> list[list[str]]:
    """The first fenced block made only of `tidemq` commands."""
    for block in BLOCK.findall(README.read_text()):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        if lines and all(line.startswith("tidemq ") for line in lines):
            return [shlex.split(line) for line in lines]
    raise AssertionError("the README has no block of tidemq commands")


def test_the_walkthrough_ends_with_the_consumer_group_it_used() -> None:
    commands = walkthrough()
    assert len(commands) >= 5
    progress = next(c for c in commands if c[1:3] == ["consumer", "progress"])
    group = progress[3]
    assert any(c[1] == "consume" and group in c for c in commands[: commands.index(progress)])


def test_every_walkthrough_command_exits_0(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as server:
        for command in walkthrough():
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "tidemq.cli.main",
                    *command[1:],
                    "--namesrv",
                    server.namesrv,
                ],
                capture_output=True,
                text=True,
                env=_env(tmp_path),
                timeout=CLI_DEADLINE_S,
                check=False,
            )
            assert result.returncode == 0, f"{shlex.join(command)}:\n{result.stdout}{result.stderr}"
