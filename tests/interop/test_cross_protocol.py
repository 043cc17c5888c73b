"""Across the two protocols: what the official 5.x client sends over gRPC is
consumed by a real ali-ons push consumer (remoting) and by tidemq's push
consumer; what ali-ons and tidemq's producer send over remoting is received
by the official client's SimpleConsumer over gRPC."""

from __future__ import annotations

import shutil
import threading
from typing import Any

import pytest
from ali_ons_harness import ScriptRunner, unique
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer
from rocketmq import SimpleConsumer as OfficialSimpleConsumer

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer.listener import ConsumeOrderlyStatus
from tidemq.client.consumer.push import PushConsumer
from tidemq.client.producer import Producer as TidemqProducer
from tidemq.client.producer import make_message
from tidemq.common.message import MessageExt
from tidemq.testing.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("node") is None, reason="`node` is not installed"),
]


def official_producer(endpoint: str, topic: str) -> Producer:
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (topic,))
    producer.startup()
    return producer


def grpc_message(topic: str, body: bytes, **fields: Any) -> Message:
    message = Message()
    message.topic = topic
    message.body = body
    for name, value in fields.items():
        setattr(message, name, value)
    return message


def test_grpc_sent_consumed_by_ali_ons(scripts: ScriptRunner) -> None:
    topic = unique("IT_GrpcToAli")
    scripts.server.create_topic(topic, queues=4)
    script = scripts.start("tidemq_producer_consume", timeout=90, topic=topic, group=unique("CG"))
    script.wait_for("the subscription", lambda events: script.of_kind("subscribed"), 40)
    producer = official_producer(scripts.server.grpc, topic)
    try:
        sent = grpc_message(topic, b"from grpc", tag="TagA", keys="k-1")
        sent.add_property("label", "plain")
        receipt = producer.send(sent)
    finally:
        producer.shutdown()
    script.wait_for(
        "the gRPC message",
        lambda events: any(e.get("label") == "plain" for e in script.of_kind("received")),
        60,
    )
    script.stop()
    script.wait_exit(30)
    [event] = [e for e in script.of_kind("received") if e.get("label") == "plain"]
    assert event["tags"] == "TagA" and event["keys"] == "k-1", event
    assert event["body"] == "from grpc", event
    assert receipt.message_id


def test_grpc_fifo_consumed_in_order_by_tidemq_orderly_consumer(scripts: ScriptRunner) -> None:
    topic = unique("IT_GrpcFifo")
    scripts.server.create_topic(topic, queues=4)
    producer = official_producer(scripts.server.grpc, topic)
    try:
        for i in range(5):
            producer.send(grpc_message(topic, f"o{i}".encode(), message_group="order-7"))
    finally:
        producer.shutdown()
    got: list[bytes] = []
    lock = threading.Lock()

    def listener(messages: list[MessageExt], context: Any) -> ConsumeOrderlyStatus:
        with lock:
            got.extend(m.body for m in messages)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer(
        unique("CG_order"),
        scripts.server.namesrv,
        listener=listener,
        orderly=True,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic, "*")
    consumer.start()
    try:
        wait_until(lambda: len(got) >= 5, "the five ordered messages", interval=0.1)
    finally:
        consumer.shutdown()
    assert got == [f"o{i}".encode() for i in range(5)]


def test_remoting_sent_received_by_official_simple_consumer(scripts: ScriptRunner) -> None:
    topic = unique("IT_AliToGrpc")
    scripts.server.create_topic(topic, queues=2)
    script = scripts.run("ali_producer_send", timeout=60, topic=topic, group=unique("aliprod"))
    labels = {e["label"] for e in script.of_kind("sent")}
    with TidemqProducer(unique("PG_cross"), scripts.server.namesrv) as producer:
        producer.send(make_message(topic, b"from tidemq", tags="TagA", properties={"label": "py"}))
    config = ClientConfiguration(scripts.server.grpc, Credentials())
    consumer = OfficialSimpleConsumer(config, unique("CG_grpc"), {topic: FilterExpression("*")}, 2)
    consumer.startup()
    try:
        got: dict[str, Any] = {}

        def received_all() -> bool:
            for message in consumer.receive(16, 15):
                got[message.properties.get("label", "?")] = message
                consumer.ack(message)
            return len(got) >= len(labels) + 1

        wait_until(received_all, "every label and the tidemq message")
    finally:
        consumer.shutdown()
    assert set(got) == labels | {"py"}
    assert got["py"].body == b"from tidemq" and got["py"].tag == "TagA"
    assert len(got["zip"].body) == 6000  # ali-ons compressed it; gRPC delivers it inflated
    assert not any(m.corrupted for m in got.values())
