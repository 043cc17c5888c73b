"""What the CLI prints, without a server: JSON errors, tables that never cut
a value, topic changes, permissions, cut key queries, refused topics."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from rich.console import Console

from tidemq.cli import output, plumbing
from tidemq.cli.admin_commands import topic_change
from tidemq.cli.main import cli, wants_json
from tidemq.cli.message_commands import cut_notice, refuse_group_topic
from tidemq.cli.output import emit
from tidemq.client.admin import AdminError, KeyQueryResult, QueueData
from tidemq.client.model import perm_text
from tidemq.common.message import MessageExt
from tidemq.protocol import ResponseCode

CLIENT_ID = "0DBC9F614346B007B7A879D8AC6E0000"
OFFSET_ID = "7F00000100002A9F00000000000A1B2C"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


class FakeAdmin:
    """Stands in for AdminClient inside the commands (no network)."""

    def __init__(
        self, namesrv: list[str], *, credentials: object = None, tls: object = None
    ) -> None:
        self.namesrv = namesrv

    async def __aenter__(self) -> FakeAdmin:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    async def all_topics(self) -> list[str]:
        raise AdminError("topic list refused", ResponseCode.NO_PERMISSION)

    async def find_by_key(self, topic: str, key: str, max_num: int) -> KeyQueryResult:
        message = MessageExt(
            topic=topic,
            body=b"hello",
            properties={"KEYS": key, "UNIQ_KEY": CLIENT_ID},
            queue_id=1,
            queue_offset=7,
            msg_id=OFFSET_ID,
            store_timestamp=1_700_000_000_000,
        )
        return KeyQueryResult([message] * min(max_num, 3), cut=max_num < 3)


@pytest.fixture
def fake_admin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plumbing, "AdminClient", FakeAdmin)


# -- --json failures --------------------------------------------------------------


@pytest.mark.usefixtures("fake_admin")
def test_a_refusal_with_json_is_a_json_object_with_the_code() -> None:
    code, out = run("topic", "list", "--json")
    assert code == 1
    assert json.loads(out) == {
        "error": "topic list refused",
        "code": ResponseCode.NO_PERMISSION,
        "code_name": "NO_PERMISSION",
    }
    code, out = run("topic", "list")
    assert (code, out.strip()) == (1, "Error: topic list refused")


def test_a_usage_error_with_json_is_a_json_object_too() -> None:
    code, out = run("offset", "reset", "G", "T", "--json")
    assert code == 2
    error = json.loads(out)
    assert "give --timestamp or --to" in error["error"]
    assert error["code"] is None
    code, out = run("topic", "create", "T", "--queues", "0", "--json")
    assert code == 2
    assert "--queues" in json.loads(out)["error"]


def test_json_is_wanted_only_before_a_double_dash() -> None:
    assert wants_json(["topic", "list", "--json"])
    assert not wants_json(["send", "T", "--", "--json"])
    assert not wants_json(["topic", "list"])


# -- tables never cut ------------------------------------------------------------------


def test_rows_too_wide_for_the_terminal_become_whole_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(output, "console", Console(width=60))
    rows = [{"msg_id": CLIENT_ID, "offset_msg_id": OFFSET_ID, "queue": 1, "body": "x" * 30}]
    emit(rows, as_json=False, title="found")
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "found"
    assert f"msg_id={CLIENT_ID}  offset_msg_id={OFFSET_ID}" in out
    emit({"msg_id": CLIENT_ID, "properties": {"k": "v" * 80}}, as_json=False)
    out = capsys.readouterr().out
    assert f"msg_id: {CLIENT_ID}" in out


def test_rows_that_fit_stay_a_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(output, "console", Console(width=120))
    emit([{"msg_id": CLIENT_ID, "queue": 1}], as_json=False, title="found")
    out = capsys.readouterr().out
    assert CLIENT_ID in out
    assert "┃ msg_id" in out


@pytest.mark.usefixtures("fake_admin")
def test_key_query_lines_carry_whole_ids_and_say_when_cut() -> None:
    result = CliRunner().invoke(
        cli, ["message", "query", "--topic", "T", "--key", "k", "--max", "2"]
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert f"id={CLIENT_ID}  offset_id={OFFSET_ID}" in lines[0]
    assert "showing the newest 2 messages with key k" in result.stderr


# -- small formatters ------------------------------------------------------------------


def test_permissions_as_java_prints_them() -> None:
    # PermName.perm2String: R, W, X (inherit) or "-"
    assert [perm_text(p) for p in (6, 4, 2, 0, 7)] == ["RW-", "R--", "-W-", "---", "RWX"]


def test_what_topic_create_did() -> None:
    four = {"broker-a": QueueData("broker-a", 4, 4, 6)}
    eight = {"broker-a": QueueData("broker-a", 8, 8, 6)}
    assert topic_change({}, four) == "created"
    assert topic_change(four, four) == "unchanged"
    assert topic_change(four, eight) == "updated (4 → 8 queues)"
    read_only = {"broker-a": QueueData("broker-a", 4, 4, 4)}
    assert topic_change(four, read_only) == "updated (perm RW- → R--)"
    both = {**eight, "broker-b": QueueData("broker-b", 8, 8, 6)}
    assert topic_change(four, both) == "updated (4 → 8 queues, now also on broker-b)"


def test_cut_and_incomplete_notices() -> None:
    message = MessageExt(topic="T", body=b"")
    assert cut_notice(KeyQueryResult([message], cut=False), "k", 5) is None
    cut = cut_notice(KeyQueryResult([message], cut=True), "k", 1)
    assert cut is not None and "raise --max above 1" in cut
    partial = cut_notice(KeyQueryResult([message], cut=False, incomplete=True), "k", 5)
    assert partial is not None and "some may be missing" in partial


def test_group_topics_are_refused_by_send() -> None:
    assert refuse_group_topic("Orders") is None
    retry = refuse_group_topic("%RETRY%billing")
    assert retry is not None and "retry topic of consumer group billing" in retry
    dlq = refuse_group_topic("%DLQ%billing")
    assert dlq is not None and "dead-letter topic" in dlq
    code, out = run("send", "%RETRY%billing", "x", "--namesrv", "127.0.0.1:1")
    assert code == 2
    assert "retry topic of consumer group billing" in out
