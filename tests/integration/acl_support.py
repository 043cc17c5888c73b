"""A name server and a broker, both with a plain_acl.yml, on port 0; clients that sign.

The broker registers with the name server under the admin account (cluster
mode: its ``acl_access_key``/``acl_secret_key``). Identities are the four
columns of the request-family table: no credentials, a wrong secret, an
account that may, an account that may not; as plain_acl.yml accounts and as
RocketMQ 5 users (``IDENTITIES``). ``doc_table`` reads the table those tests
check docs/access-control.md's against.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import AsyncIterator
from pathlib import Path

from broker_harness import Cluster, broker_config

from tidemq.acl.auth_model import PolicyEntry, User, UserType
from tidemq.acl.credentials import Credentials
from tidemq.namesrv.app import NameServer
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.headers import CreateTopicRequestHeader, encode_header
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


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "access-control.md"
CASE_COLUMNS = ("anonymous", "wrong key", "allowed", "denied")
_LEADING_CODE = re.compile(r"\s*`?(\d+)")


def doc_table(first_column: str) -> dict[str, dict[str, int]]:
    """The docs' request-family table whose header starts with `first_column`: each row's
    first cell -> {case: the response code its cell starts with}, for the tests that
    observe every cell to compare with."""
    rows: dict[str, dict[str, int]] = {}
    columns: list[str] | None = None
    for line in GUIDE.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if columns is None:
            if line.startswith("|") and cells[0] == first_column:
                columns = cells
            continue
        if not line.startswith("|"):
            break
        if set(cells[0]) <= {"-", " "}:
            continue
        by_column = dict(zip(columns, cells, strict=True))
        codes = {}
        for case in CASE_COLUMNS:
            match = _LEADING_CODE.match(by_column[case])
            assert match, f"{GUIDE.name}: {cells[0]} x {case}: {by_column[case]!r} has no code"
            codes[case] = int(match.group(1))
        rows[cells[0]] = codes
    assert rows, f"{GUIDE.name} has no table headed {first_column!r}"
    return rows


# The RocketMQ 5 users standing in for the file's accounts (their ACLs: `_users`).
ROOT = Credentials("root", "rootSecret01")
ALICE = Credentials("alice", "aliceSecret01")
BOB = Credentials("bob", "bobSecret001")
IDENTITIES = {
    "file": {"admin": ADMIN, "app": APP, "other": OTHER},
    "users": {"admin": ROOT, "app": ALICE, "other": BOB},
}


async def users(cluster: AclCluster) -> None:
    """root (Super), alice (what the file's app account may), bob (nothing)."""
    store = cluster.broker.auth_store
    assert store is not None
    store.create_user(User(ROOT.access_key, ROOT.secret_key, UserType.SUPER))
    store.create_user(User(ALICE.access_key, ALICE.secret_key))
    store.create_user(User(BOB.access_key, BOB.secret_key))
    store.create_acl(
        ALICE.access_key,
        [
            PolicyEntry.build(f"Topic:{TOPIC}", ["Pub", "Sub"], "Allow"),
            PolicyEntry.build(f"Group:{GROUP}", ["Sub"], "Allow"),
        ],
    )


async def seeded(cluster: AclCluster) -> None:
    """AclTopic with one message, AclGroup's offset of queue 0 at 1, one consumer of it,
    the broker registered, and the RocketMQ 5 users."""
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
    joined = await cluster.heartbeat("seeded-client", GROUP, topics={TOPIC: "*"})
    assert joined.code == ResponseCode.SUCCESS, joined.remark
    assert await cluster.broker.register_all() == 1
    await users(cluster)


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
