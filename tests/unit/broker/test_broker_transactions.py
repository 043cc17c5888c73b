"""BrokerTransactions behind the broker's processors over the in-memory store: half messages,
END_TRANSACTION, the check-back scan, a restart. No sockets, a manual clock."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tidemq.broker.assembly import BrokerCore, Features
from tidemq.broker.processors.transaction import TransactionProcessor
from tidemq.broker.service import BrokerError, BrokerService, SendRequest, SendResult
from tidemq.broker.transaction_policy import HALF_TOPIC, OP_TOPIC
from tidemq.broker.transactions import BrokerTransactions
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.clock import ManualClock
from tidemq.common.message import MessageExt
from tidemq.common.message_id import decode_offset_message_id
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    decode_header,
)
from tidemq.protocol.heartbeat import HeartbeatData
from tidemq.record.codec import decode_record, decode_records
from tidemq.store.memory import MemoryMessageStore
from tidemq.testing.cores import memory_core

TOPIC = "TxTopic"
GROUP = "PG_TX"
COMMIT = sysflag.TRANSACTION_COMMIT_TYPE
ROLLBACK = sysflag.TRANSACTION_ROLLBACK_TYPE


@dataclass
class FakeConnection:
    id: int
    remote: tuple[str, int] = ("127.0.0.1", 5555)
    closed: bool = False
    pushed: list[RemotingCommand] = field(default_factory=list)

    def send(self, command: RemotingCommand) -> None:
        self.pushed.append(command)

    def send_oneway(self, command: RemotingCommand) -> None:
        self.pushed.append(command)

    def close(self) -> None:
        self.closed = True


@dataclass
class Broker:
    core: BrokerCore
    store: MemoryMessageStore
    clock: ManualClock
    tx: BrokerTransactions

    @property
    def service(self) -> BrokerService:
        return self.core.service


def make_broker(
    tmp_path: Path,
    store: MemoryMessageStore | None = None,
    clock: ManualClock | None = None,
    **overrides: object,
) -> Broker:
    features = Features(delay=False, timers=False, transactions=True, pop=False)
    core, used, clock = memory_core(tmp_path, features, clock=clock, store=store, **overrides)
    assert isinstance(used, MemoryMessageStore)
    store = used
    assert core.transactions is not None
    return Broker(core, store, clock, core.transactions)


async def send_half(
    broker: Broker, body: bytes = b"order-1", extra: dict[str, str] | None = None
) -> SendResult:
    properties = {props.TRAN_MSG: "true", props.UNIQ_KEY: f"UNIQ-{body.decode()}", **(extra or {})}
    request = SendRequest(
        producer_group=GROUP,
        topic=TOPIC,
        queue_id=-1,
        body=body,
        properties=props.encode_properties(properties),
        sys_flag=sysflag.TRANSACTION_PREPARED_TYPE,
        born_timestamp=broker.clock.now_ms(),
        born_port=40000,
    )
    return await broker.core.send.send(request)


def end_header(
    sent: SendResult, kind: int, group: str = GROUP, *, from_check: bool = False
) -> EndTransactionRequestHeader:
    return EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=sent.queue_offset,
        commit_log_offset=decode_offset_message_id(sent.msg_id)[2],
        commit_or_rollback=kind,
        from_transaction_check=from_check,
        msg_id=sent.transaction_id or "",
        transaction_id=sent.transaction_id,
    )


def records(store: MemoryMessageStore, topic: str, queue_id: int | None = None) -> list[MessageExt]:
    found: list[MessageExt] = []
    for queue in [queue_id] if queue_id is not None else range(8):
        result = store.get_messages("test", topic, queue, 0, 1000)
        found += decode_records(result.body())
    return found


def producer(broker: Broker, client_id: str, connection_id: int) -> FakeConnection:
    connection = FakeConnection(connection_id)
    broker.core.client.heartbeat(HeartbeatData(client_id, producer_groups=(GROUP,)), connection)
    return connection


# -- prepare ------------------------------------------------------------------------------


async def test_a_half_message_is_stored_out_of_sight_with_its_real_queue(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    sent = await send_half(broker)
    assert sent.code == ResponseCode.SUCCESS
    assert sent.transaction_id == "UNIQ-order-1"
    assert records(broker.store, TOPIC) == []
    (half,) = records(broker.store, HALF_TOPIC, 0)
    assert half.queue_offset == sent.queue_offset == 0
    assert half.properties[props.REAL_TOPIC] == TOPIC
    assert half.properties[props.REAL_QID] == str(sent.queue_id)
    assert half.properties[props.PGROUP] == GROUP
    assert half.properties[props.TRAN_MSG] == "true"
    assert sysflag.transaction_value(half.sys_flag) == sysflag.TRANSACTION_NOT_TYPE


async def test_prepare_keeps_a_pgroup_the_producer_set(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    await send_half(broker, extra={props.PGROUP: "OTHER"})
    (half,) = records(broker.store, HALF_TOPIC, 0)
    assert half.properties[props.PGROUP] == "OTHER"


@pytest.mark.parametrize(
    "extra",
    [
        {props.DELAY: "3"},
        {props.TIMER_DELIVER_MS: "1900000000000"},
        {props.TIMER_DELAY_MS: "5000"},
        {props.TIMER_DELAY_SEC: "5"},
        {props.START_DELIVER_TIME: "1900000000000"},
    ],
)
async def test_a_half_with_a_delay_or_a_delivery_time_is_refused(
    tmp_path: Path, extra: dict[str, str]
) -> None:
    broker = make_broker(tmp_path)
    with pytest.raises(BrokerError) as caught:
        await send_half(broker, extra=extra)
    assert caught.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert "transactional message cannot have" in caught.value.remark
    assert records(broker.store, HALF_TOPIC, 0) == []


async def test_delay_level_zero_is_no_delay(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    sent = await send_half(broker, extra={props.DELAY: "0"})
    assert sent.code == ResponseCode.SUCCESS


# -- END_TRANSACTION ----------------------------------------------------------------------


async def test_commit_stores_the_real_message_and_an_op_record(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    sent = await send_half(broker)
    await broker.tx.end(end_header(sent, COMMIT))
    (message,) = records(broker.store, TOPIC, sent.queue_id)
    (half,) = records(broker.store, HALF_TOPIC, 0)
    assert message.body == b"order-1"
    assert sysflag.transaction_value(message.sys_flag) == COMMIT
    assert message.properties[props.UNIQ_KEY] == "UNIQ-order-1"
    assert message.properties[props.PGROUP] == GROUP
    assert message.properties[props.TRAN_MSG] == "true"
    assert message.born_timestamp == half.born_timestamp
    assert message.born_host == half.born_host
    assert message.prepared_transaction_offset == half.commit_log_offset
    (op,) = records(broker.store, OP_TOPIC, 0)
    assert op.body == b"0"
    assert op.tags == "d"


async def test_rollback_stores_only_the_op_record(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    await send_half(broker, b"first")
    sent = await send_half(broker, b"second")
    await broker.tx.end(end_header(sent, ROLLBACK))
    assert records(broker.store, TOPIC) == []
    (op,) = records(broker.store, OP_TOPIC, 0)
    assert op.body == b"1"


async def test_unknown_state_stores_nothing(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    sent = await send_half(broker)
    await broker.tx.end(end_header(sent, sysflag.TRANSACTION_NOT_TYPE))
    assert records(broker.store, TOPIC) == []
    assert records(broker.store, OP_TOPIC, 0) == []


async def test_a_second_end_is_ignored_never_a_second_copy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broker = make_broker(tmp_path)
    sent = await send_half(broker)
    await broker.tx.end(end_header(sent, COMMIT))
    with caplog.at_level(logging.INFO, logger="tidemq.broker.transactions"):
        await broker.tx.end(end_header(sent, COMMIT))
        await broker.tx.end(end_header(sent, ROLLBACK, from_check=True))
    assert len(records(broker.store, TOPIC)) == 1
    assert len(records(broker.store, OP_TOPIC, 0)) == 1
    assert "resolved" in caplog.text


async def test_end_that_does_not_match_its_half_gets_javas_remarks(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    sent = await send_half(broker)
    good = end_header(sent, COMMIT)
    cases = [
        (end_header(sent, COMMIT, group="WRONG"), "The producer group wrong"),
        (
            EndTransactionRequestHeader(
                producer_group=GROUP,
                tran_state_table_offset=7,
                commit_log_offset=good.commit_log_offset,
                commit_or_rollback=COMMIT,
                msg_id=good.msg_id,
            ),
            "The transaction state table offset wrong",
        ),
        (
            EndTransactionRequestHeader(
                producer_group=GROUP,
                tran_state_table_offset=0,
                commit_log_offset=good.commit_log_offset + 1,
                commit_or_rollback=COMMIT,
                msg_id=good.msg_id,
            ),
            "Find prepared transaction message failed",
        ),
    ]
    for header, remark in cases:
        with pytest.raises(BrokerError) as caught:
            await broker.tx.end(header)
        assert (caught.value.code, caught.value.remark) == (ResponseCode.SYSTEM_ERROR, remark)
    assert records(broker.store, TOPIC) == []
    await broker.tx.end(good)
    assert len(records(broker.store, TOPIC)) == 1


async def test_end_naming_a_normal_message_finds_no_half(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    normal = await broker.core.send.send(
        SendRequest(producer_group=GROUP, topic=TOPIC, queue_id=0, body=b"plain")
    )
    with pytest.raises(BrokerError) as caught:
        await broker.tx.end(end_header(normal, COMMIT))
    assert caught.value.remark == "Find prepared transaction message failed"


# -- check-back ---------------------------------------------------------------------------


async def test_check_back_asks_a_live_producer_about_a_copy_then_its_commit_lands(
    tmp_path: Path,
) -> None:
    broker = make_broker(tmp_path)
    connection = producer(broker, "client-1", 1)
    sent = await send_half(broker)
    report = await broker.tx.check_back.scan()
    assert (report.checked, connection.pushed) == (0, []), "younger than the 6 s timeout"
    broker.clock.advance(6)
    report = await broker.tx.check_back.scan()
    assert (report.checked, report.sent) == (1, 1)
    (command,) = connection.pushed
    assert command.code == RequestCode.CHECK_TRANSACTION_STATE and command.is_oneway
    header = decode_header(CheckTransactionStateRequestHeader, command.ext_fields)
    original, copy = records(broker.store, HALF_TOPIC, 0)
    assert copy.properties[props.TRANSACTION_CHECK_TIMES] == "1"
    assert copy.body == original.body and copy.born_timestamp == original.born_timestamp
    assert header.tran_state_table_offset == copy.queue_offset == 1
    assert header.commit_log_offset == copy.commit_log_offset
    assert header.msg_id == header.transaction_id == "UNIQ-order-1"
    assert header.offset_msg_id == copy.msg_id
    carried, _ = decode_record(command.body)
    assert (carried.topic, carried.queue_id) == (TOPIC, sent.queue_id)
    assert carried.body == b"order-1"
    assert carried.properties[props.UNIQ_KEY] == "UNIQ-order-1"
    await broker.tx.end(
        EndTransactionRequestHeader(
            producer_group=GROUP,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=COMMIT,
            from_transaction_check=True,
            msg_id="UNIQ-order-1",
        )
    )
    assert [m.body for m in records(broker.store, TOPIC)] == [b"order-1"]
    broker.clock.advance(30)
    report = await broker.tx.check_back.scan()
    assert report.checked == 0 and len(connection.pushed) == 1
    assert broker.tx.progress == 2
    # The producer's own END for the original half arrives late: still one message.
    await broker.tx.end(end_header(sent, COMMIT))
    assert len(records(broker.store, TOPIC)) == 1


async def test_a_resolved_half_is_never_checked(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    connection = producer(broker, "client-1", 1)
    sent = await send_half(broker)
    await broker.tx.end(end_header(sent, ROLLBACK))
    broker.clock.advance(60)
    report = await broker.tx.check_back.scan()
    assert (report.skipped, report.checked, connection.pushed) == (1, 0, [])


async def test_a_young_half_stops_the_scan(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    producer(broker, "client-1", 1)
    await send_half(broker, b"old")
    broker.clock.advance(5)
    await send_half(broker, b"young")
    broker.clock.advance(1)
    report = await broker.tx.check_back.scan()
    assert report.checked == 1
    assert broker.tx.progress == 1


async def test_check_goes_to_a_live_connection_of_the_group(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    dead = producer(broker, "client-dead", 1)
    alive = producer(broker, "client-alive", 2)
    dead.closed = True
    await send_half(broker)
    broker.clock.advance(6)
    await broker.tx.check_back.scan()
    assert dead.pushed == [] and len(alive.pushed) == 1


async def test_without_a_live_producer_the_check_still_counts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broker = make_broker(tmp_path)
    await send_half(broker)
    broker.clock.advance(6)
    with caplog.at_level(logging.INFO, logger="tidemq.broker.transaction_check"):
        report = await broker.tx.check_back.scan()
    assert (report.checked, report.sent) == (1, 0)
    assert "no live producer of group PG_TX" in caplog.text
    copy = records(broker.store, HALF_TOPIC, 0)[-1]
    assert copy.properties[props.TRANSACTION_CHECK_TIMES] == "1"


async def test_after_the_maximum_checks_the_half_is_discarded_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broker = make_broker(tmp_path, transaction_check_max=3)
    connection = producer(broker, "client-1", 1)
    await send_half(broker)
    broker.clock.advance(6)
    with caplog.at_level(logging.WARNING, logger="tidemq.broker.transaction_check"):
        for _ in range(5):
            await broker.tx.check_back.scan()
            broker.clock.advance(30)
    assert len(connection.pushed) == 3
    assert broker.tx.check_back.totals.discarded == 1
    warning = next(r for r in caplog.records if "discarded" in r.getMessage())
    assert warning.levelno == logging.WARNING
    assert TOPIC in warning.getMessage() and "UNIQ-order-1" in warning.getMessage()
    assert GROUP in warning.getMessage()
    assert records(broker.store, TOPIC) == []


async def test_a_half_inside_its_immunity_is_requeued_without_a_check(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    connection = producer(broker, "client-1", 1)
    await send_half(broker, extra={props.CHECK_IMMUNITY_TIME_IN_SECONDS: "20"})
    broker.clock.advance(7)
    report = await broker.tx.check_back.scan()
    assert (report.requeued, connection.pushed) == (1, [])
    broker.clock.advance(14)
    report = await broker.tx.check_back.scan()
    assert report.checked == 1 and len(connection.pushed) == 1


async def test_a_restart_resumes_the_scan_and_remembers_what_was_resolved(
    tmp_path: Path,
) -> None:
    broker = make_broker(tmp_path)
    producer(broker, "client-1", 1)
    committed = await send_half(broker, b"committed")
    pending = await send_half(broker, b"pending")
    await broker.tx.end(end_header(committed, COMMIT))
    broker.clock.advance(6)
    await broker.tx.check_back.scan()
    await broker.tx.stop()
    broker.service.offsets.persist()

    again = make_broker(tmp_path, store=broker.store, clock=broker.clock)
    await again.tx.start()
    try:
        assert again.tx.progress == broker.tx.progress == 2
        assert "UNIQ-committed" in again.tx.ledger
        await again.tx.end(end_header(committed, COMMIT))
        assert len(records(again.store, TOPIC)) == 1
        connection = producer(again, "client-2", 2)
        broker.clock.advance(30)
        report = await again.tx.check_back.scan()
        assert report.checked == 1
        header = decode_header(CheckTransactionStateRequestHeader, connection.pushed[0].ext_fields)
        assert header.msg_id == pending.transaction_id
    finally:
        await again.tx.stop()


# -- the transaction id: UNIQ_KEY, in the message and as the half's name ----------------------


async def test_the_half_and_its_committed_message_carry_the_transaction_id(
    tmp_path: Path,
) -> None:
    """RocketMQ's parseHalfMessageInner copies UNIQ_KEY into __transactionId__
    when the half is stored (TransactionalMessageBridge.java:219-223); the
    commit keeps the half's properties, so consumers see it."""
    broker = make_broker(tmp_path)
    sent = await send_half(broker)
    (half,) = records(broker.store, HALF_TOPIC, 0)
    assert half.properties[props.TRANSACTION_ID] == "UNIQ-order-1" == sent.transaction_id
    await broker.tx.end(end_header(sent, COMMIT))
    (message,) = records(broker.store, TOPIC, sent.queue_id)
    assert message.properties[props.TRANSACTION_ID] == "UNIQ-order-1"


async def test_a_half_without_a_client_id_gets_one_and_carries_it(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    request = SendRequest(
        producer_group=GROUP,
        topic=TOPIC,
        queue_id=-1,
        body=b"anonymous",
        properties=props.encode_properties({props.TRAN_MSG: "true"}),
        sys_flag=sysflag.TRANSACTION_PREPARED_TYPE,
        born_timestamp=broker.clock.now_ms(),
    )
    await broker.core.send.send(request)
    (half,) = records(broker.store, HALF_TOPIC, 0)
    assert half.properties[props.UNIQ_KEY]
    assert half.properties[props.TRANSACTION_ID] == half.properties[props.UNIQ_KEY]


async def test_locate_finds_the_newest_copy_of_a_half_by_its_key(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    producer(broker, "client-1", 1)
    sent = await send_half(broker)
    await send_half(broker, b"other")
    first = (decode_offset_message_id(sent.msg_id)[2], sent.queue_offset)
    assert broker.core.transaction.locate_half("UNIQ-order-1") == first
    assert broker.core.transaction.locate_half("UNIQ-nobody") is None
    broker.clock.advance(6)
    await broker.tx.check_back.scan()  # re-appends both halves
    copy = next(h for h in records(broker.store, HALF_TOPIC, 0)[2:] if h.body == b"order-1")
    assert broker.core.transaction.locate_half("UNIQ-order-1") == (
        copy.commit_log_offset,
        copy.queue_offset,
    )
    # ending by what locate found resolves the transaction: one committed copy
    offsets = broker.core.transaction.locate_half("UNIQ-order-1")
    assert offsets is not None
    commit_log_offset, queue_offset = offsets
    header = dataclasses.replace(
        end_header(sent, COMMIT),
        commit_log_offset=commit_log_offset,
        tran_state_table_offset=queue_offset,
    )
    await broker.tx.end(header)
    assert [m.body for m in records(broker.store, TOPIC)] == [b"order-1"]


async def test_locate_scans_the_half_queue_without_an_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = make_broker(tmp_path)
    sent = await send_half(broker)
    empty = broker.store.query_by_unique_key("NoTopic", "none")
    monkeypatch.setattr(broker.store, "query_by_unique_key", lambda topic, key: empty)
    found = broker.core.transaction.locate_half("UNIQ-order-1")
    assert found == (decode_offset_message_id(sent.msg_id)[2], sent.queue_offset)
    assert broker.core.transaction.locate_half("UNIQ-nobody") is None


async def test_locate_needs_transactions(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    disabled = TransactionProcessor(broker.service.config, None)
    with pytest.raises(BrokerError) as refused:
        disabled.locate_half("UNIQ-order-1")
    assert refused.value.code == ResponseCode.NO_PERMISSION


async def test_a_long_scan_lets_the_broker_run_between_pages(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    producer(broker, "client-1", 1)
    for i in range(100):
        sent = await send_half(broker, f"order-{i}".encode())
        await broker.tx.end(end_header(sent, ROLLBACK))
    broker.clock.advance(60)
    ran = 0
    stopping = False

    async def other_work() -> None:
        nonlocal ran
        while not stopping:
            ran += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(other_work())
    await asyncio.sleep(0)
    before = ran
    report = await broker.tx.check_back.scan()
    during = ran - before
    stopping = True
    await task
    assert report.skipped == 100
    assert during >= 3  # 100 resolved halves are 4 pages: a turn for others after each


# -- what /metrics shows: halves waiting, commits, rollbacks -------------------------------


async def test_halves_wait_until_ended_and_ends_are_counted_per_topic(tmp_path: Path) -> None:
    broker = make_broker(tmp_path, http_port=0)
    stats = broker.service.stats
    first = await send_half(broker, b"one")
    second = await send_half(broker, b"two")
    await send_half(broker, b"three")
    assert broker.tx.waiting == {TOPIC: 3}
    assert stats.puts[HALF_TOPIC].by_type["transaction"].messages == 3
    broker.clock.advance(70)
    await broker.tx.end(end_header(first, COMMIT))
    await broker.tx.end(end_header(second, ROLLBACK))
    await broker.tx.end(end_header(first, COMMIT))  # resolved already: counted once
    assert broker.tx.waiting == {TOPIC: 1}
    ended = stats.transactions[TOPIC]
    assert (ended.commits, ended.rollbacks) == (1, 1)
    assert ended.latency.cumulative()[:2] == [(5, 0), (60, 0)]  # 70 s from birth to commit
    assert ended.latency.count == 1
    assert stats.puts[TOPIC].by_type["transaction"].messages == 1  # the committed copy


async def test_a_restart_counts_the_halves_still_waiting(tmp_path: Path) -> None:
    broker = make_broker(tmp_path, http_port=0)
    producer(broker, "client-1", 1)
    committed = await send_half(broker, b"committed")
    await send_half(broker, b"pending")
    await broker.tx.end(end_header(committed, COMMIT))
    broker.clock.advance(6)
    await broker.tx.check_back.scan()  # re-appends the pending half: still one transaction
    await broker.tx.stop()
    broker.service.offsets.persist()

    again = make_broker(tmp_path, store=broker.store, clock=broker.clock, http_port=0)
    await again.tx.start()
    try:
        assert again.tx.waiting == {TOPIC: 1}
    finally:
        await again.tx.stop()


async def test_a_discarded_half_waits_no_more(tmp_path: Path) -> None:
    broker = make_broker(tmp_path, transaction_check_max=1)
    await send_half(broker)
    for _ in range(3):
        broker.clock.advance(60)
        await broker.tx.check_back.scan()
    assert broker.tx.check_back.totals.discarded == 1
    assert broker.tx.waiting == {}
