"""Timer messages end to end against a real `tidemq serve`: held until their
time (never delivered before it), past times at once, the horizon refused with
RocketMQ's illegal-timer answer, recall before the time, refusals after it, and
restarts (SIGTERM and kill -9 in sync flush) neither lose nor repeat a message."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig, ClientInstance
from tidemq.client.producer import AsyncProducer, Producer, make_message
from tidemq.common import properties as props
from tidemq.common.message import Message, MessageExt, MessageQueue
from tidemq.protocol import RequestCode, ResponseCode
from tidemq.protocol.headers import RecallMessageRequestHeader, encode_header
from tidemq.testing.client_support import create_topic, read_queue
from tidemq.testing.processes import ServerProcess, serve, server_env
from tidemq.testing.waiting import eventually, unique_name

pytestmark = pytest.mark.slow

HORIZON_S = 3600


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("timers") / "data"
    with serve(data, settings={"timer_max_delay_s": HORIZON_S}) as process:
        yield process


def timer_message(topic: str, body: str, **timer: int) -> Message:
    """A message with RocketMQ 5 timer properties set as the Java client sets them."""
    message = Message(topic, body.encode())
    for name, value in timer.items():
        message.properties[name] = str(value)
    return message


async def recall(namesrv: str, topic: str, handle: str) -> str:
    """RECALL_MESSAGE to the topic's broker: the recalled msg id, or ClientError."""
    instance = ClientInstance(ClientConfig(namesrv=namesrv))
    try:
        route = await instance.route(topic)
        address = instance.master_address(route.broker_datas[0].broker_name)
        assert address is not None
        header = RecallMessageRequestHeader(
            producer_group="TimerTest", topic=topic, recall_handle=handle
        )
        response = await instance.invoke(address, RequestCode.RECALL_MESSAGE, encode_header(header))
        if response.code != ResponseCode.SUCCESS:
            raise ClientError(response.remark or "", response.code)
        return str(response.ext_fields["msgId"])
    finally:
        await instance.close()


async def test_held_until_its_time_with_each_property(server: ServerProcess) -> None:
    topic = unique_name("Timer")
    (queue,) = await create_topic(server.namesrv, topic, queues=1)
    now = int(time.time() * 1000)
    wanted = {
        "deliver-ms": now + 2500,
        "delay-ms": now + 2000,
        "delay-sec": now + 2000,
    }
    async with AsyncProducer(unique_name("P"), server.namesrv) as producer:
        sent = {
            "deliver-ms": await producer.send(
                timer_message(topic, "deliver-ms", TIMER_DELIVER_MS=wanted["deliver-ms"]),
                queue=queue,
            ),
            "delay-ms": await producer.send(
                timer_message(topic, "delay-ms", TIMER_DELAY_MS=2000), queue=queue
            ),
            "delay-sec": await producer.send(
                timer_message(topic, "delay-sec", TIMER_DELAY_SEC=2), queue=queue
            ),
        }
        assert all(r.recall_handle for r in sent.values())
        assert await read_queue(server.namesrv, queue) == []  # parked, out of sight

    async def all_three() -> list[MessageExt] | None:
        got = await read_queue(server.namesrv, queue)
        return got if len(got) == 3 else None

    got = await eventually(all_three, "the three timer messages", timeout=30)
    for message in got:
        name = message.body.decode()
        # never before the requested time (the delay ones were asked relative to the
        # broker's clock when it received them, at or after `now`)
        assert message.store_timestamp >= wanted[name], (name, message.store_timestamp)
        assert message.topic == topic and message.unique_key == sent[name].msg_id
        assert props.REAL_TOPIC not in message.properties


async def test_a_past_time_is_delivered_at_once(server: ServerProcess) -> None:
    topic = unique_name("TimerPast")
    (queue,) = await create_topic(server.namesrv, topic, queues=1)
    async with AsyncProducer(unique_name("P"), server.namesrv) as producer:
        result = await producer.send(
            timer_message(topic, "past", TIMER_DELIVER_MS=int(time.time() * 1000) - 60_000),
            queue=queue,
        )
    assert result.recall_handle is None and result.queue_offset == 0
    got = await read_queue(server.namesrv, queue)
    assert [m.body for m in got] == [b"past"]


async def test_beyond_the_horizon_and_malformed_times_are_refused(server: ServerProcess) -> None:
    topic = unique_name("TimerFar")
    (queue,) = await create_topic(server.namesrv, topic, queues=1)
    async with AsyncProducer(unique_name("P"), server.namesrv) as producer:
        with pytest.raises(ClientError) as far:
            await producer.send(
                timer_message(topic, "far", TIMER_DELAY_SEC=HORIZON_S + 60), queue=queue
            )
        assert far.value.code == ResponseCode.MESSAGE_ILLEGAL
        assert "timer message illegal" in str(far.value) and "max delay" in str(far.value)
        bad = Message(topic, b"bad")
        bad.properties[props.TIMER_DELIVER_MS] = "tomorrow"
        with pytest.raises(ClientError) as malformed:
            await producer.send(bad, queue=queue)
        assert malformed.value.code == ResponseCode.MESSAGE_ILLEGAL
        assert "TIMER_DELIVER_MS" in str(malformed.value)
    assert await read_queue(server.namesrv, queue) == []


async def test_recall_before_the_time_and_refusals(server: ServerProcess) -> None:
    topic = unique_name("TimerRecall")
    (queue,) = await create_topic(server.namesrv, topic, queues=1)
    async with AsyncProducer(unique_name("P"), server.namesrv) as producer:
        recalled = await producer.send(
            timer_message(topic, "recalled", TIMER_DELAY_MS=1500), queue=queue
        )
        kept = await producer.send(timer_message(topic, "kept", TIMER_DELAY_MS=1500), queue=queue)
        assert recalled.recall_handle is not None and kept.recall_handle is not None
        assert await recall(server.namesrv, topic, recalled.recall_handle) == recalled.msg_id
        # the sentinel falls due after both: once it is there, the recalled one would be too
        await producer.send(timer_message(topic, "sentinel", TIMER_DELAY_MS=2500), queue=queue)

    async def sentinel_arrived() -> list[MessageExt] | None:
        got = await read_queue(server.namesrv, queue)
        return got if any(m.body == b"sentinel" for m in got) else None

    got = await eventually(sentinel_arrived, "the sentinel", timeout=30)
    assert sorted(m.body for m in got) == [b"kept", b"sentinel"]
    with pytest.raises(ClientError) as late:
        await recall(server.namesrv, topic, kept.recall_handle)
    assert late.value.code == ResponseCode.ILLEGAL_OPERATION
    for forged in ("", "bm90IGEgaGFuZGxl", "%%%"):
        with pytest.raises(ClientError) as bad:
            await recall(server.namesrv, topic, forged)
        assert bad.value.code == ResponseCode.ILLEGAL_OPERATION
        assert "recall failed" in str(bad.value)
    with pytest.raises(ClientError) as other_topic:
        await recall(server.namesrv, topic, recalled.recall_handle.replace("A", "B", 1))
    assert other_topic.value.code == ResponseCode.ILLEGAL_OPERATION


async def _send_spread(
    namesrv: str, queue: MessageQueue, count: int, spread_ms: int
) -> tuple[dict[str, str], int]:
    """`count` timer messages due over the next `spread_ms`: ({msg id: body}, last due ms)."""
    now = int(time.time() * 1000)
    sent: dict[str, str] = {}
    async with AsyncProducer(unique_name("P"), namesrv) as producer:
        for i in range(count):
            body = f"t{i}"
            due = now + 1000 + spread_ms * i // count
            result = await producer.send(
                timer_message(queue.topic, body, TIMER_DELIVER_MS=due), queue=queue
            )
            sent[result.msg_id] = body
    return sent, due


@pytest.mark.parametrize("how", ["sigterm", "kill-9"])
async def test_restart_neither_loses_nor_repeats(tmp_path: Path, how: str) -> None:
    data = tmp_path / "data"
    count = 120
    with serve(data, flush="sync", name="first") as first:
        topic = unique_name("TimerCrash")
        (queue,) = await create_topic(first.namesrv, topic, queues=1)
        sent, last_due = await _send_spread(first.namesrv, queue, count, spread_ms=4000)
        recall_me = await _send_recall_target(first.namesrv, queue)
        await recall(first.namesrv, topic, recall_me)

        async def some_delivered() -> int | None:
            n = len(await read_queue(first.namesrv, queue))
            return n if 0 < n < count else None

        await eventually(some_delivered, "some but not all delivered", timeout=30, interval=0.05)
        if how == "sigterm":
            first.stop()
        else:
            first.kill()
    with serve(data, flush="sync", name="second") as second:
        # A sentinel due after every timer message: once it is delivered, any
        # repeat of the others would have been delivered before it.
        async with AsyncProducer(unique_name("P"), second.namesrv) as producer:
            await producer.send(
                timer_message(topic, "sentinel", TIMER_DELIVER_MS=last_due + 1000), queue=queue
            )

        async def sentinel_arrived() -> list[MessageExt] | None:
            got = await read_queue(second.namesrv, queue)
            return got if any(m.body == b"sentinel" for m in got) else None

        got = await eventually(sentinel_arrived, "the sentinel", timeout=60)
    got = [m for m in got if m.body != b"sentinel"]
    ids = [m.unique_key for m in got]
    assert len(ids) == len(set(ids)) == count, "each exactly once"
    assert set(ids) == set(sent)
    assert all(m.body != b"recalled" for m in got)


async def _send_recall_target(namesrv: str, queue: MessageQueue) -> str:
    async with AsyncProducer(unique_name("P"), namesrv) as producer:
        result = await producer.send(
            timer_message(queue.topic, "recalled", TIMER_DELAY_MS=3000), queue=queue
        )
    assert result.recall_handle is not None
    return result.recall_handle


async def test_the_python_api_deliver_at_deliver_after_and_recall(server: ServerProcess) -> None:
    topic = unique_name("TimerApi")
    (queue,) = await create_topic(server.namesrv, topic, queues=1)
    at = datetime.now(UTC) + timedelta(seconds=2)
    async with AsyncProducer(unique_name("P"), server.namesrv) as producer:
        by_time = await producer.send(make_message(topic, "at", deliver_at=at), queue=queue)
        by_delay = await producer.send(
            make_message(topic, "after", deliver_after=timedelta(seconds=1.5)), queue=queue
        )
        gone = await producer.send(make_message(topic, "gone", deliver_after=1.5), queue=queue)
        assert gone.recall_handle is not None
        assert await producer.recall(topic, gone.recall_handle) == gone.msg_id
        with pytest.raises(ClientError) as garbled:
            await producer.recall(topic, "not-a-handle")
        assert garbled.value.code == ResponseCode.ILLEGAL_OPERATION

    async def two() -> list[MessageExt] | None:
        got = await read_queue(server.namesrv, queue)
        return got if len(got) >= 2 else None

    got = {m.body: m for m in await eventually(two, "the two timer messages", timeout=30)}
    assert set(got) == {b"at", b"after"}  # "gone" is due before "at" and was recalled
    assert got[b"at"].store_timestamp >= int(at.timestamp() * 1000)
    assert got[b"at"].unique_key == by_time.msg_id
    assert got[b"after"].unique_key == by_delay.msg_id
    with Producer(unique_name("P"), server.namesrv) as blocking, pytest.raises(ClientError) as late:
        blocking.recall(topic, by_time.recall_handle or "")
    assert late.value.code == ResponseCode.ILLEGAL_OPERATION


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=server_env(tmp_path),
    )


async def test_the_cli_sends_timer_messages_and_recalls_them(
    server: ServerProcess, tmp_path: Path
) -> None:
    topic = unique_name("TimerCli")
    (queue,) = await create_topic(server.namesrv, topic, queues=1)
    ns = ("--namesrv", server.namesrv)
    sent = _cli(tmp_path, "send", topic, "later", "--delay", "30", "--json", *ns)
    assert sent.returncode == 0, sent.stderr
    (row,) = json.loads(sent.stdout)
    handle = row["recall_handle"]
    plain = _cli(tmp_path, "send", topic, "now", *ns)
    assert plain.returncode == 0 and "recall_handle" not in plain.stdout
    recalled = _cli(tmp_path, "recall", topic, handle, "--json", *ns)
    assert recalled.returncode == 0, recalled.stderr
    assert json.loads(recalled.stdout) == {
        "topic": topic,
        "msg_id": row["msg_id"],
        "recalled": True,
    }
    garbled = _cli(tmp_path, "recall", topic, "garbage", *ns)
    assert garbled.returncode != 0 and "recall handle is invalid" in garbled.stderr + garbled.stdout
    at = _cli(tmp_path, "send", topic, "at", "--deliver-at", "2000-01-01T00:00:00+00:00", *ns)
    assert at.returncode == 0, at.stderr  # a time in the past: delivered at once
    both = _cli(tmp_path, "send", topic, "x", "--delay", "1", "--deliver-at", "now", *ns)
    assert both.returncode != 0 and "not both" in both.stderr
    assert [m.body for m in await read_queue(server.namesrv, queue)] == [b"now", b"at"]
