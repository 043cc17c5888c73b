"""Replication where every port enforces TLS and asks for client certificates.

A slave copies its master's topics over the broker's client TLS (as RocketMQ's
BrokerOuterAPI dials the master with tls.client.*); in controller mode a replica
reaches the controllers in its name servers, and the master's epochs, the same
way. Before, those two connections were plain, and a master or name server that
enforced TLS closed them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from failover_support import broker_set, in_sync, replica
from replication_support import Brokers, running_brokers
from tls_support import Certs

from tidemq.protocol.codes import ResponseCode
from tidemq.testing.waiting import eventually

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return Certs(tmp_path_factory.mktemp("certs"))


def enforcing_broker(certs: Certs) -> dict[str, Any]:
    """A broker whose port enforces TLS with client certificates, and which dials
    its name servers (and so its master) with the client certificate."""
    return {
        "tls_mode": "enforcing",
        "tls_cert": str(certs.server.cert),
        "tls_key": str(certs.server.key),
        "tls_ca": str(certs.ca.cert),
        "tls_verify_client": "require",
        "namesrv_tls": True,
        "namesrv_tls_ca": str(certs.ca.cert),
        "namesrv_tls_cert": str(certs.client.cert),
        "namesrv_tls_key": str(certs.client.key),
    }


async def replicated(brokers: Brokers, master: Any, slave: Any) -> None:
    """The slave knows the master's new topic and holds what the master acknowledged."""
    topic = "TlsCopies"
    await brokers.create_topic(master, topic)
    await brokers.topic_on(slave, topic)
    sent = await brokers.send(master, b"over tls", queue_id=1, topic=topic)
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    await brokers.caught_up(master, slave)
    assert (await brokers.pull_all(slave, topic))[1] == [b"over tls"]


async def test_a_slave_copies_its_master_over_tls(tmp_path: Path, certs: Certs) -> None:
    namesrv_args = certs.server_args("enforcing", "require")
    async with running_brokers(tmp_path, namesrv_args, certs.client_tls(certs.client)) as brokers:
        settings = enforcing_broker(certs)
        master = brokers.node("master", "SYNC_MASTER", 0, **settings)
        slave = brokers.node("slave", "SLAVE", 1, **settings)
        master.start()
        slave.start()
        await replicated(brokers, master, slave)
        assert _copy_failures(slave.log_text()) == []


async def test_a_slave_refused_by_its_master_says_so(tmp_path: Path, certs: Certs) -> None:
    """master_tls=False overrides namesrv_tls: the enforcing master closes the
    plain connection and the slave's log names the master it could not copy."""
    namesrv_args = certs.server_args("enforcing", "require")
    async with running_brokers(tmp_path, namesrv_args, certs.client_tls(certs.client)) as brokers:
        settings = enforcing_broker(certs)
        master = brokers.node("master", "ASYNC_MASTER", 0, **settings)
        slave = brokers.node("slave", "SLAVE", 1, **settings, master_tls=False)
        master.start()
        slave.start()
        await brokers.create_topic(master, "NotCopied")

        def complaints() -> list[str] | None:
            return _copy_failures(slave.log_text()) or None

        (first, *_) = await eventually(complaints, "the slave logging that it cannot copy")
        assert master.address in first
        assert "TLS enforcing" in first  # the reason, not just "connection lost"
        assert int((await brokers.runtime_info(slave))["commitLogMaxOffset"]) >= 0


def _copy_failures(log: str) -> list[str]:
    """The slave's warnings that copying from its master failed."""
    return [line for line in log.splitlines() if "from master" in line and "failed" in line]


async def test_controller_mode_replicas_over_tls(tmp_path: Path, certs: Certs) -> None:
    namesrv_args = certs.server_args("enforcing", "require")
    tls = certs.client_tls(certs.client)
    async with broker_set(tmp_path, namesrv_args=namesrv_args, tls=tls) as (brokers, nodes):
        one = replica(brokers, nodes, 1, **enforcing_broker(certs))
        assert one.start()["role"] == "SYNC_MASTER"
        two = replica(brokers, nodes, 2, **enforcing_broker(certs))
        assert two.start()["role"] == "SLAVE"
        await eventually(lambda: in_sync(brokers, one), "replica 2 joining the SyncStateSet")
        await replicated(brokers, one, two)
