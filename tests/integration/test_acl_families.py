"""The request-family table: each family x (anonymous, wrong key, allowed, denied), against
a real name server and broker with a plain_acl.yml, over TCP, signed by our transport.

Each family names the request, what it changes, and which account may send it. A
refused cell must answer NO_PERMISSION (16) with a readable remark and change
nothing; the allowed cell must succeed and change what it says. The refused cells
run first, so "nothing changed" is measured against the state before any of them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from acl_support import ADMIN, APP, GROUP, OTHER, TOPIC, AclCluster, acl_cluster, wrong_secret

from tidemq.acl.credentials import Credentials
from tidemq.protocol.admin_headers import ResetOffsetRequestHeader
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    encode_header,
)
from tidemq.transport import RemotingClient

Action = Callable[[AclCluster, RemotingClient], Awaitable[RemotingCommand]]
Probe = Callable[[AclCluster], Awaitable[object]]


@dataclass(frozen=True)
class Family:
    name: str
    act: Action
    probe: Probe
    """What the request changes (read before and after each cell)."""
    allowed: Credentials
    denied: Credentials
    ok_codes: tuple[int, ...] = (ResponseCode.SUCCESS,)


async def _seeded(cluster: AclCluster) -> None:
    """AclTopic with one message, AclGroup's offset of queue 0 at 1."""
    header = CreateTopicRequestHeader(
        topic=TOPIC,
        default_topic="TBW102",
        read_queue_nums=4,
        write_queue_nums=4,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    created = await cluster.call(RequestCode.UPDATE_AND_CREATE_TOPIC, encode_header(header))
    assert created.code == ResponseCode.SUCCESS, created.remark
    sent = await cluster.send(TOPIC, "seed")
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    cluster.broker.service.offsets.commit(GROUP, TOPIC, 0, 1)
    assert await cluster.broker.register_all() == 1


def _victim() -> str:
    return f"Victim_{uuid.uuid4().hex[:8]}"


# -- the families ------------------------------------------------------------------------


async def send(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    return await cluster.send(TOPIC, "hello", client=client)


async def stored(cluster: AclCluster) -> int:
    store = cluster.broker.store
    assert store is not None
    return sum(store.max_offset(TOPIC, q) for q in range(4))


async def pull(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    return await cluster.pull(TOPIC, 0, 0, group=GROUP, client=client, commit_offset=1)


async def pulled(cluster: AclCluster) -> int:
    return cluster.broker.service.stats.all_gets.total


async def heartbeat(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    return await cluster.heartbeat("acl-client-1", GROUP, topics={TOPIC: "*"}, client=client)


async def members(cluster: AclCluster) -> list[str]:
    return cluster.broker.service.consumers.client_ids(GROUP)


async def commit(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "1", "commitOffset": "1"}
    return await cluster.call(RequestCode.UPDATE_CONSUMER_OFFSET, fields, client=client)


async def offset_of_queue_1(cluster: AclCluster) -> int:
    return cluster.broker.service.offsets.query(GROUP, TOPIC, 1)


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


async def reset_offset(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    header = ResetOffsetRequestHeader(topic=TOPIC, group=GROUP, timestamp=0, queue_id=0, offset=0)
    return await cluster.call(
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, encode_header(header), client=client
    )


async def offset_of_queue_0(cluster: AclCluster) -> int:
    return cluster.broker.service.offsets.query(GROUP, TOPIC, 0)


async def delete_route(cluster: AclCluster, client: RemotingClient) -> RemotingCommand:
    header = encode_header(DeleteTopicFromNamesrvRequestHeader(topic=TOPIC))
    command = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, header)
    return await client.invoke(cluster.namesrv.address, command)


async def route(cluster: AclCluster) -> bool:
    command = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
    response = await cluster.client.invoke(cluster.namesrv.address, command)
    return response.code == ResponseCode.SUCCESS and bool(json.loads(response.body))


FAMILIES = [
    Family("produce (PUB on the topic)", send, stored, APP, OTHER),
    Family("pull (SUB on topic and group)", pull, pulled, APP, OTHER),
    Family("heartbeat (SUB on group and topics)", heartbeat, members, APP, OTHER),
    Family("commit offset (SUB on group and topic)", commit, offset_of_queue_1, APP, OTHER),
    Family("topic create (admin)", create_topic, created_topics, ADMIN, APP),
    Family("topic delete (admin)", delete_topic, topic_exists, ADMIN, APP),
    Family("offset reset (admin)", reset_offset, offset_of_queue_0, ADMIN, APP),
    Family("route delete on the name server (admin)", delete_route, route, ADMIN, APP),
]

TABLE = {
    "anonymous": "No accessKey is configured",
    "wrong key": "Check signature failed for accessKey=",
    "denied": ("No default permission for ", "Need admin permission for request code="),
}


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
async def test_family_by_identity(tmp_path: Path, family: Family) -> None:
    async with acl_cluster(tmp_path) as cluster:
        await _seeded(cluster)
        before = await family.probe(cluster)
        refused_as = {
            "anonymous": None,
            "wrong key": wrong_secret(family.allowed),
            "denied": family.denied,
        }
        for column, credentials in refused_as.items():
            response = await family.act(cluster, cluster.client_for(credentials))
            cell = f"{family.name} x {column}"
            assert response.code == ResponseCode.NO_PERMISSION, (cell, response.remark)
            assert response.remark is not None
            assert response.remark.startswith(TABLE[column]), (cell, response.remark)
            for secret in (family.allowed.secret_key, ADMIN.secret_key, APP.secret_key):
                assert secret not in response.remark
            assert await family.probe(cluster) == before, f"{cell} changed something"
        response = await family.act(cluster, cluster.client_for(family.allowed))
        assert response.code in family.ok_codes, (f"{family.name} x allowed", response.remark)
        assert await family.probe(cluster) != before, f"{family.name} x allowed changed nothing"
        server = cluster.broker.acl if "name server" not in family.name else cluster.namesrv.access
        assert server is not None


async def test_refusals_are_counted_per_reason(tmp_path: Path) -> None:
    async with acl_cluster(tmp_path) as cluster:
        await _seeded(cluster)
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
