"""AsyncProducer's send policy (which attempts, where, how many, within which
time) over a scripted stand-in for the ClientInstance: each request's answer
is chosen per broker address, so retries and fault isolation are visible
without real brokers (those are in tests/integration/test_producer.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig
from tidemq.client.model import BrokerData, QueueData, SendStatus, TopicRoute
from tidemq.client.producer import AsyncProducer
from tidemq.common.clock import ManualClock
from tidemq.common.message import Message, MessageQueue
from tidemq.protocol import RemotingCommand, ResponseCode
from tidemq.transport.errors import RemotingConnectError

ADDRESSES = {"broker-a": "10.0.0.1:10911", "broker-b": "10.0.0.2:10911"}
Answer = Callable[[RemotingCommand], RemotingCommand]


def route(topic: str, *brokers: str, queues: int = 2) -> TopicRoute:
    return TopicRoute(
        topic,
        tuple(QueueData(b, queues, queues, 6) for b in brokers),
        tuple(BrokerData("c", b, {0: ADDRESSES[b]}) for b in brokers),
    )


def stored(request: RemotingCommand, code: int = ResponseCode.SUCCESS) -> RemotingCommand:
    fields = {"msgId": "0A00000100002A9F0000000000000000", "queueId": request.ext_fields["e"]}
    fields["queueOffset"] = "0"
    return RemotingCommand(code=code, flag=1, ext_fields=fields)


def refused(code: int) -> Answer:
    return lambda request: RemotingCommand(code=code, flag=1, remark=f"refused {code}")


def unreachable(request: RemotingCommand) -> RemotingCommand:
    raise RemotingConnectError("connection refused")


class FakeRemoting:
    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.answers: dict[str, Answer] = {}
        self.calls: list[str] = []
        self.cost_s = 0.0
        """Clock time each request takes."""

    async def invoke(
        self, address: str, command: RemotingCommand, timeout: float = 3.0
    ) -> RemotingCommand:
        self.calls.append(address)
        self.clock.advance(self.cost_s)
        return self.answers.get(address, stored)(command)

    async def invoke_oneway(self, address: str, command: RemotingCommand) -> None:
        self.calls.append(address)


class FakeInstance:
    """What AsyncProducer uses of a ClientInstance, with routes given by the test."""

    def __init__(self, routes: dict[str, TopicRoute]) -> None:
        self.clock = ManualClock()
        self.config = ClientConfig(namesrv="127.0.0.1:1", client_ip="10.0.0.9", clock=self.clock)
        self.client_id = self.config.client_id
        self.remoting = FakeRemoting(self.clock)
        self.routes = routes
        self.route_requests: list[str] = []
        self.tasks: list[asyncio.Task[Any]] = []

    def register_producer(self, member: Any) -> None:
        self.member = member

    async def unregister(self, **groups: str | None) -> None:
        pass

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.append(task)
        return task

    async def send_heartbeat(self) -> None:
        pass

    async def route(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        self.route_requests.append(topic)
        found = self.routes.get(topic)
        if found is None:
            raise ClientError(f"no route for topic {topic}", ResponseCode.TOPIC_NOT_EXIST)
        return found

    async def require_master(self, broker_name: str, topic: str | None = None) -> str:
        return ADDRESSES[broker_name]


async def started(instance: FakeInstance, **options: Any) -> AsyncProducer:
    producer = AsyncProducer("PG", client_instance=instance, **options)  # type: ignore[arg-type]
    await producer.start()
    return producer


@pytest.fixture
def instance() -> FakeInstance:
    return FakeInstance({"T": route("T", "broker-a", "broker-b")})


async def test_transport_failure_is_retried_on_the_other_broker_and_isolates_it(
    instance: FakeInstance,
) -> None:
    producer = await started(instance)
    instance.remoting.answers[ADDRESSES["broker-b"]] = unreachable
    results = [await producer.send(Message("T", b"x")) for _ in range(6)]
    assert {r.broker_name for r in results} == {"broker-a"}
    assert instance.remoting.calls.count(ADDRESSES["broker-b"]) == 1
    assert producer.fault_tolerance is not None
    assert not producer.fault_tolerance.is_available("broker-b")
    instance.clock.advance(601)  # a failure isolates for 600 s
    assert producer.fault_tolerance.is_available("broker-b")


async def test_three_attempts_then_the_last_error(instance: FakeInstance) -> None:
    producer = await started(instance)
    for address in ADDRESSES.values():
        instance.remoting.answers[address] = unreachable
    with pytest.raises(ClientError) as excinfo:
        await producer.send(Message("T", b"x"))
    assert len(instance.remoting.calls) == 3
    assert excinfo.value.code == ResponseCode.RPC_SEND_TO_CHANNEL_FAILED
    assert "after 3 attempt(s)" in excinfo.value.message
    # Consecutive attempts alternate brokers.
    calls = instance.remoting.calls
    assert calls[0] != calls[1] and calls[1] != calls[2]


@pytest.mark.parametrize(
    "code", [ResponseCode.SYSTEM_ERROR, ResponseCode.NO_PERMISSION, ResponseCode.TOPIC_NOT_EXIST]
)
async def test_retryable_broker_codes_are_retried_by_sync_sends(
    instance: FakeInstance, code: int
) -> None:
    producer = await started(instance)
    instance.remoting.answers[ADDRESSES["broker-a"]] = refused(code)
    results = [await producer.send(Message("T", b"x")) for _ in range(4)]
    assert {r.broker_name for r in results} == {"broker-b"}


@pytest.mark.parametrize("code", [ResponseCode.SYSTEM_BUSY, ResponseCode.MESSAGE_ILLEGAL])
async def test_other_broker_codes_end_the_send_at_once(instance: FakeInstance, code: int) -> None:
    producer = await started(instance)
    for address in ADDRESSES.values():
        instance.remoting.answers[address] = refused(code)
    with pytest.raises(ClientError) as excinfo:
        await producer.send(Message("T", b"x"))
    assert excinfo.value.code == code
    assert f"refused {code}" in excinfo.value.message
    assert len(instance.remoting.calls) == 1


async def test_async_sends_retry_transport_failures_only(instance: FakeInstance) -> None:
    producer = await started(instance)
    instance.remoting.answers[ADDRESSES["broker-a"]] = refused(ResponseCode.SYSTEM_ERROR)
    instance.remoting.answers[ADDRESSES["broker-b"]] = refused(ResponseCode.SYSTEM_ERROR)
    with pytest.raises(ClientError):
        await producer.send_async(Message("T", b"x"))
    assert len(instance.remoting.calls) == 1
    instance.remoting.calls.clear()
    instance.remoting.answers[ADDRESSES["broker-a"]] = unreachable
    instance.remoting.answers[ADDRESSES["broker-b"]] = stored
    outcomes: list[object] = []
    result = await producer.send_async(Message("T", b"x"), outcomes.append)
    assert result.broker_name == "broker-b"
    assert outcomes == [result]


async def test_chosen_queue_gets_exactly_one_attempt(instance: FakeInstance) -> None:
    producer = await started(instance)
    instance.remoting.answers[ADDRESSES["broker-b"]] = unreachable
    with pytest.raises(ClientError) as excinfo:
        await producer.send(Message("T", b"x"), queue=MessageQueue("T", "broker-b", 1))
    assert excinfo.value.transport_failure
    assert instance.remoting.calls == [ADDRESSES["broker-b"]]
    with pytest.raises(ClientError, match="not a queue of topic T"):
        await producer.send(Message("T", b"x"), queue=MessageQueue("U", "broker-a", 0))


async def test_sends_stop_when_the_timeout_is_spent(instance: FakeInstance) -> None:
    producer = await started(instance, send_timeout_s=3.0)
    instance.remoting.cost_s = 2.0
    for address in ADDRESSES.values():
        instance.remoting.answers[address] = unreachable
    with pytest.raises(ClientError) as excinfo:
        await producer.send(Message("T", b"x"))
    assert len(instance.remoting.calls) == 2  # the third would start after 4 s of 3
    assert "after 2 attempt(s)" in excinfo.value.message


async def test_not_stored_ok_goes_to_another_broker_only_when_asked(
    instance: FakeInstance,
) -> None:
    def flush_timeout(request: RemotingCommand) -> RemotingCommand:
        return stored(request, ResponseCode.FLUSH_DISK_TIMEOUT)

    for address in ADDRESSES.values():
        instance.remoting.answers[address] = flush_timeout
    plain = await started(instance)
    assert (await plain.send(Message("T", b"x"))).status is SendStatus.FLUSH_DISK_TIMEOUT
    assert len(instance.remoting.calls) == 1
    instance.remoting.calls.clear()
    insisting = await started(
        FakeInstance(instance.routes), retry_another_broker_when_not_store_ok=True
    )
    fake = insisting.client_instance
    assert isinstance(fake, FakeInstance)
    for address in ADDRESSES.values():
        fake.remoting.answers[address] = flush_timeout
    assert (await insisting.send(Message("T", b"x"))).status is SendStatus.FLUSH_DISK_TIMEOUT
    assert len(fake.remoting.calls) == 3


async def test_unknown_topic_uses_the_template_route_once_per_topic() -> None:
    template = TopicRoute(  # perm 7: inheritable, as a broker that auto-creates registers it
        "TBW102", (QueueData("broker-a", 8, 8, 7),), route("TBW102", "broker-a").broker_datas
    )
    instance = FakeInstance({"TBW102": template})
    producer = await started(instance)
    results = await asyncio.gather(*(producer.send(Message("New", b"x")) for _ in range(20)))
    assert {r.queue_id for r in results} == {0, 1, 2, 3}
    assert instance.route_requests.count("New") == 1
    assert "TBW102" in producer.published_topics()
    # The name server learns the topic: the real route replaces the template's.
    producer.on_route_changed("New", route("New", "broker-a", "broker-b", queues=1))
    assert "TBW102" not in producer.published_topics()
    assert await producer.publish_queues("New") == [
        MessageQueue("New", "broker-a", 0),
        MessageQueue("New", "broker-b", 0),
    ]


async def test_no_template_route_is_topic_not_exist() -> None:
    producer = await started(FakeInstance({}))
    with pytest.raises(ClientError) as excinfo:
        await producer.send(Message("Nowhere", b"x"))
    assert excinfo.value.code == ResponseCode.TOPIC_NOT_EXIST
    assert "no route for topic Nowhere" in excinfo.value.message


async def test_template_without_inheritable_queues_is_topic_not_exist() -> None:
    producer = await started(FakeInstance({"TBW102": route("TBW102", "broker-a")}))
    with pytest.raises(ClientError) as excinfo:
        await producer.send(Message("Nowhere", b"x"))
    assert excinfo.value.code == ResponseCode.TOPIC_NOT_EXIST


async def test_shutdown_waits_for_in_flight_async_sends(instance: FakeInstance) -> None:
    producer = await started(instance)
    futures = [producer.send_async(Message("T", b"x")) for _ in range(5)]
    await producer.shutdown()
    assert all(f.done() and not f.cancelled() for f in futures)
    with pytest.raises(ClientError, match="shut down"):
        producer.send_async(Message("T", b"x"))


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="producer group"):
        AsyncProducer("bad group!")
    with pytest.raises(ValueError, match="send_timeout_s"):
        AsyncProducer("PG", send_timeout_s=0)
