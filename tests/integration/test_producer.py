"""AsyncProducer and Producer against real `tidemq serve` / `tidemq broker`
processes: every send mode, what the broker stored (read back with plain
PULL_MESSAGE requests or the admin client), errors, and failover to another
broker when one is killed."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
import zlib
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tidemq.client.admin import AdminClient
from tidemq.client.errors import ClientError
from tidemq.client.model import SendResult
from tidemq.client.producer import AsyncProducer, Producer, make_message
from tidemq.common import sysflag
from tidemq.common.message import Message, MessageExt, MessageQueue
from tidemq.protocol import RemotingCommand, RequestCode, ResponseCode
from tidemq.protocol.headers import PullMessageRequestHeader, encode_header
from tidemq.record.codec import decode_records
from tidemq.testing.processes import FAST_DELAY_LEVELS, ServerProcess, serve, started
from tidemq.testing.waiting import eventually, unique_name
from tidemq.transport.client import RemotingClient

pytestmark = pytest.mark.slow

QUEUES = 4


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("producer") / "data"
    with serve(data, settings={"delay_levels": FAST_DELAY_LEVELS}) as process:
        yield process


@pytest.fixture
async def admin(server: ServerProcess) -> AsyncIterator[AdminClient]:
    async with AdminClient(server.namesrv) as client:
        yield client


@pytest.fixture
async def producer(server: ServerProcess) -> AsyncIterator[AsyncProducer]:
    async with AsyncProducer(unique_name("PG"), server.namesrv) as p:
        yield p


async def new_topic(admin: AdminClient, prefix: str, queues: int = QUEUES) -> str:
    topic = unique_name(prefix)
    await admin.create_topic(topic, queues=queues)
    return topic


async def pull(
    address: str, topic: str, queue_id: int, offset: int = 0, max_nums: int = 64
) -> list[MessageExt]:
    """The records of one queue from `offset`, as stored (bodies not inflated)."""
    header = PullMessageRequestHeader(
        consumer_group="CG_producer_tests",
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=sysflag.build_pull_sys_flag(subscription=True),
        commit_offset=0,
        suspend_timeout_millis=0,
        subscription="*",
        sub_version=0,
    )
    async with RemotingClient() as client:
        command = RemotingCommand.request(RequestCode.PULL_MESSAGE, encode_header(header))
        response = await client.invoke(address, command, timeout=5.0)
    if response.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
        return []
    assert response.code == ResponseCode.SUCCESS, (response.code, response.remark)
    return decode_records(response.body)


async def pull_all(address: str, topic: str, queues: int = QUEUES) -> list[MessageExt]:
    found: list[MessageExt] = []
    for queue_id in range(queues):
        found += await pull(address, topic, queue_id)
    return found


def by_unique_id(messages: Sequence[MessageExt]) -> dict[str, MessageExt]:
    return {m.unique_key or "": m for m in messages}


# -- send modes ------------------------------------------------------------------------


async def test_sync_send_stores_tags_keys_properties_and_flag(
    server: ServerProcess, admin: AdminClient, producer: AsyncProducer
) -> None:
    topic = await new_topic(admin, "PSync")
    message = make_message(
        topic, b"hello", tags="TagA", keys=["k1", "k2"], properties={"color": "blue"}, flag=7
    )
    result = await producer.send(message)
    assert result.status == "SEND_OK"
    assert result.topic == topic
    assert result.broker_name == "broker-a"
    assert result.msg_id == message.unique_key
    [stored] = await pull(server.broker, topic, result.queue_id, result.queue_offset, 1)
    assert stored.body == b"hello"
    assert stored.tags == "TagA"
    assert stored.keys == ["k1", "k2"]
    assert stored.properties["color"] == "blue"
    assert stored.flag == 7
    assert stored.unique_key == result.msg_id
    assert stored.msg_id == result.offset_msg_id
    assert stored.sys_flag & sysflag.COMPRESSED == 0
    viewed = await admin.view_by_id(result.offset_msg_id)
    assert viewed.body == b"hello"


async def test_round_robin_covers_every_queue(admin: AdminClient, producer: AsyncProducer) -> None:
    topic = await new_topic(admin, "PRound")
    results = [await producer.send(Message(topic, b"x")) for _ in range(QUEUES * 2)]
    assert sorted(r.queue_id for r in results) == sorted(list(range(QUEUES)) * 2)


async def test_async_send_resolves_futures_and_calls_callbacks(
    server: ServerProcess, admin: AdminClient, producer: AsyncProducer
) -> None:
    topic = await new_topic(admin, "PAsync")
    outcomes: list[SendResult | BaseException] = []
    futures = [producer.send_async(Message(topic, b"m%d" % i), outcomes.append) for i in range(100)]
    results = await asyncio.gather(*futures)
    assert all(r.status == "SEND_OK" for r in results)
    assert sorted(map(id, outcomes)) == sorted(map(id, results))
    ids = [r.msg_id for r in results]
    assert len(set(ids)) == 100
    assert len({r.offset_msg_id for r in results}) == 100
    stored = by_unique_id(await pull_all(server.broker, topic))
    assert set(stored) == set(ids)
    assert {stored[r.msg_id].body for r in results} == {b"m%d" % i for i in range(100)}


async def test_async_send_of_an_invalid_message_fails_its_future_and_callback(
    producer: AsyncProducer,
) -> None:
    outcomes: list[SendResult | BaseException] = []
    future = producer.send_async(Message("bad topic!", b"x"), outcomes.append)
    with pytest.raises(ClientError) as excinfo:
        await future
    assert excinfo.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert outcomes == [excinfo.value]


async def test_oneway_messages_arrive(admin: AdminClient, producer: AsyncProducer) -> None:
    topic = await new_topic(admin, "POneway")
    key = unique_name("ow")
    for i in range(5):
        await producer.send_oneway(make_message(topic, b"o%d" % i, keys=[key]))

    async def all_stored() -> list[MessageExt] | None:
        found = await admin.query_by_key(topic, key)
        return found if len(found) == 5 else None

    found = await eventually(all_stored, "the 5 oneway messages")
    assert sorted(m.body for m in found) == [b"o%d" % i for i in range(5)]


async def test_batch_lands_on_one_queue_with_consecutive_offsets(
    server: ServerProcess, admin: AdminClient, producer: AsyncProducer
) -> None:
    topic = await new_topic(admin, "PBatch")
    messages = [make_message(topic, b"b%d" % i, tags="T", keys=[f"k{i}"]) for i in range(10)]
    result = await producer.send_batch(messages)
    assert result.status == "SEND_OK"
    ids = result.msg_id.split(",")
    assert ids == [m.unique_key for m in messages]
    assert len(result.offset_msg_id.split(",")) == 10
    stored = await pull(server.broker, topic, result.queue_id, result.queue_offset, 10)
    assert [m.body for m in stored] == [b"b%d" % i for i in range(10)]
    assert [m.queue_offset for m in stored] == list(
        range(result.queue_offset, result.queue_offset + 10)
    )
    assert [m.unique_key for m in stored] == ids
    assert [m.keys for m in stored] == [[f"k{i}"] for i in range(10)]


async def test_batch_to_a_chosen_queue(
    server: ServerProcess, admin: AdminClient, producer: AsyncProducer
) -> None:
    topic = await new_topic(admin, "PBatchQ")
    queue = MessageQueue(topic, "broker-a", 3)
    result = await producer.send_batch([Message(topic, b"1"), Message(topic, b"2")], queue=queue)
    assert result.queue_id == 3
    assert [m.body for m in await pull(server.broker, topic, 3)] == [b"1", b"2"]


async def test_selector_and_sharding_key_keep_per_key_order_on_one_queue(
    server: ServerProcess, admin: AdminClient, producer: AsyncProducer
) -> None:
    topic = await new_topic(admin, "POrder")

    def by_order_id(queues: Sequence[MessageQueue], message: Message, arg: Any) -> MessageQueue:
        return queues[int(arg) % len(queues)]

    sent: dict[str, list[SendResult]] = {}
    for step in range(6):
        for order in ("o1", "o2", "o3"):
            body = f"{order}:{step}".encode()
            result = await producer.send(
                make_message(topic, body, keys=[order]), sharding_key=order
            )
            sent.setdefault(order, []).append(result)
        result = await producer.send(
            make_message(topic, f"sel:{step}".encode(), keys=["sel"]),
            selector=by_order_id,
            arg=2,
        )
        sent.setdefault("sel", []).append(result)
    assert {r.queue_id for r in sent["sel"]} == {2}
    for order, results in sent.items():
        queue_ids = {r.queue_id for r in results}
        assert len(queue_ids) == 1, f"{order} spread over {queue_ids}"
        stored = [m for m in await pull(server.broker, topic, queue_ids.pop()) if m.keys == [order]]
        assert [m.body.decode().split(":")[1] for m in stored] == [str(i) for i in range(6)]


async def test_selector_must_return_a_writable_queue(
    admin: AdminClient, producer: AsyncProducer
) -> None:
    topic = await new_topic(admin, "PSel")

    def elsewhere(queues: Sequence[MessageQueue], message: Message, arg: Any) -> MessageQueue:
        return MessageQueue(topic, "broker-a", 99)

    with pytest.raises(ClientError, match="not one of the 4 writable queues"):
        await producer.send(Message(topic, b"x"), selector=elsewhere)
    with pytest.raises(ValueError, match="at most one"):
        await producer.send(Message(topic, b"x"), selector=elsewhere, sharding_key="k")


async def test_large_body_is_stored_compressed_and_restored(
    server: ServerProcess, admin: AdminClient, producer: AsyncProducer
) -> None:
    topic = await new_topic(admin, "PZip")
    body = b"".join(b"line %05d of a compressible body\n" % i for i in range(400))
    assert len(body) > 4096
    message = Message(topic, body)
    result = await producer.send(message)
    assert message.body == body
    [stored] = await pull(server.broker, topic, result.queue_id, result.queue_offset, 1)
    assert stored.sys_flag & sysflag.COMPRESSED
    assert len(stored.body) < len(body)
    assert zlib.decompress(stored.body) == body
    assert (await admin.view_by_id(result.offset_msg_id)).body == body


async def test_delay_level_delivers_after_the_delay(
    server: ServerProcess, admin: AdminClient, producer: AsyncProducer
) -> None:
    topic = await new_topic(admin, "PDelay")
    message = make_message(topic, b"later", delay_level=6)  # 2 s with FAST_DELAY_LEVELS
    sent_at = time.monotonic()
    result = await producer.send(message)
    assert result.status == "SEND_OK"
    assert await pull_all(server.broker, topic) == []

    async def delivered() -> list[MessageExt] | None:
        return await pull_all(server.broker, topic) or None

    [stored] = await eventually(delivered, "the delayed message", timeout=30.0)
    assert time.monotonic() - sent_at >= 1.5
    assert stored.body == b"later"
    assert stored.unique_key == result.msg_id
    assert stored.store_timestamp - stored.born_timestamp >= 1500


async def test_unknown_topic_is_created_through_the_template_route(
    server: ServerProcess, admin: AdminClient, producer: AsyncProducer
) -> None:
    topic = unique_name("PAuto")
    result = await producer.send(Message(topic, b"first"))
    assert result.status == "SEND_OK"
    assert len(await producer.publish_queues(topic)) == QUEUES
    # Until the name server knows the topic, the template route is refreshed with it.
    assert "TBW102" in producer.published_topics()

    async def real_route_installed() -> bool:
        await producer.client_instance.refresh_routes()
        return "TBW102" not in producer.published_topics()

    await eventually(real_route_installed, "the broker to register the created topic")
    assert len(await producer.publish_queues(topic)) == QUEUES
    route = await admin.topic_route(topic)
    assert [q.broker_name for q in route.queue_datas] == ["broker-a"]
    [stored] = await pull(server.broker, topic, result.queue_id, result.queue_offset, 1)
    assert stored.body == b"first"


# -- errors ------------------------------------------------------------------------------------


async def test_invalid_and_oversized_messages_fail_before_the_network(
    tmp_path: Path,
) -> None:
    # Nothing listens on this name server: any network use would fail with an RPC code.
    async with AsyncProducer(unique_name("PG"), "127.0.0.1:1", max_message_size=1024) as p:
        for topic in ("bad topic", "x" * 200, "", "SCHEDULE_TOPIC_XXXX"):
            with pytest.raises(ClientError) as excinfo:
                await p.send(Message(topic, b"x"))
            assert excinfo.value.code == ResponseCode.MESSAGE_ILLEGAL
        with pytest.raises(ClientError) as excinfo:
            await p.send(Message("T", b"x" * 2000))
        assert excinfo.value.code == ResponseCode.MESSAGE_ILLEGAL
        assert "more than the maximum of 1024 bytes" in excinfo.value.message
        with pytest.raises(ClientError) as excinfo:
            await p.send(Message("T", b""))
        assert excinfo.value.code == ResponseCode.MESSAGE_ILLEGAL


async def test_broker_limit_refusal_is_reported_with_its_code(
    server: ServerProcess, admin: AdminClient
) -> None:
    topic = await new_topic(admin, "PBig")
    # The client limit is raised above the broker's 4 MiB: the broker refuses.
    async with AsyncProducer(
        unique_name("PG"),
        server.namesrv,
        max_message_size=8 * 1024 * 1024,
        compress_over_bytes=1 << 30,
    ) as p:
        with pytest.raises(ClientError) as excinfo:
            await p.send(Message(topic, b"x" * (5 * 1024 * 1024)))
    assert excinfo.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert "broker-a" in excinfo.value.message


async def test_read_only_topic_has_no_writable_queue(
    admin: AdminClient, producer: AsyncProducer
) -> None:
    topic = unique_name("PReadOnly")
    await admin.create_topic(topic, queues=2, perm=4)
    with pytest.raises(ClientError) as excinfo:
        await producer.send(Message(topic, b"x"))
    assert excinfo.value.code == ResponseCode.NO_PERMISSION
    assert "no writable queue" in excinfo.value.message


async def test_unstarted_or_shut_down_producer_refuses_to_send(server: ServerProcess) -> None:
    p = AsyncProducer(unique_name("PG"), server.namesrv)
    with pytest.raises(ClientError, match="not started"):
        await p.send(Message("T", b"x"))
    await p.start()
    await p.shutdown()
    with pytest.raises(ClientError, match="shut down"):
        await p.send(Message("T", b"x"))


async def test_topic_unknown_without_auto_creation_is_topic_not_exist(tmp_path: Path) -> None:
    with serve(tmp_path / "data", settings={"auto_create_topic": "false"}) as no_auto:
        async with AsyncProducer(unique_name("PG"), no_auto.namesrv) as p:
            with pytest.raises(ClientError) as excinfo:
                await p.send(Message("NeverCreated", b"x"))
    assert excinfo.value.code == ResponseCode.TOPIC_NOT_EXIST
    assert "no route for topic NeverCreated" in excinfo.value.message


# -- the blocking producer ---------------------------------------------------------------


def test_blocking_producer_sends_in_every_mode(server: ServerProcess) -> None:
    topic = unique_name("PBlock")
    callback_results: list[SendResult | BaseException] = []
    done = threading.Event()

    def on_done(outcome: SendResult | BaseException) -> None:
        callback_results.append(outcome)
        done.set()

    with Producer(unique_name("PG"), server.namesrv) as p:
        first = p.send(make_message(topic, b"sync", keys=["blk"]))
        assert first.status == "SEND_OK"
        future = p.send_async(make_message(topic, b"async", keys=["blk"]), on_done)
        second = future.result(timeout=10)
        assert done.wait(10)
        assert callback_results == [second]
        batch = p.send_batch([Message(topic, b"b1"), Message(topic, b"b2")])
        assert len(batch.msg_id.split(",")) == 2
        p.send_oneway(make_message(topic, b"oneway", keys=["blk"]))
        assert len(p.publish_queues(topic)) == QUEUES
    with pytest.raises(ClientError, match="shut down"):
        p.send(Message(topic, b"after shutdown"))
    p.shutdown()  # idempotent

    async def stored_count() -> int:
        async with AdminClient(server.namesrv) as admin:
            return len(await admin.query_by_key(topic, "blk"))

    async def all_three() -> bool:
        return await stored_count() == 3

    asyncio.run(eventually(all_three, "the sync, async and oneway messages"))


def loop_sends_counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread of every send that goes through the loop's retry loop."""
    counted: list[str] = []
    real = AsyncProducer._send_with_retries

    def counting(self: AsyncProducer, *args: Any, **kwargs: Any) -> Any:
        counted.append(threading.current_thread().name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(AsyncProducer, "_send_with_retries", counting)
    return counted


def test_blocking_send_runs_on_the_calling_thread_once_the_route_is_known(
    server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = unique_name("PCaller")
    loop_sends = loop_sends_counted(monkeypatch)
    with Producer(unique_name("PG"), server.namesrv) as p:
        first = p.send(Message(topic, b"first"))  # loads the route: on the loop
        assert len(loop_sends) == 1
        rest = [p.send(make_message(topic, f"m{i}", keys=["caller"])) for i in range(12)]
        assert len(loop_sends) == 1  # none of these went through the loop
        assert p._channels is not None and p._channels.open_count(server.broker) == 1
        chosen = p.send(Message(topic, b"chosen"), sharding_key="k")  # a queue choice: the loop
        assert len(loop_sends) == 1 and chosen.status == "SEND_OK"
    assert p._channels.open_count(server.broker) == 0  # closed by shutdown
    assert all(r.status == "SEND_OK" for r in [first, *rest])
    assert {r.queue_id for r in rest} == set(range(QUEUES))  # round robin as ever
    stored = by_unique_id(asyncio.run(pull_all(server.broker, topic)))
    assert {m.body for m in stored.values()} >= {f"m{i}".encode() for i in range(12)}
    assert all(stored[r.msg_id].keys == ["caller"] for r in rest)


def test_blocking_sends_beyond_the_sockets_per_broker_go_through_the_loop(
    server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = unique_name("PBusy")
    loop_sends = loop_sends_counted(monkeypatch)
    results: list[SendResult] = []
    with Producer(unique_name("PG"), server.namesrv, caller_thread_connections=2) as p:
        p.send(Message(topic, b"route"))

        def sender() -> None:
            for _ in range(25):
                results.append(p.send(Message(topic, b"busy")))

        threads = [threading.Thread(target=sender) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert p._channels is not None and p._channels.open_count(server.broker) <= 2
    assert len(results) == 150 and all(r.status == "SEND_OK" for r in results)
    assert len({r.msg_id for r in results}) == 150
    assert 1 <= len(loop_sends) < 151  # the route's send, and those that found both sockets busy


def test_blocking_send_with_no_caller_thread_sockets_goes_through_the_loop(
    server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = unique_name("PNoCaller")
    loop_sends = loop_sends_counted(monkeypatch)
    with Producer(unique_name("PG"), server.namesrv, caller_thread_connections=0) as p:
        results = [p.send(Message(topic, b"x")) for _ in range(5)]
    assert all(r.status == "SEND_OK" for r in results)
    assert len(loop_sends) == 5
    with pytest.raises(ValueError, match="caller_thread_connections"):
        Producer(unique_name("PG"), server.namesrv, caller_thread_connections=-1)


# -- failover ----------------------------------------------------------------------------------


async def test_sends_fail_over_when_a_broker_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with started(["namesrv", "--port", "0"], tmp_path, "namesrv") as (_, ns_ready):
        namesrv = ns_ready["namesrv"]
        brokers: dict[str, ServerProcess] = {}
        contexts: list[Any] = []
        try:
            await spread_over_two_brokers(tmp_path, namesrv, brokers, contexts)

            calls: list[str] = []  # the broker of each attempt, as it reports its latency
            async with AsyncProducer(unique_name("PG"), namesrv) as p:
                assert p.fault_tolerance is not None
                real_update = p.fault_tolerance.update

                def recording_update(broker_name: str, *args: Any) -> None:
                    calls.append(broker_name)
                    real_update(broker_name, *args)

                monkeypatch.setattr(p.fault_tolerance, "update", recording_update)
                before = [await p.send(Message("Spread", b"before")) for _ in range(4)]
                assert {r.broker_name for r in before} == {"broker-a", "broker-b"}

                brokers["broker-b"].popen.send_signal(signal.SIGKILL)
                brokers["broker-b"].popen.wait(timeout=10)
                calls.clear()
                after = [await p.send(Message("Spread", b"after")) for _ in range(10)]

                assert all(r.status == "SEND_OK" for r in after)
                assert {r.broker_name for r in after} == {"broker-a"}
                # Round robin over a0 a1 b0 b1 reaches broker-b within the first sends; the
                # failed attempt is retried on broker-a and broker-b is then avoided.
                assert calls.count("broker-b") == 1
                assert len(calls) == 11
                assert not p.fault_tolerance.is_available("broker-b")
                assert p.fault_tolerance.is_available("broker-a")
        finally:
            for context in reversed(contexts):
                context.__exit__(None, None, None)


async def spread_over_two_brokers(
    tmp_path: Path, namesrv: str, brokers: dict[str, ServerProcess], contexts: list[Any]
) -> None:
    """Start broker-a and broker-b (entered contexts appended to `contexts`, for
    the caller to exit) and create topic "Spread" with 2 queues on each."""
    for name in ("broker-a", "broker-b"):
        config = tmp_path / f"{name}.json"
        config.write_text(
            json.dumps(
                {
                    "broker_name": name,
                    "listen_port": 0,
                    "namesrv_addrs": [namesrv],
                    "data_dir": str(tmp_path / name),
                }
            )
        )
        context = started(["broker", "--config", str(config)], tmp_path, name)
        contexts.append(context)
        brokers[name], _ = context.__enter__()
    async with AdminClient(namesrv) as admin:

        async def both_registered() -> bool:
            return set((await admin.cluster_info()).masters()) == set(brokers)

        await eventually(both_registered, "both brokers to register")
        await admin.create_topic("Spread", queues=2)


def test_blocking_sends_from_the_calling_thread_fail_over_when_a_broker_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with started(["namesrv", "--port", "0"], tmp_path, "namesrv") as (_, ns_ready):
        namesrv = ns_ready["namesrv"]
        brokers: dict[str, ServerProcess] = {}
        contexts: list[Any] = []
        try:
            asyncio.run(spread_over_two_brokers(tmp_path, namesrv, brokers, contexts))
            with Producer(unique_name("PG"), namesrv) as p:
                before = [p.send(Message("Spread", b"before")) for _ in range(4)]
                assert {r.broker_name for r in before} == {"broker-a", "broker-b"}
                fault = p.core.fault_tolerance
                assert fault is not None
                calls: list[tuple[str, str]] = []  # (broker, thread) of each attempt's report
                real_update = fault.update

                def recording_update(broker_name: str, *args: Any) -> None:
                    calls.append((broker_name, threading.current_thread().name))
                    real_update(broker_name, *args)

                monkeypatch.setattr(fault, "update", recording_update)
                brokers["broker-b"].popen.send_signal(signal.SIGKILL)
                brokers["broker-b"].popen.wait(timeout=10)
                after = [p.send(Message("Spread", b"after")) for _ in range(10)]

            assert all(r.status == "SEND_OK" for r in after)
            assert {r.broker_name for r in after} == {"broker-a"}
            # the one attempt on broker-b failed on the calling thread; its retry on
            # broker-a ran on the loop thread; every other send on the calling thread
            caller = threading.current_thread().name
            assert [c for c in calls if c[0] == "broker-b"] == [("broker-b", caller)]
            retried = [c for c in calls if c[0] == "broker-a" and c[1] != caller]
            assert len(retried) == 1 and retried[0][1].startswith("tidemq-producer-")
            assert len(calls) == 11
            assert not fault.is_available("broker-b")
        finally:
            for context in reversed(contexts):
                context.__exit__(None, None, None)
