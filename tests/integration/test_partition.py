"""A network partition between a SYNC_MASTER and its slave (tidemq.testing.tcp_proxy
on the HA link): while it lasts the master never answers SEND_OK, after it the
slave catches up, and losing the master's machine then loses no SEND_OK message.

The cluster is `tidemq cluster up`'s (LocalCluster): real processes; the slave
is pointed at the proxy by `ha_master_address`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tidemq.cli.local_cluster import ClusterPlan, LocalCluster, NodeRecord
from tidemq.common.tasks import TaskSet
from tidemq.protocol.codes import ResponseCode
from tidemq.testing import broker_calls
from tidemq.testing.tcp_proxy import TcpProxy
from tidemq.testing.waiting import HANG_GUARD_S, eventually
from tidemq.transport import RemotingClient
from tidemq.transport.errors import RemotingError

pytestmark = pytest.mark.slow

TOPIC = "Partitioned"
QUEUES = 4
SLAVE_TIMEOUT_MS = 1000
NOT_ACKED = {ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE}
PLAN = ClusterPlan(
    brokers=1,
    replicas=1,
    role="SYNC_MASTER",
    settings={
        "slave_timeout_ms": SLAVE_TIMEOUT_MS,
        "commitlog_file_size": 256 * 1024,
        "ha_send_heartbeat_interval_ms": 500,
        "ha_housekeeping_interval_ms": 3000,
        "slave_sync_interval_s": 0.5,
    },
)


@dataclass
class Pair:
    cluster: LocalCluster
    proxy: TcpProxy
    client: RemotingClient
    master: NodeRecord
    slave: NodeRecord
    sent: int = 0

    async def send_batch(self, count: int) -> dict[bytes, int]:
        """`count` concurrent sends to the master: each body's response code."""
        bodies = [f"m-{self.sent + i:06d}".encode() * 20 for i in range(count)]
        self.sent += count

        async def one(i: int, body: bytes) -> int:
            response = await broker_calls.send(
                self.client, self.master.address, body, topic=TOPIC,
                queue_id=i % QUEUES, queues=QUEUES,
            )  # fmt: skip
            return response.code

        codes = await asyncio.gather(*(one(i, b) for i, b in enumerate(bodies)))
        return dict(zip(bodies, codes, strict=True))

    async def on_slave(self) -> set[bytes]:
        found = await broker_calls.pull_all(self.client, self.slave.address, TOPIC, QUEUES)
        return {body for bodies in found.values() for body in bodies}

    async def slave_in_sync(self) -> bool | None:
        """The slave's in_sync as `tidemq cluster list --json` shows it."""
        result = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "tidemq.cli.main", "cluster", "list", "--json",
             "--namesrv", self.cluster.namesrv],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        rows = json.loads(result.stdout)
        in_sync: bool | None = next(row["in_sync"] for row in rows if row["id"] == 1)
        return in_sync


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[Pair]:
    cluster = LocalCluster(tmp_path / "cluster")
    client = RemotingClient()
    proxy: TcpProxy | None = None
    try:
        await asyncio.to_thread(cluster.up, PLAN)
        master = cluster.master()
        proxy = TcpProxy(master.ha_address)
        await proxy.start()
        slave = await asyncio.to_thread(
            functools.partial(cluster.add_slave, PLAN, ha_master_address=proxy.address)
        )
        await broker_calls.create_topic(client, master.address, TOPIC, QUEUES)
        yield Pair(cluster, proxy, client, master, slave)
    finally:
        await client.close()
        if proxy is not None:
            await proxy.stop()
        await asyncio.to_thread(cluster.down)


async def test_no_send_ok_during_a_partition_and_the_slave_catches_up_after(pair: Pair) -> None:
    before = await pair.send_batch(8)
    assert set(before.values()) == {ResponseCode.SUCCESS}
    stored = set(before)

    # drop: the link is reset and stays down
    pair.proxy.drop()
    await eventually(lambda: pair.proxy.connections == 0, "the HA link down")
    for _ in range(3):
        codes = await pair.send_batch(6)
        assert set(codes.values()) <= NOT_ACKED, codes
        stored |= set(codes)
    await eventually(_not_in_sync(pair), "cluster list: the slave NOT in sync")

    # blackhole: the link looks open, nothing crosses; the master's housekeeping
    # closes its side after 3 s of silence (FLUSH_SLAVE_TIMEOUT, then SLAVE_NOT_AVAILABLE)
    pair.proxy.pass_through()
    await asyncio.to_thread(pair.cluster.wait_replicating)
    pair.proxy.blackhole()
    seen: set[int] = set()
    while ResponseCode.SLAVE_NOT_AVAILABLE not in seen:
        codes = await pair.send_batch(6)
        assert set(codes.values()) <= NOT_ACKED, codes
        seen |= set(codes.values())
        stored |= set(codes)
    assert ResponseCode.FLUSH_SLAVE_TIMEOUT in seen  # the connection was up, silent

    # heal: the slave reconnects and catches up with everything the master stored
    pair.proxy.pass_through()
    await asyncio.to_thread(pair.cluster.wait_replicating)
    await eventually(lambda: pair.slave_in_sync(), "cluster list: slave in sync again")
    await eventually(
        lambda: _holds(pair, stored), "the slave holding every message stored during the partition"
    )
    after = await pair.send_batch(8)
    assert set(after.values()) == {ResponseCode.SUCCESS}


async def test_a_delayed_link_times_out_and_every_send_ok_survives_the_master(
    pair: Pair,
) -> None:
    pair.proxy.delay(SLAVE_TIMEOUT_MS / 1000 * 2)  # slower than the master waits
    codes = await pair.send_batch(6)
    assert set(codes.values()) == {ResponseCode.FLUSH_SLAVE_TIMEOUT}, codes
    pair.proxy.pass_through()
    await eventually(lambda: _holds(pair, set(codes)), "the delayed bytes arriving")

    # sends in flight when the master's machine is lost: every SEND_OK is on the slave
    acked: set[bytes] = set()

    async def keep_sending() -> None:
        while True:
            try:
                batch = await pair.send_batch(4)
            except RemotingError:  # the master is gone
                return
            acked.update(body for body, code in batch.items() if code == ResponseCode.SUCCESS)

    senders = TaskSet("senders")
    senders.spawn(keep_sending())
    try:
        await eventually(lambda: len(acked) >= 40, "sends acknowledged before the loss")
        await asyncio.to_thread(pair.cluster.kill, pair.master.name, signal.SIGKILL)
        assert await senders.wait(HANG_GUARD_S)
    finally:
        await senders.cancel_all()
    shutil.rmtree(pair.master.data_dir)  # the machine and its disk are gone
    with contextlib.suppress(AssertionError):  # the count below says what is missing
        await eventually(lambda: _holds(pair, acked), "the slave serving every SEND_OK message")
    missing = acked - await pair.on_slave()
    assert not missing, f"{len(missing)} of {len(acked)} SEND_OK messages not on the slave"


async def _holds(pair: Pair, bodies: set[bytes]) -> bool:
    return bodies <= await pair.on_slave()


def _not_in_sync(pair: Pair) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await pair.slave_in_sync() is False

    return check
