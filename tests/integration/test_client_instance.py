"""ClientInstance against a real `tidemq serve` process: routes, heartbeats,
the group's consumer list, NOTIFY_CONSUMER_IDS_CHANGED and unregistering."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pytest

from tidemq.client.admin import AdminClient
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig, ClientInstance
from tidemq.client.model import TopicRoute
from tidemq.protocol import ResponseCode
from tidemq.protocol.heartbeat import ConsumerData, Subscription
from tidemq.testing.processes import ServerProcess, free_port, serve
from tidemq.testing.waiting import eventually

pytestmark = pytest.mark.slow


class RecordingConsumer:
    """A ConsumerMember that records what the instance tells it."""

    def __init__(self, group: str, topic: str) -> None:
        self.group = group
        self.topic = topic
        self.rebalance_requests = 0
        self.routes: list[TopicRoute] = []

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group, subscriptions=(Subscription(self.topic),))

    def subscribed_topics(self) -> Iterable[str]:
        return [self.topic]

    def on_route_changed(self, topic: str, route: TopicRoute) -> None:
        self.routes.append(route)

    def rebalance_soon(self) -> None:
        self.rebalance_requests += 1


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("instance") / "data") as process:
        yield process


async def test_route_is_fetched_once_and_cached(server: ServerProcess) -> None:
    async with AdminClient(server.namesrv) as admin:
        await admin.create_topic("InstanceRoute", queues=3)
    instance = ClientInstance(ClientConfig(namesrv=server.namesrv))
    try:
        route = await instance.route("InstanceRoute")
        assert [q.queue_id for q in route.write_queues()] == [0, 1, 2]
        assert instance.cached_route("InstanceRoute") is route
        assert await instance.route("InstanceRoute") is route
        assert instance.master_address(route.queue_datas[0].broker_name) == server.broker
    finally:
        await instance.close()


async def test_unknown_topic_and_unreachable_name_server_are_clear_errors(
    server: ServerProcess,
) -> None:
    instance = ClientInstance(ClientConfig(namesrv=server.namesrv))
    try:
        with pytest.raises(ClientError) as missing:
            await instance.route("NoSuchTopicAnywhere")
        assert missing.value.code == ResponseCode.TOPIC_NOT_EXIST
        assert "NoSuchTopicAnywhere" in str(missing.value)
    finally:
        await instance.close()
    dead = f"127.0.0.1:{free_port()}"
    instance = ClientInstance(ClientConfig(namesrv=dead, request_timeout_s=2.0))
    try:
        with pytest.raises(ClientError) as unreachable:
            await instance.route("AnyTopic")
        assert unreachable.value.transport_failure
        assert dead in str(unreachable.value)
    finally:
        await instance.close()


async def test_heartbeat_joins_the_group_and_notify_reaches_the_members(
    server: ServerProcess,
) -> None:
    topic, group = "InstanceGroupTopic", "InstanceGroup"
    async with AdminClient(server.namesrv) as admin:
        await admin.create_topic(topic, queues=2)
    first = ClientInstance(ClientConfig(namesrv=server.namesrv))
    second = ClientInstance(ClientConfig(namesrv=server.namesrv))
    member_one = RecordingConsumer(group, topic)
    member_two = RecordingConsumer(group, topic)
    try:
        assert first.client_id != second.client_id
        await first.start()
        first.register_consumer(member_one)
        await first.route(topic)
        assert member_one.routes, "the registered member hears about the route"
        await first.send_heartbeat()
        assert await first.consumer_ids(group, topic) == [first.client_id]

        await second.start()
        second.register_consumer(member_two)
        await second.route(topic)
        await second.send_heartbeat()
        assert sorted(await first.consumer_ids(group, topic)) == sorted(
            [first.client_id, second.client_id]
        )

        async def notified() -> bool:
            return member_one.rebalance_requests > 0

        await eventually(notified, "NOTIFY_CONSUMER_IDS_CHANGED at the first member")

        await second.unregister(consumer_group=group)

        async def only_first_left() -> bool:
            return await first.consumer_ids(group, topic) == [first.client_id]

        await eventually(only_first_left, "the unregistered client to leave the group")
    finally:
        await first.close()
        await second.close()


async def test_refresh_hands_a_changed_route_to_the_members(server: ServerProcess) -> None:
    topic, group = "InstanceGrowingTopic", "InstanceGrowingGroup"
    async with AdminClient(server.namesrv) as admin:
        await admin.create_topic(topic, queues=2)
        instance = ClientInstance(ClientConfig(namesrv=server.namesrv))
        member = RecordingConsumer(group, topic)
        try:
            instance.register_consumer(member)
            await instance.route(topic)
            await admin.update_topic(topic, queues=5)

            async def grown() -> bool:
                await instance.refresh_routes()
                return bool(member.routes) and len(member.routes[-1].read_queues()) == 5

            await eventually(grown, "the refreshed route with 5 queues")
            assert len(member.routes[0].read_queues()) == 2
        finally:
            await instance.close()


async def test_a_second_member_of_one_group_is_refused() -> None:
    instance = ClientInstance(ClientConfig(namesrv="127.0.0.1:9"))
    try:
        instance.register_consumer(RecordingConsumer("G", "T"))
        with pytest.raises(ClientError, match="already registered"):
            instance.register_consumer(RecordingConsumer("G", "T"))
    finally:
        await instance.close()


async def test_name_servers_are_tried_in_turn(server: ServerProcess) -> None:
    dead_one, dead_two = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    async with AdminClient(server.namesrv) as admin:
        await admin.create_topic("InstanceFailover", queues=1)
    instance = ClientInstance(
        ClientConfig(namesrv=[dead_one, server.namesrv], request_timeout_s=2.0)
    )
    try:
        for _ in range(3):  # whichever one it starts at, the live one answers
            route = await instance.route("InstanceFailover", refresh=True)
            assert len(route.read_queues()) == 1
    finally:
        await instance.close()
    instance = ClientInstance(ClientConfig(namesrv=[dead_one, dead_two], request_timeout_s=2.0))
    try:
        with pytest.raises(ClientError, match="cannot reach any name server") as caught:
            await instance.route("InstanceFailover")
        assert caught.value.transport_failure
        assert dead_one in str(caught.value) and dead_two in str(caught.value)
    finally:
        await instance.close()
    async with AdminClient([dead_one, dead_two]) as admin:
        with pytest.raises(ClientError, match="cannot reach any name server"):
            await admin.topic_route("InstanceFailover")


async def test_a_broker_that_has_not_heard_the_heartbeat_is_told_before_the_consumer_list(
    server: ServerProcess,
) -> None:
    """A consumer that starts right after its topic is created can heartbeat
    before the route is known (to no broker); the first consumer list then
    finds the group empty, and the rebalance used to warn "no consumer for
    this group". The instance now says hello to that broker and asks again."""
    topic, group = "InstanceLateRoute", "InstanceLateRouteGroup"
    async with AdminClient(server.namesrv) as admin:
        await admin.create_topic(topic, queues=1)
    instance = ClientInstance(ClientConfig(namesrv=server.namesrv))
    try:
        await instance.start()
        instance.register_consumer(RecordingConsumer(group, topic))
        assert await instance.consumer_ids(group, topic) == [instance.client_id]
    finally:
        await instance.close()


async def test_a_broker_given_as_the_name_server_is_named(server: ServerProcess) -> None:
    instance = ClientInstance(ClientConfig(namesrv=server.broker))
    try:
        with pytest.raises(ClientError) as caught:
            await instance.route("AnyTopic")
    finally:
        await instance.close()
    assert caught.value.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert str(caught.value) == (
        f"{server.broker} is a tidemq broker (broker-a of cluster DefaultCluster), "
        f"not a name server; its name server is {server.namesrv}"
    )
