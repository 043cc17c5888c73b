"""The remoting request-family table: each family x (anonymous, wrong key, allowed, denied),
against a real name server and broker over TCP, signed by our transport, under both access
models (plain_acl.yml accounts, and RocketMQ 5 users and ACLs), each cell's exact response
code checked against the table in docs/access-control.md, so the table cannot lie.

Each family names the request, what it changes, and which identity may send it. A refused
cell must answer NO_PERMISSION (16) with a readable remark and change nothing; the allowed
cell must succeed and change what it says (or, for a read, answer it). The refused cells
run first, so "nothing changed" is measured against the state before any of them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from acl_support import (
    ADMIN,
    APP,
    CASE_COLUMNS,
    GROUP,
    IDENTITIES,
    OTHER,
    TOPIC,
    AclCluster,
    acl_cluster,
    doc_table,
    seeded,
    wrong_secret,
)

from tidemq.acl.credentials import Credentials
from tidemq.common.message import Message
from tidemq.protocol.admin_headers import (
    DeleteSubscriptionGroupRequestHeader,
    ResetOffsetRequestHeader,
)
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    QueryConsumerOffsetRequestHeader,
    RegisterBrokerRequestHeader,
    SendMessageRequestHeaderV2,
    UnregisterClientRequestHeader,
    encode_header,
)
from tidemq.record.codec import encode_batch
from tidemq.transport import RemotingClient

Action = Callable[[AclCluster, RemotingClient], Awaitable[RemotingCommand]]
Probe = Callable[[AclCluster], Awaitable[object]]
TABLE = doc_table("request family")
"""The docs' remoting table: family -> case -> the response code its cell says."""


@dataclass(frozen=True)
class Family:
    row: str
    """The family's row in the docs' table (its first cell, exactly)."""
    act: Action
    probe: Probe | None
    """What the request changes (read before and after each cell); None: a read,
    whose allowed answer `answered` checks."""
    allowed: str
    denied: str
    namesrv: bool = False
    """Sent to the name server, which knows the policy file only (not the users)."""
    models: tuple[str, ...] = ("file", "users")
    """The identity models the row holds for (a row of one model where they differ)."""
    answered: Callable[[RemotingCommand], bool] = lambda response: True


def _victim(prefix: str = "Victim") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


# -- the families ------------------------------------------------------------------------


async def send(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    return await cluster.send(TOPIC, "hello", client=client)


async def send_batch(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    body = encode_batch([Message(TOPIC, b"one"), Message(TOPIC, b"two")])
    header = SendMessageRequestHeaderV2(
        producer_group="PG",
        topic=TOPIC,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=1,
        sys_flag=0,
        born_timestamp=1,
        flag=0,
        batch=True,
    )
    return await cluster.call(
        RequestCode.SEND_BATCH_MESSAGE, encode_header(header), body, client=client
    )


async def stored(cluster: AclCluster) -> int:
    store = cluster.broker.store
    assert store is not None
    return sum(store.max_offset(TOPIC, q) for q in range(4))


async def pull(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    return await cluster.pull(TOPIC, 0, 0, group=GROUP, client=client, commit_offset=1)


async def pulled(cluster: AclCluster) -> int:
    return cluster.broker.service.stats.all_gets.total


async def query_offset(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    header = QueryConsumerOffsetRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=0)
    return await cluster.call(
        RequestCode.QUERY_CONSUMER_OFFSET, encode_header(header), client=client
    )


def _offset_is_1(response: RemotingCommand) -> bool:
    return (response.ext_fields or {}).get("offset") == "1"


async def commit(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "1", "commitOffset": "1"}
    return await cluster.call(RequestCode.UPDATE_CONSUMER_OFFSET, fields, client=client)


async def offset_of_queue_1(cluster: AclCluster) -> int:
    return cluster.broker.service.offsets.query(GROUP, TOPIC, 1)


async def heartbeat(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    return await cluster.heartbeat("acl-client-1", GROUP, topics={TOPIC: "*"}, client=client)


async def members(cluster: AclCluster) -> list[str]:
    return sorted(cluster.broker.service.consumers.client_ids(GROUP))


async def unregister(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    header = UnregisterClientRequestHeader(client_id="seeded-client", consumer_group=GROUP)
    return await cluster.call(RequestCode.UNREGISTER_CLIENT, encode_header(header), client=client)


_CREATED: list[str] = []


async def create_topic(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    name = _victim()
    _CREATED.append(name)
    header = CreateTopicRequestHeader(
        topic=name,
        default_topic="TBW102",
        read_queue_nums=2,
        write_queue_nums=2,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    return await cluster.call(
        RequestCode.UPDATE_AND_CREATE_TOPIC, encode_header(header), client=client
    )


async def created_topics(cluster: AclCluster) -> list[str]:
    return sorted(name for name in _CREATED if name in cluster.broker.service.topics)


async def delete_topic(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    header = encode_header(DeleteTopicRequestHeader(topic=TOPIC))
    return await cluster.call(RequestCode.DELETE_TOPIC_IN_BROKER, header, client=client)


async def topic_exists(cluster: AclCluster) -> bool:
    return TOPIC in cluster.broker.service.topics


async def create_group(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    name = _victim("VictimGroup")
    _CREATED.append(name)
    body = json.dumps({"groupName": name}).encode()
    return await cluster.call(
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body, client=client
    )


async def created_groups(cluster: AclCluster) -> list[str]:
    return sorted(name for name in _CREATED if name in cluster.broker.service.groups)


async def delete_group(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    header = DeleteSubscriptionGroupRequestHeader(group_name=GROUP)
    return await cluster.call(
        RequestCode.DELETE_SUBSCRIPTIONGROUP, encode_header(header), client=client
    )


async def group_exists(cluster: AclCluster) -> bool:
    return GROUP in cluster.broker.service.groups


async def reset_offset(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    header = ResetOffsetRequestHeader(topic=TOPIC, group=GROUP, timestamp=0, queue_id=0, offset=0)
    return await cluster.call(
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, encode_header(header), client=client
    )


async def offset_of_queue_0(cluster: AclCluster) -> int:
    return cluster.broker.service.offsets.query(GROUP, TOPIC, 0)


async def get_broker_config(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    return await cluster.call(RequestCode.GET_BROKER_CONFIG, {}, client=client)


def _names_the_broker(response: RemotingCommand) -> bool:
    return b"brokerName=broker" in response.body


async def update_broker_config(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    body = b"brokerPermission=6\n"  # what it is already: the one setting changed while running
    return await cluster.call(RequestCode.UPDATE_BROKER_CONFIG, {}, body, client=client)


async def query_route(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    command = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
    return await client.invoke(cluster.namesrv.address, command)


def _routes_to_the_broker(response: RemotingCommand) -> bool:
    return bool(json.loads(response.body)["brokerDatas"])


async def register_broker(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    name = _victim("rogue-broker")
    _CREATED.append(name)
    header = RegisterBrokerRequestHeader(
        broker_name=name,
        broker_addr="127.0.0.1:1",
        cluster_name="DefaultCluster",
        ha_server_addr="127.0.0.1:1",
        broker_id=0,
    )
    body = json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": {}}}).encode()
    command = RemotingCommand.request(RequestCode.REGISTER_BROKER, encode_header(header), body)
    return await client.invoke(cluster.namesrv.address, command)


async def registered_brokers(cluster: AclCluster) -> list[str]:
    return sorted(record.broker_name for record in cluster.namesrv.routes.brokers())


async def delete_route(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    header = encode_header(DeleteTopicFromNamesrvRequestHeader(topic=TOPIC))
    command = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, header)
    return await client.invoke(cluster.namesrv.address, command)


async def route(cluster: AclCluster) -> bool:
    command = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
    response = await cluster.client.invoke(cluster.namesrv.address, command)
    return response.code == ResponseCode.SUCCESS and bool(json.loads(response.body))


FAMILIES = [
    Family("send (SEND_MESSAGE, _V2)", send, stored, "app", "other"),
    Family("send batch (SEND_BATCH_MESSAGE)", send_batch, stored, "app", "other"),
    Family("pull (PULL_MESSAGE)", pull, pulled, "app", "other"),
    Family(
        "consumer offset query (QUERY_CONSUMER_OFFSET)",
        query_offset,
        None,
        "app",
        "other",
        models=("file",),
        answered=_offset_is_1,
    ),
    Family(
        "consumer offset query by a RocketMQ 5 user (QUERY_CONSUMER_OFFSET)",
        query_offset,
        None,
        "app",
        "other",
        models=("users",),
        answered=_offset_is_1,
    ),
    Family(
        "consumer offset update (UPDATE_CONSUMER_OFFSET)", commit, offset_of_queue_1, "app", "other"
    ),
    Family("heartbeat, client registration (HEART_BEAT)", heartbeat, members, "app", "other"),
    Family("client unregistration (UNREGISTER_CLIENT)", unregister, members, "app", "other"),
    Family(
        "topic create / update (UPDATE_AND_CREATE_TOPIC)",
        create_topic,
        created_topics,
        "admin",
        "app",
    ),
    Family("topic delete (DELETE_TOPIC_IN_BROKER)", delete_topic, topic_exists, "admin", "app"),
    Family(
        "subscription group create / update (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)",
        create_group,
        created_groups,
        "admin",
        "app",
    ),
    Family(
        "subscription group delete (DELETE_SUBSCRIPTIONGROUP)",
        delete_group,
        group_exists,
        "admin",
        "app",
    ),
    Family(
        "offset reset (INVOKE_BROKER_TO_RESET_OFFSET)",
        reset_offset,
        offset_of_queue_0,
        "admin",
        "app",
    ),
    Family(
        "broker config get (GET_BROKER_CONFIG)",
        get_broker_config,
        None,
        "admin",
        "app",
        answered=_names_the_broker,
    ),
    Family(
        "broker config update (UPDATE_BROKER_CONFIG)",
        update_broker_config,
        None,
        "admin",
        "app",
    ),
    Family(
        "name server: route query (GET_ROUTEINFO_BY_TOPIC)",
        query_route,
        None,
        "app",
        "other",
        namesrv=True,
        answered=_routes_to_the_broker,
    ),
    Family(
        "name server: broker registration (REGISTER_BROKER)",
        register_broker,
        registered_brokers,
        "admin",
        "app",
        namesrv=True,
    ),
    Family(
        "name server: route delete (DELETE_TOPIC_IN_NAMESRV)",
        delete_route,
        route,
        "admin",
        "app",
        namesrv=True,
    ),
]

REMARKS = {
    "anonymous": ("No accessKey is configured",),
    "wrong key": ("Check signature failed for accessKey=",),
    "denied": (
        "No default permission for ",
        "Need admin permission for request code=",
        "User:",
    ),
}


def _runs() -> list[tuple[Family, str]]:
    """Every family under the file; the broker's families under the users too (the name
    server knows no users: RocketMQ's authenticates nothing)."""
    return [(f, "file") for f in FAMILIES if "file" in f.models] + [
        (f, "users") for f in FAMILIES if not f.namesrv and "users" in f.models
    ]


@pytest.mark.parametrize(
    ("family", "model"), _runs(), ids=lambda x: x if isinstance(x, str) else x.row
)
async def test_family_by_identity(tmp_path: Path, family: Family, model: str) -> None:
    identities = IDENTITIES[model]
    allowed, denied = identities[family.allowed], identities[family.denied]
    async with acl_cluster(tmp_path) as cluster:
        await seeded(cluster)
        before = await family.probe(cluster) if family.probe is not None else None
        observed: dict[str, int] = {}
        for case, credentials in (
            ("anonymous", None),
            ("wrong key", wrong_secret(allowed)),
            ("denied", denied),
        ):
            response = await family.act(cluster, cluster.client_for(credentials))
            observed[case] = response.code
            cell = f"{family.row} x {case} ({model}): {response.code} {response.remark}"
            if response.code == ResponseCode.NO_PERMISSION:
                assert response.remark is not None
                assert response.remark.startswith(REMARKS[case]), cell
                for secret in (allowed.secret_key, ADMIN.secret_key, APP.secret_key):
                    assert secret not in response.remark
            if family.probe is not None:
                assert await family.probe(cluster) == before, f"{cell} changed something"
        response = await family.act(cluster, cluster.client_for(allowed))
        observed["allowed"] = response.code
        cell = f"{family.row} x allowed ({model}): {response.code} {response.remark}"
        if family.probe is not None:
            assert await family.probe(cluster) != before, f"{cell} changed nothing"
        else:
            assert family.answered(response), cell
        assert observed == TABLE[family.row], f"{family.row} ({model}): the docs' row is wrong"


def test_the_docs_table_has_a_row_for_every_family_and_no_other() -> None:
    assert sorted(TABLE) == sorted(f.row for f in FAMILIES)
    assert all(set(cells) == set(CASE_COLUMNS) for cells in TABLE.values())


async def test_refusals_are_counted_per_reason(tmp_path: Path) -> None:
    async with acl_cluster(tmp_path) as cluster:
        await seeded(cluster)
        await send(cluster, cluster.client_for(None))
        await send(cluster, cluster.client_for(None))
        await send(cluster, cluster.client_for(wrong_secret(APP)))
        await send(cluster, cluster.client_for(OTHER))
        await send(cluster, cluster.client_for(Credentials("nobodyKey1", "whatever1")))
        assert cluster.broker.acl is not None
        counts = cluster.broker.acl.refusals()
        assert counts["no_access_key"] == 2
        assert counts["bad_signature"] == 1
        assert counts["no_permission"] == 1
        assert counts["unknown_access_key"] == 1
        assert counts["not_admin"] == 0
