"""Groups of single messages appended in one call (`FileMessageStore.append`
through `tidemq.record.group_append`, compiled or its Python twin) leave the
same bytes in every store file, and the same results, as the general path
(one encode per message), across commitlog, consumequeue and index file
boundaries, with messages the fast path leaves to the general path mixed in;
and what either path wrote is read back after a reopen."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.clock import ManualClock
from tidemq.record import group_append
from tidemq.record.native import compiled
from tidemq.store.api import MessageToStore, PutResult, PutStatus
from tidemq.store.config import SCHEDULE_TOPIC, FlushMode, StoreConfig
from tidemq.store.file_store import FileMessageStore
from tidemq.testing.stores import small_config


def _message(rng: random.Random, n: int) -> MessageToStore:
    properties = {props.TAGS: rng.choice(["TagA", "TagB", ""]), props.UNIQ_KEY: f"U{n}"}
    if rng.random() < 0.4:
        properties[props.KEYS] = f"k{n % 7} k{n} k{n % 7}"
    message = MessageToStore(
        rng.choice(["Orders", "Orders", "Payments"]),
        rng.randrange(3),
        rng.randbytes(rng.randrange(1, 3000)),
        props.encode_properties(properties),
        flag=n,
        born_timestamp=1_700_000_000_000 + n,
        born_host=rng.choice([b"\x0a\x00\x00\x07", bytes(range(16))]),
        born_port=40000 + n,
        reconsume_times=n % 3,
    )
    odd = rng.random()
    if odd < 0.03:  # the store computes the delay topic's tag slot: general path
        message.topic, message.properties = SCHEDULE_TOPIC, "DELAY\x013\x02"
    elif odd < 0.06:  # a transaction half: no consumequeue entry, general path
        message.sys_flag = sysflag.TRANSACTION_PREPARED_TYPE
    elif odd < 0.08:  # a queue nobody wrote yet: the general path creates it
        message.queue_id = 3 + n % 2
    return message


def _groups(seed: int) -> list[list[MessageToStore]]:
    rng = random.Random(seed)
    n = 0
    groups = []
    for _ in range(70):
        group = []
        for _ in range(rng.randrange(1, 17)):
            group.append(_message(rng, n))
            n += 1
        groups.append(group)
    return groups


def _config(root: Path, **overrides: Any) -> StoreConfig:
    """Small files, so the groups cross commitlog, consumequeue and index files."""
    return small_config(root, consumequeue_entries_per_file=16, index_max_count=300, **overrides)


def _write(
    root: Path, groups: list[list[MessageToStore]]
) -> list[tuple[PutStatus, tuple[Any, ...]]]:
    clock = ManualClock()
    store = FileMessageStore(_config(root), clock=clock)
    store.open()
    answers = []
    try:
        for group in groups:
            clock.advance(0.007)
            result = store.append(group)
            answers.append((result.status, result.results))
    finally:
        store.close()
    return answers


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != "lock"
    }


def _use(monkeypatch: pytest.MonkeyPatch, encoder: str) -> None:
    if encoder == "compiled":
        native = compiled("_append")
        if native is None:
            pytest.skip("compiled core switched off")
        monkeypatch.setattr(group_append, "encode", native.encode_group_records)
    else:
        monkeypatch.setattr(group_append, "encode", group_append.encode_group_records)


@pytest.mark.parametrize("encoder", ["compiled", "python"])
def test_group_path_writes_the_same_bytes_as_the_general_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoder: str
) -> None:
    groups = _groups(seed=16)
    taken = 0
    with monkeypatch.context() as patch:
        patch.setattr(group_append, "encode", lambda *args: None)  # the general path only
        general = _write(tmp_path / "general", groups)
    _use(monkeypatch, encoder)
    real = group_append.encode

    def counting(*args: Any) -> Any:
        nonlocal taken
        encoded = real(*args)
        taken += encoded is not None
        return encoded

    monkeypatch.setattr(group_append, "encode", counting)
    fast = _write(tmp_path / "fast", groups)
    assert taken > len(groups) // 2, "the fast path took too few groups to tell"
    assert taken < len(groups), "no group went to the general path"
    assert fast == general
    assert all(status is PutStatus.PUT_OK for status, _ in fast)
    general_files, fast_files = _files(tmp_path / "general"), _files(tmp_path / "fast")
    assert sorted(fast_files) == sorted(general_files)
    for kind in ("commitlog", "index", "consumequeue/Orders/0"):
        assert len([name for name in fast_files if name.startswith(kind + "/")]) > 1, kind
    for name, data in general_files.items():
        assert fast_files[name] == data, name


@pytest.mark.parametrize("encoder", ["compiled", "python"])
def test_concurrent_sync_writers_are_stored_and_read_back_after_a_reopen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoder: str
) -> None:
    """Sixteen writers with one message each in flight (sync flush, group
    commit): every acknowledged message is in its queue after a reopen, in
    each writer's call order."""
    _use(monkeypatch, encoder)
    config = _config(tmp_path / "store", flush_mode=FlushMode.SYNC)
    store = FileMessageStore(config)
    store.open()
    store.append([MessageToStore("Orders", q, b"first") for q in range(4)])  # the queues exist

    async def writer(w: int) -> list[PutResult]:
        results = []
        for i in range(20):
            body = f"{w}:{i}".encode()
            message = MessageToStore(
                "Orders", w % 4, body, f"TAGS\x01w{w}\x02UNIQ_KEY\x01{w}-{i}\x02"
            )
            results.append(await store.put_message(message))
        return results

    async def run() -> list[list[PutResult]]:
        return await asyncio.gather(*(writer(w) for w in range(16)))

    try:
        answers = asyncio.run(run())
    finally:
        store.close()
    assert all(r.status is PutStatus.PUT_OK for results in answers for r in results)
    assert store.group_commit.largest_group > 1
    reopened = FileMessageStore(config)
    reopened.open()
    try:
        for w, results in enumerate(answers):
            for i, result in enumerate(results):
                got = reopened.get_messages("g", "Orders", w % 4, result.queue_offset, 1)
                assert got.physical_offsets == [result.physical_offset]
                assert bytes(got.buffers[0]).find(f"{w}:{i}".encode()) > 0
        found = reopened.query_by_unique_key("Orders", "7-19")
        assert found.physical_offsets == [answers[7][19].physical_offset]
    finally:
        reopened.close()
