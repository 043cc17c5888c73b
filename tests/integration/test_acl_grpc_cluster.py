"""Cluster mode: a broker whose JSON config has both acl_file and grpc_port (refused
before step 3) serves gRPC under the file: one gate for both protocols, so refusals
are counted together and a change of the file reaches both."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import grpc
from acl_support import ADMIN, APP, POLICY, TOPIC, acl_cluster, wrong_secret
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc

from tidemq.acl.credentials import Credentials
from tidemq.acl.grpc_auth import client_headers
from tidemq.client.admin import AdminClient
from tidemq.testing.client_support import grpc_send_request
from tidemq.testing.waiting import eventually

Code = pb.Code


async def grpc_send(address: str, topic: str, credentials: Credentials | None) -> Any:
    metadata = [("x-mq-client-id", "cluster-acl@1")]
    if credentials is not None:
        now = datetime.now(UTC)
        metadata += client_headers(credentials.access_key, credentials.secret_key, now).items()
    async with grpc.aio.insecure_channel(address) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        request = grpc_send_request(topic, b"over grpc")
        response: spb.SendMessageResponse = await stub.SendMessage(
            request, metadata=metadata, timeout=10
        )
        return response.status


async def test_a_cluster_broker_serves_grpc_under_its_acl_file(tmp_path: Any) -> None:
    async with acl_cluster(tmp_path, grpc=True, poll_interval_s=0.2) as cluster:
        broker = cluster.broker
        assert broker.grpc_address is not None and broker.acl is not None
        async with AdminClient(cluster.namesrv.address, credentials=ADMIN) as admin:
            await admin.create_topic(TOPIC, queues=1)
            await admin.create_topic("Elsewhere", queues=1)
        address = broker.grpc_address
        assert (await grpc_send(address, TOPIC, APP)).code == Code.OK
        anonymous = await grpc_send(address, TOPIC, None)
        assert anonymous.code == Code.UNAUTHORIZED
        wrong = await grpc_send(address, TOPIC, wrong_secret(APP))
        assert wrong.message == f"Check signature failed for accessKey={APP.access_key}"
        denied = await grpc_send(address, "Elsewhere", APP)
        assert (denied.code, denied.message) == (
            Code.FORBIDDEN,
            "No default permission for topic:Elsewhere",
        )
        counts = broker.acl.refusals()  # the remoting port's counters
        assert (counts["no_access_key"], counts["bad_signature"], counts["no_permission"]) == (
            1,
            1,
            1,
        )
        # the file changes: the gRPC endpoint follows without a restart
        cluster.acl_path.write_text(
            POLICY.replace(
                f"topicPerms: [{TOPIC}=PUB|SUB]", f"topicPerms: [{TOPIC}=PUB|SUB, Elsewhere=PUB]"
            ),
            encoding="utf-8",
        )

        async def elsewhere_allowed() -> bool:
            return bool((await grpc_send(address, "Elsewhere", APP)).code == Code.OK)

        await eventually(elsewhere_allowed, "the new policy on the gRPC endpoint")
