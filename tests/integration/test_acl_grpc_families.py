"""The gRPC request-family table: each RPC x (anonymous, wrong key, allowed, denied), against
a real broker's gRPC endpoint (the one gate of its remoting port, plain_acl.yml and the
RocketMQ 5 users), through a raw apache.rocketmq.v2 stub signing as the official clients
do, under both access models; each cell's exact status code checked against the table in
docs/access-control.md, so the table cannot lie.

The allowed cell does the real thing (a receipt handle from a real receive, a real half
message, a real timer message) and must succeed and change what it says; the refused
cells run first and must change nothing.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from acl_support import (
    APP,
    CASE_COLUMNS,
    GROUP,
    IDENTITIES,
    TOPIC,
    AclCluster,
    acl_cluster,
    doc_table,
    seeded,
    wrong_secret,
)
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc

from tidemq.acl.credentials import Credentials
from tidemq.acl.grpc_auth import client_headers
from tidemq.testing.client_support import grpc_send_request

Code = pb.Code
TABLE = doc_table("RPC family")
"""The docs' gRPC table: RPC -> case -> the status code its cell says."""
STREAMS = ("ReceiveMessage", "PullMessage")


def res(name: str) -> pb.Resource:
    return pb.Resource(name=name)


def mq(topic: str = TOPIC) -> pb.MessageQueue:
    return pb.MessageQueue(topic=res(topic), id=0)


@dataclass
class Endpoint:
    cluster: AclCluster
    address: str

    async def call(self, rpc: str, request: Any, credentials: Credentials | None) -> list[Any]:
        """Every response of `rpc` (one for a unary call), signed as `credentials`."""
        metadata = [("x-mq-client-id", f"grpc-table-{rpc}@1")]
        if credentials is not None:
            now = datetime.now(UTC)
            headers = client_headers(credentials.access_key, credentials.secret_key, now)
            metadata += headers.items()
        async with grpc.aio.insecure_channel(self.address) as channel:
            method = getattr(service_pb2_grpc.MessagingServiceStub(channel), rpc)
            if rpc == "Telemetry":

                async def one_command() -> AsyncIterator[Any]:
                    yield request

                return [
                    reply async for reply in method(one_command(), metadata=metadata, timeout=20)
                ]
            if rpc in STREAMS:
                return [reply async for reply in method(request, metadata=metadata, timeout=20)]
            return [await method(request, metadata=metadata, timeout=20)]

    async def fresh(self) -> None:
        """A message GROUP has not consumed (the seeding committed queue 0 past its own)."""
        sent = await self.cluster.send(TOPIC, "to receive", queue_id=0)
        assert sent.code == 0, sent.remark

    async def received(self, credentials: Credentials) -> Any:
        """A fresh message, received (made invisible) as `credentials` in GROUP."""
        await self.fresh()
        responses = await self.call("ReceiveMessage", receive_request(), credentials)
        (message,) = [r.message for r in responses if r.HasField("message")]
        return message


def status_of(responses: list[Any]) -> pb.Status:
    return next(r.status for r in responses if r.HasField("status"))


def receive_request() -> Any:
    return spb.ReceiveMessageRequest(
        group=res(GROUP),
        message_queue=mq(),
        batch_size=1,
        invisible_duration={"seconds": 30},
        long_polling_timeout={"seconds": 0},
    )


# -- the families: (endpoint, the allowed identity) -> the request every cell sends ----------

Setup = Callable[[Endpoint, Credentials], Awaitable[Any]]
Probe = Callable[[Endpoint], Awaitable[object]]


async def _fixed(request: Any) -> Any:
    return request


def fixed(request: Any) -> Setup:
    return lambda endpoint, allowed: _fixed(request)


async def ack_request(endpoint: Endpoint, allowed: Credentials) -> Any:
    message = await endpoint.received(allowed)
    entry = spb.AckMessageEntry(
        message_id=message.system_properties.message_id,
        receipt_handle=message.system_properties.receipt_handle,
    )
    return spb.AckMessageRequest(group=res(GROUP), topic=res(TOPIC), entries=[entry])


async def change_request(endpoint: Endpoint, allowed: Credentials) -> Any:
    message = await endpoint.received(allowed)
    return spb.ChangeInvisibleDurationRequest(
        group=res(GROUP),
        topic=res(TOPIC),
        receipt_handle=message.system_properties.receipt_handle,
        invisible_duration={"seconds": 60},
        message_id=message.system_properties.message_id,
    )


async def forward_request(endpoint: Endpoint, allowed: Credentials) -> Any:
    message = await endpoint.received(allowed)
    return spb.ForwardMessageToDeadLetterQueueRequest(
        group=res(GROUP),
        topic=res(TOPIC),
        receipt_handle=message.system_properties.receipt_handle,
        message_id=message.system_properties.message_id,
        delivery_attempt=1,
        max_delivery_attempts=16,
    )


async def end_request(endpoint: Endpoint, allowed: Credentials) -> Any:
    half = grpc_send_request(TOPIC, b"half", message_type=pb.MessageType.TRANSACTION)
    (sent,) = await endpoint.call("SendMessage", half, allowed)
    assert sent.status.code == Code.OK, sent.status
    (entry,) = sent.entries
    return spb.EndTransactionRequest(
        topic=res(TOPIC),
        message_id=entry.message_id,
        transaction_id=entry.transaction_id,
        resolution=pb.TransactionResolution.COMMIT,
        source=pb.TransactionSource.SOURCE_CLIENT,
    )


async def recall_request(endpoint: Endpoint, allowed: Credentials) -> Any:
    later = int(time.time()) + 3600
    timer = grpc_send_request(
        TOPIC,
        b"later",
        message_type=pb.MessageType.DELAY,
        delivery_timestamp={"seconds": later},
    )
    (sent,) = await endpoint.call("SendMessage", timer, allowed)
    assert sent.status.code == Code.OK, sent.status
    (entry,) = sent.entries
    assert entry.recall_handle
    return spb.RecallMessageRequest(topic=res(TOPIC), recall_handle=entry.recall_handle)


async def stored(endpoint: Endpoint) -> int:
    store = endpoint.cluster.broker.store
    assert store is not None
    return sum(store.max_offset(TOPIC, q) for q in range(4))


async def unacked(endpoint: Endpoint) -> int:
    core = endpoint.cluster.broker.core
    assert core is not None and core.pop_engine is not None
    return core.pop_engine.pending_count()


async def committed_offset(endpoint: Endpoint) -> int:
    return endpoint.cluster.broker.service.offsets.query(GROUP, TOPIC, 0)


@dataclass(frozen=True)
class Rpc:
    name: str
    """The RPC, and its row in the docs' table."""
    setup: Setup
    probe: Probe | None = None
    """What the RPC changes (read before and after each cell); None: `answered` checks
    the allowed answer."""
    answered: Callable[[list[Any]], bool] = lambda responses: True


async def receive_setup(endpoint: Endpoint, allowed: Credentials) -> Any:
    await endpoint.fresh()
    return receive_request()


def _has_message(responses: list[Any]) -> bool:
    return any(r.HasField("message") for r in responses)


RPCS = [
    Rpc("SendMessage", fixed(grpc_send_request(TOPIC, b"table")), stored),
    Rpc(
        "QueryRoute",
        fixed(spb.QueryRouteRequest(topic=res(TOPIC))),
        answered=lambda r: bool(r[0].message_queues),
    ),
    Rpc(
        "Heartbeat",
        fixed(spb.HeartbeatRequest(group=res(GROUP), client_type=pb.ClientType.SIMPLE_CONSUMER)),
    ),
    Rpc(
        "QueryAssignment",
        fixed(spb.QueryAssignmentRequest(topic=res(TOPIC), group=res(GROUP))),
        answered=lambda r: bool(r[0].assignments),
    ),
    Rpc("ReceiveMessage", receive_setup, answered=_has_message),
    Rpc("AckMessage", ack_request, unacked),
    Rpc(
        "ChangeInvisibleDuration",
        change_request,
        answered=lambda r: bool(r[0].receipt_handle),
    ),
    Rpc("ForwardMessageToDeadLetterQueue", forward_request, unacked),
    Rpc("EndTransaction", end_request, stored),
    Rpc("RecallMessage", recall_request, answered=lambda r: bool(r[0].message_id)),
    Rpc(
        "PullMessage",
        fixed(spb.PullMessageRequest(group=res(GROUP), message_queue=mq(), offset=0, batch_size=1)),
        answered=_has_message,
    ),
    Rpc(
        "UpdateOffset",
        fixed(spb.UpdateOffsetRequest(group=res(GROUP), message_queue=mq(), offset=5)),
        committed_offset,
    ),
    Rpc(
        "GetOffset",
        fixed(spb.GetOffsetRequest(group=res(GROUP), message_queue=mq())),
        answered=lambda r: r[0].offset == 1,
    ),
    Rpc(
        "QueryOffset",
        fixed(spb.QueryOffsetRequest(message_queue=mq(), query_offset_policy=pb.END)),
        answered=lambda r: r[0].offset == 1,
    ),
    Rpc("NotifyClientTermination", fixed(spb.NotifyClientTerminationRequest(group=res(GROUP)))),
    Rpc(
        "Telemetry",
        fixed(
            spb.TelemetryCommand(
                settings=pb.Settings(
                    client_type=pb.ClientType.PRODUCER,
                    publishing=pb.Publishing(topics=[res(TOPIC)]),
                )
            )
        ),
        answered=lambda r: r[0].HasField("settings"),
    ),
]

REMARKS = {
    "anonymous": ("No accessKey is configured",),
    "wrong key": ("Check signature failed for accessKey=",),
    "denied": ("No default permission for ", "User:"),
}


@pytest.mark.parametrize("model", ["file", "users"])
@pytest.mark.parametrize("rpc", RPCS, ids=lambda r: r.name)
async def test_rpc_by_identity(tmp_path: Path, rpc: Rpc, model: str) -> None:
    allowed, denied = IDENTITIES[model]["app"], IDENTITIES[model]["other"]
    async with acl_cluster(tmp_path, grpc=True) as cluster:
        await seeded(cluster)
        assert cluster.broker.grpc_address is not None
        endpoint = Endpoint(cluster, cluster.broker.grpc_address)
        request = await rpc.setup(endpoint, allowed)
        before = await rpc.probe(endpoint) if rpc.probe is not None else None
        observed: dict[str, int] = {}
        for case, credentials in (
            ("anonymous", None),
            ("wrong key", wrong_secret(allowed)),
            ("denied", denied),
        ):
            responses = await endpoint.call(rpc.name, request, credentials)
            status = status_of(responses)
            observed[case] = status.code
            cell = f"{rpc.name} x {case} ({model}): {status.code} {status.message}"
            assert len(responses) == 1, cell  # the refusal alone: nothing else answered
            assert status.message.startswith(REMARKS[case]), cell
            assert allowed.secret_key not in status.message and APP.secret_key not in cell
            if rpc.probe is not None:
                assert await rpc.probe(endpoint) == before, f"{cell} changed something"
        responses = await endpoint.call(rpc.name, request, allowed)
        status = status_of(responses)
        observed["allowed"] = status.code
        cell = f"{rpc.name} x allowed ({model}): {status.code} {status.message}"
        if rpc.probe is not None:
            assert await rpc.probe(endpoint) != before, f"{cell} changed nothing"
        else:
            assert rpc.answered(responses), cell
        assert observed == TABLE[rpc.name], f"{rpc.name} ({model}): the docs' row is wrong"


def test_the_docs_table_has_a_row_for_every_rpc_and_no_other() -> None:
    assert sorted(TABLE) == sorted(r.name for r in RPCS)
    assert all(set(cells) == set(CASE_COLUMNS) for cells in TABLE.values())
