"""The gRPC endpoint under `tidemq serve --acl` (a real process): the official
RocketMQ 5 Python client with credentials sends, receives and acks; without them,
with a wrong secret, or on a topic it may not publish to, it is refused and
nothing is stored or consumed; a policy change taken without a restart, also
by an open client. Every RPC family x (anonymous, wrong key, allowed, denied):
tests/integration/test_acl_grpc_families.py. The Node client: below."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from node_acl_support import official_node_acl
from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2_grpc
from rocketmq.v5.exception import ForbiddenException

from tidemq.acl.credentials import Credentials as TidemqCredentials
from tidemq.acl.grpc_auth import client_headers
from tidemq.client.admin import AdminClient
from tidemq.testing.client_support import grpc_send_request
from tidemq.testing.processes import ServerProcess, started
from tidemq.testing.waiting import eventually, wait_until

pytestmark = pytest.mark.slow

Code = pb.Code
ADMIN = TidemqCredentials("adminKey01", "adminSecret01")
APP = ("appKey0001", "appSecret0001")
POLICY = """\
accounts:
  - accessKey: adminKey01
    secretKey: adminSecret01
    admin: true
  - accessKey: appKey0001
    secretKey: appSecret0001
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [Orders=PUB|SUB, Audit=SUB]
    groupPerms: [Billing=SUB]
"""
TOPICS = ("Orders", "Audit")
GROUPS = ("Billing", "Other")


def serve_acl(tmp_path: Path, policy: str = POLICY) -> Any:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(policy, encoding="utf-8")
    args = ["serve", "--data-dir", str(tmp_path / "data"), "--acl", str(acl)]
    args += ["--namesrv-port", "0", "--broker-port", "0", "--grpc-port", "0"]
    args += ["--set", "acl_poll_interval_s=0.2"]
    return started(args, tmp_path, "serve")


async def setup(namesrv: str) -> None:
    async with AdminClient(namesrv, credentials=ADMIN) as admin:
        for topic in TOPICS:
            await admin.create_topic(topic, queues=2)
        for group in GROUPS:
            await admin.create_group(group)


async def stored(namesrv: str, topic: str) -> int:
    async with AdminClient(namesrv, credentials=ADMIN) as admin:
        return sum(q.max_offset for q in await admin.topic_status(topic))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve_acl(tmp_path_factory.mktemp("grpc-acl")) as (process, ready):
        assert "grpc" in ready
        asyncio.run(setup(process.namesrv))
        yield process


def config(server: ServerProcess, ak: str = "", sk: str = "") -> ClientConfiguration:
    return ClientConfiguration(server.grpc, Credentials(ak, sk))


def message(topic: str, body: bytes) -> Message:
    result = Message()
    result.topic = topic
    result.body = body
    return result


def refused(client: Any, use: Callable[[Any], object]) -> None:
    """The official client fails: at startup, or (the Python client logs a failed
    route query at startup and goes on) at its first use."""
    with pytest.raises(Exception):  # noqa: B017 - the client raises a bare Exception
        try:
            client.startup()
            use(client)
        finally:
            with contextlib.suppress(Exception):  # one that never started may not shut down
                client.shutdown()


def server_log(server: ServerProcess) -> str:
    return server.stderr()


def test_official_python_client_with_credentials_sends_receives_and_acks(
    server: ServerProcess,
) -> None:
    before = asyncio.run(stored(server.namesrv, "Orders"))
    producer = Producer(config(server, *APP), ("Orders",))
    producer.startup()
    consumer = SimpleConsumer(
        config(server, *APP), "Billing", {"Orders": FilterExpression()}, await_duration=2
    )
    consumer.startup()
    try:
        receipt = producer.send(message("Orders", b"allowed"))
        assert receipt.message_id
        got: list[Any] = []

        def received() -> bool:
            got.extend(consumer.receive(16, 15))
            return any(m.body == b"allowed" for m in got)

        wait_until(received, "the allowed message received")
        for item in got:
            consumer.ack(item)
        assert consumer.receive(16, 15) == []  # acked: not delivered again
    finally:
        consumer.shutdown()
        producer.shutdown()
    assert asyncio.run(stored(server.namesrv, "Orders")) == before + 1


def test_official_python_client_without_or_with_wrong_credentials_is_refused(
    server: ServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    before = asyncio.run(stored(server.namesrv, "Orders"))
    for ak, sk in (("", ""), (APP[0], "wrongSecret1")):
        producer = Producer(config(server, ak, sk), ("Orders",))
        refused(producer, lambda p: p.send(message("Orders", b"refused")))
        consumer = SimpleConsumer(
            config(server, ak, sk), "Billing", {"Orders": FilterExpression()}, await_duration=2
        )
        refused(consumer, lambda c: c.receive(16, 15))
    # the client logs the server's answer: code and reason
    logged = caplog.text
    assert "40100, No accessKey is configured (the client sends no credentials)" in logged
    assert "40100, Check signature failed for accessKey=appKey0001" in logged
    assert asyncio.run(stored(server.namesrv, "Orders")) == before
    wait_until(
        lambda: (
            "(no_access_key): No accessKey is configured" in server_log(server)
            and "(bad_signature): Check signature failed for accessKey=appKey0001"
            in server_log(server)
        ),
        "the refusals logged",
    )
    assert "wrongSecret1" not in server_log(server) and "appSecret0001" not in server_log(server)


def test_official_python_client_may_not_publish_to_a_sub_only_topic(
    server: ServerProcess,
) -> None:
    producer = Producer(config(server, *APP), ("Audit",))
    producer.startup()  # the route needs PUB or SUB: Audit is SUB
    try:
        with pytest.raises(ForbiddenException) as info:
            producer.send(message("Audit", b"denied"))
        assert "No default permission for topic:Audit" in str(info.value)
    finally:
        producer.shutdown()
    assert asyncio.run(stored(server.namesrv, "Audit")) == 0


def test_official_python_consumer_of_a_denied_group_consumes_nothing(
    server: ServerProcess,
) -> None:
    producer = Producer(config(server, *APP), ("Orders",))
    producer.startup()
    try:
        producer.send(message("Orders", b"for billing only"))
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(
        config(server, *APP), "Other", {"Orders": FilterExpression()}, await_duration=2
    )
    refused(consumer, lambda c: c.receive(16, 15))  # the assignment needs SUB on the group
    billing = SimpleConsumer(
        config(server, *APP), "Billing", {"Orders": FilterExpression()}, await_duration=2
    )
    billing.startup()
    try:
        got: list[Any] = []

        def received() -> bool:
            got.extend(billing.receive(16, 15))
            return any(m.body == b"for billing only" for m in got)

        wait_until(received, "the message still there for Billing")
        for item in got:
            billing.ack(item)
    finally:
        billing.shutdown()


# -- a raw v2 stub signing as the official clients do ------------------------------------


def metadata_for(identity: str) -> list[tuple[str, str]]:
    headers = [("x-mq-client-id", f"table-{identity}@1")]
    now = datetime.now(UTC)
    if identity == "wrong key":
        headers += list(client_headers(APP[0], "wrongSecret1", now).items())
    elif identity in ("allowed", "denied"):
        headers += list(client_headers(*APP, now).items())
    return headers


async def call(endpoint: str, rpc: str, request: Any, identity: str) -> pb.Status:
    """The status the RPC answers (the first response of a stream)."""
    metadata = metadata_for(identity)
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        method = getattr(stub, rpc)
        if rpc == "Telemetry":

            async def one_command() -> AsyncIterator[Any]:
                yield request

            async for reply in method(one_command(), metadata=metadata, timeout=20):
                return reply.status
            raise AssertionError("Telemetry: no reply")
        if rpc in ("ReceiveMessage", "PullMessage"):
            async for response in method(request, metadata=metadata, timeout=20):
                return response.status
            raise AssertionError(f"{rpc}: no response")
        return (await method(request, metadata=metadata, timeout=20)).status


# -- the policy file, changed while the server runs -------------------------------------------


def test_a_policy_change_is_taken_without_a_restart(tmp_path: Path) -> None:
    with serve_acl(tmp_path) as (process, _):
        asyncio.run(setup(process.namesrv))
        producer = Producer(config(process, *APP), ("Audit",))
        producer.startup()
        try:
            with pytest.raises(ForbiddenException):
                producer.send(message("Audit", b"before"))
            (tmp_path / "plain_acl.yml").write_text(
                POLICY.replace("Audit=SUB", "Audit=PUB|SUB"), encoding="utf-8"
            )

            def sent() -> bool:
                try:
                    producer.send(message("Audit", b"after"))
                except ForbiddenException:
                    return False
                return True

            wait_until(sent, "the new policy in force")
        finally:
            producer.shutdown()
        assert asyncio.run(stored(process.namesrv, "Audit")) == 1
        # and taken away again: an open client is refused at its next call
        (tmp_path / "plain_acl.yml").write_text(
            POLICY.replace("Orders=PUB|SUB", "Orders=SUB"), encoding="utf-8"
        )

        async def orders_refused() -> bool:
            status = await call(
                process.grpc, "SendMessage", grpc_send_request("Orders", b"x"), "allowed"
            )
            return status.code == Code.FORBIDDEN

        asyncio.run(eventually(orders_refused, "Orders no longer PUB"))


# -- the official Node client -------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("node") is None, reason="`node` is not installed")
def test_official_node_client_with_and_without_credentials(
    server: ServerProcess, tmp_path: Path
) -> None:
    before = {topic: asyncio.run(stored(server.namesrv, topic)) for topic in ("Orders", "Audit")}
    by_event = official_node_acl(server.grpc, "Orders", "Billing", "Audit", *APP, tmp_path)
    assert "No default permission for topic:Audit" in by_event["denied"]["message"]
    after = {topic: asyncio.run(stored(server.namesrv, topic)) for topic in ("Orders", "Audit")}
    assert after == {"Orders": before["Orders"] + 1, "Audit": before["Audit"]}
