"""A name server and a broker, both with a plain_acl.yml, on port 0; clients that sign.

The broker registers with the name server under the admin account (cluster
mode: its ``acl_access_key``/``acl_secret_key``). Identities are the four
columns of the request-family table: no credentials, a wrong secret, an
account that may, an account that may not.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

from broker_harness import Cluster, broker_config

from tidemq.acl.credentials import Credentials
from tidemq.namesrv.app import NameServer
from tidemq.server.broker import Broker
from tidemq.transport import RemotingClient

ADMIN = Credentials("adminKey01", "adminSecret01")
APP = Credentials("appKey0001", "appSecret0001")
OTHER = Credentials("otherKey01", "otherSecret01")
TOPIC = "AclTopic"
GROUP = "AclGroup"

POLICY = f"""\
accounts:
  - accessKey: {ADMIN.access_key}
    secretKey: {ADMIN.secret_key}
    admin: true
  - accessKey: {APP.access_key}
    secretKey: {APP.secret_key}
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [{TOPIC}=PUB|SUB]
    groupPerms: [{GROUP}=SUB, AclLite=SUB, AclPop=SUB]
  - accessKey: {OTHER.access_key}
    secretKey: {OTHER.secret_key}
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
"""


def wrong_secret(credentials: Credentials) -> Credentials:
    return dataclasses.replace(credentials, secret_key="not-the-secret")


@dataclasses.dataclass
class AclCluster(Cluster):
    acl_path: Path = Path()

    def client_for(self, credentials: Credentials | None) -> RemotingClient:
        """A remoting client signing as `credentials` (None: unsigned); closed with the cluster."""
        client = RemotingClient(sign=credentials.sign if credentials is not None else None)
        self._extra.append(client)
        return client

    _extra: list[RemotingClient] = dataclasses.field(default_factory=list)


@contextlib.asynccontextmanager
async def acl_cluster(
    tmp_path: Path, *, policy: str = POLICY, poll_interval_s: float = 5.0, grpc: bool = False
) -> AsyncIterator[AclCluster]:
    """`grpc`: the broker serves its gRPC endpoint too (grpc_port 0), under the same file."""
    acl_path = tmp_path / "plain_acl.yml"
    acl_path.write_text(policy, encoding="utf-8")
    namesrv = NameServer("127.0.0.1", 0, acl_file=acl_path, acl_poll_interval_s=poll_interval_s)
    await namesrv.start()
    config = broker_config(
        tmp_path / "broker",
        namesrv.address,
        acl_file=str(acl_path),
        acl_poll_interval_s=poll_interval_s,
        acl_access_key=ADMIN.access_key,
        acl_secret_key=ADMIN.secret_key,
        auto_create_topic=False,
        grpc_port=0 if grpc else None,
    )
    broker = Broker(config)
    cluster = AclCluster(
        namesrv, broker, RemotingClient(sign=ADMIN.sign), tmp_path / "broker", acl_path
    )
    try:
        await broker.start()
        yield cluster
    finally:
        for client in [cluster.client, *cluster._extra]:
            await client.close()
        await cluster.broker.stop()
        await namesrv.stop()
