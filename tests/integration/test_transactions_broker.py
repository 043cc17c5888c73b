"""Transactional messages against a real `tidemq serve`: a small raw producer
(RemotingClient) sends half messages, ends them, answers check-backs; a real
lite pull consumer sees what was committed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer.lite_pull import AsyncLitePullConsumer
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.message import Message, MessageExt, MessageQueue
from tidemq.common.message_id import decode_offset_message_id
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    decode_header,
    encode_header,
)
from tidemq.protocol.heartbeat import HeartbeatData
from tidemq.record.codec import decode_record, encode_batch
from tidemq.testing.client_support import create_topic
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.waiting import eventually, unique_name
from tidemq.transport import Connection, RemotingClient

pytestmark = pytest.mark.slow

SETTINGS = {
    "transaction_timeout_ms": 1000,
    "transaction_check_interval_ms": 500,
    "transaction_check_max": 3,
}
COMMIT = sysflag.TRANSACTION_COMMIT_TYPE
ROLLBACK = sysflag.TRANSACTION_ROLLBACK_TYPE
UNKNOWN = sysflag.TRANSACTION_NOT_TYPE

Answer = Callable[[CheckTransactionStateRequestHeader, MessageExt], int | None]


class Sent:
    """A half message as the broker acknowledged it."""

    def __init__(self, header: SendMessageResponseHeader, key: str) -> None:
        self.queue_offset = header.queue_offset
        self.commit_log_offset = decode_offset_message_id(header.msg_id)[2]
        self.transaction_id = header.transaction_id
        self.key = key


class RawTxProducer:
    """Heartbeats with a producer group, sends half messages, ends them, and
    answers CHECK_TRANSACTION_STATE with `answer` (None: no answer)."""

    def __init__(self, broker: str, group: str, answer: Answer | None = None) -> None:
        self.broker = broker
        self.group = group
        self.answer = answer
        self.client_id = unique_name("txclient")
        self.checks: list[tuple[CheckTransactionStateRequestHeader, MessageExt]] = []
        self.client = RemotingClient(request_handler=self._on_request, name=self.client_id)

    async def __aenter__(self) -> RawTxProducer:
        await self.heartbeat()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()

    async def heartbeat(self) -> None:
        body = HeartbeatData(self.client_id, producer_groups=(self.group,)).encode()
        command = RemotingCommand.request(RequestCode.HEART_BEAT, {}, body)
        response = await self.client.invoke(self.broker, command, 10)
        assert response.code == ResponseCode.SUCCESS, response.remark

    async def send(
        self,
        topic: str,
        body: bytes,
        extra: dict[str, str] | None = None,
        *,
        sys_flag: int = sysflag.TRANSACTION_PREPARED_TYPE,
    ) -> RemotingCommand:
        key = unique_name("UNIQ")
        properties = {props.TRAN_MSG: "true", props.PGROUP: self.group, props.UNIQ_KEY: key}
        header = SendMessageRequestHeader(
            producer_group=self.group,
            topic=topic,
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=0,
            sys_flag=sys_flag,
            born_timestamp=int(time.time() * 1000),
            flag=0,
            properties=props.encode_properties({**properties, **(extra or {})}),
        )
        command = RemotingCommand.request(RequestCode.SEND_MESSAGE, encode_header(header), body)
        return await self.client.invoke(self.broker, command, 10)

    async def send_half(self, topic: str, body: bytes) -> Sent:
        response = await self.send(topic, body)
        assert response.code == ResponseCode.SUCCESS, response.remark
        header = decode_header(SendMessageResponseHeader, response.ext_fields)
        assert header.transaction_id is not None
        return Sent(header, header.transaction_id)

    async def end(
        self,
        sent: Sent,
        kind: int,
        *,
        group: str | None = None,
        queue_offset: int | None = None,
        commit_log_offset: int | None = None,
    ) -> RemotingCommand:
        header = EndTransactionRequestHeader(
            producer_group=group or self.group,
            tran_state_table_offset=sent.queue_offset if queue_offset is None else queue_offset,
            commit_log_offset=(
                sent.commit_log_offset if commit_log_offset is None else commit_log_offset
            ),
            commit_or_rollback=kind,
            msg_id=sent.key,
            transaction_id=sent.transaction_id,
        )
        command = RemotingCommand.request(RequestCode.END_TRANSACTION, encode_header(header))
        return await self.client.invoke(self.broker, command, 10)

    async def _on_request(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand | None:
        if request.code != RequestCode.CHECK_TRANSACTION_STATE:
            return RemotingCommand.response_to(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
        header = decode_header(CheckTransactionStateRequestHeader, request.ext_fields)
        message, _ = decode_record(request.body)
        self.checks.append((header, message))
        kind = self.answer(header, message) if self.answer is not None else None
        if kind is not None:
            end = EndTransactionRequestHeader(
                producer_group=self.group,
                tran_state_table_offset=header.tran_state_table_offset,
                commit_log_offset=header.commit_log_offset,
                commit_or_rollback=kind,
                from_transaction_check=True,
                msg_id=header.msg_id or "",
                transaction_id=header.transaction_id,
            )
            command = RemotingCommand.request(
                RequestCode.END_TRANSACTION, encode_header(end), oneway=True
            )
            connection.send_oneway(command)
        return None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("tx") / "data", flush="sync", settings=SETTINGS) as process:
        yield process


async def new_topic(server: ServerProcess) -> MessageQueue:
    (queue,) = await create_topic(server.namesrv, unique_name("TxTopic"), queues=1)
    return queue


def consumer(server: ServerProcess, queue: MessageQueue) -> AsyncLitePullConsumer:
    member = AsyncLitePullConsumer(
        unique_name("cg_tx"),
        server.namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        poll_timeout_s=1.0,
    )
    member.assign([queue])
    return member


async def poll_bodies_until(member: AsyncLitePullConsumer, last: bytes) -> list[bytes]:
    """Bodies polled until `last` arrived."""
    bodies: list[bytes] = []

    async def arrived() -> bool:
        bodies.extend(m.body for m in await member.poll(0.5))
        return last in bodies

    await eventually(arrived, f"{last!r} to be polled")
    return bodies


async def test_commit_is_seen_rollback_never_and_a_second_commit_stores_nothing(
    server: ServerProcess,
) -> None:
    queue = await new_topic(server)
    async with RawTxProducer(server.broker, unique_name("PG_tx")) as producer:
        committed = await producer.send_half(queue.topic, b"committed")
        rolled_back = await producer.send_half(queue.topic, b"rolled-back")
        marker = await producer.send_half(queue.topic, b"marker")
        assert (await producer.end(rolled_back, ROLLBACK)).code == ResponseCode.SUCCESS
        assert (await producer.end(committed, COMMIT)).code == ResponseCode.SUCCESS
        assert (await producer.end(committed, COMMIT)).code == ResponseCode.SUCCESS
        assert (await producer.end(rolled_back, COMMIT)).code == ResponseCode.SUCCESS
        assert (await producer.end(marker, COMMIT)).code == ResponseCode.SUCCESS
    member = consumer(server, queue)
    await member.start()
    try:
        bodies = await poll_bodies_until(member, b"marker")
    finally:
        await member.shutdown()
    assert bodies == [b"committed", b"marker"]


async def test_unknown_state_is_checked_back_and_the_answer_commits(
    server: ServerProcess,
) -> None:
    queue = await new_topic(server)
    async with RawTxProducer(server.broker, unique_name("PG_tx"), lambda h, m: COMMIT) as producer:
        sent = await producer.send_half(queue.topic, b"asked")
        assert (await producer.end(sent, UNKNOWN)).code == ResponseCode.SUCCESS
        member = consumer(server, queue)
        await member.start()
        try:
            assert await poll_bodies_until(member, b"asked") == [b"asked"]
        finally:
            await member.shutdown()
        header, message = producer.checks[0]
    assert header.msg_id == header.transaction_id == sent.transaction_id
    assert header.tran_state_table_offset > sent.queue_offset, "the check names the copy"
    assert (message.topic, message.queue_id, message.body) == (queue.topic, 0, b"asked")
    assert message.properties[props.TRANSACTION_CHECK_TIMES] == "1"


async def test_unanswered_checks_stop_at_the_maximum_and_the_half_is_discarded(
    server: ServerProcess,
) -> None:
    queue = await new_topic(server)
    async with RawTxProducer(server.broker, unique_name("PG_tx")) as producer:
        sent = await producer.send_half(queue.topic, b"never-answered")
        await eventually(
            lambda: sent.key in server.stderr() and "discarded" in server.stderr(),
            "the discard log line",
        )
        times = [m.properties[props.TRANSACTION_CHECK_TIMES] for _, m in producer.checks]
    assert times == ["1", "2", "3"]
    line = next(x for x in server.stderr().splitlines() if sent.key in x and "discarded" in x)
    assert "WARNING" in line and queue.topic in line and producer.group in line


async def test_end_that_does_not_match_is_refused_with_javas_remarks(
    server: ServerProcess,
) -> None:
    queue = await new_topic(server)
    async with RawTxProducer(server.broker, unique_name("PG_tx")) as producer:
        sent = await producer.send_half(queue.topic, b"x")
        cases = [
            (await producer.end(sent, COMMIT, group="PG_other"), "The producer group wrong"),
            (
                await producer.end(sent, COMMIT, queue_offset=sent.queue_offset + 100),
                "The transaction state table offset wrong",
            ),
            (
                await producer.end(sent, COMMIT, commit_log_offset=sent.commit_log_offset + 1),
                "Find prepared transaction message failed",
            ),
        ]
        for response, remark in cases:
            assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, remark)
        assert (await producer.end(sent, ROLLBACK)).code == ResponseCode.SUCCESS


@pytest.mark.parametrize(
    "extra",
    [{props.DELAY: "2"}, {props.TIMER_DELAY_MS: "5000"}, {props.START_DELIVER_TIME: "1"}],
)
async def test_a_half_with_delay_or_timer_is_illegal(
    server: ServerProcess, extra: dict[str, str]
) -> None:
    queue = await new_topic(server)
    async with RawTxProducer(server.broker, unique_name("PG_tx")) as producer:
        response = await producer.send(queue.topic, b"x", extra)
    assert response.code == ResponseCode.MESSAGE_ILLEGAL
    assert "transactional message cannot have" in (response.remark or "")


async def test_a_prepared_batch_is_illegal(server: ServerProcess) -> None:
    queue = await new_topic(server)
    async with RawTxProducer(server.broker, unique_name("PG_tx")) as producer:
        header = SendMessageRequestHeader(
            producer_group=producer.group,
            topic=queue.topic,
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=0,
            sys_flag=sysflag.TRANSACTION_PREPARED_TYPE,
            born_timestamp=int(time.time() * 1000),
            flag=0,
            batch=True,
        )
        body = encode_batch([Message(queue.topic, b"a"), Message(queue.topic, b"b")])
        command = RemotingCommand.request(
            RequestCode.SEND_BATCH_MESSAGE, encode_header(header.to_v2()), body
        )
        response = await producer.client.invoke(producer.broker, command, 10)
    assert response.code == ResponseCode.MESSAGE_ILLEGAL


async def test_after_kill_9_committed_survive_once_and_pending_halves_are_checked(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    group = unique_name("PG_tx")
    with serve(data, flush="sync", settings=SETTINGS) as first:
        queue = await new_topic(first)
        async with RawTxProducer(first.broker, group) as producer:
            committed = await producer.send_half(queue.topic, b"committed-before-crash")
            await producer.send_half(queue.topic, b"pending-at-crash")
            assert (await producer.end(committed, COMMIT)).code == ResponseCode.SUCCESS
        first.kill()
    with serve(data, flush="sync", settings=SETTINGS, name="serve2") as second:
        async with RawTxProducer(second.broker, group, lambda h, m: COMMIT) as producer:
            member = consumer(second, queue)
            await member.start()
            try:
                bodies = await poll_bodies_until(member, b"pending-at-crash")
            finally:
                await member.shutdown()
    assert bodies == [b"committed-before-crash", b"pending-at-crash"]


async def test_pending_half_survives_a_clean_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    group = unique_name("PG_tx")
    with serve(data, flush="async", settings=SETTINGS) as first:
        queue = await new_topic(first)
        async with RawTxProducer(first.broker, group) as producer:
            await producer.send_half(queue.topic, b"pending")
        assert first.stop() == 0
    with serve(data, flush="async", settings=SETTINGS, name="serve2") as second:
        async with RawTxProducer(second.broker, group, lambda h, m: COMMIT) as producer:
            member = consumer(second, queue)
            await member.start()
            try:
                assert await poll_bodies_until(member, b"pending") == [b"pending"]
            finally:
                await member.shutdown()
        assert producer.checks, "the restarted broker asked the producer"
