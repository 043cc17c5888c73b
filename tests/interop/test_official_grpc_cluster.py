"""The official RocketMQ 5 Python client given ONE broker's gRPC endpoint in a
two-broker cluster: routes list both brokers, each at its own endpoint (as
RocketMQ's local-mode proxy answers from the name server's route), so the
producer's messages land on both and a SimpleConsumer receives all of them; a
broker made read only (brokerPermission) or wiped (wipe-write-perm) shows READ
in the routes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from tidemq.client.admin import AdminClient
from tidemq.grpc.cluster_routes import GRPC_ADDRESS_KEY
from tidemq.testing.client_support import grpc_call
from tidemq.testing.processes import server_env
from tidemq.testing.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC = "Spread"
GROUP = "SpreadReaders"


def tidemq(home: Path, *args: str) -> Any:
    result = subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", *args, "--json"],
        capture_output=True, text=True, env=server_env(home), timeout=180, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"{args}: {result.stdout}{result.stderr}"
    return json.loads(result.stdout)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """Two masters with gRPC endpoints: the name server, broker name -> gRPC address
    (the CLI's home is this test's tmp_path)."""
    data = tmp_path / "cluster"
    up = tidemq(tmp_path, "cluster", "up", "--data-dir", str(data), "--brokers", "2",
                "--replicas", "1", "--role", "ASYNC_MASTER", "--grpc")  # fmt: skip
    try:
        namesrv = up["namesrv"]
        tidemq(tmp_path, "topic", "create", TOPIC, "--queues", "2", "--namesrv", namesrv)
        tidemq(tmp_path, "group", "create", GROUP, "--namesrv", namesrv)

        async def endpoints() -> dict[str, str]:
            async with AdminClient(namesrv) as admin:
                masters = (await admin.cluster_info()).masters()
                return {
                    name: (await admin.broker_runtime_stats(address))[GRPC_ADDRESS_KEY]
                    for name, address in masters.items()
                }

        yield namesrv, asyncio.run(endpoints())
    finally:
        subprocess.run(
            [sys.executable, "-m", "tidemq.cli.main", "cluster", "down", "--data-dir", str(data)],
            capture_output=True, env=server_env(tmp_path), timeout=180, check=False,
        )  # fmt: skip


def route_of(endpoint: str) -> dict[str, tuple[int, str]]:
    """broker name -> (permission of its queues, "host:port" a client reaches it at)."""
    host, _, port = endpoint.rpartition(":")
    dialled = pb.Endpoints(
        scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host=host, port=int(port))]
    )
    request = spb.QueryRouteRequest(topic=pb.Resource(name=TOPIC), endpoints=dialled)
    response = asyncio.run(grpc_call(endpoint, "QueryRoute", request))
    assert response.status.code == pb.Code.OK, response.status
    found = {}
    for queue in response.message_queues:
        address = queue.broker.endpoints.addresses[0]
        found[queue.broker.name] = (queue.permission, f"{address.host}:{address.port}")
    return found


def test_one_endpoint_reaches_every_broker(
    cluster: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    namesrv, grpc = cluster
    entry = grpc["broker-a"]
    routes = route_of(entry)
    assert routes == {
        "broker-a": (pb.Permission.READ_WRITE, entry),
        "broker-b": (pb.Permission.READ_WRITE, grpc["broker-b"]),
    }
    config = ClientConfiguration(entry, Credentials())
    producer = Producer(config, (TOPIC,))
    producer.startup()
    consumer = SimpleConsumer(config, GROUP, {TOPIC: FilterExpression("*")}, await_duration=2)
    consumer.startup()
    try:
        landed: Counter[str] = Counter()
        for i in range(20):
            message = Message()
            message.topic, message.body = TOPIC, f"spread {i}".encode()
            queue = producer.send(message).message_queue
            landed[str(queue).split(".")[0]] += 1  # "broker.topic.queue_id"
        assert set(landed) == {"broker-a", "broker-b"}
        received: list[bytes] = []

        def all_twenty() -> bool:
            for message in consumer.receive(32, 15):
                received.append(message.body)
                consumer.ack(message)
            return len(set(received)) >= 20

        wait_until(all_twenty, "the twenty messages from both brokers")
        assert sorted(set(received)) == sorted(f"spread {i}".encode() for i in range(20))

        tidemq(tmp_path, "cluster", "broker-config", "broker-b",
               "--set", "brokerPermission=4", "--namesrv", namesrv)  # fmt: skip
        wait_until(
            lambda: route_of(entry)["broker-b"][0] == pb.Permission.READ, "broker-b read only"
        )
        tidemq(tmp_path, "cluster", "wipe-write-perm", "broker-a", "--namesrv", namesrv)
        wait_until(lambda: route_of(entry)["broker-a"][0] == pb.Permission.READ, "broker-a wiped")
    finally:
        consumer.shutdown()
        producer.shutdown()
