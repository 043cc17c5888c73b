"""The embedded controller in real name server processes: register, elect, re-elect, majority."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from controller_support import (
    ControllerNode,
    controller_call,
    controller_leader,
    controller_nodes,
    heartbeat,
)

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.testing.waiting import eventually
from tidemq.transport import RemotingClient

pytestmark = pytest.mark.slow


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    client = RemotingClient(name="controller-test")
    try:
        yield client
    finally:
        await client.close()


def register_fields(broker_id: int) -> dict[str, str]:
    return {
        "clusterName": "C",
        "brokerName": "broker-a",
        "brokerId": str(broker_id),
        "brokerAddress": f"127.0.0.1:{10000 + broker_id}",
        "haAddress": f"127.0.0.1:{20000 + broker_id}",
    }


async def setup_pair(client: RemotingClient, nodes: list[ControllerNode]) -> None:
    """Replicas 1 and 2 registered, 1 elected master, SyncStateSet {1, 2}."""
    for broker_id in (1, 2):
        await heartbeat(client, nodes, broker_id)
        response = await eventually(
            lambda b=broker_id: _ok(
                controller_call(
                    client, nodes, RequestCode.CONTROLLER_REGISTER_BROKER, register_fields(b)
                )
            ),
            "a controller leader to take the registration",
        )
        assert response.code == ResponseCode.SUCCESS
    # Fresh heartbeats for both (they count for 1.5 s, and waiting for a
    # leader to take a registration can take longer on a loaded machine).
    for broker_id in (1, 2):
        await heartbeat(client, nodes, broker_id)
    elected = await controller_call(
        client,
        nodes,
        RequestCode.CONTROLLER_ELECT_MASTER,
        {"clusterName": "C", "brokerName": "broker-a", "brokerId": "1"},
    )
    assert elected.code == ResponseCode.SUCCESS, elected.remark
    assert elected.ext_fields["masterBrokerId"] == "1"
    assert elected.ext_fields["masterHaAddress"] == "127.0.0.1:20001"
    for broker_id in (1, 2):
        await heartbeat(client, nodes, broker_id)
    grown = await controller_call(
        client,
        nodes,
        RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
        {"brokerName": "broker-a", "masterBrokerId": "1", "masterEpoch": "1"},
        json.dumps({"syncStateSet": [1, 2], "syncStateSetEpoch": 1}).encode(),
    )
    assert grown.code == ResponseCode.SUCCESS, grown.remark
    assert grown.ext_fields["newSyncStateSetEpoch"] == "2"


async def _ok(call):  # type: ignore[no-untyped-def]
    response = await call
    return response if response.code != ResponseCode.CONTROLLER_NOT_LEADER else None


async def replica_info(client: RemotingClient, node: ControllerNode) -> dict[str, str]:
    from tidemq.protocol.command import RemotingCommand

    response = await client.invoke(
        node.address,
        RemotingCommand.request(
            RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": "broker-a"}
        ),
        5.0,
    )
    return {**response.ext_fields, "code": str(response.code), "body": response.body.decode()}


async def keep_beating(client: RemotingClient, nodes: list[ControllerNode], broker_id: int) -> None:
    while True:
        await heartbeat(client, nodes, broker_id)
        await asyncio.sleep(0.3)


async def test_a_dead_master_is_replaced_by_its_in_sync_slave(
    tmp_path: Path, client: RemotingClient
) -> None:
    nodes = controller_nodes(tmp_path, 1)
    node = nodes[0]
    node.start()
    try:
        await setup_pair(client, nodes)
        beating = asyncio.ensure_future(keep_beating(client, nodes, 2))
        try:
            # replica 1 stops beating: the controller elects 2, the only other in-sync replica
            info = await eventually(
                lambda: _when(replica_info(client, node), lambda i: i.get("masterBrokerId") == "2"),
                "replica 2 elected",
                timeout=15,
            )
        finally:
            beating.cancel()
        assert info["masterEpoch"] == "2"
        assert json.loads(info["body"]) == {"syncStateSet": [2], "syncStateSetEpoch": 3}
        # the old master, back, is fenced: its epoch is stale
        stale = await controller_call(
            client,
            nodes,
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
            {"brokerName": "broker-a", "masterBrokerId": "1", "masterEpoch": "1"},
            json.dumps({"syncStateSet": [1], "syncStateSetEpoch": 2}).encode(),
        )
        assert stale.code == ResponseCode.CONTROLLER_INVALID_MASTER
        # the state is durable: a restarted controller still knows it
        node.kill()
        connection = client.live_connection(node.address)
        if connection is not None:
            connection.abort()
        node.start()
        await eventually(
            lambda: _when(
                replica_info(client, node),
                lambda i: (i.get("masterBrokerId"), i.get("masterEpoch")) == ("2", "2"),
            ),
            "the restarted controller to replay its journal",
        )
    finally:
        node.kill()


async def _when(call, accept):  # type: ignore[no-untyped-def]
    value = await call
    return value if accept(value) else None


async def test_three_controllers_elect_with_a_majority_and_not_without(
    tmp_path: Path, client: RemotingClient
) -> None:
    nodes = controller_nodes(tmp_path, 3)
    for node in nodes:
        node.start()
    try:
        await setup_pair(client, nodes)
        # one controller (whichever is leader) killed: the other two still elect
        leader = await controller_leader(client, nodes)
        leader.kill()
        beating = asyncio.ensure_future(keep_beating(client, nodes, 2))
        try:
            live = [n for n in nodes if n.process is not None]
            await eventually(
                lambda: _when(
                    replica_info(client, live[0]), lambda i: i.get("masterBrokerId") == "2"
                ),
                "replica 2 elected by the two remaining controllers",
                timeout=20,
            )
            # 1 catches up: SyncStateSet {1, 2}; then a second controller is killed
            await heartbeat(client, live, 1)
            beat_1 = asyncio.ensure_future(keep_beating(client, live, 1))
            grown = await controller_call(
                client,
                live,
                RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                {"brokerName": "broker-a", "masterBrokerId": "2", "masterEpoch": "2"},
                json.dumps({"syncStateSet": [1, 2], "syncStateSetEpoch": 3}).encode(),
            )
            assert grown.code == ResponseCode.SUCCESS, grown.remark
            await eventually(
                lambda: _when(replica_info(client, live[1]), lambda i: "[1, 2]" in i["body"]),
                "the follower to have the new SyncStateSet",
            )
            survivor, victim = live
            victim.kill()
            beating.cancel()  # master 2 dies too: 1 would be elected, but there is no majority
            await eventually(
                lambda: "replica 2 of broker-a" in survivor.log_text(),
                "the lone controller to see master 2 stop beating",
                timeout=20,
            )
            # for several scans after that, nothing is elected: no majority commits it
            loop = asyncio.get_running_loop()
            window_end = loop.time() + 3.0
            while loop.time() < window_end:
                after = await replica_info(client, survivor)
                assert (after.get("masterBrokerId"), after.get("masterEpoch")) == ("2", "2")
                await asyncio.sleep(0.3)
            beat_1.cancel()
        finally:
            beating.cancel()
    finally:
        for node in nodes:
            node.kill()
