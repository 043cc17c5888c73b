"""The admin commands without a server: argument errors, formatting, helpers."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click
import pytest
from click.testing import CliRunner

from tidemq.cli import plumbing
from tidemq.cli.main import cli
from tidemq.cli.message_commands import message_json
from tidemq.cli.plumbing import parse_properties, parse_timestamp
from tidemq.client.admin import (
    AdminClient,
    AdminError,
    BrokerData,
    QueueData,
    QueueProgress,
    QueueStatus,
    SendResult,
    TopicRoute,
    loads_lenient,
    parse_address_list,
    parse_tag_expression,
)
from tidemq.common.message import MessageExt
from tidemq.transport.ports import free_port


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


# -- command line -------------------------------------------------------------------


def test_help_lists_every_command() -> None:
    code, output = run("--help")
    assert code == 0
    for name in (
        "serve",
        "namesrv",
        "broker",
        "topic",
        "group",
        "consumer",
        "send",
        "consume",
        "message",
        "offset",
        "cluster",
        "store",
    ):
        assert name in output


def test_unreachable_name_server_is_one_readable_line() -> None:
    port = free_port()
    code, output = run("topic", "list", "--namesrv", f"127.0.0.1:{port}")
    assert code == 1
    assert output.strip() == (
        f"Error: cannot reach the name server at 127.0.0.1:{port} (connection refused)"
    )


def test_namesrv_comes_from_the_environment() -> None:
    port = free_port()
    result = CliRunner().invoke(
        cli, ["cluster", "list", "--json"], env={"TIDEMQ_NAMESRV": f"127.0.0.1:{port}"}
    )
    assert result.exit_code == 1
    assert f"127.0.0.1:{port}" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["topic", "list", "--namesrv", "nohost"], "is not a HOST:PORT address"),
        (["topic", "update", "T"], "give at least one of --queues"),
        (["topic", "create", "T", "--queues", "0"], "--queues"),
        (["send", "T", "body", "--property", "novalue"], "KEY=VALUE"),
        (["consume", "T", "--tags", "A", "--sql", "a > 1"], "give --tags or --sql"),
        (["consume", "T", "--max", "0"], "--max"),
        (["message", "query"], "give either --key"),
        (["message", "query", "--key", "k"], "--key needs --topic"),
        (["offset", "reset", "G", "T", "--timestamp", "yesterday-ish"], "ISO-8601"),
        (["offset", "reset", "G", "T"], "--timestamp"),
    ],
)
def test_argument_errors_exit_2_with_a_reason(args: list[str], message: str) -> None:
    code, output = run(*args)
    assert code == 2
    assert message in output


def test_reserved_property_is_refused_before_any_network() -> None:
    code, output = run(
        "send", "T", "body", "--property", "TAGS=x", "--namesrv", f"127.0.0.1:{free_port()}"
    )
    assert code == 1
    assert "property TAGS is reserved" in output


# -- helpers ----------------------------------------------------------------------


def test_parse_timestamp_forms() -> None:
    assert parse_timestamp("1700000000123") == 1700000000123
    assert parse_timestamp("2024-05-01T12:00:00Z") == int(
        datetime(2024, 5, 1, 12, tzinfo=UTC).timestamp() * 1000
    )
    assert parse_timestamp("2024-05-01T14:00:00+02:00") == parse_timestamp("2024-05-01T12:00:00Z")
    assert parse_timestamp("now") > 1_700_000_000_000
    with pytest.raises(ValueError, match="ISO-8601"):
        parse_timestamp("tomorrow")


def test_parse_properties() -> None:
    assert parse_properties(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(click.BadParameter) as refused:
        parse_properties(["=1"], "--set")
    assert "--set" in refused.value.format_message()


def test_message_json_text_and_binary_bodies() -> None:
    message = MessageExt(
        topic="T",
        body="héllo".encode(),
        properties={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC"},
        queue_id=2,
        queue_offset=7,
        msg_id="7F00000100002A9F0000000000000000",
    )
    data = message_json(message)
    assert data["body"] == "héllo"
    assert data["msg_id"] == "ABC"
    assert data["offset_msg_id"] == "7F00000100002A9F0000000000000000"
    assert data["keys"] == ["k1", "k2"]
    assert (data["tags"], data["queue_id"], data["queue_offset"]) == ("TagA", 2, 7)
    json.dumps(data)
    message.body = b"\xff\x00"
    binary = message_json(message)
    assert binary["body"] is None
    assert binary["body_base64"] == "/wA="


def test_parse_address_list() -> None:
    assert parse_address_list("a:1;b:2, c:3") == ["a:1", "b:2", "c:3"]
    assert parse_address_list(["127.0.0.1:9876"]) == ["127.0.0.1:9876"]
    for bad in ("", "host", "host:0", "host:70000", "host:port"):
        with pytest.raises(ValueError):
            parse_address_list(bad)


def test_parse_tag_expression() -> None:
    assert parse_tag_expression("*") is None
    assert parse_tag_expression("  ") == frozenset()  # Java: no tag, so nothing matches
    assert parse_tag_expression("TagA || TagB ||") == frozenset({"TagA", "TagB"})
    assert parse_tag_expression("TagA || *") == frozenset({"TagA", "*"})  # Java: "*" is a tag


def test_lenient_json_reads_fastjson_maps() -> None:
    text = (
        '{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"maxOffset":3}},'
        '"brokerAddrs":{0:"127.0.0.1:10911"}}'
    )
    data = loads_lenient(text)
    assert data["brokerAddrs"] == {"0": "127.0.0.1:10911"}
    (key,) = data["offsetTable"]
    assert json.loads(key) == {"brokerName": "b", "queueId": 1, "topic": "T"}
    assert loads_lenient(b'{"a": [1, 2.5, true, null]}') == {"a": [1, 2.5, True, None]}
    for bad in ("{", '{"a" 1}', "[1,]", "{}x"):
        with pytest.raises(ValueError):
            loads_lenient(bad)


def test_route_queue_lists_follow_permissions() -> None:
    route = TopicRoute(
        "T",
        (QueueData("a", 2, 3, 6), QueueData("b", 2, 2, 4), QueueData("c", 1, 1, 6)),
        (
            BrokerData("C", "a", {0: "h:1"}),
            BrokerData("C", "b", {0: "h:2"}),
            BrokerData("C", "c", {1: "h:3"}),
        ),
    )
    assert [(q.broker_name, q.queue_id) for q in route.write_queues()] == [
        ("a", 0),
        ("a", 1),
        ("a", 2),
    ]
    assert [(q.broker_name, q.queue_id) for q in route.read_queues()] == [
        ("a", 0),
        ("a", 1),
        ("b", 0),
        ("b", 1),
        ("c", 0),
    ]
    assert route.masters() == {"a": "h:1", "b": "h:2"}


async def test_admin_error_carries_the_code() -> None:
    async with AdminClient(f"127.0.0.1:{free_port()}", timeout=1.0) as admin:
        with pytest.raises(AdminError) as caught:
            await admin.all_topics()
    assert caught.value.code < 0
    assert "connection refused" in str(caught.value)


# -- formatting, with the client replaced by a fake ---------------------------------


class FakeAdmin:
    """Stands in for AdminClient inside the commands (no network)."""

    def __init__(
        self, namesrv: list[str], *, credentials: object = None, tls: object = None
    ) -> None:
        self.namesrv = namesrv
        self.credentials = credentials
        self.tls = tls

    async def __aenter__(self) -> FakeAdmin:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    async def consumer_progress(self, group: str, topic: str | None) -> list[QueueProgress]:
        if group == "idle":
            return []
        return [
            QueueProgress("T", "broker-a", 0, 10, 4, 1_700_000_000_000),
            QueueProgress("T", "broker-a", 1, 5, 5, 0),
        ]

    async def send(self, topic: str, body: bytes, *args: object, **options: object) -> SendResult:
        return SendResult("SEND_OK", "C" * 32, "7F" * 16, topic, "broker-a", 2, 9)

    async def topic_status(self, topic: str) -> list[QueueStatus]:
        return [QueueStatus(topic, "broker-a", 0, 0, 3, 1_700_000_000_000)]

    async def all_topics(self) -> list[str]:
        raise AdminError("the name server said no", 1)


@pytest.fixture
def fake_admin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plumbing, "AdminClient", FakeAdmin)


@pytest.mark.usefixtures("fake_admin")
def test_consumer_progress_json_and_total_lag() -> None:
    code, output = run("consumer", "progress", "g", "--json")
    assert code == 0, output
    data = json.loads(output)
    assert data["total_lag"] == 6
    assert [q["lag"] for q in data["queues"]] == [6, 0]
    assert data["queues"][0]["last_timestamp"] == 1_700_000_000_000
    code, output = run("consumer", "progress", "g")
    assert code == 0
    assert "total lag: 6" in output
    code, output = run("consumer", "progress", "idle")
    assert code == 1
    assert "group idle has no consume progress" in output


@pytest.mark.usefixtures("fake_admin")
def test_send_prints_whole_ids_for_people_and_rows_for_programs() -> None:
    code, output = run("send", "T", "hello", "--count", "2")
    assert code == 0, output
    lines = output.splitlines()
    assert len(lines) == 2
    assert f"msg_id={'C' * 32}" in lines[0]
    assert f"offset_msg_id={'7F' * 16}" in lines[0]
    assert "queue=broker-a/2" in lines[0]
    code, output = run("send", "T", "hello", "--json")
    assert json.loads(output) == [
        {
            "broker": "broker-a",
            "msg_id": "C" * 32,
            "offset_msg_id": "7F" * 16,
            "queue": 2,
            "queue_offset": 9,
            "status": "SEND_OK",
        }
    ]


@pytest.mark.usefixtures("fake_admin")
def test_topic_status_and_server_errors() -> None:
    code, output = run("topic", "status", "T", "--json")
    assert code == 0
    assert json.loads(output) == [
        {
            "broker": "broker-a",
            "queue": 0,
            "min_offset": 0,
            "max_offset": 3,
            "last_update_timestamp": 1_700_000_000_000,
        }
    ]
    code, output = run("topic", "list")
    assert code == 1
    assert output.strip() == "Error: the name server said no"
