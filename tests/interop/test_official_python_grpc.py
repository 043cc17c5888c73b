"""The official RocketMQ 5 Python client (`rocketmq-python-client` 5.1.2, gRPC)
against a real `tidemq serve`: producer (normal, FIFO, delay + recall,
transaction commit / rollback / orphan check-back), SimpleConsumer (receive,
ack, change invisible duration, redelivery with the attempt raised, FIFO
order), and through a raw v2 stub: bad input (unknown group, expired handles,
invisible durations out of range), the offset RPCs, receive long polling; a
cluster `tidemq broker` serving gRPC from its config; the 8081 default."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
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

from tidemq.broker.pop.receipts import parse_receipt_handle
from tidemq.cli.main import cli
from tidemq.cli.server_commands import serve as serve_command
from tidemq.client.admin import AdminClient
from tidemq.testing import processes
from tidemq.testing.client_support import create_topic, grpc_call, grpc_send_request, read_topic
from tidemq.testing.processes import ServerProcess, serve, serve_args
from tidemq.testing.waiting import eventually, unique_name, wait_until

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


def receive_until(consumer: SimpleConsumer, count: int, invisible_s: int = 15) -> list[Any]:
    got: list[Any] = []

    def enough() -> bool:
        got.extend(consumer.receive(32, invisible_s))
        return len(got) >= count

    wait_until(enough, f"{count} messages received")
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

        def six_acked() -> bool:
            batch = consumer.receive(2, 15)
            assert all(m.message_group == "order-a" for m in batch)
            got.extend(batch)
            for m in batch:
                consumer.ack(m)
            return len(got) >= 6

        wait_until(six_acked, "the six messages of order-a")
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


# -- what the official clients' own integration tests check on the wire ----------------


def test_receipts_name_the_message_and_received_properties_keep_rocketmqs(
    server: ServerProcess,
) -> None:
    """As apache/rocketmq-clients nodejs/test/producer/Producer.test.ts checks:
    every send receipt's transaction_id is its message_id (RocketMQ answers
    the UNIQ_KEY for every type), the transaction commits by it, a FIFO
    message keeps __SHARDINGKEY and a committed one __transactionId__ among
    its user properties, for gRPC and remoting consumers alike."""
    topic, group = new_topic(server), new_group(server)
    producer = started(lambda: Producer(config(server), (topic,), checker=Commit()))
    consumer = started(
        lambda: SimpleConsumer(config(server), group, {topic: FilterExpression("*")}, 1)
    )
    try:
        receipts = {
            b"normal": producer.send(message(topic, b"normal", tag="T")),
            b"fifo": producer.send(message(topic, b"fifo", message_group="g-7")),
            b"delayed": producer.send(
                message(topic, b"delayed", delivery_timestamp=int(time.time()) + 1)
            ),
        }
        transaction = producer.begin_transaction()
        receipts[b"committed"] = producer.send(message(topic, b"committed"), transaction)
        transaction.commit()
        for receipt in receipts.values():
            assert receipt.message_id and receipt.transaction_id == receipt.message_id
        got = {m.body: m for m in receive_until(consumer, len(receipts))}
        assert set(got) == set(receipts)
        for m in got.values():
            assert m.message_id == receipts[m.body].message_id
            consumer.ack(m)
        assert got[b"fifo"].properties == {"__SHARDINGKEY": "g-7"}
        committed = got[b"committed"].properties
        assert committed == {"__transactionId__": receipts[b"committed"].transaction_id}
        assert got[b"normal"].properties == got[b"delayed"].properties == {}
    finally:
        consumer.shutdown()
        producer.shutdown()
    stored = {m.body: m for m in asyncio.run(read_topic(server.namesrv, topic))}
    tx_id = stored[b"committed"].properties["__transactionId__"]
    assert tx_id == receipts[b"committed"].transaction_id


def test_system_property_names_are_refused_as_user_properties(server: ServerProcess) -> None:
    topic = new_topic(server, queues=1)
    producer = started(lambda: Producer(config(server), (topic,)))
    try:
        reserved = message(topic, b"x")
        reserved.add_property("UNIQ_KEY", "mine")
        with pytest.raises(Exception, match="property is used by system: UNIQ_KEY"):
            producer.send(reserved)
    finally:
        producer.shutdown()


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_unknown_topic_gets_rocketmqs_text(server: ServerProcess) -> None:
    """QueryRoute for a topic without a route: TOPIC_NOT_FOUND with the proxy's
    text, which clients (and their tests) match on."""
    missing = unique_name("NoSuchPyT")
    text = (
        f"CODE: 17  DESC: No topic route info in name server for the topic: {missing}\n"
        "For more information, please visit the url, "
        "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
    )
    route = call(server, "QueryRoute", spb.QueryRouteRequest(topic=resource(missing)))
    assert (route.status.code, route.status.message) == (Code.TOPIC_NOT_FOUND, text)
    # the official client reports it as it came (its log), then fails the send
    records = Records()
    client_log = logging.getLogger("rocketmq-python-client")
    client_log.addHandler(records)
    producer = started(lambda: Producer(config(server)))
    try:
        with pytest.raises(Exception, match=f"failed to fetch topic:{missing} route"):
            producer.send(message(missing, b"nowhere"))
    finally:
        producer.shutdown()
        client_log.removeHandler(records)
    assert any(f"{Code.TOPIC_NOT_FOUND}, {text}" in line for line in records.lines), records.lines
    for rpc, request in (
        ("SendMessage", grpc_send_request(missing, b"x")),
        ("ReceiveMessage", receive_request(unique_name("G"), missing)),
    ):
        answer = call(server, rpc, request)
        first = answer[0] if isinstance(answer, list) else answer
        assert (first.status.code, first.status.message) == (Code.TOPIC_NOT_FOUND, text), rpc


# -- bad input through a raw stub ------------------------------------------------------


def call(server: ServerProcess, method: str, request: Any) -> Any:
    return asyncio.run(grpc_call(server.grpc, method, request))


def resource(name: str) -> pb.Resource:
    return pb.Resource(name=name)


def receive_request(
    group: str, topic: str, *, invisible_s: int = 15, polling_s: int = 1, batch: int = 16
) -> Any:
    return spb.ReceiveMessageRequest(
        group=resource(group),
        message_queue=pb.MessageQueue(topic=resource(topic)),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=batch,
        invisible_duration={"seconds": invisible_s},
        long_polling_timeout={"seconds": polling_s},
    )


def received(responses: list[Any]) -> list[Any]:
    """The messages of a ReceiveMessage or PullMessage stream."""
    return [r.message for r in responses if r.HasField("message")]


def test_bad_input_gets_the_right_codes(server: ServerProcess) -> None:
    topic, group = new_topic(server, queues=1), new_group(server)
    route = call(server, "QueryRoute", spb.QueryRouteRequest(topic=resource("NoSuchTopicHere")))
    assert route.status.code == Code.TOPIC_NOT_FOUND

    def send(body: bytes, **system: Any) -> Any:
        return call(server, "SendMessage", grpc_send_request(topic, body, **system))

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

    [answer] = call(server, "ReceiveMessage", receive_request(group, topic, invisible_s=5))
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
        wait_until(lambda: (b"m1", 2) in listener.seen, "the redelivery of m1")
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
        wait_until(
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

        wait_until(dead_lettered, "b1 in the DLQ")
        assert [m.body for m in dead] == [b"b1"]
    finally:
        consumer.shutdown()
        producer.shutdown()


# -- raw stub: offsets, long polling, receipt handles -------------------------------------


def ack_request(group: str, topic: str, *handles: str) -> Any:
    entries = [spb.AckMessageEntry(message_id="x", receipt_handle=h) for h in handles]
    return spb.AckMessageRequest(group=resource(group), topic=resource(topic), entries=entries)


def change_request(group: str, topic: str, handle: str, seconds: int) -> Any:
    return spb.ChangeInvisibleDurationRequest(
        group=resource(group),
        topic=resource(topic),
        receipt_handle=handle,
        invisible_duration={"seconds": seconds},
        message_id="x",
    )


def receive_raw(server: ServerProcess, group: str, topic: str, count: int) -> list[Any]:
    """ReceiveMessage (15 s invisible) until `count` messages came."""
    got: list[Any] = []

    def enough() -> bool:
        got.extend(received(call(server, "ReceiveMessage", receive_request(group, topic))))
        return len(got) >= count

    wait_until(enough, f"{count} messages received")
    return got


def test_offset_rpcs(server: ServerProcess) -> None:
    """PullMessage, UpdateOffset, GetOffset and QueryOffset (the official
    clients do not use them)."""
    topic, group = new_topic(server, queues=1), new_group(server)
    for i in range(3):
        sent = call(server, "SendMessage", grpc_send_request(topic, f"o{i}".encode()))
        assert (sent.status.code, sent.entries[0].offset) == (Code.OK, i)
    queue = pb.MessageQueue(topic=resource(topic), id=0)

    def pull(offset: int, batch: int = 32, on: Any = queue) -> tuple[int, list[Any], int]:
        request = spb.PullMessageRequest(
            group=resource(group),
            message_queue=on,
            offset=offset,
            batch_size=batch,
            filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        )
        answer = call(server, "PullMessage", request)
        next_offsets = [r.next_offset for r in answer if r.WhichOneof("content") == "next_offset"]
        return answer[0].status.code, received(answer), (next_offsets or [-1])[0]

    code, first, next_offset = pull(0, batch=2)
    assert code == Code.OK and next_offset == 2
    assert [(m.body, m.system_properties.queue_offset) for m in first] == [(b"o0", 0), (b"o1", 1)]
    code, rest, next_offset = pull(2)
    assert (code, [m.body for m in rest], next_offset) == (Code.OK, [b"o2"], 3)
    assert pull(3)[0] == Code.MESSAGE_NOT_FOUND
    assert pull(50)[0] == Code.ILLEGAL_OFFSET
    missing = pb.MessageQueue(topic=resource("NoSuchTopicHere"), id=0)
    assert pull(0, on=missing)[0] == Code.TOPIC_NOT_FOUND

    def get_offset() -> Any:
        request = spb.GetOffsetRequest(group=resource(group), message_queue=queue)
        return call(server, "GetOffset", request)

    def update_offset(offset: int, on: Any = queue) -> int:
        request = spb.UpdateOffsetRequest(group=resource(group), message_queue=on, offset=offset)
        return call(server, "UpdateOffset", request).status.code

    assert get_offset().status.code == Code.OFFSET_NOT_FOUND  # pulls commit nothing
    assert update_offset(2) == Code.OK
    assert (get_offset().status.code, get_offset().offset) == (Code.OK, 2)
    assert update_offset(-1) == Code.ILLEGAL_OFFSET
    assert update_offset(1, on=missing) == Code.TOPIC_NOT_FOUND
    assert get_offset().offset == 2  # the refusals changed nothing

    def query(policy: str, at_ms: int = 0, on: Any = queue) -> tuple[int, int]:
        request = spb.QueryOffsetRequest(
            message_queue=on,
            query_offset_policy=pb.QueryOffsetPolicy.Value(policy),
            timestamp={"seconds": at_ms // 1000, "nanos": at_ms % 1000 * 1_000_000},
        )
        answer = call(server, "QueryOffset", request)
        return answer.status.code, answer.offset

    assert query("BEGINNING") == (Code.OK, 0)
    assert query("END") == (Code.OK, 3)
    stored_ms = [m.system_properties.store_timestamp.ToMilliseconds() for m in first + rest]
    assert query("TIMESTAMP", stored_ms[0] - 60_000) == (Code.OK, 0)
    assert query("TIMESTAMP", stored_ms[-1] + 60_000) == (Code.OK, 3)
    # the first message stored at or after the time
    expected = min(i for i, ms in enumerate(stored_ms) if ms >= stored_ms[1])
    assert query("TIMESTAMP", stored_ms[1]) == (Code.OK, expected)
    assert query("END", on=missing)[0] == Code.TOPIC_NOT_FOUND


RECEIVE_PARKED_S = 1.5
"""How long an empty receive is left alone before the send: the claim is that nothing
answers it meanwhile (it is held, not answered empty), and it makes sure the message
arrives while the receive is parked. The server is another process and shows no count
of parked receives, so real time has to pass."""
LONG_POLLING_S = 30
"""The longest hold the proxy allows (MAX_POLL_S): a receive answered only at the end
of its hold misses ARRIVAL_DEADLINE_S."""
ARRIVAL_DEADLINE_S = 20.0
"""A deadline on the answer after the send, generous (it comes in milliseconds) yet
before the hold would end by itself."""


def test_receive_long_polling_answers_when_a_message_arrives(server: ServerProcess) -> None:
    topic, group = new_topic(server), new_group(server)

    async def run() -> list[Any]:
        receiving = asyncio.ensure_future(
            grpc_call(
                server.grpc,
                "ReceiveMessage",
                receive_request(group, topic, polling_s=LONG_POLLING_S),
                timeout=LONG_POLLING_S + 10,
            )
        )
        done, _ = await asyncio.wait({receiving}, timeout=RECEIVE_PARKED_S)
        assert not done, "an empty receive was answered instead of held"
        sent = await grpc_call(server.grpc, "SendMessage", grpc_send_request(topic, b"late"))
        assert sent.status.code == Code.OK
        return await asyncio.wait_for(receiving, ARRIVAL_DEADLINE_S)

    answer = asyncio.run(run())
    assert answer[0].status.code == Code.OK
    [message] = received(answer)
    assert message.body == b"late"
    acked = call(
        server, "AckMessage", ack_request(group, topic, message.system_properties.receipt_handle)
    )
    assert acked.status.code == Code.OK

    # the hold ends a second before the client's deadline, with an answer (not the
    # client's DEADLINE_EXCEEDED)
    started_at = time.monotonic()
    empty = asyncio.run(
        grpc_call(
            server.grpc, "ReceiveMessage", receive_request(group, topic, polling_s=20), timeout=3
        )
    )
    assert empty[0].status.code == Code.MESSAGE_NOT_FOUND
    assert time.monotonic() - started_at >= 1.0  # held, not answered at once


def test_unknown_group_gets_consumer_group_not_found(tmp_path: Path) -> None:
    settings = {"auto_create_subscription_group": False}
    with serve(tmp_path / "data", settings=settings) as strict:
        topic = new_topic(strict, queues=1)
        assert call(strict, "SendMessage", grpc_send_request(topic, b"kept")).status.code == Code.OK
        [refused] = call(strict, "ReceiveMessage", receive_request("NoSuchGroup", topic))
        assert refused.status.code == Code.CONSUMER_GROUP_NOT_FOUND
        assert "NoSuchGroup" in refused.status.message
        group = new_group(strict)  # the message is still there for a real group
        [message] = receive_raw(strict, group, topic, 1)
        assert (message.body, message.system_properties.delivery_attempt) == (b"kept", 1)


def test_expired_receipt_handles_are_refused(server: ServerProcess) -> None:
    for fifo in (False, True):
        topic, group = new_topic(server, queues=1), new_group(server, fifo=fifo)
        system = {"message_type": pb.MessageType.FIFO, "message_group": "g"} if fifo else {}
        sent = call(server, "SendMessage", grpc_send_request(topic, b"once", **system))
        assert sent.status.code == Code.OK
        [first] = receive_raw(server, group, topic, 1)
        changed = call(
            server,
            "ChangeInvisibleDuration",
            change_request(group, topic, first.system_properties.receipt_handle, 0),
        )
        assert changed.status.code == Code.OK
        expired = changed.receipt_handle  # its invisible time (0 s) is over at once
        # the proxy's check: an expired handle is refused before the broker sees it
        ack = call(server, "AckMessage", ack_request(group, topic, expired))
        assert (ack.status.code, ack.status.message) == (
            Code.INVALID_RECEIPT_HANDLE,
            "INVALID_RECEIPT_HANDLE",
        )
        assert ack.entries[0].status.message == "receipt handle is expired"
        [again] = receive_raw(server, group, topic, 1)  # revived
        assert (again.body, again.system_properties.delivery_attempt) == (b"once", 2)
        ack = call(server, "AckMessage", ack_request(group, topic, expired))
        assert ack.status.code == Code.INVALID_RECEIPT_HANDLE, fifo
        first_handle = first.system_properties.receipt_handle
        before = call(server, "AckMessage", ack_request(group, topic, first_handle))
        if fifo:
            # not expired by its own time, but for an earlier delivery of the batch:
            # done without effect, as RocketMQ's broker (commitAndNext answers -2)
            assert before.status.code == Code.OK
            held = call(server, "ReceiveMessage", receive_request(group, topic))
            assert held[0].status.code == Code.MESSAGE_NOT_FOUND, "the redelivery is not acked"
        else:
            assert before.status.code == Code.INVALID_RECEIPT_HANDLE, before.status
        fresh = again.system_properties.receipt_handle
        assert call(server, "AckMessage", ack_request(group, topic, fresh)).status.code == Code.OK
        nothing = call(server, "ReceiveMessage", receive_request(group, topic))
        assert nothing[0].status.code == Code.MESSAGE_NOT_FOUND, fifo


def wait_until_expired(handles: list[str]) -> None:
    """Until the server's clock (this machine's) is past every handle's invisible time."""
    due_ms = max(parse_receipt_handle(h).due_ms for h in handles)
    wait_until(lambda: time.time() * 1000 > due_ms + 50, "the invisible time to pass")


def test_late_fifo_ack_and_the_minimum_receive_invisible_time(tmp_path: Path) -> None:
    """`min_invisible_time_mills_for_recv` (the proxy's minInvisibleTimeMillsForRecv,
    10 s by default) set to 1 s lets a receive ask for 1 s and refuses 999 ms
    in the proxy's words. A FIFO ack after the invisible time is refused with
    INVALID_RECEIPT_HANDLE, as the proxy refuses every expired handle before
    the broker sees it (AbstractProcessor.validateReceiptHandle), and the
    batch comes again, attempt 2."""
    settings = {"min_invisible_time_mills_for_recv": 1000}
    with serve(tmp_path / "data", settings=settings) as strict:
        topic, group = new_topic(strict, queues=1), new_group(strict, fifo=True)
        short = receive_request(group, topic)
        short.invisible_duration.FromMilliseconds(999)
        [refused] = call(strict, "ReceiveMessage", short)
        assert (refused.status.code, refused.status.message) == (
            Code.ILLEGAL_INVISIBLE_TIME,
            "the invisibleTime is too small. min is 1000",
        )
        producer = started(lambda: Producer(config(strict), (topic,)))
        consumer = started(
            lambda: SimpleConsumer(config(strict), group, {topic: FilterExpression("*")}, 1)
        )
        try:
            for body in (b"f0", b"f1"):
                producer.send(message(topic, body, message_group="late"))
            first = receive_until(consumer, 2, invisible_s=1)[:2]
            assert [m.body for m in first] == [b"f0", b"f1"]
            wait_until_expired([m.receipt_handle for m in first])
            with pytest.raises(Exception, match="INVALID_RECEIPT_HANDLE"):
                consumer.ack(first[0])
            again = receive_until(consumer, 2, invisible_s=15)
            assert [(m.body, m.delivery_attempt) for m in again] == [(b"f0", 2), (b"f1", 2)]
            for m in again:
                consumer.ack(m)
            assert consumer.receive(16, 15) == []
        finally:
            consumer.shutdown()
            producer.shutdown()


def test_change_invisible_duration_out_of_range(server: ServerProcess) -> None:
    topic, group = new_topic(server, queues=1), new_group(server)
    assert call(server, "SendMessage", grpc_send_request(topic, b"kept")).status.code == Code.OK
    [message] = receive_raw(server, group, topic, 1)
    handle = message.system_properties.receipt_handle
    for seconds in (12 * 3600 + 1, -1):
        answer = call(
            server, "ChangeInvisibleDuration", change_request(group, topic, handle, seconds)
        )
        assert answer.status.code == Code.ILLEGAL_INVISIBLE_TIME, seconds
        assert answer.receipt_handle == handle
    # the handle still works: the message was neither revived nor changed
    assert call(server, "AckMessage", ack_request(group, topic, handle)).status.code == Code.OK
    nothing = call(server, "ReceiveMessage", receive_request(group, topic))
    assert nothing[0].status.code == Code.MESSAGE_NOT_FOUND


# -- gRPC on a cluster broker, the default port ---------------------------------------------


def test_cluster_broker_serves_grpc_from_its_config(tmp_path: Path) -> None:
    with processes.started(["namesrv", "--port", "0"], tmp_path, "namesrv") as (_, ns_ready):
        namesrv = ns_ready["namesrv"]
        config = tmp_path / "broker-g.json"
        config.write_text(
            json.dumps(
                {
                    "broker_name": "broker-g",
                    "listen_port": 0,
                    "namesrv_addrs": [namesrv],
                    "data_dir": str(tmp_path / "broker-g"),
                    "grpc_port": 0,
                }
            )
        )
        args = ["broker", "--config", str(config)]
        with processes.started(args, tmp_path, "broker-g") as (_, ready):
            assert ready["name"] == "broker-g" and ready.get("grpc")
            topic = unique_name("ClusterT")

            async def create() -> None:
                async with AdminClient(namesrv) as admin:

                    async def registered() -> bool:
                        return "broker-g" in (await admin.cluster_info()).masters()

                    await eventually(registered, "broker-g to register", timeout=20)
                    await admin.create_topic(topic, queues=2)

            asyncio.run(create())
            endpoint = ClientConfiguration(ready["grpc"], Credentials())
            producer = started(lambda: Producer(endpoint, (topic,)))
            try:
                receipt = producer.send(message(topic, b"via broker grpc", tag="T"))
            finally:
                producer.shutdown()
            assert receipt.message_id
            stored = asyncio.run(read_topic(namesrv, topic))
            assert [(m.body, m.tags) for m in stored] == [(b"via broker grpc", "T")]
            assert stored[0].properties["UNIQ_KEY"] == receipt.message_id


def test_serve_defaults_to_grpc_port_8081() -> None:
    option = next(p for p in serve_command.params if p.name == "grpc_port")
    assert option.default == 8081
    shown = CliRunner().invoke(cli, ["serve", "--help"])
    assert shown.exit_code == 0
    assert "[default: 8081;" in " ".join(shown.output.split())
