"""Topic message types (`tidemq topic create T --type ...`, RocketMQ 5's
`message.type` attribute) refuse other message types over remoting and
gRPC; untyped topics take every type; `tidemq group create G --fifo` makes a
FIFO group for POP and gRPC."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc

from tidemq.client.errors import ClientError
from tidemq.client.producer import AsyncProducer
from tidemq.common import properties as props
from tidemq.common.message import Message
from tidemq.protocol import ResponseCode
from tidemq.testing.client_support import grpc_call, grpc_send_request, read_topic
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.waiting import unique_name

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("types") / "data") as process:
        yield process


def typed_topic(server: ServerProcess, kind: str) -> str:
    topic = unique_name(f"Typed{kind.title()}")
    done = server.cli("topic", "create", topic, "--type", kind, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["type"] == kind.upper()
    return topic


async def send(server: ServerProcess, topic: str, **properties: str) -> None:
    producer = AsyncProducer(unique_name("TypesP"), server.namesrv)
    async with producer:
        message = Message(topic, body=b"x")
        message.properties.update(properties)
        await producer.send(message)


def test_typed_topics_refuse_other_types_over_remoting(server: ServerProcess) -> None:
    normal, fifo = typed_topic(server, "normal"), typed_topic(server, "fifo")
    delay = typed_topic(server, "delay")

    async def run() -> None:
        await send(server, normal)
        await send(server, fifo, **{props.SHARDING_KEY: "g1"})
        await send(server, delay, **{props.TIMER_DELAY_SEC: "1"})
        for topic, extra, name in (
            (normal, {props.SHARDING_KEY: "g1"}, "FIFO"),
            (fifo, {}, "NORMAL"),
            (fifo, {props.TIMER_DELAY_SEC: "5"}, "DELAY"),
        ):
            with pytest.raises(ClientError) as refused:
                await send(server, topic, **extra)
            assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
            assert f"message type {name} does not match" in str(refused.value)
        untyped = unique_name("Untyped")
        assert server.cli("topic", "create", untyped).returncode == 0
        await send(server, untyped, **{props.SHARDING_KEY: "g1"})
        await send(server, untyped)

    asyncio.run(run())


def test_grpc_route_and_send_follow_the_type(server: ServerProcess) -> None:
    fifo = typed_topic(server, "fifo")

    async def run() -> tuple[object, object]:
        async with grpc.aio.insecure_channel(server.grpc) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            route = await stub.QueryRoute(
                spb.QueryRouteRequest(topic=pb.Resource(name=fifo)), timeout=10
            )
            normal = pb.Message(
                topic=pb.Resource(name=fifo),
                body=b"x",
                system_properties=pb.SystemProperties(
                    message_id="01AB", message_type=pb.MessageType.NORMAL
                ),
            )
            sent = await stub.SendMessage(spb.SendMessageRequest(messages=[normal]), timeout=10)
            return route, sent

    route, sent = asyncio.run(run())
    types = {tuple(q.accept_message_types) for q in route.message_queues}  # type: ignore[attr-defined]
    assert types == {(pb.MessageType.FIFO,)}
    entry = sent.entries[0]  # type: ignore[attr-defined]
    assert entry.status.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert "FIFO" in entry.status.message


def test_bad_type_and_fifo_group_cli(server: ServerProcess) -> None:
    bad = server.cli("topic", "create", unique_name("Bad"), "--type", "weird")
    assert bad.returncode != 0 and "weird" in bad.stderr
    group = unique_name("FifoGroup")
    done = server.cli("group", "create", group, "--fifo", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["fifo"] is True
    listed = json.loads(server.cli("group", "list", "--json").stdout)
    assert any(row["group"] == group and row["orderly"] for row in listed)


def test_grpc_fifo_message_to_a_normal_topic_is_refused(server: ServerProcess) -> None:
    normal = typed_topic(server, "normal")
    fifo = grpc_send_request(
        normal, b"grouped", message_type=pb.MessageType.FIFO, message_group="g"
    )
    sent = asyncio.run(grpc_call(server.grpc, "SendMessage", fifo))
    entry = sent.entries[0]
    assert entry.status.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert "NORMAL" in entry.status.message and "FIFO" in entry.status.message
    plain = asyncio.run(grpc_call(server.grpc, "SendMessage", grpc_send_request(normal, b"plain")))
    assert plain.status.code == pb.Code.OK
    assert [m.body for m in asyncio.run(read_topic(server.namesrv, normal))] == [b"plain"]


def test_transaction_topic_over_grpc(server: ServerProcess) -> None:
    topic = typed_topic(server, "transaction")

    async def run() -> tuple[Any, Any, Any, Any]:
        route = await grpc_call(
            server.grpc, "QueryRoute", spb.QueryRouteRequest(topic=pb.Resource(name=topic))
        )
        normal = await grpc_call(server.grpc, "SendMessage", grpc_send_request(topic, b"normal"))
        half = await grpc_call(
            server.grpc,
            "SendMessage",
            grpc_send_request(topic, b"tx", message_type=pb.MessageType.TRANSACTION),
        )
        end = await grpc_call(
            server.grpc,
            "EndTransaction",
            spb.EndTransactionRequest(
                topic=pb.Resource(name=topic),
                message_id=half.entries[0].message_id,
                transaction_id=half.entries[0].transaction_id,
                resolution=pb.TransactionResolution.COMMIT,
            ),
        )
        return route, normal, half, end

    route, normal, half, end = asyncio.run(run())
    types = {tuple(q.accept_message_types) for q in route.message_queues}
    assert types == {(pb.MessageType.TRANSACTION,)}
    assert normal.entries[0].status.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert half.entries[0].status.code == pb.Code.OK and half.entries[0].transaction_id
    assert end.status.code == pb.Code.OK, end.status.message
    stored = asyncio.run(read_topic(server.namesrv, topic))
    assert [m.body for m in stored] == [b"tx"]  # committed; the NORMAL one was never stored
