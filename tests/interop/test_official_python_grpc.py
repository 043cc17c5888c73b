"""The official RocketMQ 5 Python client (`rocketmq-python-client` 5.1.2, gRPC)
against a real `tidemq serve`: producer (normal, FIFO, delay + recall,
transaction commit / rollback / orphan check-back), SimpleConsumer (receive,
ack, change invisible duration, redelivery with the attempt raised, FIFO
order), and what a raw v2 stub gets for bad input."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
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
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc

from tidemq.client.admin import AdminClient
from tidemq.testing import processes
from tidemq.testing.client_support import create_topic, read_topic
from tidemq.testing.processes import ServerProcess, serve, serve_args
from tidemq.testing.waiting import unique_name

pytestmark = pytest.mark.slow

Code = pb.Code


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    settings = {"transaction_timeout_ms": 1000, "transaction_check_interval_ms": 1000}
    with serve(tmp_path_factory.mktemp("grpc") / "data", settings=settings) as process:
        yield process


def config(server: ServerProcess) -> ClientConfiguration:
    return ClientConfiguration(server.grpc, Credentials())


def new_topic(server: ServerProcess, queues: int = 2) -> str:
    topic = unique_name("GrpcT")
    asyncio.run(create_topic(server.namesrv, topic, queues=queues))
    return topic


def new_group(server: ServerProcess, *, fifo: bool = False) -> str:
    group = unique_name("GrpcG")

    async def create() -> None:
        async with AdminClient(server.namesrv) as admin:
            await admin.create_group(group, orderly=fifo)

    asyncio.run(create())
    return group


def message(topic: str, body: bytes, **fields: Any) -> Message:
    result = Message()
    result.topic = topic
    result.body = body
    for name, value in fields.items():
        setattr(result, name, value)
    return result


def receive_until(
    consumer: SimpleConsumer, count: int, invisible_s: int = 15, deadline_s: float = 30
) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + deadline_s
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} messages came"
        got += consumer.receive(32, invisible_s)
    return got


def started(make: Callable[[], Any]) -> Any:
    client = make()
    client.startup()
    return client


def test_producer_and_simple_consumer_round_trip(server: ServerProcess) -> None:
    topic, group = new_topic(server), new_group(server)
    producer = started(lambda: Producer(config(server), (topic,)))
    consumer = started(
        lambda: SimpleConsumer(
            config(server), group, {topic: FilterExpression("TagA")}, await_duration=2
        )
    )
    try:
        sent = message(topic, b"hello", tag="TagA", keys="k0")
        sent.add_property("p", "v")
        receipt = producer.send(sent)
        assert receipt.message_id
        producer.send(message(topic, b"other tag", tag="TagB"))
        [got] = receive_until(consumer, 1)
        assert (got.body, got.tag, got.keys) == (b"hello", "TagA", {"k0"})
        assert got.properties == {"p": "v"}
        assert got.delivery_attempt == 1 and got.message_id == receipt.message_id
        assert not got.corrupted
        # a shorter invisible time brings it back with the attempt raised
        consumer.change_invisible_duration(got, 1)
        [again] = receive_until(consumer, 1)
        assert again.body == b"hello" and again.delivery_attempt == 2
        consumer.ack(again)
        assert consumer.receive(16, 15) == []
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_fifo_messages_come_in_group_order(server: ServerProcess) -> None:
    topic, group = new_topic(server, queues=4), new_group(server, fifo=True)
    producer = started(lambda: Producer(config(server), (topic,)))
    consumer = started(
        lambda: SimpleConsumer(config(server), group, {topic: FilterExpression("*")}, 2)
    )
    try:
        for i in range(6):
            producer.send(message(topic, f"a{i}".encode(), message_group="order-a"))
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 6:
            assert time.monotonic() < deadline
            batch = consumer.receive(2, 15)
            assert all(m.message_group == "order-a" for m in batch)
            got += batch
            for m in batch:
                consumer.ack(m)
        assert [m.body for m in got] == [f"a{i}".encode() for i in range(6)]
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_delay_and_recall(server: ServerProcess) -> None:
    topic, group = new_topic(server), new_group(server)
    producer = started(lambda: Producer(config(server), (topic,)))
    consumer = started(
        lambda: SimpleConsumer(config(server), group, {topic: FilterExpression("*")}, 1)
    )
    try:
        due = int(time.time()) + 3
        kept = producer.send(message(topic, b"later", delivery_timestamp=due))
        dropped = producer.send(message(topic, b"recalled", delivery_timestamp=due))
        assert kept.recall_handle and dropped.recall_handle
        assert producer.recall_message(topic, dropped.recall_handle) == dropped.message_id
        got = receive_until(consumer, 1)
        assert time.time() >= due - 0.2
        assert [m.body for m in got] == [b"later"]
        assert got[0].delivery_timestamp == due * 1000
        consumer.ack(got[0])
        assert consumer.receive(16, 15) == []  # the recalled one never comes
    finally:
        consumer.shutdown()
        producer.shutdown()


class Commit(TransactionChecker):  # type: ignore[misc]
    def __init__(self) -> None:
        self.checked: list[bytes] = []

    def check(self, message: Any) -> Any:
        self.checked.append(message.body)
        return TransactionResolution.COMMIT


def test_transactions_commit_rollback_and_orphan_check(server: ServerProcess) -> None:
    topic, group = new_topic(server), new_group(server)
    checker = Commit()
    producer = started(lambda: Producer(config(server), (topic,), checker=checker))
    consumer = started(
        lambda: SimpleConsumer(config(server), group, {topic: FilterExpression("*")}, 1)
    )
    try:
        committed = producer.begin_transaction()
        producer.send(message(topic, b"commit"), committed)
        committed.commit()
        rolled_back = producer.begin_transaction()
        producer.send(message(topic, b"rollback"), rolled_back)
        rolled_back.rollback()
        orphan = producer.begin_transaction()
        producer.send(message(topic, b"orphan"), orphan)  # never ended by the producer
        got = receive_until(consumer, 2)
        assert sorted(m.body for m in got) == [b"commit", b"orphan"]
        assert checker.checked == [b"orphan"]
        for m in got:
            consumer.ack(m)
        assert consumer.receive(16, 15) == []
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_sent_over_grpc_read_by_remoting(server: ServerProcess) -> None:
    topic = new_topic(server, queues=1)
    producer = started(lambda: Producer(config(server), (topic,)))
    try:
        producer.send(message(topic, b"cross", tag="T", keys="key-9"))
        producer.send(message(topic, b"grouped", message_group="g-1"))
    finally:
        producer.shutdown()
    stored = asyncio.run(read_topic(server.namesrv, topic))
    assert [m.body for m in stored] == [b"cross", b"grouped"]
    assert (stored[0].tags, stored[0].keys) == ("T", ["key-9"])
    assert stored[1].properties["__SHARDINGKEY"] == "g-1"


# -- bad input through a raw stub ------------------------------------------------------


def call(server: ServerProcess, method: str, request: Any) -> Any:
    async def run() -> Any:
        async with grpc.aio.insecure_channel(server.grpc) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            metadata = (("x-mq-client-id", "raw-stub@1"),)
            rpc = getattr(stub, method)
            if method == "ReceiveMessage":
                return [r async for r in rpc(request, metadata=metadata, timeout=30)]
            return await rpc(request, metadata=metadata, timeout=10)

    return asyncio.run(run())


def resource(name: str) -> pb.Resource:
    return pb.Resource(name=name)


def test_bad_input_gets_the_right_codes(server: ServerProcess) -> None:
    topic, group = new_topic(server, queues=1), new_group(server)
    route = call(server, "QueryRoute", spb.QueryRouteRequest(topic=resource("NoSuchTopicHere")))
    assert route.status.code == Code.TOPIC_NOT_FOUND

    def send(body: bytes, **system: Any) -> Any:
        request = spb.SendMessageRequest(
            messages=[
                pb.Message(
                    topic=resource(topic),
                    body=body,
                    system_properties=pb.SystemProperties(message_id="01AB", **system),
                )
            ]
        )
        return call(server, "SendMessage", request)

    big = send(b"x" * (4 * 1024 * 1024 + 1), message_type=pb.MessageType.NORMAL)
    assert big.entries[0].status.code == Code.MESSAGE_BODY_TOO_LARGE
    grouped = send(b"x", message_type=pb.MessageType.NORMAL, message_group="g")
    assert grouped.entries[0].status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    far = send(
        b"x",
        message_type=pb.MessageType.DELAY,
        delivery_timestamp={"seconds": int(time.time()) + 400 * 86400},
    )
    assert far.entries[0].status.code == Code.ILLEGAL_DELIVERY_TIME

    def receive(invisible_ms: int) -> list[Any]:
        return call(
            server,
            "ReceiveMessage",
            spb.ReceiveMessageRequest(
                group=resource(group),
                message_queue=pb.MessageQueue(topic=resource(topic)),
                filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
                batch_size=1,
                invisible_duration={"seconds": invisible_ms // 1000},
                long_polling_timeout={"seconds": 1},
            ),
        )

    [answer] = receive(5000)
    assert answer.status.code == Code.ILLEGAL_INVISIBLE_TIME
    for handle in ("forged", "0 1 60000 0 0 broker-a 0 0"):
        ack = call(
            server,
            "AckMessage",
            spb.AckMessageRequest(
                group=resource(group),
                topic=resource(topic),
                entries=[spb.AckMessageEntry(message_id="x", receipt_handle=handle)],
            ),
        )
        assert ack.status.code == Code.INVALID_RECEIPT_HANDLE, ack.status.message
    end = call(
        server,
        "EndTransaction",
        spb.EndTransactionRequest(
            topic=resource(topic),
            message_id="x",
            transaction_id="not-an-id",
            resolution=pb.TransactionResolution.COMMIT,
        ),
    )
    assert end.status.code == Code.INVALID_TRANSACTION_ID
    # nothing was stored by the refusals and the server still serves
    assert send(b"fine", message_type=pb.MessageType.NORMAL).status.code == Code.OK
    stored = asyncio.run(read_topic(server.namesrv, topic))
    assert [m.body for m in stored] == [b"fine"]


def test_tls_with_tidemq_cert(tmp_path: Path) -> None:
    """`tidemq cert` + `serve --tls-cert/--tls-key`: the official client, told
    to trust the certificate, produces and consumes over TLS."""
    certs = tmp_path / "certs"
    made = subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", "cert", "--out", str(certs), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    paths = json.loads(made.stdout)
    script = """
import sys
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message
from rocketmq import Producer, SimpleConsumer
cfg = ClientConfiguration(sys.argv[1], Credentials())
p = Producer(cfg, (sys.argv[2],), tls_enable=True); p.startup()
m = Message(); m.topic = sys.argv[2]; m.body = b"secret"
print("sent", p.send(m).message_id, flush=True)
c = SimpleConsumer(cfg, sys.argv[3], {sys.argv[2]: FilterExpression("*")}, 2, tls_enable=True)
c.startup()
got = []
for _ in range(10):
    got += c.receive(4, 15)
    if got:
        break
print("got", [x.body for x in got], flush=True)
for x in got:
    c.ack(x)
c.shutdown(); p.shutdown()
"""
    data = tmp_path / "data"
    extra = ["--tls-cert", paths["cert"], "--tls-key", paths["key"]]
    with processes.started([*serve_args(data), *extra], tmp_path, "tls") as (server, _):
        topic = unique_name("TlsT")
        asyncio.run(create_topic(server.namesrv, topic, queues=1))
        env = dict(os.environ, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=paths["cert"], HOME=str(tmp_path))
        args = [sys.executable, "-c", script, server.grpc, topic, unique_name("TlsG")]
        done = subprocess.run(args, capture_output=True, text=True, timeout=90, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "got [b'secret']" in done.stdout, done.stdout
        # without trusting the certificate the client cannot send
        env.pop("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH")
        untrusting = subprocess.run(args, capture_output=True, text=True, timeout=90, env=env)
        assert "got [b'secret']" not in untrusting.stdout


# -- push consumers ----------------------------------------------------------------------


class Listener(MessageListener):  # type: ignore[misc]
    """Fails the bodies in `fail_once` the first time, `fail_always` every time."""

    def __init__(self, fail_once: set[bytes], fail_always: set[bytes] = frozenset()) -> None:
        self.fail_once = set(fail_once)
        self.fail_always = set(fail_always)
        self.seen: list[tuple[bytes, int]] = []
        self.lock = threading.Lock()

    def consume(self, message: Any) -> Any:
        with self.lock:
            self.seen.append((message.body, message.delivery_attempt))
            if message.body in self.fail_always:
                return ConsumeResult.FAILURE
            if message.body in self.fail_once:
                self.fail_once.discard(message.body)
                return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 40) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_push_consumer_retries_a_failed_message(server: ServerProcess) -> None:
    topic, group = new_topic(server), new_group(server)
    listener = Listener({b"m1"})
    consumer = started(
        lambda: PushConsumer(config(server), group, listener, {topic: FilterExpression("*")})
    )
    producer = started(lambda: Producer(config(server), (topic,)))
    try:
        for i in range(4):
            producer.send(message(topic, f"m{i}".encode()))
        wait_for(lambda: (b"m1", 2) in listener.seen, "the redelivery of m1")
        bodies = sorted({body for body, _ in listener.seen})
        assert bodies == [b"m0", b"m1", b"m2", b"m3"]
        assert (b"m1", 1) in listener.seen
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_push_consumer_fifo_order_retries_and_dlq(server: ServerProcess) -> None:
    topic = new_topic(server, queues=2)
    group = unique_name("GrpcFifo")

    async def create() -> None:
        async with AdminClient(server.namesrv) as admin:
            await admin.create_group(group, orderly=True, retry_max_times=1)

    asyncio.run(create())
    listener = Listener({b"a1"}, fail_always={b"b1"})
    consumer = started(
        lambda: PushConsumer(config(server), group, listener, {topic: FilterExpression("*")})
    )
    producer = started(lambda: Producer(config(server), (topic,)))
    try:
        for i in range(3):
            producer.send(message(topic, f"a{i}".encode(), message_group="ga"))
            producer.send(message(topic, f"b{i}".encode(), message_group="gb"))
        wait_for(
            lambda: {b"a2", b"b2"} <= {body for body, _ in listener.seen}, "both groups to finish"
        )
        for prefix in (b"a", b"b"):
            firsts = []
            for body, _ in listener.seen:
                if body.startswith(prefix) and body not in firsts:
                    firsts.append(body)
            assert firsts == [prefix + b"0", prefix + b"1", prefix + b"2"]
        assert [b for b, _ in listener.seen].count(b"a1") == 2  # one local retry
        dead: list[Any] = []

        def dead_lettered() -> bool:
            try:
                dead[:] = asyncio.run(read_topic(server.namesrv, f"%DLQ%{group}"))
            except Exception:
                return False
            return bool(dead)

        wait_for(dead_lettered, "b1 in the DLQ")
        assert [m.body for m in dead] == [b"b1"]
    finally:
        consumer.shutdown()
        producer.shutdown()
