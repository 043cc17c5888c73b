"""/metrics while the official RocketMQ 5 Python client (gRPC) works against a real
`tidemq serve --http-port 0`: its producer and SimpleConsumer as connections of
protocol_type "grpc", its receives as long-polling RPCs, POP deliveries out
with is_retry, and the POP group's lag rows (topic and retry topic)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
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

from tidemq.client.admin import AdminClient
from tidemq.testing.client_support import create_topic
from tidemq.testing.metrics import sample_value, samples, scrape
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.waiting import unique_name, wait_until

pytestmark = pytest.mark.slow

BROKER = {"node_type": "broker", "cluster": "DefaultCluster", "node_id": "broker-a"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("grpc-metrics") / "data", http=True) as process:
        yield process


def message(topic: str, body: bytes) -> Message:
    result = Message()
    result.topic = topic
    result.body = body
    return result


def test_official_clients_show_as_grpc_connections_and_pop_traffic(
    server: ServerProcess,
) -> None:
    topic, group = unique_name("GrpcT"), unique_name("GrpcG")

    async def setup() -> None:
        await create_topic(server.namesrv, topic, queues=1)
        async with AdminClient(server.namesrv) as admin:
            await admin.create_group(group)

    asyncio.run(setup())
    config = ClientConfiguration(server.grpc, Credentials())
    producer = Producer(config, (topic,))
    consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=2)
    producer.startup()
    consumer.startup()
    try:
        for i in range(3):
            producer.send(message(topic, f"m{i}".encode()))
        got: list[Any] = []

        def received() -> bool:
            got.extend(consumer.receive(16, 15))
            return len(got) >= 3

        wait_until(received, "three messages received")
        consumer.ack(got[0])  # two stay in flight

        def grpc_clients() -> list[Any] | None:
            families = scrape(server.http)
            connected = samples(
                families,
                "rocketmq_consumer_connections",
                consumer_group=group,
                protocol_type="grpc",
            )
            producing = samples(families, "rocketmq_producer_connections", protocol_type="grpc")
            return families if connected and producing else None

        families = wait_until(grpc_clients, "the gRPC producer and consumer connected")
        [connection] = samples(families, "rocketmq_consumer_connections", consumer_group=group)
        assert connection.labels["consume_mode"] == "pop"
        assert connection.labels["language"] == "python"
        producing = samples(families, "rocketmq_producer_connections", protocol_type="grpc")
        assert {s.labels["language"] for s in producing} == {"python"}
        out = {"topic": topic, "consumer_group": group, "is_retry": "false"}
        assert sample_value(families, "rocketmq_messages_out_total", **BROKER, **out) == 3
        lag = {"consumer_group": group, "topic": topic, "is_retry": "false"}
        assert sample_value(families, "rocketmq_consumer_lag_messages", **lag) == 2
        assert sample_value(families, "rocketmq_consumer_inflight_messages", **lag) == 2
        assert sample_value(families, "rocketmq_consumer_ready_messages", **lag) == 0
        retry_row = {"consumer_group": group, "topic": topic, "is_retry": "true"}
        assert sample_value(families, "rocketmq_consumer_lag_messages", **retry_row) == 0
        receives = samples(
            families,
            "rocketmq_rpc_latency_milliseconds_count",
            protocol_type="grpc",
            request_code="receive_message",
            is_long_polling="true",
        )
        assert receives and sum(s.value for s in receives) >= 1
    finally:
        consumer.shutdown()
        producer.shutdown()
