"""The name server over real loopback sockets: registration, routes, cluster info, expiry."""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tidemq.common.clock import ManualClock
from tidemq.namesrv import NameServer
from tidemq.protocol import CommandDecoder, RemotingCommand, RequestCode, ResponseCode
from tidemq.protocol.headers import (
    RegisterBrokerRequestHeader,
    UnregisterBrokerRequestHeader,
    encode_header,
)
from tidemq.testing.waiting import eventually
from tidemq.transport import RemotingClient

A_ADDR, B_ADDR = "127.0.0.1:10911", "127.0.0.1:20911"


def topic_config(name: str, queues: int = 4, perm: int = 6) -> dict[str, object]:
    return {
        "topicName": name,
        "readQueueNums": queues,
        "writeQueueNums": queues,
        "perm": perm,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
    }


def register_request(
    name: str,
    addr: str,
    topics: list[str] | dict[str, dict[str, object]],
    *,
    broker_id: int = 0,
    cluster: str = "DefaultCluster",
    ha: str = "127.0.0.1:10912",
    compressed: bool = False,
    crc: int | None = None,
    body: bytes | None = None,
) -> RemotingCommand:
    if body is None:
        table = topics if isinstance(topics, dict) else {t: topic_config(t) for t in topics}
        wrapper = {"topicConfigTable": table, "dataVersion": {"timestamp": 1, "counter": 1}}
        body = json.dumps({"topicConfigSerializeWrapper": wrapper, "filterServerList": []}).encode()
    header = RegisterBrokerRequestHeader(
        broker_name=name,
        broker_addr=addr,
        cluster_name=cluster,
        ha_server_addr=ha,
        broker_id=broker_id,
        compressed=compressed,
        body_crc32=zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc,
    )
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, encode_header(header), body)


def route_request(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


class Cluster:
    """A name server on a free port, a clock to move and clients standing in for brokers."""

    def __init__(self, namesrv: NameServer, clock: ManualClock) -> None:
        self.namesrv = namesrv
        self.clock = clock
        self.clients: list[RemotingClient] = []

    def client(self) -> RemotingClient:
        client = RemotingClient()
        self.clients.append(client)
        return client

    async def call(
        self, command: RemotingCommand, client: RemotingClient | None = None
    ) -> RemotingCommand:
        client = client or (self.clients[0] if self.clients else self.client())
        return await client.invoke(self.namesrv.address, command, timeout=5)

    async def ok(self, command: RemotingCommand, client: RemotingClient | None = None) -> Any:
        response = await self.call(command, client)
        assert response.code == ResponseCode.SUCCESS, response.remark
        return json.loads(response.body) if response.body else None


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    clock = ManualClock()
    namesrv = NameServer(port=0, clock=clock)
    await namesrv.start()
    env = Cluster(namesrv, clock)
    try:
        yield env
    finally:
        for client in env.clients:
            await client.close()
        await namesrv.stop()


async def test_route_json_matches_the_protocol_doc(cluster: Cluster) -> None:
    await cluster.ok(register_request("broker-a", A_ADDR, ["TopicTest"]))
    route = await cluster.ok(route_request("TopicTest"))
    assert route == {
        "orderTopicConf": None,
        "queueDatas": [
            {
                "brokerName": "broker-a",
                "readQueueNums": 4,
                "writeQueueNums": 4,
                "perm": 6,
                "topicSysFlag": 0,
            }
        ],
        "brokerDatas": [
            {"cluster": "DefaultCluster", "brokerName": "broker-a", "brokerAddrs": {"0": A_ADDR}}
        ],
        "filterServerTable": {},
    }


async def test_two_brokers_for_one_topic_give_the_union(cluster: Cluster) -> None:
    broker_a, broker_b = cluster.client(), cluster.client()
    await cluster.ok(register_request("broker-a", A_ADDR, ["T", "OnlyA"]), broker_a)
    await cluster.ok(register_request("broker-b", B_ADDR, {"T": topic_config("T", 8)}), broker_b)
    route = await cluster.ok(route_request("T"))
    assert [(q["brokerName"], q["writeQueueNums"]) for q in route["queueDatas"]] == [
        ("broker-a", 4),
        ("broker-b", 8),
    ]
    assert [b["brokerAddrs"]["0"] for b in route["brokerDatas"]] == [A_ADDR, B_ADDR]
    only_a = await cluster.ok(route_request("OnlyA"))
    assert [b["brokerName"] for b in only_a["brokerDatas"]] == ["broker-a"]


async def test_an_unknown_topic_is_topic_not_exist(cluster: Cluster) -> None:
    response = await cluster.call(route_request("NoSuchTopic"))
    assert response.code == 17
    assert response.remark == "No topic route info in name server for the topic: NoSuchTopic"


async def test_an_ali_ons_route_request_on_a_raw_socket(cluster: Cluster) -> None:
    await cluster.ok(register_request("broker-a", A_ADDR, ["TopicTest"]))
    header = (
        b'{"code":105,"language":"JAVA","opaque":1,"flag":0,"version":121,'
        b'"extFields":{"topic":"TopicTest"}}'
    )
    frame = (4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header
    reader, writer = await asyncio.open_connection("127.0.0.1", cluster.namesrv.port)
    try:
        writer.write(frame)
        decoder = CommandDecoder()
        commands: list[RemotingCommand] = []
        async with asyncio.timeout(5):
            while not commands:
                data = await reader.read(65536)
                assert data, "name server closed the connection"
                commands = decoder.feed(data)
    finally:
        writer.close()
        await writer.wait_closed()
    [response] = commands
    assert (response.code, response.opaque, response.flag) == (0, 1, 1)
    assert json.loads(response.body)["brokerDatas"][0]["brokerAddrs"] == {"0": A_ADDR}


async def test_cluster_info(cluster: Cluster) -> None:
    await cluster.ok(register_request("broker-a", A_ADDR, ["T"]))
    await cluster.ok(register_request("broker-b", B_ADDR, ["T"], cluster="Other"))
    slave = await cluster.call(register_request("broker-a", "127.0.0.1:10921", [], broker_id=1))
    assert slave.ext_fields == {"haServerAddr": "127.0.0.1:10912", "masterAddr": A_ADDR}
    info = await cluster.ok(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    assert info == {
        "brokerAddrTable": {
            "broker-a": {
                "cluster": "DefaultCluster",
                "brokerName": "broker-a",
                "brokerAddrs": {"0": A_ADDR, "1": "127.0.0.1:10921"},
            },
            "broker-b": {
                "cluster": "Other",
                "brokerName": "broker-b",
                "brokerAddrs": {"0": B_ADDR},
            },
        },
        "clusterAddrTable": {"DefaultCluster": ["broker-a"], "Other": ["broker-b"]},
    }


async def test_a_master_registration_answers_without_master_fields(cluster: Cluster) -> None:
    response = await cluster.call(register_request("broker-a", A_ADDR, ["T"]))
    assert (response.code, response.ext_fields, response.body) == (0, {}, b"")


async def test_topic_list_and_delete_topic(cluster: Cluster) -> None:
    await cluster.ok(register_request("broker-a", A_ADDR, ["TopicB", "TopicA"]))
    listing = await cluster.ok(
        RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    )
    assert listing == {"topicList": ["TopicA", "TopicB"]}
    await cluster.ok(
        RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "TopicA"})
    )
    assert (await cluster.call(route_request("TopicA"))).code == ResponseCode.TOPIC_NOT_EXIST
    listing = await cluster.ok(
        RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    )
    assert listing == {"topicList": ["TopicB"]}


async def test_unregister_broker(cluster: Cluster) -> None:
    await cluster.ok(register_request("broker-a", A_ADDR, ["T"]))
    header = UnregisterBrokerRequestHeader(
        broker_name="broker-a", broker_addr=A_ADDR, cluster_name="DefaultCluster", broker_id=0
    )
    await cluster.ok(RemotingCommand.request(RequestCode.UNREGISTER_BROKER, encode_header(header)))
    assert (await cluster.call(route_request("T"))).code == ResponseCode.TOPIC_NOT_EXIST


async def test_kv_config_is_not_found(cluster: Cluster) -> None:
    response = await cluster.call(
        RemotingCommand.request(
            RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"}
        )
    )
    assert response.code == ResponseCode.QUERY_NOT_FOUND


@pytest.mark.parametrize(
    ("command", "remark_part"),
    [
        (register_request("b", A_ADDR, ["T"], compressed=True), "compressed"),
        (register_request("b", A_ADDR, ["T"], crc=12345), "crc32 not match"),
        (register_request("b", A_ADDR, [], body=b"{oops", crc=0), "not valid JSON"),
        (
            register_request("b", A_ADDR, {"T": {"topicName": "T", "perm": 6}}),
            "lacks readQueueNums",
        ),
        (RemotingCommand.request(RequestCode.REGISTER_BROKER, {"brokerName": "b"}), "brokerAddr"),
        (RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC), "topic"),
    ],
    ids=["compressed", "crc", "bad-json", "bad-topic-config", "missing-header", "no-topic"],
)
async def test_bad_requests_get_system_error_with_a_reason(
    cluster: Cluster, command: RemotingCommand, remark_part: str
) -> None:
    response = await cluster.call(command)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and remark_part in response.remark
    assert cluster.namesrv.routes.brokers() == []


async def test_unknown_codes_are_not_supported(cluster: Cluster) -> None:
    response = await cluster.call(RemotingCommand.request(RequestCode.PUT_KV_CONFIG))
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_a_broker_is_removed_when_its_connection_closes(cluster: Cluster) -> None:
    asker = cluster.client()
    broker_a, broker_b = RemotingClient(), cluster.client()
    try:
        await cluster.ok(register_request("broker-a", A_ADDR, ["T", "OnlyA"]), broker_a)
        await cluster.ok(register_request("broker-b", B_ADDR, ["T"]), broker_b)
    finally:
        await broker_a.close()
    await eventually(
        lambda: [b.broker_name for b in cluster.namesrv.routes.brokers()] == ["broker-b"],
        "broker-a removed",
    )
    assert (await cluster.call(route_request("OnlyA"), asker)).code == ResponseCode.TOPIC_NOT_EXIST
    route = await cluster.ok(route_request("T"), asker)
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["broker-b"]


async def test_a_silent_broker_expires_after_120_seconds_and_is_disconnected(
    cluster: Cluster,
) -> None:
    broker_a, broker_b = cluster.client(), cluster.client()
    await cluster.ok(register_request("broker-a", A_ADDR, ["T"]), broker_a)
    await cluster.ok(register_request("broker-b", B_ADDR, ["T"]), broker_b)
    connection_a = await broker_a.connect(cluster.namesrv.address)
    cluster.clock.advance(100)
    await cluster.ok(register_request("broker-b", B_ADDR, ["T"]), broker_b)
    cluster.clock.advance(20)
    assert cluster.namesrv.scan_now() == []
    cluster.clock.advance(1)
    [expired] = cluster.namesrv.scan_now()
    assert expired.broker_addr == A_ADDR
    await eventually(lambda: connection_a.closed, "broker-a's connection closed")
    route = await cluster.ok(route_request("T"), broker_b)
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["broker-b"]


async def test_the_expiry_scan_runs_by_itself() -> None:
    clock = ManualClock()
    namesrv = NameServer(port=0, clock=clock, scan_interval_s=0.02)
    async with namesrv, RemotingClient() as broker:
        response = await broker.invoke(
            namesrv.address, register_request("broker-a", A_ADDR, ["T"]), timeout=5
        )
        assert response.code == ResponseCode.SUCCESS
        clock.advance(121)
        await eventually(lambda: namesrv.routes.brokers() == [], "the scan to expire broker-a")
        assert namesrv.routes.route("T") is None
