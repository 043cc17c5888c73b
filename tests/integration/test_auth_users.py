"""RocketMQ 5 users and ACLs on a real `tidemq serve --auth`: made with the CLI, obeyed
by our remoting client (through the CLI's send/consume) and by the official Python
5.x gRPC client; a change taken without a restart; the store kept across one."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rocketmq import ClientConfiguration, Credentials, Message, Producer

from tidemq.testing.processes import ServerProcess, server_env, started
from tidemq.testing.waiting import wait_until

pytestmark = pytest.mark.slow

CLI_DEADLINE_S = 60.0
ROOT = ("--access-key", "root", "--secret-key", "rootSecret01")
ALICE = {"TIDEMQ_ACCESS_KEY": "alice", "TIDEMQ_SECRET_KEY": "aliceSecret01"}


def serve_auth(data: Path, *extra: str) -> list[str]:
    return [
        "serve",
        "--data-dir",
        str(data),
        "--namesrv-port",
        "0",
        "--broker-port",
        "0",
        "--grpc-port",
        "0",
        "--auth",
        *extra,
    ]


class Cli:
    def __init__(self, home: Path, namesrv: str) -> None:
        self.home, self.namesrv = home, namesrv

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tidemq.cli.main", *args, "--namesrv", self.namesrv, "--json"],
            capture_output=True,
            text=True,
            env={**server_env(self.home), **(env or {})},
            timeout=CLI_DEADLINE_S,
            check=False,
        )

    def ok(self, *args: str, env: dict[str, str] | None = None) -> Any:
        result = self.run(*args, env=env)
        assert result.returncode == 0, f"{args}: {result.stdout} {result.stderr}"
        try:
            return json.loads(result.stdout)
        except json.JSONDecodeError:  # JSON lines (consume)
            return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]

    def refused(self, *args: str, env: dict[str, str] | None = None) -> str:
        """Fails with one JSON error, NO_PERMISSION; returns its text."""
        result = self.run(*args, env=env)
        assert result.returncode != 0, f"{args} was not refused: {result.stdout}"
        error = json.loads(result.stdout)
        assert error["code"] == 16, error
        return str(error["error"])


def message(topic: str, body: bytes) -> Message:
    result = Message()
    result.topic = topic
    result.body = body
    return result


def grpc_send(server: ServerProcess, topic: str, ak: str, sk: str) -> None:
    producer = Producer(ClientConfiguration(server.grpc, Credentials(ak, sk)), (topic,))
    try:
        producer.startup()
        producer.send(message(topic, b"over gRPC"))
    finally:
        with contextlib.suppress(Exception):
            producer.shutdown()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@contextlib.contextmanager
def server(tmp_path: Path, data: Path, *extra: str) -> Iterator[tuple[ServerProcess, Cli]]:
    with started(serve_auth(data, *extra), tmp_path, "serve") as (process, ready):
        yield process, Cli(tmp_path, ready["namesrv"])


def test_users_and_acls_made_with_the_cli_apply_to_both_protocols(
    tmp_path: Path, data: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with server(tmp_path, data, "--auth-init-user", "root:rootSecret01") as (process, cli):
        assert "RocketMQ 5 users and ACLs on" in "".join(process.output)
        # anonymous: nothing, not even a topic
        assert "No accessKey" in cli.refused("topic", "create", "Orders")
        for topic in ("Orders", "Audit", "Scratch"):
            cli.ok("topic", "create", topic, "--queues", "1", *ROOT)
        cli.ok("group", "create", "Billing", *ROOT)

        cli.ok("user", "create", "alice", "--password", "aliceSecret01", *ROOT)
        cli.ok("acl", "create", "alice", "--resource", "Topic:*", "--action", "Pub",
               "--action", "Sub", *ROOT)  # fmt: skip
        cli.ok("acl", "create", "User:alice", "--resource", "Topic:Audit", "--action", "Pub",
               "--decision", "Deny", *ROOT)  # fmt: skip
        cli.ok("acl", "create", "alice", "--resource", "Group:Bill*", "--action", "Sub", *ROOT)

        listed = cli.run("user", "list", *ROOT)
        assert "aliceSecret01" not in listed.stdout and "rootSecret01" not in listed.stdout
        users = {u["username"]: u for u in json.loads(listed.stdout)}
        assert users["alice"] == {"username": "alice", "userType": "Normal", "userStatus": "enable"}
        assert users["root"]["userType"] == "Super"
        (acl,) = cli.ok("acl", "list", "--subject", "alice", *ROOT)
        resources = {e["resource"]: e["decision"] for e in acl["policies"][0]["entries"]}
        assert resources == {"Topic:*": "Allow", "Topic:Audit": "Deny", "Group:Bill*": "Allow"}

        # a Normal user may not administer
        assert "no matched policies" in cli.refused("user", "list", env=ALICE)
        cli.refused("topic", "create", "Mine", env=ALICE)

        # remoting: our client through the CLI
        (sent,) = cli.ok("send", "Orders", "one", env=ALICE)
        assert sent["status"] == "SEND_OK"
        denied = cli.refused("send", "Audit", "no", env=ALICE)
        assert (
            "User:alice has no permission to access Topic:Audit from 127.0.0.1, "
            "the decision is deny." in denied
        )
        wrong = {**ALICE, "TIDEMQ_SECRET_KEY": "wrongSecret1"}
        assert "Check signature failed" in cli.refused("send", "Orders", "x", env=wrong)
        consume = ("consume", "Orders", "--from-beginning", "--max", "1", "--timeout", "10")
        assert cli.ok(*consume, "--group", "Billing", env=ALICE)["body"] == "one"
        assert "Group:Other" in cli.refused(*consume, "--group", "Other", env=ALICE)

        # gRPC: the official 5.x client signs as alice the same way
        grpc_send(process, "Orders", "alice", "aliceSecret01")
        with pytest.raises(Exception):  # noqa: B017 - the route query is refused too
            grpc_send(process, "Audit", "alice", "aliceSecret01")
        # the client logs the server's answer (FORBIDDEN, with the reason)
        assert "40300, User:alice has no permission to access Topic:Audit" in caplog.text
        with pytest.raises(Exception):  # noqa: B017
            grpc_send(process, "Orders", "alice", "wrongSecret1")
        status = {q["max_offset"] for q in cli.ok("topic", "status", "Orders", *ROOT)}
        assert status == {2}  # one over remoting, one over gRPC
        assert all(q["max_offset"] == 0 for q in cli.ok("topic", "status", "Audit", *ROOT))

        # a change, without restart: the Deny entry goes, then alice is disabled
        cli.ok("acl", "delete", "alice", "--resource", "Topic:Audit", *ROOT)
        (sent,) = cli.ok("send", "Audit", "now allowed", env=ALICE)
        assert sent["status"] == "SEND_OK"
        grpc_send(process, "Audit", "alice", "aliceSecret01")
        cli.ok("user", "update", "alice", "--status", "disable", *ROOT)
        assert "User:alice is disabled" in cli.refused("send", "Orders", "x", env=ALICE)
        with pytest.raises(Exception):  # noqa: B017
            grpc_send(process, "Orders", "alice", "aliceSecret01")
        assert "40100, User:alice is disabled" in caplog.text
        # the last Super user cannot lock everyone out
        error = cli.run("user", "delete", "root", *ROOT)
        assert error.returncode != 0 and "last enabled Super user" in error.stdout
        wait_until(lambda: "(user_disabled)" in process.stderr(), "the refusal logged")
        assert "aliceSecret01" not in process.stderr()

    # the store outlives the process; no init user needed the second time
    with server(tmp_path, data) as (_, cli):
        users = {u["username"]: u["userStatus"] for u in cli.ok("user", "list", *ROOT)}
        assert users == {"alice": "disable", "root": "enable"}
        cli.ok("user", "update", "alice", "--status", "enable", *ROOT)
        (sent,) = cli.ok("send", "Orders", "after restart", env=ALICE)
        assert sent["status"] == "SEND_OK"
        assert "Topic:Scratch" not in cli.ok("acl", "list", "--resource", "Scratch", *ROOT)


def test_auth_without_a_super_user_does_not_start(tmp_path: Path, data: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", *serve_auth(data)],
        capture_output=True,
        text=True,
        env=server_env(tmp_path),
        timeout=CLI_DEADLINE_S,
        check=False,
    )
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "no enabled Super user exists" in errors[0], result.stderr


def test_user_and_acl_commands_say_what_happened_and_fail_as_rocketmq_answers(
    tmp_path: Path, data: Path
) -> None:
    with server(tmp_path, data, "--auth-init-user", "root:rootSecret01") as (_, cli):

        def failed(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
            result = cli.run(*args, *ROOT, env=env) if env is None else cli.run(*args, env=env)
            assert result.returncode == 1, f"{args}: {result.stdout} {result.stderr}"
            error: dict[str, Any] = json.loads(result.stdout)
            plain = subprocess.run(
                [sys.executable, "-m", "tidemq.cli.main", *args, "--namesrv", cli.namesrv]
                + ([] if env else list(ROOT)),
                capture_output=True,
                text=True,
                env={**server_env(cli.home), **(env or {})},
                timeout=CLI_DEADLINE_S,
                check=False,
            )
            assert plain.returncode == 1 and plain.stdout == ""
            assert plain.stderr.strip() == f"Error: {error['error']}", plain.stderr
            return error

        def plain_ok(*args: str) -> str:
            result = subprocess.run(
                [sys.executable, "-m", "tidemq.cli.main", *args, "--namesrv", cli.namesrv, *ROOT],
                capture_output=True,
                text=True,
                env=server_env(cli.home),
                timeout=CLI_DEADLINE_S,
                check=False,
            )
            assert result.returncode == 0, result.stderr
            return result.stdout.strip()

        assert plain_ok("user", "create", "bob", "--password", "bobSecret01") == (
            "user bob created on broker-a"
        )
        made = cli.ok("user", "create", "carol", "--password", "carolSecret1", *ROOT)
        assert made == {"result": "created", "user": "carol", "brokers": ["broker-a"]}
        assert failed("user", "create", "bob", "--password", "x1234567") == {
            "error": "cannot create user bob: The user is existed",
            "code": 16,
            "code_name": "NO_PERMISSION",
        }
        missing = failed("user", "update", "ghost", "--status", "disable")
        assert (missing["code"], missing["error"]) == (
            16,
            "cannot update user ghost: The user is not exist",
        )
        assert cli.ok("user", "delete", "ghost", *ROOT) == {
            "result": "not found",
            "user": "ghost",
            "brokers": [],
        }
        assert plain_ok("user", "delete", "ghost") == "user ghost does not exist: nothing deleted"
        assert cli.ok("user", "get", "bob", *ROOT) == {
            "username": "bob",
            "userType": "Normal",
            "userStatus": "enable",
        }
        unknown = failed("user", "get", "ghost")
        assert (unknown["code_name"], unknown["error"]) == (
            "USER_NOT_EXIST",
            "user ghost does not exist",
        )

        no_subject = failed("acl", "create", "ghost", "--resource", "Topic:a", "--action", "Pub")
        assert (no_subject["code"], no_subject["error"]) == (
            16,
            "cannot create the ACL of User:ghost: The subject of User:ghost is not exist.",
        )
        assert failed("acl", "get", "bob")["code_name"] == "POLICY_NOT_EXIST"
        no_acl = failed("acl", "delete", "bob")
        assert no_acl["error"] == "cannot delete the ACL of User:bob: The acl is not exist."
        updated = cli.ok("acl", "update", "bob", "--resource", "Topic:a", "--action", "Pub", *ROOT)
        assert updated["result"] == "updated"  # RocketMQ's update makes a missing ACL
        acl = cli.ok("acl", "get", "bob", *ROOT)
        assert [e["resource"] for e in acl["policies"][0]["entries"]] == ["Topic:a"]
        assert "Topic:a" in plain_ok("acl", "get", "bob")

        # a user allowed to manage users may not make a Super one (privilege escalation)
        cli.ok("acl", "create", "bob", "--resource", "Cluster", "--action", "Update", *ROOT)
        bob = {"TIDEMQ_ACCESS_KEY": "bob", "TIDEMQ_SECRET_KEY": "bobSecret01"}
        cli.ok("user", "create", "dave", "--password", "daveSecret1", env=bob)
        escalation = failed(
            "user", "create", "eve", "--password", "eveSecret01", "--type", "Super", env=bob
        )
        assert (escalation["code_name"], escalation["error"]) == (
            "SYSTEM_ERROR",
            "cannot create user eve: The super user can only be create by super user",
        )
        demote = failed("user", "update", "root", "--type", "Normal", env=bob)
        assert demote["error"].endswith("The super user can only be update by super user")
        users = {u["username"]: u["userType"] for u in cli.ok("user", "list", *ROOT)}
        assert users == {"bob": "Normal", "carol": "Normal", "dave": "Normal", "root": "Super"}
