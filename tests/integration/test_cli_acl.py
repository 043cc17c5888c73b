"""`tidemq serve --acl` and the CLI's --access-key/--secret-key, as real processes.

Allowed and refused paths for PUB, SUB and admin commands (topic create/delete,
offset reset), the `--json` shape of a refusal, a policy change taken without a
restart, and serve's refusal to listen on a non-loopback address without ACL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tidemq.testing.processes import server_env, started
from tidemq.testing.waiting import wait_until

pytestmark = pytest.mark.slow

CLI_DEADLINE_S = 60.0
ADMIN = ("--access-key", "adminKey01", "--secret-key", "adminSecret01")
APP = {"TIDEMQ_ACCESS_KEY": "appKey0001", "TIDEMQ_SECRET_KEY": "appSecret0001"}
POLICY = """\
accounts:
  - accessKey: adminKey01
    secretKey: adminSecret01
    admin: true
  - accessKey: appKey0001
    secretKey: appSecret0001
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [Orders=PUB|SUB]
    groupPerms: [Billing=SUB]
"""


class Cli:
    def __init__(self, home: Path, namesrv: str) -> None:
        self.home = home
        self.namesrv = namesrv

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tidemq.cli.main", *args, "--namesrv", self.namesrv],
            capture_output=True,
            text=True,
            env={**server_env(self.home), **(env or {})},
            timeout=CLI_DEADLINE_S,
            check=False,
        )

    def ok(self, *args: str, env: dict[str, str] | None = None) -> Any:
        result = self.run(*args, "--json", env=env)
        assert result.returncode == 0, f"{args}: {result.stdout} {result.stderr}"
        try:
            return json.loads(result.stdout)
        except json.JSONDecodeError:  # JSON lines (consume)
            return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]

    def refused(self, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        """The command fails with one JSON error object carrying NO_PERMISSION."""
        result = self.run(*args, "--json", env=env)
        assert result.returncode != 0, f"{args} was not refused: {result.stdout}"
        error: dict[str, Any] = json.loads(result.stdout)
        assert error["code"] == 16 and error["code_name"] == "NO_PERMISSION", error
        assert "adminSecret01" not in result.stdout + result.stderr
        plain = self.run(*args, env=env)
        assert plain.returncode != 0
        assert len(plain.stderr.strip().splitlines()) == 1, plain.stderr
        return error


def acl_serve(tmp_path: Path, acl: Path, *extra: str) -> list[str]:
    return [
        "serve",
        "--data-dir",
        str(tmp_path / "data"),
        "--namesrv-port",
        "0",
        "--broker-port",
        "0",
        "--grpc-port",
        "0",
        "--acl",
        str(acl),
        "--set",
        "acl_poll_interval_s=0.2",
        *extra,
    ]


def test_cli_allowed_and_refused_paths_and_a_policy_change(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(POLICY, encoding="utf-8")
    with started(acl_serve(tmp_path, acl), tmp_path, "serve") as (server, ready):
        assert "grpc" in ready  # on with --acl: checked with the same policy
        assert "ACL on" in "".join(server.output)
        cli = Cli(tmp_path, ready["namesrv"])

        # admin: topic create
        error = cli.refused("topic", "create", "Orders", "--queues", "2")
        assert error["error"] == "No accessKey is configured"
        error = cli.refused("topic", "create", "Orders", "--queues", "2", env=APP)
        assert error["error"].startswith("Need admin permission for request code=17")
        assert cli.ok("topic", "create", "Orders", "--queues", "2", *ADMIN)["result"] == "created"
        cli.ok("topic", "create", "Scratch", "--queues", "1", *ADMIN)

        # PUB
        cli.refused("send", "Orders", "anonymous")
        cli.refused("send", "Orders", "bad", "--access-key", "appKey0001", "--secret-key", "nope")
        cli.refused("send", "Scratch", "denied", env=APP)
        (sent,) = cli.ok("send", "Orders", "one", env=APP)
        assert sent["status"] == "SEND_OK"
        status = cli.ok("topic", "status", "Orders", *ADMIN)
        assert status is not None

        # SUB
        consume = ("consume", "Orders", "--from-beginning", "--max", "1", "--timeout", "10")
        cli.refused(*consume, "--group", "Billing")
        cli.refused(*consume, "--group", "Other", env=APP)
        consumed = cli.ok(*consume, "--group", "Billing", env=APP)  # one JSON line
        assert consumed["body"] == "one"

        # admin: offset reset, topic delete
        reset = ("offset", "reset", "Billing", "Orders", "--to", "earliest")
        cli.refused(*reset, env=APP)
        cli.ok(*reset, *ADMIN)
        cli.refused("topic", "delete", "Scratch", env=APP)
        cli.ok("topic", "delete", "Scratch", *ADMIN)

        # a policy change, without restart: appKey0001 may now publish everywhere
        acl.write_text(
            POLICY.replace("    defaultTopicPerm: DENY\n", "    defaultTopicPerm: PUB\n"),
            encoding="utf-8",
        )
        stat = acl.stat()
        os.utime(acl, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        cli.ok("topic", "create", "Elsewhere", "--queues", "1", *ADMIN)

        def published() -> bool | None:
            result = cli.run("send", "Elsewhere", "now allowed", "--json", env=APP)
            return True if result.returncode == 0 else None

        wait_until(published, "the new policy to allow appKey0001 on Elsewhere", timeout=30.0)
        assert server.stop() == 0
        log = server.stderr()
        assert "refused" in log  # one WARNING line per client and reason
        assert "adminSecret01" not in log and "appSecret0001" not in log


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_serve_refuses_a_non_loopback_address_without_acl(tmp_path: Path, host: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", "serve", "--host", host, "--no-grpc"],
        capture_output=True,
        text=True,
        env=server_env(tmp_path),
        timeout=CLI_DEADLINE_S,
        check=False,
    )
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert "without access control" in result.stderr
    assert "--allow-anonymous" in result.stderr


def test_serve_on_any_address_with_allow_anonymous_starts(tmp_path: Path) -> None:
    args = [
        "serve",
        "--data-dir",
        str(tmp_path / "data"),
        "--host",
        "0.0.0.0",
        "--allow-anonymous",
        "--namesrv-port",
        "0",
        "--broker-port",
        "0",
        "--no-grpc",
    ]
    with started(args, tmp_path, "serve") as (server, ready):
        assert ready["broker"]
        assert server.stop() == 0


def test_serve_with_a_malformed_policy_is_one_line_and_no_start(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text("accounts:\n  - {accessKey: short, secretKey: verySecret1}\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", *acl_serve(tmp_path, acl)],
        capture_output=True,
        text=True,
        env=server_env(tmp_path),
        timeout=CLI_DEADLINE_S,
        check=False,
    )
    assert result.returncode != 0
    assert "tidemq ready" not in result.stdout
    lines = [line for line in result.stderr.splitlines() if "open files" not in line]
    assert len(lines) == 1, result.stderr
    assert "accessKey must be longer than 6 characters" in lines[0]
    assert "verySecret1" not in result.stderr


def test_a_broker_signs_its_registration_with_a_guarded_name_server(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(POLICY, encoding="utf-8")
    namesrv_args = ["namesrv", "--port", "0", "--acl", str(acl)]
    with started(namesrv_args, tmp_path, "namesrv") as (_, ns_ready):
        cli = Cli(tmp_path, ns_ready["namesrv"])
        for name, keys in (("broker-a", ("adminKey01", "adminSecret01")), ("broker-b", None)):
            settings: dict[str, Any] = {
                "broker_name": name,
                "listen_port": 0,
                "namesrv_addrs": [ns_ready["namesrv"]],
                "data_dir": str(tmp_path / name),
                "acl_file": str(acl),
            }
            if keys is not None:
                settings.update(acl_access_key=keys[0], acl_secret_key=keys[1])
            config = tmp_path / f"{name}.json"
            config.write_text(json.dumps(settings), encoding="utf-8")
        with (
            started(["broker", "--config", str(tmp_path / "broker-a.json")], tmp_path, "a"),
            started(["broker", "--config", str(tmp_path / "broker-b.json")], tmp_path, "b") as (
                unsigned,
                _,
            ),
        ):

            def registered() -> set[str] | None:
                result = cli.run("cluster", "list", "--json", *ADMIN)
                names = {row["broker"] for row in json.loads(result.stdout or "[]")}
                return names if "broker-a" in names else None

            assert wait_until(registered, "broker-a to register") == {"broker-a"}
            assert "No accessKey is configured" in unsigned.stderr()


def test_namesrv_on_any_address_starts_with_acl_or_allow_anonymous(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(POLICY, encoding="utf-8")
    for name, extra in (("acl", ["--acl", str(acl)]), ("anonymous", ["--allow-anonymous"])):
        args = ["namesrv", "--host", "0.0.0.0", "--port", "0", *extra]
        with started(args, tmp_path, f"namesrv-{name}") as (server, ready):
            assert ready["namesrv"].startswith("127.0.0.1:")
            assert server.stop() == 0


@pytest.mark.parametrize(
    "case", ["allow_anonymous key", "--allow-anonymous", "acl_file", "auth_enabled"]
)
def test_broker_on_any_address_starts_with_access_control_or_allow_anonymous(
    tmp_path: Path, case: str
) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(POLICY, encoding="utf-8")
    settings: dict[str, Any] = {
        "listen_host": "0.0.0.0",
        "listen_port": 0,
        "namesrv_addrs": ["127.0.0.1:1"],  # no name server needed to listen
        "data_dir": str(tmp_path / "broker-a"),
    }
    flags: list[str] = []
    if case == "allow_anonymous key":
        settings["allow_anonymous"] = True
    elif case == "--allow-anonymous":
        flags.append("--allow-anonymous")
    elif case == "acl_file":
        settings["acl_file"] = str(acl)
    else:
        settings.update(auth_enabled=True, auth_init_user="root:rootSecret01")
    config = tmp_path / "broker.json"
    config.write_text(json.dumps(settings), encoding="utf-8")
    with started(["broker", "--config", str(config), *flags], tmp_path, "broker") as (
        server,
        ready,
    ):
        assert ready["name"] == "broker-a"
        assert server.stop() == 0
