"""AsyncProducer.send_async's task-free first attempt, over real sockets.

When the route, the master and an open connection are at hand, the first
attempt is written at once and its answer's callback ends the send; a
transport failure hands the send to the retry loop. Two RemotingServers play
two brokers; the producer's ClientInstance is a stand-in giving their routes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig
from tidemq.client.model import BrokerData, QueueData, SendResult, TopicRoute
from tidemq.client.producer import AsyncProducer
from tidemq.common.clock import SYSTEM_CLOCK
from tidemq.common.message import Message
from tidemq.protocol import RemotingCommand, RequestCode, ResponseCode
from tidemq.testing.waiting import eventually
from tidemq.transport import Connection, RemotingClient, RemotingServer

Handler = Callable[[RemotingCommand, Connection], Awaitable[RemotingCommand | None]]


def stored(request: RemotingCommand) -> RemotingCommand:
    return RemotingCommand.response_to(
        request,
        ResponseCode.SUCCESS,
        ext_fields={
            "msgId": "0A00000100002A9F0000000000000000",
            "queueId": request.ext_fields["e"],
            "queueOffset": "7",
        },
    )


class Broker:
    """A RemotingServer answering sends as `behaviour` says (default: stored)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests: list[RemotingCommand] = []
        self.behaviour: Handler | None = None
        self.server = RemotingServer(
            name, {RequestCode.SEND_MESSAGE_V2: self._handle}, host="127.0.0.1", port=0
        )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    async def _handle(self, request: RemotingCommand, connection: Connection) -> Any:
        self.requests.append(request)
        if self.behaviour is not None:
            return await self.behaviour(request, connection)
        return stored(request)


class Instance:
    """What AsyncProducer uses of a ClientInstance: a real RemotingClient, given routes."""

    def __init__(self, brokers: list[Broker]) -> None:
        self.config = ClientConfig(namesrv="127.0.0.1:1", client_ip="10.0.0.9")
        self.clock = SYSTEM_CLOCK
        self.client_id = self.config.client_id
        self.remoting = RemotingClient()
        self.brokers = {b.name: b for b in brokers}
        self.route_value = TopicRoute(
            "T",
            tuple(QueueData(b.name, 2, 2, 6) for b in brokers),
            tuple(BrokerData("c", b.name, {0: b.address}) for b in brokers),
        )

    def register_producer(self, member: Any) -> None:
        pass

    async def unregister(self, **groups: str | None) -> None:
        pass

    async def route(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        return self.route_value

    async def require_master(self, broker_name: str, topic: str | None = None) -> str:
        return self.brokers[broker_name].address


@pytest.fixture
async def brokers() -> AsyncIterator[list[Broker]]:
    started = [Broker("broker-a"), Broker("broker-b")]
    for broker in started:
        await broker.server.start()
    yield started
    for broker in started:
        await broker.server.stop(grace=1.0)


async def producer_for(brokers: list[Broker], **options: Any) -> AsyncProducer:
    """A started producer with an open connection to each broker (the direct path's case)."""
    instance = Instance(brokers)
    producer = AsyncProducer("PG", client_instance=instance, **options)  # type: ignore[arg-type]
    await producer.start()
    for broker in brokers:
        await instance.remoting.connect(broker.address)
    await producer.send(Message("T", b"warm"))  # the route is known from here on
    for broker in brokers:
        broker.requests.clear()
    return producer


async def close(producer: AsyncProducer) -> None:
    await producer.shutdown()
    await producer.client_instance.remoting.close()


async def test_a_direct_send_ends_with_its_result_and_callback(brokers: list[Broker]) -> None:
    producer = await producer_for(brokers)
    outcomes: list[object] = []
    futures = [producer.send_async(Message("T", b"x%d" % i), outcomes.append) for i in range(8)]
    assert not any(isinstance(f, asyncio.Task) for f in futures)  # no task per send
    results = await asyncio.gather(*futures)
    assert all(isinstance(r, SendResult) and r.queue_offset == 7 for r in results)
    await eventually(lambda: len(outcomes) == 8, "every callback")
    assert sorted(map(id, outcomes)) == sorted(map(id, results))
    assert sum(len(b.requests) for b in brokers) == 8
    assert {b.name for b in brokers if b.requests} == {"broker-a", "broker-b"}  # round robin
    assert [r.msg_id for r in results] == [f.result().msg_id for f in futures] and len(
        {r.msg_id for r in results}
    ) == 8
    await close(producer)


async def test_a_refused_direct_send_fails_at_once(brokers: list[Broker]) -> None:
    producer = await producer_for(brokers)

    async def refuse(request: RemotingCommand, _connection: Connection) -> RemotingCommand:
        return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, "disk full")

    for broker in brokers:
        broker.behaviour = refuse
    outcomes: list[object] = []
    with pytest.raises(ClientError) as excinfo:
        await producer.send_async(Message("T", b"x"), outcomes.append)
    assert excinfo.value.code == ResponseCode.SYSTEM_ERROR and "disk full" in str(excinfo.value)
    assert sum(len(b.requests) for b in brokers) == 1  # async sends do not retry broker codes
    await eventually(lambda: outcomes == [excinfo.value], "the callback")
    await close(producer)


async def test_a_transport_failure_is_retried_on_the_other_broker(
    brokers: list[Broker],
) -> None:
    producer = await producer_for(brokers)
    hung_up: list[str] = []

    def hang_up_once(broker: Broker) -> Handler:
        async def handle(request: RemotingCommand, connection: Connection) -> Any:
            if hung_up:
                return stored(request)
            hung_up.append(broker.name)
            connection.abort()
            return None

        return handle

    for broker in brokers:
        broker.behaviour = hang_up_once(broker)
    future = producer.send_async(Message("T", b"x"))
    assert not isinstance(future, asyncio.Task)
    result = await future
    assert len(hung_up) == 1 and result.broker_name != hung_up[0]
    assert [len(b.requests) for b in brokers] == [1, 1]
    fault = producer.fault_tolerance
    assert fault is not None and not fault.is_available(hung_up[0])
    await close(producer)


async def test_shutdown_waits_for_direct_sends_then_cancels_the_rest(
    brokers: list[Broker],
) -> None:
    producer = await producer_for(brokers, send_timeout_s=0.5)
    release = asyncio.Event()

    async def hold(request: RemotingCommand, _connection: Connection) -> RemotingCommand:
        await release.wait()
        return stored(request)

    async def never(request: RemotingCommand, _connection: Connection) -> None:
        await asyncio.Event().wait()

    brokers[0].behaviour = brokers[1].behaviour = hold
    held = [producer.send_async(Message("T", b"x")) for _ in range(4)]
    await eventually(lambda: sum(len(b.requests) for b in brokers) == 4, "the held sends")
    asyncio.get_running_loop().call_later(0.05, release.set)
    brokers[0].behaviour = brokers[1].behaviour = never
    outcomes: list[object] = []
    stuck = producer.send_async(Message("T", b"y"), outcomes.append)
    await producer.shutdown()
    assert all(f.done() and not f.cancelled() and f.exception() is None for f in held)
    assert stuck.cancelled()
    await eventually(lambda: len(outcomes) == 1, "the stuck send's callback")
    assert isinstance(outcomes[0], ClientError) and "cancelled" in str(outcomes[0])
    await producer.client_instance.remoting.close()


async def test_a_cancelled_direct_send_leaves_nothing_pending(brokers: list[Broker]) -> None:
    producer = await producer_for(brokers)
    release = asyncio.Event()

    async def hold(request: RemotingCommand, _connection: Connection) -> RemotingCommand:
        await release.wait()
        return stored(request)

    brokers[0].behaviour = brokers[1].behaviour = hold
    future = producer.send_async(Message("T", b"x"))
    await eventually(lambda: sum(len(b.requests) for b in brokers) == 1, "the request")
    future.cancel()
    release.set()
    connections = producer.client_instance.remoting.connections.values()
    await eventually(lambda: all(c.pending == 0 for c in connections), "the late answer")
    assert future.cancelled()
    assert (await producer.send_async(Message("T", b"z"))).queue_offset == 7
    await close(producer)
