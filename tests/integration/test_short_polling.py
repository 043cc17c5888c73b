"""Long polling switched off (`tidemq serve --set long_polling_enable=false`),
against a real server process.

RocketMQ with ``longPollingEnable=false`` (DefaultPullMessageResultHandler,
PULL_NOT_FOUND) still holds a pull that finds nothing, but for
``shortPollingTimeMills`` (1 s) instead of the client's suspend time (15 s),
and a message arriving meanwhile does not answer it early: the answer comes
at the end of the hold or at the hold service's next check (every 1 s). A
push consumer still gets every message, at most about a second late.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from functools import partial

import pytest

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeStatus
from tidemq.client.consumer.pull_api import PullStatus, pull_message
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.client.instance import ClientConfig, ClientInstance
from tidemq.common.message import MessageExt
from tidemq.testing.client_support import create_topic, numbered_messages, produce
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.waiting import HANG_GUARD_S, eventually, unique_name

pytestmark = pytest.mark.slow

CLIENT_SUSPEND_MS = 3_600_000
"""An hour: a pull held for the client's suspend time would trip the hang guard."""
SHORT_POLLING_S = 1.0
"""The broker's default short_polling_time_ms, 1000."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("short-polling") / "data"
    with serve(data, settings={"long_polling_enable": "false"}) as process:
        yield process


async def test_an_empty_pull_is_held_the_short_polling_time_not_the_clients(
    server: ServerProcess,
) -> None:
    topic, group = unique_name("Short"), unique_name("cg_short_")
    [mq] = await create_topic(server.namesrv, topic, queues=1)
    instance = ClientInstance(ClientConfig(namesrv=server.namesrv))
    await instance.start()
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with asyncio.timeout(HANG_GUARD_S):
            result = await pull_message(
                instance,
                group=group,
                mq=mq,
                subscription=SubscriptionSpec.parse(topic, "*", sub_version=1),
                offset=0,
                suspend_ms=CLIENT_SUSPEND_MS,
            )
        elapsed = loop.time() - started
    finally:
        await instance.close()
    assert result.status is PullStatus.NO_NEW_MSG
    assert elapsed >= SHORT_POLLING_S * 0.9  # held, not answered at once


async def test_a_push_consumer_gets_every_message_without_long_polling(
    server: ServerProcess,
) -> None:
    topic, group = unique_name("Short"), unique_name("cg_short_")
    await create_topic(server.namesrv, topic, queues=2)
    bodies: set[str] = set()
    lock = threading.Lock()

    def record(messages: list[MessageExt], context: ConsumeConcurrentlyContext) -> ConsumeStatus:
        with lock:
            bodies.update(m.body.decode() for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    push = AsyncPushConsumer(
        group,
        server.namesrv,
        listener=record,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    push.subscribe(topic)
    await push.start()
    try:
        for round_ in range(3):  # sent while the consumer's pulls are being held
            await produce(server.namesrv, numbered_messages(topic, 5, start=5 * round_))
            expected = {f"m{i}" for i in range(5 * round_ + 5)}
            await eventually(partial(expected.issubset, bodies), f"round {round_}", timeout=30)
    finally:
        await push.shutdown()
