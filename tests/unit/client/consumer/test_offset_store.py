"""LocalFileOffsetStore (real files in tmp_path) and the in-memory table rules."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.client.consumer.offset_store import (
    LocalFileOffsetStore,
    ReadOffsetType,
    local_store_owner,
    offset_key,
    parse_offset_key,
)
from tidemq.client.errors import ClientError
from tidemq.common.message import MessageQueue

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)
OTHER = MessageQueue("U", "broker-b", 3)


def store(tmp_path: Path, client_id: str = "10.0.0.1@1234#99") -> LocalFileOffsetStore:
    return LocalFileOffsetStore("cg", client_id, tmp_path)


def test_file_lives_under_client_id_and_group(tmp_path: Path) -> None:
    s = LocalFileOffsetStore("cg", "10.0.0.1@inst:7/x", tmp_path)
    assert s.path == tmp_path / "10.0.0.1@inst_7_x" / "cg" / "offsets.json"
    assert s.backup_path == s.path.with_name("offsets.json.bak")
    assert LocalFileOffsetStore("g", "..", tmp_path).path.parent.parent.name == "_.."


async def test_round_trip_through_the_file(tmp_path: Path) -> None:
    s = store(tmp_path)
    await s.load()
    assert s.table() == {}
    s.update(MQ0, 5)
    s.update(MQ1, 7)
    s.update(OTHER, 1)
    await s.persist_all([MQ0, MQ1, OTHER])
    document = json.loads(s.path.read_text())
    assert document == {"offsetTable": {"T@broker-a@0": 5, "T@broker-a@1": 7, "U@broker-b@3": 1}}
    again = store(tmp_path)
    await again.load()
    assert again.table() == {MQ0: 5, MQ1: 7, OTHER: 1}
    assert again.table("T") == {MQ0: 5, MQ1: 7}
    assert await again.read(MQ1, ReadOffsetType.READ_FROM_MEMORY) == 7


async def test_reads_by_type(tmp_path: Path) -> None:
    writer = store(tmp_path)
    writer.update(MQ0, 10)
    await writer.persist(MQ0)
    reader = store(tmp_path)  # not loaded: memory is empty
    assert await reader.read(MQ0, ReadOffsetType.READ_FROM_MEMORY) == -1
    assert await reader.read(MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 10
    reader.update(MQ0, 12)
    assert await reader.read(MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 12
    assert await reader.read(MQ0, ReadOffsetType.READ_FROM_STORE) == 10
    assert await reader.read(MQ1, ReadOffsetType.READ_FROM_STORE) == -1
    reader.remove(MQ0)
    assert await reader.read(MQ0, ReadOffsetType.READ_FROM_MEMORY) == -1


async def test_each_write_keeps_the_previous_file_as_bak(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.update(MQ0, 1)
    await s.persist_all([MQ0])
    assert not s.backup_path.exists()
    s.update(MQ0, 2)
    await s.persist_all([MQ0])
    assert json.loads(s.backup_path.read_text())["offsetTable"] == {"T@broker-a@0": 1}
    assert json.loads(s.path.read_text())["offsetTable"] == {"T@broker-a@0": 2}
    assert not s.path.with_name("offsets.json.tmp").exists()


async def test_unchanged_table_is_not_rewritten(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.update(MQ0, 1)
    await s.persist_all([MQ0])
    s.path.write_text('{"offsetTable": {"T@broker-a@0": 99}}')
    await s.persist_all([MQ0])  # nothing changed in memory: no write
    assert json.loads(s.path.read_text())["offsetTable"] == {"T@broker-a@0": 99}


async def test_corrupt_file_falls_back_to_bak(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    s = store(tmp_path)
    s.update(MQ0, 1)
    await s.persist_all([MQ0])
    s.update(MQ0, 2)
    await s.persist_all([MQ0])
    s.path.write_bytes(b'{"offsetTable": {"T@broker-a@0": 3')  # torn write
    reloaded = store(tmp_path)
    with caplog.at_level(logging.WARNING):
        await reloaded.load()
    assert reloaded.table() == {MQ0: 1}
    assert "corrupt" in caplog.text
    # The next write does not back up the corrupt file over the good .bak.
    reloaded.update(MQ0, 4)
    await reloaded.persist_all([MQ0])
    assert json.loads(reloaded.backup_path.read_text())["offsetTable"] == {"T@broker-a@0": 1}
    assert json.loads(reloaded.path.read_text())["offsetTable"] == {"T@broker-a@0": 4}


@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe not text",
        b"[1, 2]",
        b'{"offsetTable": [1]}',
        b'{"offsetTable": {"T@broker-a@0": -4}}',
        b'{"offsetTable": {"T@broker-a@0": "5"}}',
        b'{"offsetTable": {"no-separators": 5}}',
        b'{"offsetTable": {"T@broker-a@zero": 5}}',
    ],
)
async def test_unusable_file_and_bak_start_empty_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    s = store(tmp_path)
    s.path.parent.mkdir(parents=True)
    s.path.write_bytes(content)
    s.backup_path.write_bytes(b"garbage")
    with caplog.at_level(logging.WARNING):
        await s.load()
    assert s.table() == {}
    assert "starting empty" in caplog.text


async def test_missing_file_uses_bak(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.backup_path.parent.mkdir(parents=True)
    s.backup_path.write_text('{"offsetTable": {"T@broker-a@1": 8}}')
    await s.load()
    assert s.table() == {MQ1: 8}


async def test_java_fastjson_file_is_read(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.path.parent.mkdir(parents=True)
    s.path.write_text(
        '{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:33,'
        '{"brokerName":"broker-b","queueId":3,"topic":"U"}:4}}'
    )
    await s.load()
    assert s.table() == {MQ1: 33, OTHER: 4}


def test_offset_keys_round_trip_with_at_signs_in_broker_names() -> None:
    mq = MessageQueue("%RETRY%cg", "broker@dc1", 12)
    assert offset_key(mq) == "%RETRY%cg@broker@dc1@12"
    assert parse_offset_key(offset_key(mq)) == mq


def test_negative_offsets_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=">= 0"):
        store(tmp_path).update(MQ0, -1)


offsets = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10_000)), max_size=40)


@given(offsets)
def test_increase_only_updates_are_monotone(updates: list[tuple[int, int]]) -> None:
    s = LocalFileOffsetStore("cg", "c", Path("/nonexistent-never-written"))
    queues = [MessageQueue("T", "b", i) for i in range(4)]
    best: dict[MessageQueue, int] = {}
    for index, offset in updates:
        mq = queues[index]
        before = s.table().get(mq)
        s.update(mq, offset, increase_only=True)
        after = s.table()[mq]
        assert before is None or after >= before
        best[mq] = max(best.get(mq, offset), offset)
        assert after == best[mq]
    assert s.table() == best


@given(offsets)
def test_plain_updates_take_the_last_value(updates: list[tuple[int, int]]) -> None:
    s = LocalFileOffsetStore("cg", "c", Path("/nonexistent-never-written"))
    last: dict[MessageQueue, int] = {}
    for index, offset in updates:
        mq = MessageQueue("T", "b", index)
        s.update(mq, offset)
        last[mq] = offset
    assert s.table() == last


def test_default_directory_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDEMQ_OFFSET_STORE_DIR", str(tmp_path / "env"))
    assert LocalFileOffsetStore("cg", "c1").path == tmp_path / "env" / "c1" / "cg" / "offsets.json"
    monkeypatch.delenv("TIDEMQ_OFFSET_STORE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert LocalFileOffsetStore("cg", "c1").path.parent.parent.parent == (
        tmp_path / "home" / ".tidemq_offsets"
    )


def test_a_claimed_file_is_refused_to_a_second_store_until_released(tmp_path: Path) -> None:
    first = LocalFileOffsetStore("G", local_store_owner("10.0.0.1", None), tmp_path)
    second = LocalFileOffsetStore("G", local_store_owner("10.0.0.1", None), tmp_path)
    other_instance = LocalFileOffsetStore("G", local_store_owner("10.0.0.1", "b"), tmp_path)
    first.claim()
    first.claim()  # the holder may claim again
    other_instance.claim()  # another instance name is another file
    with pytest.raises(ClientError, match="instance_name"):
        second.claim()
    first.release()
    second.claim()
    second.release()
    other_instance.release()


def test_the_default_owner_is_stable_across_processes() -> None:
    assert local_store_owner("10.0.0.1", None) == "10.0.0.1@DEFAULT"
    assert local_store_owner("10.0.0.1", "blue") == "10.0.0.1@blue"
