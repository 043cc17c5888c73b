"""docs/replication.md, run as written: its two config files, its name server
and brokers as processes, its CLI lines, its Python example and its `cmp`
(ports and directories moved under the test's directory)."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from doc_examples import BLOCK, DEFAULT_NAMESRV, DOCS, blocks, run_python

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.testing.processes import free_port, server_env, started
from tidemq.testing.waiting import wait_until
from tidemq.transport import RemotingClient

pytestmark = pytest.mark.slow

GUIDE = DOCS / "replication.md"
FAILOVER = "## Automatic failover"
CONFIG = re.compile(r"`(\w+\.json)`(?:(?!```).)*?:\n\n```\n(\{.*?\})\n```", re.S)
CLI_DEADLINE_S = 60.0


def tidemq_lines(text: str) -> list[list[str]]:
    return [
        shlex.split(line)
        for tag, code in BLOCK.findall(text)
        if not tag
        for line in code.splitlines()
        if line.startswith(("tidemq ", "cmp "))
    ]


def cli(home: Path, args: list[str], namesrv: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", *args, "--namesrv", namesrv],
        capture_output=True,
        text=True,
        env=server_env(home),
        cwd=home,
        timeout=CLI_DEADLINE_S,
        check=False,
    )
    assert result.returncode == 0, f"{shlex.join(args)}:\n{result.stdout}{result.stderr}"
    return result.stdout


def test_the_guide_runs_a_sync_master_and_its_slave(tmp_path: Path) -> None:
    text = GUIDE.read_text().split(FAILOVER)[0]
    configs = dict(CONFIG.findall(text))
    assert set(configs) == {"master.json", "slave.json"}
    lines = tidemq_lines(text)
    assert [line[:2] for line in lines[:3]] == [["tidemq", "namesrv"], ["tidemq", "broker"],
                                                 ["tidemq", "broker"]]  # fmt: skip

    with started(["namesrv", "--port", "0"], tmp_path, "namesrv") as (_, ready):
        namesrv = ready["namesrv"]
        for name, raw in configs.items():
            settings = json.loads(raw)
            settings["listen_port"] = free_port()
            settings["namesrv_addrs"] = [namesrv]
            settings["data_dir"] = str(tmp_path / settings["data_dir"])
            (tmp_path / name).write_text(json.dumps(settings))
        master_args, slave_args = (
            [str(tmp_path / arg) if arg.endswith(".json") else arg for arg in line[1:]]
            for line in lines[1:3]
        )
        with (
            started(master_args, tmp_path, "master") as (_, master),
            started(slave_args, tmp_path, "slave") as (_, slave),
        ):
            assert (master["role"], slave["role"]) == ("SYNC_MASTER", "SLAVE")
            for line in lines[3:]:
                if line[:3] == ["tidemq", "topic", "create"]:
                    cli(tmp_path, line[1:], namesrv)  # returns once the route has it
                elif line[:2] == ["tidemq", "send"]:
                    (sent,) = json.loads(cli(tmp_path, [*line[1:], "--json"], namesrv))
                    assert sent["status"] == "SEND_OK"
            example = blocks("replication.md", "python")[0]
            result = run_python(
                example,
                tmp_path / "example.py",
                {"PATH": "/usr/bin:/bin"},
                cwd=tmp_path,
                replace={DEFAULT_NAMESRV: namesrv},
            )
            assert result.returncode == 0, result.stderr
            assert result.stdout.strip() == "SEND_OK"

            def caught_up() -> list[dict[str, object]] | None:
                rows = json.loads(cli(tmp_path, ["cluster", "list", "--json"], namesrv))
                lag = {row["role"]: row["lag_bytes"] for row in rows}
                return rows if lag == {"SYNC_MASTER": None, "SLAVE": 0} else None

            rows = wait_until(caught_up, "the slave caught up, as cluster list shows it")
            assert {row["id"]: row["address"] for row in rows} == {
                0: master["broker"],
                1: slave["broker"],
            }
            (cmp,) = (line for line in lines if line[0] == "cmp")
            compared = subprocess.run(cmp, cwd=tmp_path, check=False, timeout=CLI_DEADLINE_S)
            assert compared.returncode == 0  # the two commitlog files are identical


def in_sync_with_topic(master: str, slave: str) -> Callable[[], bool]:
    """Replica 2 knows the topic and is in its master's SyncStateSet: the
    guide's precondition for the kill (a topic copied, an electable slave)."""

    def check() -> bool:
        async def ask() -> bool:
            client = RemotingClient(name="doc-test")
            try:
                topic = await client.invoke(
                    slave,
                    RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, {"topic": "Payments"}),
                    5.0,
                )
                info = await client.invoke(
                    master, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 5.0
                )
            finally:
                await client.close()
            table = json.loads(info.body)["table"]
            return topic.code == ResponseCode.SUCCESS and table.get("tidemqSyncStateSet") == "1,2"

        return asyncio.run(ask())

    return check


def test_the_guide_fails_over_to_the_in_sync_replica(tmp_path: Path) -> None:
    """The failover section as written: the name server with its controller,
    the two replicas, the topic, the example before and after a kill -9 of
    the master, and the old master back as a slave."""
    text = FAILOVER + GUIDE.read_text().split(FAILOVER)[1]
    configs = dict(CONFIG.findall(text))
    assert set(configs) == {"replica1.json", "replica2.json"}
    lines = tidemq_lines(text)
    assert lines[0] == ["tidemq", "namesrv", "--enable-controller"]
    port = free_port()
    namesrv_args = [
        *lines[0][1:],
        "--port",
        str(port),
        "--controller-port",
        str(free_port()),
        "--controller-dir",
        str(tmp_path / "controller-data"),
    ]
    with started(namesrv_args, tmp_path, "namesrv") as (_, ready):
        namesrv = ready["namesrv"]
        for name, raw in configs.items():
            settings = json.loads(raw.replace(DEFAULT_NAMESRV, namesrv))
            settings["listen_port"] = free_port()
            settings["data_dir"] = str(tmp_path / settings["data_dir"])
            (tmp_path / name).write_text(json.dumps(settings))
        replica1, replica2 = (
            [str(tmp_path / arg) if arg.endswith(".json") else arg for arg in line[1:]]
            for line in lines[1:3]
        )
        example = blocks("replication.md", "python")[1]

        def run_example() -> str:
            result = run_python(
                example,
                tmp_path / "failover.py",
                {"PATH": "/usr/bin:/bin"},
                cwd=tmp_path,
                replace={DEFAULT_NAMESRV: namesrv},
            )
            assert result.returncode == 0, result.stderr
            return result.stdout.strip()

        with started(replica1, tmp_path, "replica1") as (first, one):
            assert one["role"] == "SYNC_MASTER"
            with started(replica2, tmp_path, "replica2") as (_, two):
                assert two["role"] == "SLAVE"
                for line in lines[3:]:
                    if line[:3] == ["tidemq", "topic", "create"]:
                        cli(tmp_path, line[1:], namesrv)
                assert run_example() == "SEND_OK"

                wait_until(
                    in_sync_with_topic(one["broker"], two["broker"]),
                    "replica 2 in the SyncStateSet, with the topic",
                )
                first.popen.kill()  # kill -9 of the master
                first.popen.wait(timeout=30)
                assert run_example() == "SEND_OK"

                def new_master() -> bool:
                    rows = json.loads(cli(tmp_path, ["cluster", "list", "--json"], namesrv))
                    return any(r["id"] == 0 and r["address"] == two["broker"] for r in rows)

                wait_until(new_master, "replica 2 registered as the master")
                with started(replica1, tmp_path, "replica1-again") as (_, back):
                    assert back["role"] == "SLAVE"
