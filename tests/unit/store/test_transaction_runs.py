"""Half batches and batch ENDs stored as one run each (`FileMessageStore.put_run`
with the compiled encoder or its Python twin, `tidemq.record.transaction_records`)
leave the same bytes in every store file as the general path (one
MessageToStore per half, committed message and op record), across commitlog,
consumequeue and index file boundaries, with single ENDs and a check-back scan
in between; the broker answers the same; and the files read back after a
restart, the resolved transactions rebuilt from the op queue."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemq.broker import transactions
from tidemq.broker.assembly import Features
from tidemq.broker.requests import SendRequest
from tidemq.broker.topics import TopicConfig
from tidemq.broker.transaction_policy import HALF_TOPIC, OP_TOPIC
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.clock import ManualClock
from tidemq.common.message import Message
from tidemq.common.message_id import UniqueIdGenerator, decode_offset_message_id
from tidemq.protocol.headers import EndTransactionRequestHeader
from tidemq.record import transaction_records
from tidemq.record.codec import decode_records, encode_batch
from tidemq.record.native import compiled
from tidemq.store.config import StoreConfig
from tidemq.store.file_store import FileMessageStore
from tidemq.testing.cores import memory_core
from tidemq.testing.stores import small_config

GROUP = "PG_TX"
TOPICS = {"TxTopic": 4, "Orders": 2}
FEATURES = Features(delay=False, timers=False, transactions=True, pop=False)
MODES = ["general", "compiled", "python"]


def _config(root: Path) -> StoreConfig:
    """Small files, so the runs cross commitlog, consumequeue and index files."""
    return small_config(root, consumequeue_entries_per_file=16, index_max_count=300)


def _encoders(mode: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    if mode == "general":
        return (lambda *args: None), (lambda *args: None)
    if mode == "python":
        return transaction_records.encode_half_records, transaction_records.encode_end_records
    native = compiled("_transactions")
    if native is None:
        pytest.skip("compiled core switched off")
    return native.encode_half_records, native.encode_end_records


def _message(rng: random.Random, topic: str, n: int) -> Message:
    properties = {props.TRAN_MSG: "true", props.TAGS: rng.choice(["TagA", "TagB", ""])}
    if rng.random() < 0.97:  # a message without one takes the general path in every mode
        properties[props.UNIQ_KEY] = f"U{n:06d}"
    if rng.random() < 0.5:
        properties[props.KEYS] = f"k{n} k{n % 7} k{n}"
    if rng.random() < 0.3:
        properties[props.PGROUP] = GROUP
    elif rng.random() < 0.05:
        properties[props.PGROUP] = ""
    if rng.random() < 0.1:
        properties[props.CLUSTER] = "Elsewhere"
    if rng.random() < 0.02:
        properties[props.DELAY] = "0"  # allowed; the general path keeps it
    if rng.random() < 0.03:  # the broker's stamp replaces it, on the general path
        properties[rng.choice([props.MSG_REGION, props.TRACE_ON])] = "set-by-client"
    return Message(topic, rng.randbytes(rng.randrange(1, 2500)), flag=n, properties=properties)


async def _scenario(root: Path, mode: str, seed: int, steps: int) -> list[object]:
    """Half batches, batch ENDs (commits, rollbacks, repeats), single ENDs and
    one check-back scan, chosen by `seed`; the broker's answers."""
    clock = ManualClock()
    store = FileMessageStore(_config(root / "store"), clock=clock)
    store.open()
    answers: list[object] = []
    try:
        core, _, _ = memory_core(root / "broker", FEATURES, clock=clock, store=store)
        tx = core.transactions
        assert tx is not None
        tx._ids = UniqueIdGenerator(clock, b"\x7f\x00\x00\x01", 1, salt=7)  # the same ids each run
        for name, queues in TOPICS.items():
            core.service.topics.update(TopicConfig(name, queues, queues))
        rng = random.Random(seed)
        pending: list[tuple[int, int]] = []
        ended: list[tuple[int, int]] = []
        n = 0
        for step in range(steps):
            clock.advance(0.003)
            roll = rng.random()
            if roll < 0.55 or not pending:
                topic = rng.choice(sorted(TOPICS))
                batch = [_message(rng, topic, n + i) for i in range(rng.randrange(1, 9))]
                n += len(batch)
                request = SendRequest(
                    producer_group=GROUP,
                    topic=topic,
                    queue_id=rng.randrange(TOPICS[topic]),
                    body=encode_batch(batch),
                    sys_flag=sysflag.TRANSACTION_PREPARED_TYPE,
                    born_timestamp=clock.now_ms() - 5,
                    born_host=rng.choice([b"\x0a\x00\x00\x07", bytes(range(16))]),
                    born_port=40000 + step,
                    batch=True,
                )
                sent = await core.send.send_half_batch(request)
                answers.append(("half", sent.code, sent.msg_id, sent.queue_id, sent.queue_offset))
                offsets = [decode_offset_message_id(i)[2] for i in sent.msg_id.split(",")]
                pending += [(o, sent.queue_offset + i) for i, o in enumerate(offsets)]
            elif roll < 0.93:
                chosen = rng.sample(pending, min(len(pending), rng.randrange(1, 12)))
                if ended and rng.random() < 0.15:
                    chosen.append(rng.choice(ended))  # resolved before: skipped
                items = [(o, q, rng.random() < 0.8) for o, q in chosen]
                answers.append(("end_many", await tx.end_many(GROUP, items)))
                for half in chosen:
                    if half in pending:
                        pending.remove(half)
                        ended.append(half)
            else:
                offset, queue_offset = pending.pop(rng.randrange(len(pending)))
                ended.append((offset, queue_offset))
                header = EndTransactionRequestHeader(
                    producer_group=GROUP,
                    tran_state_table_offset=queue_offset,
                    commit_log_offset=offset,
                    commit_or_rollback=rng.choice(
                        [sysflag.TRANSACTION_COMMIT_TYPE, sysflag.TRANSACTION_ROLLBACK_TYPE]
                    ),
                    msg_id="",
                )
                await tx.end(header)
                answers.append(("end", offset))
            if step == steps // 2:  # the unresolved ones are checked back (re-appended)
                clock.advance(tx.config.transaction_timeout_ms / 1000 + 1)
                report = await tx.check_back.scan()
                answers.append(("scan", report.skipped, report.checked, report.requeued))
    finally:
        store.close()
    return answers


def _write(
    root: Path, mode: str, seed: int, steps: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[object], int]:
    """The scenario's answers in `mode`, and how many runs the encoders made."""
    halves, ends = _encoders(mode)
    made = 0

    def counted(encoder: Callable[..., Any]) -> Callable[..., Any]:
        def encode(*args: Any) -> Any:
            nonlocal made
            found = encoder(*args)
            made += found is not None
            return found

        return encode

    with monkeypatch.context() as patch:
        patch.setattr(transactions, "encode_halves", counted(halves))
        patch.setattr(transactions, "encode_ends", counted(ends))
        answers = asyncio.run(_scenario(root, mode, seed, steps))
    return answers, made


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != "lock"
    }


def _same_files(tmp_path: Path, seed: int, steps: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The general path's files and answers, and the same from the twin and
    (unless switched off) the compiled encoder."""
    general, made = _write(tmp_path / "general", "general", seed, steps, monkeypatch)
    assert made == 0
    expected = _files(tmp_path / "general" / "store")
    modes = ["python"] if compiled("_transactions") is None else ["compiled", "python"]
    for mode in modes:
        answers, made = _write(tmp_path / mode, mode, seed, steps, monkeypatch)
        assert answers == general, mode
        assert made > 0, mode
        files = _files(tmp_path / mode / "store")
        assert sorted(files) == sorted(expected), mode
        for name, data in expected.items():
            assert files[name] == data, (mode, name)


def test_runs_write_the_same_bytes_as_the_general_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _same_files(tmp_path, seed=16, steps=260, monkeypatch=monkeypatch)
    files = _files(tmp_path / "general" / "store")
    for kind in (
        "commitlog",
        "index",
        f"consumequeue/{HALF_TOPIC}/0",
        f"consumequeue/{OP_TOPIC}/0",
    ):
        assert len([name for name in files if name.startswith(kind + "/")]) > 1, kind


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.integers(0, 2**32), st.integers(5, 60))
def test_any_scenario_writes_the_same_bytes(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, seed: int, steps: int
) -> None:
    _same_files(tmp_path_factory.mktemp("runs"), seed, steps, monkeypatch)


def test_a_store_written_by_runs_reads_back_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(
        tmp_path / "s",
        "python" if compiled("_transactions") is None else "compiled",
        3,
        120,
        monkeypatch,
    )
    clock = ManualClock()
    store = FileMessageStore(_config(tmp_path / "s" / "store"), clock=clock)
    store.open()
    try:
        core, _, _ = memory_core(tmp_path / "s" / "broker", FEATURES, clock=clock, store=store)
        tx = core.transactions
        assert tx is not None
        ops = store.max_offset(OP_TOPIC, 0)
        assert ops > 0 and store.max_offset(HALF_TOPIC, 0) > 0
        tx._load_progress()  # the resolved transactions, from the op queue
        assert len(tx.ledger) == ops
        committed = []
        for topic, queues in TOPICS.items():
            for queue_id in range(queues):
                page = store.get_messages("g", topic, queue_id, 0, 10_000)
                committed += decode_records(page.body())
        assert committed
        for message in committed:
            assert sysflag.transaction_value(message.sys_flag) == sysflag.TRANSACTION_COMMIT_TYPE
            assert message.properties[props.REAL_TOPIC] == message.topic
            # the committed copy keeps the half's send stamp (EndTransactionProcessor
            # copies the half's properties; nothing stamps them again)
            assert message.properties[props.MSG_REGION] == "DefaultRegion"
            assert message.properties[props.TRACE_ON] == "true"
            key = message.properties[props.UNIQ_KEY]
            assert key in tx.ledger
            found = store.query_by_unique_key(message.topic, key)
            assert len(found.buffers) == 1
    finally:
        store.close()
