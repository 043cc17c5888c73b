"""Automatic failover with real processes (RocketMQ 5's controller mode): a master
killed, its in-sync slave elected, nothing acknowledged lost, the old master back
as a slave and cut back to what the new master has."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest
from controller_support import controller_leader
from failover_support import broker_set, in_sync, replica, role_of, start_pair, sync_state_set
from replication_support import QUEUES, TOPIC, Brokers, Node

from tidemq.client.errors import ClientError
from tidemq.client.model import SendStatus
from tidemq.client.producer import AsyncProducer
from tidemq.common.message import Message
from tidemq.protocol.codes import ResponseCode
from tidemq.testing.tcp_proxy import TcpProxy
from tidemq.testing.waiting import HANG_GUARD_S, eventually

pytestmark = pytest.mark.slow


def body(i: int) -> bytes:
    return f"order {i:05d} ".encode() * 20


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
        two = await start_pair(brokers, controllers, one)
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
        await eventually(lambda: in_sync(brokers, two), "replica 1 back in sync")
        more = await send_acked(brokers, two, 2000, 5)
        await brokers.caught_up(two, one)
        on_one = await brokers.pull_all(one)
        assert sorted(b for q in on_one.values() for b in q) == sorted(acked + more)


async def _role_is(brokers: Brokers, node: Node, role: str) -> bool:
    return await role_of(brokers, node) == role


async def test_producers_fail_over_under_load_and_lose_no_acknowledged_message(
    tmp_path: Path,
) -> None:
    """Senders keep going while the master is killed: the producer finds the new
    master (its route refreshed on the failure), and every SEND_OK is on it."""
    async with broker_set(tmp_path) as (brokers, controllers):
        one = replica(brokers, controllers, 1)
        two = await start_pair(brokers, controllers, one)
        producer = AsyncProducer("PG", brokers.namesrv, send_timeout_s=3)
        await producer.start()
        acked: list[bytes] = []
        killed_at: list[float] = []
        recovered_at: list[float] = []
        errors: list[str] = []

        async def sender(worker: int) -> None:
            for i in range(20_000):  # bounded in count, and in time after the kill
                if killed_at and time.monotonic() - killed_at[0] > 30:
                    return
                text = f"w{worker}-{i}".encode()
                try:
                    result = await producer.send(Message(TOPIC, text))
                except ClientError as exc:
                    if not killed_at:
                        raise
                    errors.append(str(exc))
                    await asyncio.sleep(0.05)  # an application's pause before it tries again
                    continue
                if result.status is SendStatus.SEND_OK:
                    acked.append(text)
                    if killed_at and not recovered_at:
                        recovered_at.append(time.monotonic())
                    if recovered_at and len(acked) > 400:
                        return

        try:
            workers = [asyncio.create_task(sender(w)) for w in range(4)]
            await eventually(lambda: len(acked) >= 200, "200 acknowledged sends")
            await brokers.stop(one, signal.SIGKILL)
            killed_at.append(time.monotonic())
            async with asyncio.timeout(HANG_GUARD_S * 2):
                await asyncio.gather(*workers)
        finally:
            await producer.shutdown()
        assert recovered_at, f"no send succeeded after the kill: {errors[:3]} {errors[-3:]}"
        assert recovered_at[0] - killed_at[0] < 15
        stored = {b for q in (await brokers.pull_all(two)).values() for b in q}
        lost = [text for text in acked if text not in stored]
        assert lost == [], f"{len(lost)} of {len(acked)} acknowledged messages lost"


async def test_a_partition_between_master_and_slave_makes_no_second_master(
    tmp_path: Path,
) -> None:
    """The HA stream is blackholed: the master waits, then (the controller
    agreeing) shrinks its SyncStateSet to itself and goes on alone; the slave,
    alive but out of the set, is never elected. Healed, it catches up and
    rejoins the set; the master killed then, nothing it acknowledged is lost."""
    async with broker_set(tmp_path) as (brokers, controllers):
        one = replica(brokers, controllers, 1, ha_max_time_slave_not_catchup_ms=2000)
        proxy = TcpProxy("127.0.0.1", one.settings["ha_listen_port"])
        await proxy.start()
        one.settings["ha_advertised_address"] = proxy.address
        two = await start_pair(brokers, controllers, one)
        acked = await send_acked(brokers, one, 0, 20)
        proxy.blackhole()
        statuses: set[int] = set()
        loop = asyncio.get_running_loop()
        window_end = loop.time() + 8.0
        i = 100
        while loop.time() < window_end:  # bounded by the window: the partition lasts 8 s
            response = await brokers.send(one, body(i), queue_id=i % QUEUES)
            statuses.add(response.code)
            if response.code == ResponseCode.SUCCESS:
                acked.append(body(i))
            assert await role_of(brokers, two) == "SLAVE"  # never a second master
            i += 1
        assert ResponseCode.SUCCESS in statuses  # the master went on, alone in its set
        assert await sync_state_set(brokers, one) == "1"
        proxy.heal()
        proxy.cut()  # the stream lost bytes: both ends start a new connection
        await eventually(lambda: in_sync(brokers, one), "replica 2 back in sync")
        await brokers.stop(one, signal.SIGKILL)
        await eventually(lambda: first_send(brokers, two, 5000), "replica 2 taking over")
        acked.append(body(5000))
        stored = {b for q in (await brokers.pull_all(two)).values() for b in q}
        assert [b for b in acked if b not in stored] == []
        await proxy.stop()


async def test_a_master_that_was_replaced_takes_no_write(tmp_path: Path) -> None:
    """The master is frozen (SIGSTOP) long enough to be replaced; woken, it
    acknowledges nothing: its in-sync slave is now the master and no longer
    acknowledges its writes, and it fences itself as soon as it hears of the
    new master, then rejoins as a slave."""
    async with broker_set(tmp_path) as (brokers, controllers):
        one = replica(brokers, controllers, 1)
        two = await start_pair(brokers, controllers, one)
        acked = await send_acked(brokers, one, 0, 10)
        one.signal(signal.SIGSTOP)
        await eventually(lambda: first_send(brokers, two, 100), "replica 2 elected", timeout=30)
        acked.append(body(100))
        one.signal(signal.SIGCONT)
        for i in range(200, 205):  # the woken old master: not one write acknowledged
            try:
                response = await brokers.send(one, body(i), queue_id=0)
            except Exception:
                continue  # restarting as a slave: the connection went
            assert response.code != ResponseCode.SUCCESS, response.remark
        await eventually(lambda: _role_is(brokers, one, "SLAVE"), "replica 1 a slave")
        assert "fenced:" in one.log_text()
        stored = {b for q in (await brokers.pull_all(two)).values() for b in q}
        assert [b for b in acked if b not in stored] == []


async def test_three_controllers_fail_over_with_one_of_them_down(tmp_path: Path) -> None:
    """Three name servers with their controllers; the Raft leader among them is
    killed, then the master: the two controllers left still elect replica 2."""
    async with broker_set(tmp_path, controllers=3) as (brokers, controllers):
        one = replica(brokers, controllers, 1)
        two = await start_pair(brokers, controllers, one)
        acked = await send_acked(brokers, one, 0, 10)
        leader = await controller_leader(brokers.client, controllers)
        leader.kill()
        await brokers.stop(one, signal.SIGKILL)
        await eventually(lambda: first_send(brokers, two, 100), "replica 2 elected", timeout=30)
        acked.append(body(100))
        stored = {b for q in (await brokers.pull_all(two)).values() for b in q}
        assert [b for b in acked if b not in stored] == []
