"""`tidemq consumer connection|status`, `tidemq producer connection` and `tidemq group
delete` against a real `tidemq serve` with real clients online."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cli_support import Cli, serve_args

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.admin import AdminClient
from tidemq.client.consumer.lite_pull import AsyncLitePullConsumer
from tidemq.client.producer import AsyncProducer
from tidemq.common.message import Message
from tidemq.testing.processes import started
from tidemq.testing.waiting import eventually

pytestmark = pytest.mark.slow

TOPIC = "Orders"
GROUP = "OrdersReaders"


async def test_who_is_connected_and_deleting_a_group(tmp_path: Path) -> None:
    with started(serve_args(tmp_path / "data"), tmp_path, "serve") as (_, ready):
        namesrv = ready["namesrv"]
        cli = Cli(tmp_path, namesrv)
        cli.json("topic", "create", TOPIC, "--queues", "2")
        async with AdminClient(namesrv) as admin:
            await admin.create_topic(f"%RETRY%{GROUP}", queues=1)
        async with AsyncProducer("OrdersWriters", namesrv) as producer:
            for i in range(4):
                order = Message(TOPIC, f"order {i}".encode())
                order.tags = "TagA"
                await producer.send(order)
            consumer = AsyncLitePullConsumer(
                GROUP, namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
            )
            consumer.subscribe(TOPIC, "TagA || TagB")
            async with consumer:
                received = []

                async def all_four() -> bool:
                    received.extend(await consumer.poll(1.0))
                    return len(received) >= 4

                await eventually(all_four, "the four orders")

                consumers = cli.json("consumer", "connection", GROUP)
                (client,) = consumers["connections"]
                assert client["client_id"] and client["broker"] == "broker-a"
                assert consumers["subscriptions"] == [
                    {"topic": TOPIC, "expression": "TagA || TagB", "type": "TAG"}
                ]
                assert consumers["message_model"] == "CLUSTERING"
                producers = cli.json("producer", "connection", "OrdersWriters")
                (writer,) = producers["connections"]
                assert writer["address"].startswith("127.0.0.1:")
                text = cli.run("consumer", "connection", GROUP)
                assert text.returncode == 0 and "subscriptions" in text.stdout

                # asked of the client itself, which answers from this loop: run the CLI aside
                status = await asyncio.to_thread(cli.json, "consumer", "status", GROUP)
                assert list(status["clients"]) == [client["client_id"]]
                (info,) = status["clients"].values()
                assert info["properties"]["consumerGroup"] == GROUP
                held = {key.split("@")[0] for key in info["mqTable"]}
                assert held == {TOPIC}
                shown = await asyncio.to_thread(cli.run, "consumer", "status", GROUP)
                assert shown.returncode == 0 and "queues it holds" in shown.stdout

                online = cli.json("group", "delete", GROUP, "--keep-topics")
                assert online["consumers_online"] == 1
                assert online["brokers"] == ["broker-a"] and online["topics_deleted"] == []
            # the consumer is gone and has committed its offsets
            progress = cli.json("consumer", "progress", GROUP)
            assert progress["total_lag"] == 0

        nobody = cli.run("producer", "connection", "OrdersWriters")
        assert nobody.returncode == 1
        assert "no producer of group OrdersWriters is online" in nobody.stderr
        assert cli.run("consumer", "connection", GROUP).returncode == 1
        gone = cli.run("consumer", "status", GROUP)
        assert gone.returncode == 1 and f"no consumer of group {GROUP} is online" in gone.stderr

        deleted = cli.json("group", "delete", GROUP, "--clean-offset")
        assert deleted["consumers_online"] == 0 and deleted["offsets_deleted"] is True
        assert deleted["topics_deleted"] == [f"%RETRY%{GROUP}"]  # no dead letter was ever made
        assert f"%RETRY%{GROUP}" not in cli.json("topic", "list")
        assert GROUP not in {g["group"] for g in cli.json("group", "list")}
        gone = cli.run("consumer", "progress", GROUP)
        assert gone.returncode == 1 and "no consume progress" in gone.stderr
