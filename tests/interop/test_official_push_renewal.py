"""The official RocketMQ 5 Python PushConsumer (auto_renew receives) with a listener
that works longer than a message's invisible time: the broker renews the message
while the client holds it, so it is delivered once and the late ack, made with the
handle the client was given, counts. The broker's invisible time and renewal
timing are scaled down (2 s, renewed from 1.5 s before the end, looked at every
0.3 s) so that "longer than the invisible time" is seconds, not minutes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
)

from tidemq.testing.client_support import create_topic
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.waiting import unique_name, wait_until

pytestmark = pytest.mark.slow

INVISIBLE_MS = 2_000
WORK_S = 4 * INVISIBLE_MS / 1000
"""How long the listener works on the slow message: its processing time, the
scenario itself (not a wait for something to happen)."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    settings = {
        "grpc_default_invisible_ms": INVISIBLE_MS,
        "grpc_renew_ahead_ms": 1_500,
        "grpc_renew_period_ms": 300,
    }
    with serve(tmp_path_factory.mktemp("renewal") / "data", settings=settings) as process:
        yield process


class SlowListener(MessageListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.seen: list[tuple[bytes, int]] = []
        self.lock = threading.Lock()
        self.never = threading.Event()

    def consume(self, message: Any) -> Any:
        with self.lock:
            self.seen.append((message.body, message.delivery_attempt))
        if message.body == b"slow":
            self.never.wait(WORK_S)
        return ConsumeResult.SUCCESS


def recording_acks(consumer: Any) -> list[tuple[bytes, str]]:
    """(body, "ok" or the error) of each ack the client makes, as it returns."""
    acks: list[tuple[bytes, str]] = []
    ack = consumer._ack  # the client's own ack, called once the listener returns

    def recorded(message: Any) -> Any:
        try:
            result = ack(message)
        except Exception as exc:
            acks.append((message.body, str(exc)))
            raise
        acks.append((message.body, "ok"))
        return result

    consumer._ack = recorded
    return acks


def test_a_message_held_past_its_invisible_time_is_delivered_once(server: ServerProcess) -> None:
    topic, group = unique_name("RenewT"), unique_name("RenewG")
    asyncio.run(create_topic(server.namesrv, topic, queues=1))
    config = ClientConfiguration(server.grpc, Credentials())
    listener = SlowListener()
    consumer = PushConsumer(config, group, listener, {topic: FilterExpression("*")})
    acks = recording_acks(consumer)
    consumer.startup()
    producer = Producer(config, (topic,))
    producer.startup()
    try:
        slow = Message()
        slow.topic, slow.body = topic, b"slow"
        producer.send(slow)
        wait_until(lambda: (b"slow", 1) in listener.seen, "the slow message delivered")
        marker = Message()
        marker.topic, marker.body = topic, b"after"
        producer.send(marker)
        wait_until(lambda: len(acks) >= 2, "both messages acked or refused")
        assert sorted(acks) == [(b"after", "ok"), (b"slow", "ok")]  # the late ack counts
        assert [body for body, _ in listener.seen].count(b"slow") == 1, listener.seen
    finally:
        consumer.shutdown()
        producer.shutdown()
