"""A batch stored straight from its body (`FileMessageStore.put_batch`, the
compiled encoder or its Python twin) leaves the same bytes in every store
file as the general path (`put_messages` over one MessageToStore per entry),
across commitlog, consumequeue and index file boundaries; and the files each
path writes are read back by a store that reopens them."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemq.broker.processors.send import send_stamp, stamped
from tidemq.common import properties as props
from tidemq.common.clock import ManualClock
from tidemq.common.message import Message, MessageExt
from tidemq.record import batch_append
from tidemq.record.codec import decode_records, encode_batch, split_batch
from tidemq.record.native import compiled
from tidemq.store.api import BatchToStore, MessageToStore, PutStatus
from tidemq.store.config import StoreConfig
from tidemq.store.file_store import FileMessageStore
from tidemq.store.filters import TagFilter
from tidemq.testing.stores import small_config

CLUSTER = b"CLUSTER\x01DefaultCluster\x02"
STAMP = send_stamp("eu-1", True)
BORN = (1_700_000_000_123, b"\x0a\x00\x00\x07", 40000)


def _batches(seed: int) -> list[tuple[int, bytes]]:
    rng = random.Random(seed)
    batches = []
    for n in range(40):
        messages = []
        for i in range(rng.randrange(1, 12)):
            properties = {props.TAGS: rng.choice(["TagA", "TagB", ""]), props.UNIQ_KEY: f"U{n}-{i}"}
            if rng.random() < 0.5:
                properties[props.KEYS] = f"k{n} k{i} k{n}"
            if rng.random() < 0.1:
                properties[props.CLUSTER] = "Elsewhere"
            if rng.random() < 0.03:  # replaced by the stamp, on the general path
                properties[rng.choice([props.MSG_REGION, props.TRACE_ON])] = "client"
            messages.append(
                Message(
                    "Orders", rng.randbytes(rng.randrange(1, 3000)), flag=i, properties=properties
                )
            )
        batches.append((rng.randrange(4), encode_batch(messages)))
    return batches


def _general(queue_id: int, body: bytes, stamp: str = STAMP) -> list[MessageToStore]:
    """What the broker's general batch path hands the store."""
    born_ts, born_host, born_port = BORN
    cluster = CLUSTER.decode()
    return [
        MessageToStore(
            "Orders",
            queue_id,
            entry.body,
            stamped(
                entry.properties
                if "CLUSTER\x01" in entry.properties
                else entry.properties + cluster,
                stamp,
            ),
            entry.flag,
            0,
            born_ts,
            born_host,
            born_port,
        )
        for entry in split_batch(body)
    ]


def _config(root: Path) -> StoreConfig:
    """Small files, so a run crosses commitlog, consumequeue and index files."""
    return small_config(root, consumequeue_entries_per_file=16, index_max_count=300)


def _write(
    root: Path, how: str, batches: list[tuple[int, bytes]], stamp: str = STAMP
) -> list[tuple[int, str]]:
    clock = ManualClock()
    store = FileMessageStore(_config(root), clock=clock)
    store.open()
    answers = []
    try:
        for queue_id, body in batches:
            clock.advance(0.007)
            if how == "general":
                result = asyncio.run(store.put_messages(_general(queue_id, body, stamp)))
                assert result.ok
                answers.append(
                    (result.results[0].queue_offset, ",".join(r.msg_id for r in result.results))
                )
            else:
                born_ts, born_host, born_port = BORN
                fast = asyncio.run(
                    store.put_batch(
                        BatchToStore(
                            "Orders",
                            queue_id,
                            body,
                            0,
                            born_ts,
                            born_host,
                            born_port,
                            CLUSTER,
                            stamp.encode(),
                        )
                    )
                )
                if fast is None:  # a batch that crosses a commitlog file: general path
                    result = asyncio.run(store.put_messages(_general(queue_id, body, stamp)))
                    answers.append(
                        (result.results[0].queue_offset, ",".join(r.msg_id for r in result.results))
                    )
                else:
                    assert fast.status is PutStatus.PUT_OK
                    answers.append((fast.queue_offset, fast.msg_ids))
    finally:
        store.close()
    return answers


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != "lock"
    }


@pytest.mark.parametrize("encoder", ["compiled", "python"])
def test_batch_body_path_writes_the_same_bytes_as_the_general_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoder: str
) -> None:
    if encoder == "compiled":
        native = compiled("_append")
        if native is None:
            pytest.skip("compiled core switched off")
        monkeypatch.setattr(batch_append, "encode", native.encode_batch_records)
    else:
        monkeypatch.setattr(batch_append, "encode", batch_append.encode_batch_records)
    batches = _batches(seed=16)
    general = _write(tmp_path / "general", "general", batches)
    fast = _write(tmp_path / "fast", "fast", batches)
    assert fast == general
    general_files, fast_files = _files(tmp_path / "general"), _files(tmp_path / "fast")
    assert sorted(fast_files) == sorted(general_files)
    for kind in ("commitlog", "index", "consumequeue/Orders/0"):
        assert len([name for name in fast_files if name.startswith(kind + "/")]) > 1, kind
    for name, data in general_files.items():
        assert fast_files[name] == data, name


def test_a_store_written_by_batches_reads_back_after_reopening(tmp_path: Path) -> None:
    batches = _batches(seed=7)
    _write(tmp_path / "s", "fast", batches)
    store = FileMessageStore(_config(tmp_path / "s"), clock=ManualClock())
    store.open()
    try:
        expected = {q: sum(len(split_batch(b)) for qq, b in batches if qq == q) for q in range(4)}
        for queue_id, count in expected.items():
            assert store.max_offset("Orders", queue_id) == count
            page = store.get_messages("g", "Orders", queue_id, 0, 1000, TagFilter())
            assert len(page.buffers) == min(count, len(page.buffers)) > 0
        found = store.query_by_unique_key("Orders", "U3-0")
        assert len(found.buffers) == 1
    finally:
        store.close()


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.integers(0, 2**32),
    st.integers(1, 40),
    st.sampled_from(["DefaultRegion", "eu-1", "r"]),
    st.booleans(),
)
def test_compiled_and_python_encoders_write_the_same_store_files(
    tmp_path_factory: pytest.TempPathFactory, seed: int, count: int, region: str, trace_on: bool
) -> None:
    """Generated batches, a generated send stamp: the compiled encoder and its
    Python twin leave byte-identical store files and answer the same."""
    native = compiled("_append")
    if native is None:
        pytest.skip("compiled core switched off")
    batches = _batches(seed)[:count]
    stamp = send_stamp(region, trace_on)
    answers, files, roots = {}, {}, {}
    for name, encoder in (
        ("compiled", native.encode_batch_records),
        ("python", batch_append.encode_batch_records),
    ):
        root = roots[name] = tmp_path_factory.mktemp(name)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(batch_append, "encode", encoder)
            answers[name] = _write(root, "fast", batches, stamp)
        files[name] = _files(root)
    assert answers["compiled"] == answers["python"]
    assert files["compiled"] == files["python"]
    stored = _read_all(roots["python"])
    assert len(stored) == sum(len(split_batch(body)) for _, body in batches)
    expected = (region, "true" if trace_on else "false")
    assert {(m.properties[props.MSG_REGION], m.properties[props.TRACE_ON]) for m in stored} == {
        expected
    }


def _read_all(root: Path) -> list[MessageExt]:
    store = FileMessageStore(_config(root), clock=ManualClock())
    store.open()
    try:
        found: list[MessageExt] = []
        for queue_id in range(4):
            page = store.get_messages("g", "Orders", queue_id, 0, 10_000, TagFilter())
            found += decode_records(page.body())
        return found
    finally:
        store.close()
