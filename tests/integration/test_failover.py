"""Automatic failover with real processes (RocketMQ 5's controller mode): a master
killed, its in-sync slave elected, nothing acknowledged lost, the old master back
as a slave and cut back to what the new master has."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from failover_support import broker_set, replica, sync_state_set
from replication_support import QUEUES, Brokers, Node

from tidemq.protocol.codes import ResponseCode
from tidemq.testing.tcp_proxy import TcpProxy
from tidemq.testing.waiting import eventually

pytestmark = pytest.mark.slow


def body(i: int) -> bytes:
    return f"order {i:05d} ".encode() * 20


async def role_of(brokers: Brokers, node: Node) -> str | None:
    try:
        return (await brokers.runtime_info(node)).get("tidemqBrokerRole")
    except Exception:
        return None


async def send_acked(brokers: Brokers, master: Node, first: int, count: int) -> list[bytes]:
    acked = []
    for i in range(first, first + count):
        response = await brokers.send(master, body(i), queue_id=i % QUEUES)
        assert response.code == ResponseCode.SUCCESS, response.remark
        acked.append(body(i))
    return acked


async def first_send(brokers: Brokers, node: Node, i: int) -> bool:
    try:
        response = await brokers.send(node, body(i), queue_id=i % QUEUES)
    except Exception:
        return False
    return response.code == ResponseCode.SUCCESS


async def test_the_in_sync_slave_takes_over_and_the_old_master_rejoins_cut_back(
    tmp_path: Path,
) -> None:
    async with broker_set(tmp_path) as (brokers, controllers):
        one = replica(brokers, controllers, 1, slave_timeout_ms=1000)
        one.settings["ha_max_time_slave_not_catchup_ms"] = 60_000  # no shrink in this test
        proxy = TcpProxy("127.0.0.1", one.settings["ha_listen_port"])
        await proxy.start()
        one.settings["ha_advertised_address"] = proxy.address  # replica 2 copies through it
        assert one.start()["role"] == "SYNC_MASTER"  # the first to ask is the first master
        two = replica(brokers, controllers, 2)
        assert two.start()["role"] == "SLAVE"
        await brokers.create_topic(one)
        await brokers.topic_on(two)
        await eventually(
            lambda: _equal(sync_state_set(brokers, one), "1,2"),
            "replica 2 joining the SyncStateSet",
        )
        acked = await send_acked(brokers, one, 0, 40)
        # the HA stream is cut off: the master's next write is stored but never acknowledged
        proxy.blackhole()
        unacked = await brokers.send(one, b"never acknowledged", queue_id=0)
        assert unacked.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, unacked.remark
        await brokers.stop(one, signal.SIGKILL)
        killed_at = time.monotonic()
        await proxy.stop()
        await eventually(
            lambda: first_send(brokers, two, 1000), "a send to replica 2 succeeding", timeout=30
        )
        failover_s = time.monotonic() - killed_at
        assert failover_s < 15, failover_s
        assert await role_of(brokers, two) == "SYNC_MASTER"
        acked.append(body(1000))
        on_two = await brokers.pull_all(two)
        stored = [b for queue in on_two.values() for b in queue]
        assert sorted(stored) == sorted(acked)  # every acknowledged message, and only those
        # the old master comes back: a slave of replica 2, its unacknowledged write dropped
        assert one.start()["role"] == "SLAVE"
        await eventually(
            lambda: "dropped what no in-sync replica had" in one.log_text(),
            "the old master cutting its commitlog back",
        )
        assert "1 messages (Orders/0" in one.log_text()
        await eventually(
            lambda: _equal(sync_state_set(brokers, two), "1,2"), "replica 1 back in sync"
        )
        more = await send_acked(brokers, two, 2000, 5)
        await brokers.caught_up(two, one)
        on_one = await brokers.pull_all(one)
        assert sorted(b for q in on_one.values() for b in q) == sorted(acked + more)


async def _equal(call, expected):  # type: ignore[no-untyped-def]
    try:
        return (await call) == expected
    except Exception:
        return False
