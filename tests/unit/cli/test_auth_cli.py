"""`tidemq user|acl` and `serve --auth-init-user`: what can be told wrong without a server
is refused before one is asked, in one line, with a non-zero exit (JSON with --json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tidemq.cli.main import cli

UNREACHABLE = ("--namesrv", "127.0.0.1:1")


@pytest.mark.parametrize(
    "args, problem",
    [
        (["acl", "create", "alice", "--resource", "Queue:x", "--action", "Pub"], "resource type"),
        (["acl", "create", "alice", "--resource", "Topic:", "--action", "Pub"], "TYPE:NAME"),
        (
            ["acl", "create", "alice", "--resource", "Topic:a", "--source-ip", "10.0.0.300"],
            "bad source IP",
        ),
        (["acl", "create", "Role:x", "--resource", "Topic:a", "--action", "Pub"], "bad subject"),
        (["acl", "delete", "User:"], "names no user"),
        (["user", "update", "alice"], "nothing to change"),
    ],
)
def test_bad_input_is_one_line_before_any_request(args: list[str], problem: str) -> None:
    if args[:2] == ["acl", "create"] and "--action" not in args:
        args = [*args, "--action", "Pub"]
    result = CliRunner().invoke(cli, [*args, *UNREACHABLE])
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and problem in lines[0], result.output
    as_json = CliRunner().invoke(cli, [*args, *UNREACHABLE, "--json"])
    assert as_json.exit_code != 0 and problem in json.loads(as_json.output)["error"]


def test_unknown_actions_and_types_are_click_errors() -> None:
    result = CliRunner().invoke(
        cli, ["acl", "create", "a", "--resource", "Topic:a", "--action", "Fly", *UNREACHABLE]
    )
    assert result.exit_code == 2 and "Fly" in result.output
    result = CliRunner().invoke(
        cli, ["user", "create", "a", "--password", "p1234567", "--type", "Root", *UNREACHABLE]
    )
    assert result.exit_code == 2 and "Root" in result.output


@pytest.mark.parametrize("value", ["root", "root:", ":secret"])
def test_a_bad_init_user_stops_serve_before_starting(tmp_path: Path, value: str) -> None:
    result = CliRunner().invoke(
        cli, ["serve", "--data-dir", str(tmp_path / "data"), "--auth-init-user", value]
    )
    assert result.exit_code == 1 and "NAME:PASSWORD" in result.output
    assert "secret" not in result.output  # the password is never echoed
    assert not (tmp_path / "data" / "store").exists()
