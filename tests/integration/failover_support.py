"""A controller-mode broker set on loopback: a name server with its controller, replicas 1 and 2."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from controller_support import ControllerNode, controller_nodes
from replication_support import Brokers, Node

from tidemq.acl.credentials import Credentials
from tidemq.testing.waiting import eventually
from tidemq.transport import RemotingClient, TlsConfig

FAST = {
    "controller_heartbeat_timeout_ms": 1500,
    "broker_heartbeat_interval_ms": 300,
    "sync_state_set_check_interval_ms": 300,
    "ha_max_time_slave_not_catchup_ms": 3000,
    "slave_timeout_ms": 3000,
}
"""Failover in a few seconds: RocketMQ's defaults (10 s, 1 s, 5 s, 15 s) scaled down."""


def replica(brokers: Brokers, nodes: list[ControllerNode], replica_id: int, **extra: Any) -> Node:
    return brokers.node(
        f"replica{replica_id}",
        "ASYNC_MASTER",
        replica_id,
        enable_controller_mode=True,
        controller_addr=";".join(n.address for n in nodes),
        namesrv_addrs=[n.address for n in nodes],
        **{**FAST, **extra},
    )


@asynccontextmanager
async def broker_set(
    home: Path,
    controllers: int = 1,
    namesrv_args: list[str] | None = None,
    tls: TlsConfig | None = None,
    credentials: Credentials | None = None,
) -> AsyncIterator[tuple[Brokers, list[ControllerNode]]]:
    """`namesrv_args`: more options of each name server; `tls`, `credentials`: how
    the test's client dials and signs."""
    nodes = controller_nodes(home, controllers, extra_args=namesrv_args)
    sign = credentials.sign if credentials is not None else None
    client = RemotingClient(name="failover-test", tls=tls, sign=sign)
    brokers = Brokers(home, nodes[0].address, client)
    try:
        for node in nodes:
            node.start()
        yield brokers, nodes
    finally:
        await client.close()
        brokers.stop_all()
        for node in nodes:
            node.kill()


async def sync_state_set(brokers: Brokers, master: Node) -> str | None:
    info = await brokers.runtime_info(master)
    return info.get("tidemqSyncStateSet")


async def in_sync(brokers: Brokers, master: Node, members: str = "1,2") -> bool:
    """Whether `master`'s SyncStateSet is `members` (False while it cannot answer)."""
    try:
        return await sync_state_set(brokers, master) == members
    except Exception:
        return False


async def start_pair(brokers: Brokers, nodes: list[ControllerNode], one: Node) -> Node:
    """Start replica `one` (configured), then replica 2; create the topic on
    `one`, the master; wait until replica 2 has the topic and is in sync."""
    assert one.start()["role"] == "SYNC_MASTER"  # the first to ask is the first master
    two = replica(brokers, nodes, 2)
    assert two.start()["role"] == "SLAVE"
    await brokers.create_topic(one)
    await brokers.topic_on(two)
    await eventually(lambda: in_sync(brokers, one), "replica 2 joining the SyncStateSet")
    return two


async def role_of(brokers: Brokers, node: Node) -> str | None:
    """The node's role as it reports it (None while it cannot answer)."""
    try:
        return (await brokers.runtime_info(node)).get("tidemqBrokerRole")
    except Exception:
        return None


async def bodies_on(brokers: Brokers, node: Node) -> Counter[bytes]:
    """How many times each body is stored on `node`, over every queue of the topic."""
    return Counter(b for queue in (await brokers.pull_all(node)).values() for b in queue)
