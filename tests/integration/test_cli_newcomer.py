"""What trips a newcomer at the command line (issue #15), against a real
`tidemq serve`: every CLI call is a fresh `python -m tidemq.cli.main` process
with `--namesrv`; conditions are polled with deadlines."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tidemq.testing.processes import ServerProcess, serve, serve_args, started
from tidemq.testing.processes import server_env as _env
from tidemq.testing.waiting import unique_name

pytestmark = pytest.mark.slow

CLI_DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("newcomer") / "data") as process:
        yield process


def tidemq(
    server: ServerProcess, *args: str, namesrv: str | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tidemq.cli.main", *args]
    command += ["--namesrv", namesrv or server.namesrv]
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=_env(server.home),
        timeout=CLI_DEADLINE_S,
        check=False,
    )


def ok_json(server: ServerProcess, *args: str) -> Any:
    result = tidemq(server, *args, "--json")
    assert result.returncode == 0, f"{args}: {result.stdout}{result.stderr}"
    return json.loads(result.stdout)


def test_a_broker_or_grpc_port_given_as_the_name_server_is_named(server: ServerProcess) -> None:
    wrong = tidemq(server, "topic", "list", namesrv=server.broker)
    assert wrong.returncode == 1
    assert wrong.stderr.strip() == (
        f"Error: {server.broker} is a tidemq broker (broker-a of cluster DefaultCluster), "
        f"not a name server; its name server is {server.namesrv}"
    )
    grpc = tidemq(server, "topic", "route", "T", namesrv=server.grpc)
    assert grpc.returncode == 1
    assert grpc.stderr.startswith(
        f"Error: {server.grpc} is a gRPC (HTTP/2) endpoint, not a name server"
    )
    as_json = tidemq(server, "cluster", "list", "--json", namesrv=server.grpc)
    assert as_json.returncode == 1
    error = json.loads(as_json.stdout)
    assert error["error"].startswith(f"{server.grpc} is a gRPC (HTTP/2) endpoint")
    assert (error["code"], error["code_name"]) == (-1000, "RPC_UNKNOWN")


def test_topic_create_on_an_existing_topic_says_what_changed(server: ServerProcess) -> None:
    topic = unique_name("Grows")
    first = tidemq(server, "topic", "create", topic, "--queues", "4")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[0].strip() == f"topic {topic} created"
    again = tidemq(server, "topic", "create", topic, "--queues", "8")
    assert again.returncode == 0, again.stderr
    assert f"topic {topic} updated (4 → 8 queues)" in again.stdout
    for shown in ("RW-", "NORMAL"):
        assert shown in again.stdout
    assert "None" not in again.stdout
    same = ok_json(server, "topic", "create", topic, "--queues", "8")
    assert (same["result"], same["type"], same["perm"]) == ("unchanged", "NORMAL", 6)
    assert same["previous"] == {"broker-a": {"perm": 6, "read_queues": 8, "write_queues": 8}}
    typed = ok_json(server, "topic", "create", unique_name("Typed"), "--type", "fifo")
    assert (typed["result"], typed["type"]) == ("created", "FIFO")
    route = tidemq(server, "topic", "route", topic)
    assert "RW-" in route.stdout
    read_only = tidemq(server, "topic", "update", topic, "--perm", "4")
    assert read_only.returncode == 0, read_only.stderr
    assert "R--" in read_only.stdout and " 4 " not in read_only.stdout


def test_a_key_query_pages_through_the_index(server: ServerProcess) -> None:
    topic = unique_name("Keyed")
    ok_json(server, "topic", "create", topic)
    sent = ok_json(server, "send", topic, "x", "--keys", "bulk", "--count", "150")
    assert len(sent) == 150
    found = ok_json(server, "message", "query", "--topic", topic, "--key", "bulk", "--max", "1000")
    assert sorted(m["msg_id"] for m in found) == sorted(s["msg_id"] for s in sent)
    cut = tidemq(server, "message", "query", "--topic", topic, "--key", "bulk", "--max", "100")
    assert cut.returncode == 0, cut.stderr
    assert len(cut.stdout.splitlines()) == 100
    assert "showing the newest 100 messages with key bulk" in cut.stderr


def test_ids_printed_by_send_find_their_message(server: ServerProcess) -> None:
    topic = unique_name("Ids")
    ok_json(server, "topic", "create", topic)
    (sent,) = ok_json(server, "send", topic, "by id")
    by_offset_id = ok_json(server, "message", "query", "--id", sent["offset_msg_id"])
    assert (by_offset_id["body"], by_offset_id["msg_id"]) == ("by id", sent["msg_id"])
    no_topic = tidemq(server, "message", "query", "--id", sent["msg_id"])
    assert no_topic.returncode == 1
    assert "is a client message id" in no_topic.stderr
    assert "--topic" in no_topic.stderr
    with_topic = ok_json(server, "message", "query", "--id", sent["msg_id"], "--topic", topic)
    assert with_topic["offset_msg_id"] == sent["offset_msg_id"]
    people = tidemq(server, "message", "query", "--topic", topic, "--key", "nothing")
    assert people.returncode == 1
    line = tidemq(server, "send", topic, "shown whole")
    assert line.returncode == 0
    assert len(line.stdout.split("msg_id=")[1].split()[0]) == 32


def test_offset_reset_to_a_place(server: ServerProcess) -> None:
    topic, group = unique_name("Resets"), unique_name("ResetGroup")
    ok_json(server, "topic", "create", topic, "--queues", "2")
    ok_json(server, "send", topic, "m", "--count", "6")
    consumed = tidemq(
        server,
        "consume",
        topic,
        "--group",
        group,
        "--from-beginning",
        "--max",
        "6",
        "--timeout",
        "20",
    )
    assert consumed.returncode == 0, consumed.stderr

    def offsets(*place: str) -> dict[int, int]:
        rows = ok_json(server, "offset", "reset", group, topic, *place)
        return {row["queue"]: row["offset"] for row in rows}

    ends = {q["queue"]: q["max_offset"] for q in ok_json(server, "topic", "status", topic)}
    assert offsets("--to", "earliest") == {0: 0, 1: 0}
    assert offsets("--to", "latest") == ends
    assert offsets("--to", "1") == {0: 1, 1: 1}
    assert offsets("--to", "0", "--queue", "1") == {1: 0}
    progress = ok_json(server, "consumer", "progress", group, "--topic", topic)
    assert {q["queue"]: q["consumer_offset"] for q in progress["queues"]} == {0: 1, 1: 0}
    wrong = tidemq(server, "offset", "reset", group, topic, "--to", "soon", "--json")
    assert wrong.returncode == 2
    assert "not earliest, latest or a queue offset" in json.loads(wrong.stdout)["error"]


def test_send_refuses_a_retry_topic(server: ServerProcess) -> None:
    refused = tidemq(server, "send", "%RETRY%billing", "x")
    assert refused.returncode == 2
    assert "retry topic of consumer group billing" in refused.stderr
    assert ok_json(server, "topic", "list").count("%RETRY%billing") == 0


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_serve_says_it_stopped(tmp_path: Path, stop_signal: signal.Signals) -> None:
    with started(serve_args(tmp_path / "data"), tmp_path, "serve") as (process, _):
        assert process.stop(stop_signal) == 0
        process.kill()  # joins the reader: every line is in the queue
        rest = []
        while (line := process.lines.get_nowait()) is not None:
            rest.append(line)
    assert rest[-1] == f"tidemq stopped signal={stop_signal.name}\n"
