"""`tidemq serve`, `tidemq namesrv`, `tidemq broker` and the admin CLI as real processes.

Every server runs as a subprocess on free ports; every CLI call is a fresh
`python -m tidemq.cli.main` process. Conditions are waited for by polling
with deadlines, and every child is killed in a `finally`.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import CLI_DEADLINE_S, Cli, serve_args

from tidemq.testing.processes import ServerProcess as Process
from tidemq.testing.processes import free_port, started
from tidemq.testing.processes import server_env as _env
from tidemq.testing.waiting import wait_until

pytestmark = pytest.mark.slow


def test_standalone_server_and_every_admin_command(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with started(serve_args(data), tmp_path, "serve") as (server, ready):
        cli = Cli(tmp_path, ready["namesrv"])
        banner = "".join(server.output)
        assert ready["namesrv"] in banner
        assert f"nameSrv: '{ready['namesrv']}'" in banner

        created = cli.json("topic", "create", "Orders", "--queues", "4")
        assert created["brokers"] == ["broker-a"]
        assert "Orders" in cli.json("topic", "list")
        route = cli.json("topic", "route", "Orders")
        assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-a"]
        assert route["queueDatas"][0]["readQueueNums"] == 4
        assert route["brokerDatas"][0]["brokerAddrs"]["0"] == ready["broker"]

        sent = {}
        for body, tag, key in (
            ("one", "TagA", "k1"),
            ("two", "TagB", "k2"),
            ("three", "TagA", "k3"),
        ):
            (row,) = cli.json("send", "Orders", body, "--tags", tag, "--keys", key)
            assert row["status"] == "SEND_OK"
            sent[body] = row
        status = cli.json("topic", "status", "Orders")
        assert sum(q["max_offset"] for q in status) == 3

        tagged = cli.json_lines(
            "consume",
            "Orders",
            "--tags",
            "TagA",
            "--from-beginning",
            "--max",
            "2",
            "--timeout",
            "20",
        )
        assert sorted(m["body"] for m in tagged) == ["one", "three"]
        assert {m["tags"] for m in tagged} == {"TagA"}
        assert {m["msg_id"] for m in tagged} == {sent["one"]["msg_id"], sent["three"]["msg_id"]}

        people = cli.run("consume", "Orders", "--from-beginning", "--max", "3", "--timeout", "20")
        assert people.returncode == 0, people.stderr
        assert len(people.stdout.splitlines()) == 3
        assert 'body="two"' in people.stdout

        def by_key() -> list[Any] | None:
            result = cli.run("message", "query", "--topic", "Orders", "--key", "k2", "--json")
            return json.loads(result.stdout) if result.returncode == 0 else None

        (found,) = wait_until(by_key, "the key index to find k2")
        assert (found["body"], found["tags"]) == ("two", "TagB")
        viewed = cli.json("message", "query", "--id", sent["one"]["offset_msg_id"])
        assert (viewed["body"], viewed["queue_offset"]) == ("one", sent["one"]["queue_offset"])
        by_client_id = cli.json(
            "message", "query", "--id", sent["three"]["msg_id"], "--topic", "Orders"
        )
        assert by_client_id["body"] == "three"

        consumed = cli.json_lines(
            "consume",
            "Orders",
            "--group",
            "cg-cli",
            "--from-beginning",
            "--max",
            "3",
            "--timeout",
            "20",
        )
        assert len(consumed) == 3
        progress = cli.json("consumer", "progress", "cg-cli", "--topic", "Orders")
        assert progress["total_lag"] == 0
        assert (
            sum(q["consumer_offset"] for q in progress["queues"] if q["consumer_offset"] > 0) == 3
        )

        reset = cli.json("offset", "reset", "cg-cli", "Orders", "--timestamp", "0")
        assert {r["offset"] for r in reset} == {0}
        after = cli.json("consumer", "progress", "cg-cli", "--topic", "Orders")
        assert after["total_lag"] == 3

        (broker,) = cli.json("cluster", "list")
        assert (broker["cluster"], broker["broker"], broker["address"]) == (
            "DefaultCluster",
            "broker-a",
            ready["broker"],
        )

        assert cli.json("group", "create", "cg-made")["brokers"] == ["broker-a"]
        assert "cg-made" in {g["group"] for g in cli.json("group", "list")}

        down = cli.run("topic", "list", namesrv=f"127.0.0.1:{free_port()}")
        assert down.returncode != 0
        assert "cannot reach the name server at 127.0.0.1:" in down.stderr
        assert "(connection refused)" in down.stderr
        assert len(down.stderr.strip().splitlines()) == 1

        unknown = cli.run("topic", "route", "NoSuchTopic")
        assert unknown.returncode != 0
        assert "topic NoSuchTopic does not exist" in unknown.stderr

        invalid = cli.run("topic", "create", "bad topic!")
        assert invalid.returncode != 0
        assert invalid.stderr.startswith("Error: ")
        assert len(invalid.stderr.strip().splitlines()) == 1

        assert server.stop(signal.SIGTERM) == 0

    # the same data directory after a restart
    with started(serve_args(data), tmp_path, "serve-again") as (server, ready):
        cli = Cli(tmp_path, ready["namesrv"])
        assert cli.json("topic", "route", "Orders")["queueDatas"][0]["writeQueueNums"] == 4
        assert sum(q["max_offset"] for q in cli.json("topic", "status", "Orders")) == 3
        again = cli.json_lines(
            "consume", "Orders", "--from-beginning", "--max", "3", "--timeout", "20"
        )
        assert sorted(m["body"] for m in again) == ["one", "three", "two"]
        assert server.stop(signal.SIGINT) == 0


def test_two_brokers_in_cluster_mode(tmp_path: Path) -> None:
    with started(["namesrv", "--port", "0"], tmp_path, "namesrv") as (namesrv, ns_ready):
        namesrv_address = ns_ready["namesrv"]
        brokers = []
        try:
            for name in ("broker-a", "broker-b"):
                config = tmp_path / f"{name}.json"
                config.write_text(
                    json.dumps(
                        {
                            "broker_name": name,
                            "listen_port": 0,
                            "namesrv_addrs": [namesrv_address],
                            "data_dir": str(tmp_path / name),
                        }
                    )
                )
                process = Process(
                    ["broker", "--config", str(config)], tmp_path, tmp_path / f"{name}.log"
                )
                brokers.append(process)
                fields = process.wait_ready()
                assert fields["name"] == name
            cli = Cli(tmp_path, namesrv_address)

            def both_registered() -> list[Any] | None:
                rows = cli.json("cluster", "list")
                return rows if {r["broker"] for r in rows} == {"broker-a", "broker-b"} else None

            wait_until(both_registered, "both brokers to register")
            created = cli.json("topic", "create", "Spread", "--queues", "2")
            assert created["brokers"] == ["broker-a", "broker-b"]
            route = cli.json("topic", "route", "Spread")
            assert sorted(q["brokerName"] for q in route["queueDatas"]) == ["broker-a", "broker-b"]
            assert {b["brokerName"] for b in route["brokerDatas"]} == {"broker-a", "broker-b"}

            unknown = cli.run("send", "NotCreated", "x")
            assert unknown.returncode != 0
            assert "NotCreated" in unknown.stderr

            for process in brokers:
                assert process.stop() == 0
            assert namesrv.stop() == 0
        finally:
            for process in brokers:
                process.kill()


@pytest.mark.parametrize("variable", ["TIDEMQ_GC", "TIDEMQ_MALLOC"])
def test_an_unknown_process_setting_stops_serve_before_it_listens(
    tmp_path: Path, variable: str
) -> None:
    env = {**_env(tmp_path), variable: "fastest"}
    result = subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", *serve_args(tmp_path / "data")],
        capture_output=True,
        text=True,
        env=env,
        timeout=CLI_DEADLINE_S,
        check=False,
    )
    assert result.returncode != 0
    assert f"{variable}='fastest'" in result.stderr
    assert "tidemq ready" not in result.stdout
