"""`tidemq cluster wipe-write-perm` / `add-write-perm` on a real two-broker cluster:
producers leave the wiped broker (its next registrations keep it wiped), its
consumers still read it, and it takes sends again once given back."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_tidemq

from tidemq.client.admin import AdminClient
from tidemq.client.instance import ClientConfig
from tidemq.client.producer import AsyncProducer
from tidemq.common.message import Message
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.testing import broker_calls
from tidemq.testing.processes import free_port
from tidemq.testing.waiting import eventually
from tidemq.transport import RemotingClient

pytestmark = pytest.mark.slow

DEADLINE_S = 180.0
TOPIC = "Payments"


def tidemq(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tidemq(home, *args, timeout=DEADLINE_S)


def ok(home: Path, *args: str) -> Any:
    result = tidemq(home, *args, "--json")
    assert result.returncode == 0, f"{args}: {result.stdout}{result.stderr}"
    return json.loads(result.stdout)


SENT: Counter[str] = Counter()
"""Every send of the test, by the broker that took it."""


async def brokers_chosen(producer: AsyncProducer, sends: int) -> Counter[str]:
    chosen: Counter[str] = Counter()
    for i in range(sends):
        result = await producer.send(Message(TOPIC, f"payment {i}".encode()))
        chosen[result.broker_name] += 1
    SENT.update(chosen)
    return chosen


@contextmanager
def two_brokers(home: Path, queues: int) -> Iterator[str]:
    """`tidemq cluster up` with broker-a and broker-b (masters alone) and TOPIC on
    both; the name server's address; `cluster down` at the end."""
    data = home / "cluster"
    up = ok(home, "cluster", "up", "--data-dir", str(data), "--brokers", "2",
            "--replicas", "1")  # fmt: skip
    try:
        ok(home, "topic", "create", TOPIC, "--queues", str(queues), "--namesrv", up["namesrv"])
        yield up["namesrv"]
    finally:
        tidemq(home, "cluster", "down", "--data-dir", str(data))


async def test_a_wiped_broker_takes_no_sends_until_given_back(tmp_path: Path) -> None:
    SENT.clear()
    with two_brokers(tmp_path, queues=2) as namesrv:
        ns = ["--namesrv", namesrv]
        config = ClientConfig(namesrv=namesrv, poll_namesrv_interval_s=0.5)
        async with AsyncProducer("PaymentsPG", client_config=config) as producer:
            assert set(await brokers_chosen(producer, 8)) == {"broker-a", "broker-b"}

            (row,) = ok(tmp_path, "cluster", "wipe-write-perm", "broker-a", *ns)
            assert (row["ok"], row["broker"], row["namesrv"]) == (True, "broker-a", namesrv)
            assert row["topics"] >= 1

            async with AdminClient(namesrv) as admin:

                async def perms(topic: str = TOPIC) -> dict[str, int]:
                    route = await admin.topic_route(topic)
                    return {q.broker_name: q.perm for q in route.queue_datas}

                assert await perms() == {"broker-a": 4, "broker-b": 6}
                # a new topic makes broker-a register again at once: the wipe stays
                ok(tmp_path, "topic", "create", "Refunds", "--queues", "1",
                   "--broker", "broker-a", *ns)  # fmt: skip
                assert await perms("Refunds") == {"broker-a": 4}
                assert await perms() == {"broker-a": 4, "broker-b": 6}

                async def only_b() -> bool:
                    return set(await brokers_chosen(producer, 4)) == {"broker-b"}

                await eventually(only_b, "the producer leaving broker-a")
                assert set(await brokers_chosen(producer, 20)) == {"broker-b"}
                status = ok(tmp_path, "topic", "status", TOPIC, *ns)
                on_a = sum(q["max_offset"] for q in status if q["broker"] == "broker-a")
                assert on_a == SENT["broker-a"] > 0  # nothing written there since the wipe
                read = tidemq(tmp_path, "consume", TOPIC, "--group", "PaymentsAudit",
                              "--from-beginning", "--max", str(SENT.total()),
                              "--timeout", "30", "--json", *ns)  # fmt: skip
                assert read.returncode == 0, read.stderr
                lines = [json.loads(line) for line in read.stdout.splitlines()]
                assert len(lines) == SENT.total()  # broker-a's messages are still read

                (row,) = ok(tmp_path, "cluster", "add-write-perm", "broker-a", *ns)
                assert row["ok"] and row["topics"] >= 1
                assert await perms() == {"broker-a": 6, "broker-b": 6}

                async def both() -> bool:
                    return set(await brokers_chosen(producer, 8)) == {"broker-a", "broker-b"}

                await eventually(both, "the producer choosing broker-a again")

        typo = tidemq(tmp_path, "cluster", "wipe-write-perm", "broker-q", *ns)
        assert typo.returncode == 1
        assert "no broker named 'broker-q' is registered (known: broker-a, broker-b)" in typo.stderr
        text = tidemq(tmp_path, "cluster", "wipe-write-perm", "broker-b", *ns)
        assert text.returncode == 0, text.stderr
        assert f"broker-b at name server {namesrv}: no longer offered for writes" in text.stdout
        # one of two name servers down: the other is changed, the command fails naming it
        dead = f"127.0.0.1:{free_port()}"
        both = tidemq(tmp_path, "cluster", "add-write-perm", "broker-b",
                      "--namesrv", f"{namesrv};{dead}")  # fmt: skip
        assert both.returncode == 1
        assert f"broker-b at name server {namesrv}: writable again" in both.stdout
        assert f"broker-b at name server {dead}: FAILED" in both.stdout
        assert f"not changed at name server(s) {dead}" in both.stderr


async def test_broker_permission_read_only_and_back(tmp_path: Path) -> None:
    """`tidemq cluster broker-config broker-a --set brokerPermission=4`: broker-a
    registers read only at once, producers leave it, it still serves reads;
    brokerPermission=0 refuses its pulls in Java's words; 6 puts it back."""
    with two_brokers(tmp_path, queues=1) as namesrv:
        ns = ["--namesrv", namesrv]
        (shown,) = ok(tmp_path, "cluster", "broker-config", "broker-a", *ns)
        assert shown["config"]["brokerPermission"] == "6" and shown["id"] == 0
        (changed,) = ok(tmp_path, "cluster", "broker-config", "broker-a",
                        "--set", "brokerPermission=4", *ns)  # fmt: skip
        assert changed["changed"] == {"brokerPermission": "4"} and changed["error"] is None
        address = changed["address"]
        async with AdminClient(namesrv) as admin:

            async def perms() -> dict[str, int]:
                route = await admin.topic_route(TOPIC)
                return {q.broker_name: q.perm for q in route.queue_datas}

            await eventually(
                lambda: _equal(perms(), {"broker-a": 4, "broker-b": 6}), "broker-a read only"
            )
            config = ClientConfig(namesrv=namesrv, poll_namesrv_interval_s=0.5)
            async with AsyncProducer("PermPG", client_config=config) as producer:
                assert set(await brokers_chosen(producer, 12)) == {"broker-b"}
            figures = await admin.broker_runtime_stats(address)
            assert figures  # still answering

            ok(tmp_path, "cluster", "broker-config", "broker-a", "--set", "brokerPermission=0",
               *ns)  # fmt: skip
            client = RemotingClient()
            try:
                refused = await broker_calls.call(
                    client, address, RequestCode.PULL_MESSAGE, _pull_fields()
                )
            finally:
                await client.close()
            assert refused.code == ResponseCode.NO_PERMISSION
            assert refused.remark == "the broker[127.0.0.1] pulling message is forbidden"

            ok(tmp_path, "cluster", "broker-config", "broker-a", "--set", "brokerPermission=6",
               *ns)  # fmt: skip
            await eventually(
                lambda: _equal(perms(), {"broker-a": 6, "broker-b": 6}), "broker-a writable"
            )
        other = tidemq(tmp_path, "cluster", "broker-config", "broker-a", "--set",
                       "flushDiskType=SYNC_FLUSH", *ns)  # fmt: skip
        assert other.returncode == 1
        assert "cannot change flushDiskType while the broker runs" in other.stderr


async def _equal(value: Any, expected: object) -> bool:
    return await value == expected


def _pull_fields() -> dict[str, str]:
    return {
        "consumerGroup": "PermCG",
        "topic": TOPIC,
        "queueId": "0",
        "queueOffset": "0",
        "maxMsgNums": "1",
        "sysFlag": "0",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "0",
    }
