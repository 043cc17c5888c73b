"""Secure by default: `tidemq serve`, `tidemq namesrv` and `tidemq broker` refuse to
listen on a non-loopback address without access control unless told to let anyone
in, in one line with exit 1 and before anything is created. (That they do start
when access control is on or `--allow-anonymous` says so: tests/integration/
test_cli_acl.py, with real processes.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tidemq.broker.config import BrokerConfig
from tidemq.cli.main import cli
from tidemq.cli.server_commands import _is_loopback

NON_LOOPBACK = ["0.0.0.0", "::", "192.0.2.10", "[2001:db8::1]", "broker.example.org"]


def _one_line_refusal(result: Result, *remedies: str) -> str:
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "without access control" in lines[0]
    for remedy in remedies:
        assert remedy in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("host", NON_LOOPBACK)
def test_namesrv_without_acl_refuses_a_non_loopback_address(host: str) -> None:
    result = CliRunner().invoke(cli, ["namesrv", "--host", host, "--port", "0"])
    line = _one_line_refusal(result, "--acl FILE", "--allow-anonymous")
    assert f"listen on {host}" in line


def _broker_config(tmp_path: Path, **settings: object) -> Path:
    path = tmp_path / "broker.json"
    data_dir = tmp_path / "broker-a"
    path.write_text(
        json.dumps({"listen_port": 0, "data_dir": str(data_dir), **settings}), encoding="utf-8"
    )
    return path


@pytest.mark.parametrize("host", NON_LOOPBACK)
def test_broker_without_access_control_refuses_a_non_loopback_address(
    tmp_path: Path, host: str
) -> None:
    config = _broker_config(tmp_path, listen_host=host)
    result = CliRunner().invoke(cli, ["broker", "--config", str(config)])
    _one_line_refusal(result, "acl_file or auth_enabled", str(config), "allow_anonymous")
    assert not (tmp_path / "broker-a").exists()  # nothing created, nothing listened


def test_allow_anonymous_false_in_the_config_still_refuses(tmp_path: Path) -> None:
    config = _broker_config(tmp_path, listen_host="0.0.0.0", allow_anonymous=False)
    _one_line_refusal(CliRunner().invoke(cli, ["broker", "--config", str(config)]))


@pytest.mark.parametrize("host", NON_LOOPBACK)
def test_serve_without_acl_refuses_a_non_loopback_address(tmp_path: Path, host: str) -> None:
    data = tmp_path / "data"
    result = CliRunner().invoke(cli, ["serve", "--host", host, "--data-dir", str(data)])
    _one_line_refusal(result, "--acl FILE", "--allow-anonymous")
    assert not data.exists()


@pytest.mark.parametrize(
    "host, loopback",
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("", False),
        ("::", False),
        ("10.0.0.1", False),
        ("localhost.example.org", False),
    ],
)
def test_what_counts_as_loopback(host: str, loopback: bool) -> None:
    assert _is_loopback(host) is loopback


def test_allow_anonymous_is_a_config_key_not_a_serve_setting(tmp_path: Path) -> None:
    path = _broker_config(tmp_path, allow_anonymous=True)
    assert BrokerConfig.from_file(path).allow_anonymous is True
    with pytest.raises(ValueError, match="is not KEY=VALUE"):
        BrokerConfig.parse_overrides(["allow_anonymous=true"])  # serve has --allow-anonymous
