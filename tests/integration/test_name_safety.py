"""Issue #14 hazard 1: no request's topic or group name can touch anything
outside the store or destroy stored data.

Before the fix, DELETE_TOPIC_IN_BROKER with `{"topic": "/some/dir"}` deleted
that directory and `{"topic": ""}` deleted the whole consumequeue directory
(every topic read empty after a restart). Here a real `tidemq serve` gets
every request code it serves with every name field set to hostile names;
a canary directory beside the store must stay byte for byte the same, every
acknowledged message must still be readable after a restart, and the server
answers every request.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from tidemq.broker.handlers import HANDLED_CODES
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.name_fields import GROUP_KEYS, SEND_V2_CODES, TOPIC_KEYS
from tidemq.testing.client_support import (
    create_topic,
    grpc_call,
    numbered_messages,
    produce,
    read_topic,
)
from tidemq.testing.processes import serve
from tidemq.transport import RemotingClient

pytestmark = pytest.mark.slow

TOPIC = "SafeTopic"
MESSAGES = 120


def hostile_names(canary: Path) -> list[str]:
    return [
        "",
        " ",
        ".",
        "..",
        "/",
        "a/b",
        "../canary",
        "../../canary",
        str(canary),
        str(canary / "precious.txt"),
        "\x00",
        "Safe\x00Topic",
        "%RETRY%/..",
        "x" * 100_000,
        "é",
    ]


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(directory)): path.read_bytes() if path.is_file() else b"<dir>"
        for path in sorted(directory.rglob("*"))
    }


def make_canary(root: Path) -> Path:
    canary = root / "canary"
    (canary / "nested").mkdir(parents=True)
    (canary / "precious.txt").write_bytes(b"do not delete")
    (canary / "nested" / "more.bin").write_bytes(os.urandom(64))
    return canary


async def fuzz_remoting(broker: str, namesrv: str, names: list[str]) -> dict[int, int]:
    """Every broker and name-server request code, every name key, every name:
    the answer codes seen (the connection must answer each one)."""
    seen: dict[int, int] = {}
    keys = [*TOPIC_KEYS, *GROUP_KEYS]
    async with RemotingClient() as client:
        targets = [(broker, code) for code in sorted(HANDLED_CODES)]
        targets += [
            (namesrv, int(RequestCode.GET_ROUTEINFO_BY_TOPIC)),
            (namesrv, int(RequestCode.DELETE_TOPIC_IN_NAMESRV)),
        ]
        for address, code in targets:
            v2 = code in SEND_V2_CODES
            for key in ["a", "b", "c"] if v2 else keys:
                for name in names:
                    request = RemotingCommand.request(
                        code, {key: name, "queueId": "0", "clusterName": "DefaultCluster"}
                    )
                    response = await client.invoke(address, request, timeout=10)
                    seen[response.code] = seen.get(response.code, 0) + 1
                    if key in ("topic", "b", "consumerGroup", "group", "groupName"):
                        assert response.code == ResponseCode.INVALID_PARAMETER, (
                            code,
                            key,
                            name[:40],
                            response.remark,
                        )
                        assert len(response.remark or "") < 300
    return seen


async def delete_topic(broker: str, topic: str) -> RemotingCommand:
    async with RemotingClient() as client:
        request = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        return await client.invoke(broker, request, timeout=10)


def test_hostile_names_change_nothing_and_lose_nothing(tmp_path: Path) -> None:
    canary = make_canary(tmp_path)
    before = snapshot(canary)
    data = tmp_path / "data"
    with serve(data, flush="sync") as server:
        asyncio.run(create_topic(server.namesrv, TOPIC, queues=4))
        sent = asyncio.run(produce(server.namesrv, numbered_messages(TOPIC, MESSAGES)))
        store = data / "store"
        queues_before = sorted(p.name for p in (store / "consumequeue").iterdir())
        assert TOPIC in queues_before

        # the two requests of the report, first
        for topic in ("", str(canary), "/", ".."):
            answer = asyncio.run(delete_topic(server.broker, topic))
            assert answer.code == ResponseCode.INVALID_PARAMETER, answer.remark
        seen = asyncio.run(fuzz_remoting(server.broker, server.namesrv, hostile_names(canary)))
        assert seen[ResponseCode.INVALID_PARAMETER] > 1000

        assert snapshot(canary) == before
        assert sorted(p.name for p in (store / "consumequeue").iterdir()) == queues_before
        # still serving, and the data is all there
        got = asyncio.run(read_topic(server.namesrv, TOPIC))
        assert sorted(m.body.decode() for m in got) == sorted(sent)
        assert server.popen.poll() is None
    with serve(data, flush="sync", name="again") as server:
        got = asyncio.run(read_topic(server.namesrv, TOPIC))
        assert sorted(m.body.decode() for m in got) == sorted(sent)
    assert snapshot(canary) == before


def grpc_requests(name: str) -> list[tuple[str, object]]:
    topic, group = pb.Resource(name=name), pb.Resource(name=name)
    queue = pb.MessageQueue(topic=topic, id=0)
    return [
        ("QueryRoute", spb.QueryRouteRequest(topic=topic)),
        ("QueryAssignment", spb.QueryAssignmentRequest(topic=topic, group=pb.Resource(name="G"))),
        (
            "SendMessage",
            spb.SendMessageRequest(
                messages=[pb.Message(topic=topic, body=b"x", user_properties={"k": "v"})]
            ),
        ),
        ("AckMessage", spb.AckMessageRequest(group=group, topic=pb.Resource(name=TOPIC))),
        (
            "ReceiveMessage",
            spb.ReceiveMessageRequest(group=pb.Resource(name="G"), message_queue=queue),
        ),
        ("UpdateOffset", spb.UpdateOffsetRequest(group=group, message_queue=queue)),
        ("GetOffset", spb.GetOffsetRequest(group=pb.Resource(name="G"), message_queue=queue)),
    ]


def test_grpc_refuses_hostile_names(tmp_path: Path) -> None:
    canary = make_canary(tmp_path)
    before = snapshot(canary)
    with serve(tmp_path / "data") as server:
        for name in hostile_names(canary):
            for method, request in grpc_requests(name):
                answer = asyncio.run(grpc_call(server.grpc, method, request))
                first = answer[0] if isinstance(answer, list) else answer
                assert first.status.code in (
                    pb.Code.ILLEGAL_TOPIC,
                    pb.Code.ILLEGAL_CONSUMER_GROUP,
                ), (
                    method,
                    name[:40],
                    first.status,
                )
        assert server.popen.poll() is None
    assert snapshot(canary) == before
