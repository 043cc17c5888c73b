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
"""Where the controller-mode part of the guide starts (its own configs and example)."""
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


def run_example(home: Path, code: str, namesrv: str) -> str:
    """A Python block of the guide run as a script against `namesrv`; what it printed."""
    result = run_python(
        code,
        home / "example.py",
        {"PATH": "/usr/bin:/bin"},
        cwd=home,
        replace={DEFAULT_NAMESRV: namesrv},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def write_config(home: Path, name: str, settings: dict[str, object], namesrv: str) -> None:
    """A config of the guide, with a free port and its directory under `home`."""
    settings = {
        **settings,
        "listen_port": free_port(),
        "namesrv_addrs": [namesrv],
        "data_dir": str(home / str(settings["data_dir"])),
    }
    (home / name).write_text(json.dumps(settings))


def test_the_guide_runs_a_sync_master_and_its_slave(tmp_path: Path) -> None:
    text = GUIDE.read_text().split(FAILOVER)[0]
    configs = dict(CONFIG.findall(text))
    assert set(configs) == {"master.json", "slave.json"}
    # this one's, the slave reader's, then the failover section's
    assert len(blocks("replication.md", "python")) == 3
    lines = tidemq_lines(text)
    assert [line[:2] for line in lines[:3]] == [["tidemq", "namesrv"], ["tidemq", "broker"],
                                                 ["tidemq", "broker"]]  # fmt: skip

    with started(["namesrv", "--port", "0"], tmp_path, "namesrv") as (_, ready):
        namesrv = ready["namesrv"]
        for name, raw in configs.items():
            write_config(tmp_path, name, json.loads(raw), namesrv)
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
            assert run_example(tmp_path, example, namesrv) == "SEND_OK"

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


def test_the_guide_reads_from_the_slave_while_the_master_is_down(tmp_path: Path) -> None:
    """'Reading from a slave': its settings on both brokers, its group, 20
    orders sent, the master stopped, then its reader run as written."""
    text = GUIDE.read_text().split(FAILOVER)[0]
    configs = dict(CONFIG.findall(text))
    section = text[text.index("## Reading from a slave") : text.index("## Settings")]
    reading, _ = (code for tag, code in BLOCK.findall(section) if not tag)
    added = json.loads(reading)
    assert added == {"slave_read_enable": True, "access_message_in_memory_max_ratio": 40}
    reader = blocks("replication.md", "python")[1]

    with started(["namesrv", "--port", "0"], tmp_path, "namesrv") as (_, ready):
        namesrv = ready["namesrv"]
        for name, raw in configs.items():
            role = "SLAVE" if name == "slave.json" else "ASYNC_MASTER"
            settings = {**json.loads(raw), **added, "broker_role": role}
            write_config(tmp_path, name, {**settings, "slave_sync_interval_s": 0.5}, namesrv)
        with (
            started(["broker", "--config", str(tmp_path / "master.json")], tmp_path, "master") as (
                master,
                _,
            ),
            started(["broker", "--config", str(tmp_path / "slave.json")], tmp_path, "slave"),
        ):
            cli(tmp_path, ["topic", "create", "Orders", "--queues", "4"], namesrv)
            (group_line,) = (line for line in tidemq_lines(section) if line[1] == "group")
            cli(tmp_path, group_line[1:], namesrv)
            groups = json.loads(cli(tmp_path, ["group", "list", "--json"], namesrv))
            (group,) = (row for row in groups if row["group"] == "order-readers")
            assert (group["broker_id"], group["which_broker_when_consume_slowly"]) == (0, 1)
            for i in range(20):
                cli(tmp_path, ["send", "Orders", f"order {i}"], namesrv)

            def caught_up() -> bool:
                rows = json.loads(cli(tmp_path, ["cluster", "list", "--json"], namesrv))
                return {row["role"]: row["lag_bytes"] for row in rows}.get("SLAVE") == 0

            wait_until(caught_up, "the slave holding the 20 orders")
            master.popen.kill()
            master.popen.wait(CLI_DEADLINE_S)
            assert run_example(tmp_path, reader, namesrv) == "20 orders read"


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
    namesrv_args = [
        *lines[0][1:],
        "--port",
        str(free_port()),
        "--controller-port",
        str(free_port()),
        "--controller-dir",
        str(tmp_path / "controller-data"),
    ]
    with started(namesrv_args, tmp_path, "namesrv") as (_, ready):
        namesrv = ready["namesrv"]
        for name, raw in configs.items():
            settings = json.loads(raw.replace(DEFAULT_NAMESRV, namesrv))
            write_config(tmp_path, name, settings, namesrv)
        replica1, replica2 = (
            [str(tmp_path / arg) if arg.endswith(".json") else arg for arg in line[1:]]
            for line in lines[1:3]
        )
        example = blocks("replication.md", "python")[2]
        with started(replica1, tmp_path, "replica1") as (first, one):
            assert one["role"] == "SYNC_MASTER"
            with started(replica2, tmp_path, "replica2") as (_, two):
                assert two["role"] == "SLAVE"
                for line in lines[3:]:
                    if line[:3] == ["tidemq", "topic", "create"]:
                        cli(tmp_path, line[1:], namesrv)
                assert run_example(tmp_path, example, namesrv) == "SEND_OK"
                wait_until(
                    in_sync_with_topic(one["broker"], two["broker"]),
                    "replica 2 in the SyncStateSet, with the topic",
                )
                first.popen.kill()  # kill -9 of the master
                first.popen.wait(timeout=30)
                assert run_example(tmp_path, example, namesrv) == "SEND_OK"

                def new_master() -> bool:
                    rows = json.loads(cli(tmp_path, ["cluster", "list", "--json"], namesrv))
                    return any(r["id"] == 0 and r["address"] == two["broker"] for r in rows)

                wait_until(new_master, "replica 2 registered as the master")
                with started(replica1, tmp_path, "replica1-again") as (_, back):
                    assert back["role"] == "SLAVE"
