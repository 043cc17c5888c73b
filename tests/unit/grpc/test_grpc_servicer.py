"""The servicer in process (in-memory store, manual clock): a send receipt's
transaction_id is the message's UNIQ_KEY, and EndTransaction finds the half
by it, as RocketMQ's clients expect; the private ids tidemq answered before
still end their transactions; a blank or unknown id gets the proxy's text;
an orphan check carries the UNIQ_KEY; send statuses in the proxy's shape."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from tidemq.broker.assembly import BrokerCore, Features
from tidemq.broker.requests import SendResult
from tidemq.broker.topics import TopicConfig
from tidemq.broker.transaction_halves import check_command, decode_half
from tidemq.broker.transaction_policy import HALF_TOPIC
from tidemq.common import properties as props
from tidemq.common.message import MessageExt
from tidemq.grpc.servicer import MessagingServicer
from tidemq.grpc.telemetry import TelemetryConnection, TelemetrySession
from tidemq.protocol.codes import ResponseCode
from tidemq.record.codec import decode_records
from tidemq.store.memory import MemoryMessageStore
from tidemq.testing.client_support import grpc_send_request
from tidemq.testing.cores import memory_core

Code = pb.Code
TOPIC = "TxT"


@dataclass
class Broker:
    core: BrokerCore
    store: MemoryMessageStore
    servicer: MessagingServicer


@pytest.fixture
def broker(tmp_path: Path) -> Broker:
    core, store, _clock = memory_core(
        tmp_path, Features(delay=False, timers=False, transactions=True, pop=False)
    )
    core.service.topics.update(TopicConfig(TOPIC, read_queue_nums=1, write_queue_nums=1))
    return Broker(core, store, MessagingServicer.of(core))


async def send(broker: Broker, body: bytes, message_id: str, **system: Any) -> Any:
    request = grpc_send_request(TOPIC, body, message_id=message_id, **system)
    response = await broker.servicer.SendMessage(request, None)
    assert response.status.code == Code.OK, response.status
    [entry] = response.entries
    return entry


async def end(broker: Broker, transaction_id: str, resolution: int, message_id: str = "") -> Any:
    request = spb.EndTransactionRequest(
        topic=pb.Resource(name=TOPIC),
        message_id=message_id,
        transaction_id=transaction_id,
        resolution=resolution,
    )
    return (await broker.servicer.EndTransaction(request, None)).status


def stored(broker: Broker, topic: str) -> list[MessageExt]:
    return decode_records(broker.store.get_messages("test", topic, 0, 0, 100).body())


async def test_every_receipt_names_its_message_and_a_commit_finds_the_half(
    broker: Broker,
) -> None:
    normal = await send(broker, b"normal", "01NORMAL")
    assert normal.transaction_id == normal.message_id == "01NORMAL"
    half = await send(broker, b"tx", "01TX", message_type=pb.MessageType.TRANSACTION)
    assert half.transaction_id == half.message_id == "01TX"
    assert [m.body for m in stored(broker, TOPIC)] == [b"normal"]
    status = await end(broker, half.transaction_id, pb.TransactionResolution.COMMIT, "01TX")
    assert status.code == Code.OK
    committed = stored(broker, TOPIC)[1]
    assert committed.body == b"tx"
    assert committed.properties[props.TRANSACTION_ID] == "01TX"


async def test_an_id_from_before_the_upgrade_still_ends_its_transaction(broker: Broker) -> None:
    await send(broker, b"tx", "01OLD", message_type=pb.MessageType.TRANSACTION)
    [half] = stored(broker, HALF_TOPIC)
    raw = f"{half.msg_id} {half.queue_offset} 01OLD".encode()
    legacy = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    status = await end(broker, legacy, pb.TransactionResolution.COMMIT)
    assert status.code == Code.OK
    assert [m.body for m in stored(broker, TOPIC)] == [b"tx"]


@pytest.mark.parametrize(
    ("transaction_id", "text"),
    [(" ", "transaction id cannot be empty"), ("01NOBODY", "cannot found transaction data")],
)
async def test_blank_and_unknown_ids_get_the_proxys_text(
    broker: Broker, transaction_id: str, text: str
) -> None:
    status = await end(broker, transaction_id, pb.TransactionResolution.ROLLBACK)
    assert (status.code, status.message) == (Code.INVALID_TRANSACTION_ID, text)


async def test_an_orphan_check_carries_the_uniq_key(broker: Broker) -> None:
    await send(broker, b"orphan", "01ORPHAN", message_type=pb.MessageType.TRANSACTION)
    buffer = broker.store.get_messages("test", HALF_TOPIC, 0, 0, 1).buffers[0]
    half = decode_half(buffer)
    assert half is not None
    session = TelemetrySession("client-1", "ipv4:127.0.0.1:5000")
    TelemetryConnection(session).send_oneway(check_command(half))
    command = session.outbox.get_nowait()
    assert command is not None
    check = command.recover_orphaned_transaction_command
    assert check.transaction_id == check.message.system_properties.message_id == "01ORPHAN"
    assert check.message.user_properties["__transactionId__"] == "01ORPHAN"
    status = await end(broker, check.transaction_id, pb.TransactionResolution.COMMIT)
    assert status.code == Code.OK
    assert [m.body for m in stored(broker, TOPIC)] == [b"orphan"]


async def test_send_statuses_in_the_proxys_shape(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    servicer = broker.servicer
    empty = await servicer.SendMessage(spb.SendMessageRequest(), None)
    assert (empty.status.code, empty.status.message) == (
        Code.MESSAGE_CORRUPTED,
        "no message to send",
    )
    big = b"x" * (broker.core.send.max_message_size + 1)
    too_large = await servicer.SendMessage(grpc_send_request(TOPIC, big), None)
    assert (too_large.status.code, too_large.status.message) == (
        Code.MESSAGE_BODY_TOO_LARGE,
        f"message body cannot exceed the max {broker.core.send.max_message_size}",
    )
    ok = await servicer.SendMessage(grpc_send_request(TOPIC, b"fine"), None)
    assert (ok.status.message, ok.entries[0].status.message) == ("OK", "OK")

    async def slow_disk(request: Any) -> SendResult:
        return SendResult(ResponseCode.FLUSH_DISK_TIMEOUT, "00", 0, 7, "flush to disk timed out")

    monkeypatch.setattr(broker.core.send, "send", slow_disk)
    timed_out = await servicer.SendMessage(grpc_send_request(TOPIC, b"slow"), None)
    assert (timed_out.status.code, timed_out.status.message) == (
        Code.MASTER_PERSISTENCE_TIMEOUT,
        "MASTER_PERSISTENCE_TIMEOUT",
    )
    assert timed_out.entries[0].status.message == (
        "send message failed, sendStatus=FLUSH_DISK_TIMEOUT"
    )

    # A SYNC_MASTER's message stored without its slave (SendMessageActivity.java:328-337).
    for response_code, code, name in (
        (ResponseCode.FLUSH_SLAVE_TIMEOUT, Code.SLAVE_PERSISTENCE_TIMEOUT, "FLUSH_SLAVE_TIMEOUT"),
        (ResponseCode.SLAVE_NOT_AVAILABLE, Code.HA_NOT_AVAILABLE, "SLAVE_NOT_AVAILABLE"),
    ):

        async def no_slave(request: Any, answer: int = response_code) -> SendResult:
            return SendResult(answer, "00", 0, 8, None)

        monkeypatch.setattr(broker.core.send, "send", no_slave)
        answered = await servicer.SendMessage(grpc_send_request(TOPIC, b"alone"), None)
        assert answered.status.code == code
        assert answered.entries[0].status.message == f"send message failed, sendStatus={name}"


async def test_routes_show_the_broker_permission(broker: Broker) -> None:
    """QueryRoute masks each queue's permission as the name server's routes do."""
    request = spb.QueryRouteRequest(topic=pb.Resource(name=TOPIC))

    async def permissions() -> set[int]:
        response = await broker.servicer.QueryRoute(request, None)
        assert response.status.code == Code.OK, response.status
        return {queue.permission for queue in response.message_queues}

    assert await permissions() == {pb.Permission.READ_WRITE}
    broker.core.service.permission.set(4)
    assert await permissions() == {pb.Permission.READ}
    broker.core.service.permission.set(0)
    assert await permissions() == {pb.Permission.NONE}
