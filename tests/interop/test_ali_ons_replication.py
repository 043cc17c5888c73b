"""ali-ons against a SYNC_MASTER (real processes: a name server, the master, then
its slave): ali-ons' producer reads SLAVE_NOT_AVAILABLE as a send status, not an
error (the message is stored on the master), while no slave is connected, and
SEND_OK once one is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ali_ons_harness import ScriptRunner, unique

from tidemq.testing.processes import free_port, server_env, started
from tidemq.testing.waiting import wait_until

CLI_DEADLINE_S = 60.0


class Cluster:
    """What a scenario script needs of a server: the name server, and a description."""

    def __init__(self, namesrv: str, logs: list[Path]) -> None:
        self.namesrv = namesrv
        self.logs = logs

    def describe(self) -> str:
        return "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in self.logs
        )


def cli(home: Path, namesrv: str, *args: str) -> object:
    result = subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", *args, "--namesrv", namesrv, "--json"],
        capture_output=True,
        text=True,
        env=server_env(home),
        timeout=CLI_DEADLINE_S,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def broker_config(home: Path, namesrv: str, name: str, role: str, broker_id: int) -> Path:
    path = home / f"{name}.json"
    path.write_text(
        json.dumps(
            {
                "broker_name": "broker-ons",
                "broker_id": broker_id,
                "broker_role": role,
                "listen_port": free_port(),
                "ha_listen_port": 0,
                "namesrv_addrs": [namesrv],
                "data_dir": str(home / name),
                "slave_sync_interval_s": 0.5,
            }
        )
    )
    return path


def sent_statuses(runner: ScriptRunner, topic: str) -> list[str]:
    script = runner.run("ali_producer_send", timeout=60.0, topic=topic, group=unique("ons"))
    return [event["sendStatus"] for event in script.of_kind("sent")]


def test_ali_ons_reads_a_sync_masters_statuses(node: str, tmp_path: Path) -> None:
    with started(["namesrv", "--port", "0"], tmp_path, "namesrv") as (_, ready):
        namesrv = ready["namesrv"]
        master_config = broker_config(tmp_path, namesrv, "master", "SYNC_MASTER", 0)
        with started(["broker", "--config", str(master_config)], tmp_path, "master"):
            topic = unique("OnsSync")
            cli(tmp_path, namesrv, "topic", "create", topic, "--queues", "2")
            runner = ScriptRunner(node, Cluster(namesrv, [tmp_path / "master.log"]))  # duck-typed
            try:
                assert sent_statuses(runner, topic) == ["SLAVE_NOT_AVAILABLE"] * 4

                slave_config = broker_config(tmp_path, namesrv, "slave", "SLAVE", 1)
                with started(["broker", "--config", str(slave_config)], tmp_path, "slave"):

                    def slave_connected() -> bool:
                        rows = cli(tmp_path, namesrv, "cluster", "list")
                        assert isinstance(rows, list)
                        return any(
                            row["id"] == 0 and row["runtime"].get("tidemqHaSlaves") == "1"
                            for row in rows
                        )

                    wait_until(slave_connected, "the slave on the master's HA port")
                    assert sent_statuses(runner, topic) == ["SEND_OK"] * 4
            finally:
                runner.close()


def runtime(home: Path, namesrv: str, broker_id: int) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO of the broker with `broker_id`, as `cluster list` shows it."""
    rows = cli(home, namesrv, "cluster", "list")
    assert isinstance(rows, list)
    (row,) = [row for row in rows if row["id"] == broker_id]
    table: dict[str, str] = row["runtime"]
    return table


def test_ali_ons_keeps_consuming_from_the_slave_while_the_master_is_down(
    node: str, tmp_path: Path
) -> None:
    count, pause_after = 80, 10
    with started(["namesrv", "--port", "0"], tmp_path, "namesrv") as (_, ready):
        namesrv = ready["namesrv"]
        master_config = broker_config(tmp_path, namesrv, "master", "ASYNC_MASTER", 0)
        slave_config = broker_config(tmp_path, namesrv, "slave", "SLAVE", 1)
        with (
            started(["broker", "--config", str(master_config)], tmp_path, "master") as (
                master,
                _,
            ),
            started(["broker", "--config", str(slave_config)], tmp_path, "slave"),
        ):
            topic, group = unique("OnsSlave"), unique("GID_slave")
            cli(tmp_path, namesrv, "topic", "create", topic, "--queues", "4")
            logs = [tmp_path / "master.log", tmp_path / "slave.log"]
            runner = ScriptRunner(node, Cluster(namesrv, logs))  # type: ignore[arg-type]
            try:
                options: dict[str, str | int] = {"topic": topic, "group": group, "count": count}
                runner.run("slave_read", timeout=60.0, phase="send", **options)

                def caught_up() -> bool:
                    ends = [runtime(tmp_path, namesrv, i)["commitLogMaxOffset"] for i in (0, 1)]
                    return ends[0] == ends[1]

                wait_until(caught_up, "the slave holding every message")
                consumer = runner.start(
                    "slave_read", timeout=120.0, phase="consume", pause_after=pause_after, **options
                )
                consumer.wait_for(
                    "the consumer's pause", lambda events: consumer.of_kind("paused"), 60.0
                )
                master.popen.kill()  # SIGKILL
                master.popen.wait(30)

                def only_the_slave_routed() -> bool:
                    route = cli(tmp_path, namesrv, "topic", "route", topic)
                    assert isinstance(route, dict)
                    return [sorted(b["brokerAddrs"]) for b in route["brokerDatas"]] == [["1"]]

                wait_until(only_the_slave_routed, "the name server dropping the master")
                served_before = int(runtime(tmp_path, namesrv, 1)["msgGetTotalTodayNow"])
                consumer.stop()  # the handler goes on
                consumer.wait_exit(120.0)
                labels = {event["label"] for event in consumer.of_kind("received")}
                assert labels == {f"m-{i}" for i in range(count)}
                # At most 2 pulled and 2 more asked for per queue before the pause.
                served = int(runtime(tmp_path, namesrv, 1)["msgGetTotalTodayNow"]) - served_before
                assert served >= count - pause_after - 4 * 4, served
            finally:
                runner.close()
