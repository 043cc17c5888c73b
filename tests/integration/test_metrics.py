"""/metrics of a real `tidemq serve --http-port 0` after real traffic: RocketMQ 5's
broker metrics (names, labels, values) as Prometheus parses them, and the name
server's, on the same page and on a name server of its own."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.metrics_core import Metric
from rocketmq.grpc_protocol import definition_pb2 as pb

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeStatus
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.producer import AsyncProducer
from tidemq.common.message import Message, MessageExt
from tidemq.testing.client_support import (
    create_topic,
    grpc_call,
    grpc_send_request,
    numbered_messages,
    produce,
)
from tidemq.testing.metrics import sample_value, samples, scrape
from tidemq.testing.processes import FAST_DELAY_LEVELS, ServerProcess, serve, started
from tidemq.testing.waiting import eventually, unique_name, wait_until

pytestmark = pytest.mark.slow

BROKER = {"node_type": "broker", "cluster": "DefaultCluster", "node_id": "broker-a"}
RPC_BOUNDS = ("1.0", "3.0", "5.0", "7.0", "10.0", "100.0", "1000.0", "2000.0", "3000.0", "+Inf")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("metrics") / "data"
    settings = {"delay_levels": FAST_DELAY_LEVELS, "max_reconsume_times": 1}
    with serve(data, settings=settings, http=True) as process:
        yield process


async def metrics(server: ServerProcess) -> list[Metric]:
    return await asyncio.to_thread(scrape, server.http)


async def broker_value(server: ServerProcess, name: str, **labels: str) -> float | None:
    return sample_value(await metrics(server), name, **BROKER, **labels)


class Listener:
    """A concurrent listener counting what it saw (it runs in the consumer's pool)."""

    def __init__(self, status: ConsumeStatus = ConsumeStatus.CONSUME_SUCCESS) -> None:
        self.status = status
        self.bodies: list[str] = []
        self._lock = threading.Lock()

    def __call__(
        self, messages: list[MessageExt], context: ConsumeConcurrentlyContext
    ) -> ConsumeStatus:
        with self._lock:
            self.bodies.extend(m.body.decode() for m in messages)
        return self.status

    def seen(self) -> int:
        with self._lock:
            return len(set(self.bodies))


def push_consumer(
    server: ServerProcess, group: str, topic: str, listener: Listener, **options: object
) -> AsyncPushConsumer:
    push = AsyncPushConsumer(
        group,
        server.namesrv,
        listener=listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **options,  # type: ignore[arg-type]
    )
    push.subscribe(topic, "*")
    return push


async def consume_all(server: ServerProcess, group: str, topic: str, count: int) -> None:
    """Consume `count` messages of `topic` as `group`, then stop (offsets committed)."""
    listener = Listener()
    push = push_consumer(server, group, topic, listener)
    await push.start()
    try:
        await eventually(lambda: listener.seen() == count, f"{count} messages consumed")
    finally:
        await push.shutdown()


async def test_messages_in_and_out_are_counted_per_topic_and_group(server: ServerProcess) -> None:
    topic, group = unique_name("T"), unique_name("G")
    await create_topic(server.namesrv, topic)
    bodies = await produce(server.namesrv, numbered_messages(topic, 12, body="body-{}"))
    await consume_all(server, group, topic, 12)

    async def consumed() -> list[Metric] | None:
        families = await metrics(server)
        out = sample_value(
            families, "rocketmq_messages_out_total", **BROKER, topic=topic, consumer_group=group
        )
        return families if out == 12 else None

    families = await eventually(consumed, "12 messages out to the group")
    incoming = {"topic": topic, "message_type": "normal", "is_system": "false"}
    assert sample_value(families, "rocketmq_messages_in_total", **BROKER, **incoming) == 12
    size = sum(len(b) for b in bodies)
    assert sample_value(families, "rocketmq_throughput_in_total", **BROKER, **incoming) == size
    assert sample_value(families, "rocketmq_message_size_count", **BROKER, **incoming) == 12
    assert sample_value(families, "rocketmq_message_size_bucket", **incoming, le="1024.0") == 12
    outgoing = {"topic": topic, "consumer_group": group, "is_system": "false"}
    out_bytes = sample_value(families, "rocketmq_throughput_out_total", **BROKER, **outgoing)
    assert out_bytes is not None and out_bytes > size  # stored records: headers too
    lag = {"consumer_group": group, "topic": topic, "is_retry": "false"}
    assert sample_value(families, "rocketmq_consumer_lag_messages", **lag) == 0


async def test_a_stopped_group_shows_its_lag(server: ServerProcess) -> None:
    topic, group = unique_name("T"), unique_name("G")
    await create_topic(server.namesrv, topic)
    await produce(server.namesrv, numbered_messages(topic, 8))
    await consume_all(server, group, topic, 8)  # M = 8 consumed, then the consumer stops
    await produce(server.namesrv, numbered_messages(topic, 5, start=8))  # N = 13 produced

    lag = {"consumer_group": group, "topic": topic, "is_retry": "false", "is_system": "false"}

    async def behind() -> list[Metric] | None:
        families = await metrics(server)
        found = sample_value(families, "rocketmq_consumer_lag_messages", **BROKER, **lag)
        return families if found == 5 else None

    families = await eventually(behind, "a lag of N - M = 5")
    assert sample_value(families, "rocketmq_consumer_ready_messages", **lag) == 5
    assert sample_value(families, "rocketmq_consumer_inflight_messages", **lag) == 0
    age = sample_value(families, "rocketmq_consumer_lag_latency_milliseconds", **lag)
    assert age is not None and 0 <= age < 600_000  # the age of a message sent just now
    assert not samples(families, "rocketmq_consumer_connections", consumer_group=group)


async def test_messages_failed_max_reconsume_times_are_dead_letters(
    server: ServerProcess,
) -> None:
    topic, group = unique_name("T"), unique_name("G")
    await create_topic(server.namesrv, topic, queues=1)
    push = push_consumer(
        server, group, topic, Listener(ConsumeStatus.RECONSUME_LATER), max_reconsume_times=1
    )
    await push.start()
    try:
        await produce(server.namesrv, numbered_messages(topic, 2))
        dead = {"consumer_group": group, "topic": topic, "is_system": "false"}

        async def both_dead() -> bool:
            found = await broker_value(server, "rocketmq_send_to_dlq_messages_total", **dead)
            return found == 2

        await eventually(both_dead, "both messages in the DLQ after one retry")
    finally:
        await push.shutdown()


async def test_rpc_latency_buckets_count_every_send(server: ServerProcess) -> None:
    send = {
        "protocol_type": "remoting",
        "request_code": "send_message_v2",
        "response_code": "success",
        "is_long_polling": "false",
        "result": "success",
    }
    name = "rocketmq_rpc_latency_milliseconds"
    before = await broker_value(server, f"{name}_count", **send) or 0
    topic = unique_name("T")
    await create_topic(server.namesrv, topic)
    await produce(server.namesrv, numbered_messages(topic, 10))
    families = await metrics(server)
    count = sample_value(families, f"{name}_count", **BROKER, **send)
    assert count == before + 10
    buckets = [
        sample_value(families, f"{name}_bucket", **BROKER, **send, le=bound) for bound in RPC_BOUNDS
    ]
    assert all(value is not None for value in buckets)
    assert buckets == sorted(buckets)  # cumulative
    assert buckets[-1] == count
    total = sample_value(families, f"{name}_sum", **BROKER, **send)
    assert total is not None and total > 0


async def test_grpc_calls_are_timed_and_their_messages_counted(server: ServerProcess) -> None:
    topic = unique_name("T")
    await create_topic(server.namesrv, topic)
    response = await grpc_call(server.grpc, "SendMessage", grpc_send_request(topic, b"hello"))
    assert response.status.code == pb.Code.OK
    families = await metrics(server)
    grpc_send = {"protocol_type": "grpc", "request_code": "send_message", "response_code": "ok"}
    count = sample_value(families, "rocketmq_rpc_latency_milliseconds_count", **grpc_send)
    assert count is not None and count >= 1
    incoming = {"topic": topic, "message_type": "normal"}
    assert sample_value(families, "rocketmq_messages_in_total", **BROKER, **incoming) == 1


async def test_topic_and_group_numbers_grow_with_the_tables(server: ServerProcess) -> None:
    topics_before = await broker_value(server, "rocketmq_topic_number")
    groups_before = await broker_value(server, "rocketmq_consumer_group_number")
    assert topics_before is not None and groups_before is not None
    topic, group = unique_name("T"), unique_name("G")
    await create_topic(server.namesrv, topic)
    await produce(server.namesrv, numbered_messages(topic, 1))
    await consume_all(server, group, topic, 1)
    assert await broker_value(server, "rocketmq_topic_number") == topics_before + 2  # + %RETRY%
    assert await broker_value(server, "rocketmq_consumer_group_number") == groups_before + 1


async def test_connections_of_producers_and_consumers(server: ServerProcess) -> None:
    async def producers() -> float:
        return sum(s.value for s in samples(await metrics(server), "rocketmq_producer_connections"))

    topic, group = unique_name("T"), unique_name("G")
    await create_topic(server.namesrv, topic)
    before = await producers()
    async with AsyncProducer(unique_name("P"), server.namesrv) as producer:
        await producer.send(Message(topic, body=b"x"))

        async def one_more() -> bool:
            return await producers() == before + 1

        await eventually(one_more, "the producer's connection counted")

    async def back_to_before() -> bool:
        return await producers() == before

    await eventually(back_to_before, "the producer's connection gone")

    listener = Listener()
    push = push_consumer(server, group, topic, listener)
    await push.start()
    try:
        consumer = {
            "consumer_group": group,
            "consume_mode": "push",
            "protocol_type": "remoting",
            "is_system": "false",
        }

        async def connected() -> bool:
            found = samples(await metrics(server), "rocketmq_consumer_connections", **consumer)
            return len(found) == 1 and found[0].value == 1 and found[0].labels["version"] != ""

        await eventually(connected, "one consumer connection of the group")
    finally:
        await push.shutdown()


async def test_one_page_shows_the_name_server_too(server: ServerProcess) -> None:
    families = await metrics(server)
    namesrv = {"node_type": "nameserver", "node_id": server.namesrv}
    assert sample_value(families, "tidemq_nameserver_brokers", **namesrv) == 1
    registrations = sample_value(
        families,
        "rocketmq_rpc_latency_milliseconds_count",
        **namesrv,
        request_code="register_broker",
        response_code="success",
    )
    assert registrations is not None and registrations >= 1
    assert sample_value(families, "tidemq_nameserver_topics", **namesrv) is not None


def test_a_name_server_on_its_own_serves_its_metrics(tmp_path: Path) -> None:
    with started(["namesrv", "--port", "0", "--http-port", "0"], tmp_path, "ns") as (ns, ready):
        address = ready["namesrv"]
        assert f"curl http://{ready['http']}/metrics" in "".join(ns.output)
        config = tmp_path / "broker.json"
        config.write_text(
            json.dumps(
                {
                    "listen_port": 0,
                    "namesrv_addrs": [address],
                    "data_dir": str(tmp_path / "broker"),
                }
            )
        )
        labels = {"node_type": "nameserver", "node_id": address}

        def brokers() -> float | None:
            return sample_value(scrape(ready["http"]), "tidemq_nameserver_brokers", **labels)

        with started(["broker", "--config", str(config)], tmp_path, "broker") as (broker, _):
            wait_until(lambda: brokers() == 1, "the broker registered")
            families = scrape(ready["http"])
            registered = sample_value(
                families,
                "rocketmq_rpc_latency_milliseconds_count",
                **labels,
                request_code="register_broker",
                response_code="success",
                protocol_type="remoting",
            )
            assert registered is not None and registered >= 1
            assert not samples(families, "rocketmq_messages_in_total")  # no broker families
            assert broker.stop() == 0  # unregisters on the way out
        wait_until(lambda: brokers() is None, "the broker gone from the name server")
