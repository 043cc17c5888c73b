"""The embedded controller under the name server's policy file.

RocketMQ's controller checks no ACL, so whoever reaches it could declare a
replica alive or ask for an election. Here the controller's writes need an admin
account, as the name server's route writes do: controller-mode replicas sign
them with acl_access_key/acl_secret_key, and an unsigned BROKER_HEARTBEAT or
CONTROLLER_ELECT_MASTER is refused while the master stays master (and so is a
stranger's WIPE_WRITE_PERM_OF_BROKER, a route change).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from acl_support import ADMIN, APP, POLICY
from controller_support import controller_leader
from failover_support import broker_set, in_sync, replica

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.testing.waiting import eventually
from tidemq.transport import RemotingClient

pytestmark = pytest.mark.slow


async def test_replicas_sign_the_controller_calls_and_strangers_are_refused(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "plain_acl.yml"
    policy.write_text(POLICY, encoding="utf-8")
    signing = {"acl_access_key": ADMIN.access_key, "acl_secret_key": ADMIN.secret_key}
    async with broker_set(tmp_path, namesrv_args=["--acl", str(policy)], credentials=ADMIN) as (
        brokers,
        nodes,
    ):
        one = replica(brokers, nodes, 1, **signing)
        assert one.start()["role"] == "SYNC_MASTER"
        two = replica(brokers, nodes, 2, **signing)
        assert two.start()["role"] == "SLAVE"
        await brokers.create_topic(one)
        await brokers.topic_on(two)
        await eventually(lambda: in_sync(brokers, one), "replica 2 joining the SyncStateSet")

        leader = await controller_leader(brokers.client, nodes)
        elect = {"clusterName": "C", "brokerName": "broker-a", "brokerId": "2"}
        beat = {
            "clusterName": "C",
            "brokerName": "broker-a",
            "brokerAddr": two.address,
            "brokerId": "2",
            "heartbeatTimeoutMills": "600000",
            "epoch": "0",
            "maxOffset": "0",
        }
        for credentials in (None, APP):
            stranger = RemotingClient(sign=credentials.sign if credentials is not None else None)
            try:
                for code, fields in (
                    (RequestCode.CONTROLLER_ELECT_MASTER, elect),
                    (RequestCode.BROKER_HEARTBEAT, beat),
                    (RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}),
                ):
                    request = RemotingCommand.request(code, fields)
                    answer = await stranger.invoke(leader.address, request, 5.0)
                    assert answer.code == ResponseCode.NO_PERMISSION, (code, answer.remark)
                # reads stay open, as the name server's routes do
                request = RemotingCommand.request(
                    RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": "broker-a"}
                )
                info = await stranger.invoke(leader.address, request, 5.0)
                assert info.code == ResponseCode.SUCCESS, info.remark
                assert info.ext_fields["masterAddress"] == one.address
            finally:
                await stranger.close()
