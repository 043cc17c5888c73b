"""The official RocketMQ 5 Node client (`rocketmq-client-nodejs` 1.0.8, gRPC)
against a real `tidemq serve`: producer (normal with tag/keys/properties,
FIFO, delay, recall, transaction commit / rollback / orphan check-back) and
SimpleConsumer (receive, ack, change invisible duration, redelivery with the
attempt raised); what the client's own integration tests check on the wire
(transaction ids, __SHARDINGKEY and __transactionId__ in received properties,
the unknown-topic text)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tidemq.client.admin import AdminClient
from tidemq.client.errors import ClientError
from tidemq.testing.client_support import create_topic, read_topic
from tidemq.testing.processes import serve
from tidemq.testing.waiting import unique_name, wait_until

REPO = Path(__file__).resolve().parents[2]
NODE_MODULES = REPO / "interop" / "node_modules"
SCRIPT = Path(__file__).with_name("js") / "official_node.js"
PUSH_SCRIPT = Path(__file__).with_name("js") / "official_node_push.js"
WIRE_SCRIPT = Path(__file__).with_name("js") / "official_node_wire.js"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("node") is None, reason="`node` is not installed"),
]


def test_official_node_client(tmp_path: Path) -> None:
    if not (NODE_MODULES / "rocketmq-client-nodejs").exists():
        pytest.fail("interop/node_modules is missing: run `make test`", pytrace=False)
    settings = {"transaction_timeout_ms": 1000, "transaction_check_interval_ms": 1000}
    with serve(tmp_path / "data", settings=settings) as server:
        topic, group = unique_name("NodeT"), unique_name("NodeG")
        asyncio.run(create_topic(server.namesrv, topic, queues=2))
        env = dict(os.environ, NODE_PATH=str(NODE_MODULES), HOME=str(tmp_path))
        node = shutil.which("node") or "node"
        args = ["--endpoints", server.grpc, "--topic", topic, "--group", group]
        done = subprocess.run(
            [node, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120
        )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-3000:]}"
    received = [e for e in events if e["event"] == "received"]
    by_body: dict[str, list[dict[str, object]]] = {}
    for event in received:
        by_body.setdefault(str(event["body"]), []).append(event)
    assert set(by_body) == {
        "normal",
        "fifo-0",
        "fifo-1",
        "fifo-2",
        "delayed",
        "committed",
        "orphan",
    }
    first, again = by_body["normal"]
    assert (first["tag"], first["keys"], first["properties"]) == ("TagA", ["k0"], {"p": "v"})
    assert (first["attempt"], again["attempt"]) == (1, 2)
    assert not any(e["corrupted"] for e in received)
    fifo = [str(e["body"]) for e in received if e["group"] == "order-1"]
    assert fifo == ["fifo-0", "fifo-1", "fifo-2"]
    [finished] = [e for e in events if e["event"] == "done"]
    assert finished["checked"] == ["orphan"]
    [delayed] = by_body["delayed"]
    assert int(str(delayed["t"])) >= int(str(finished["delayedAt"])) - 100
    assert delayed["delivery"] is not None


def test_official_node_client_wire_details(tmp_path: Path) -> None:
    """The checks of apache/rocketmq-clients nodejs/test/producer/Producer.test.ts
    that failed against tidemq before: each receipt's transactionId is its
    messageId (RocketMQ answers the UNIQ_KEY for every message), and the
    transaction commits by it; a FIFO message keeps __SHARDINGKEY and a
    committed one __transactionId__ (= its transactionId) among its
    properties; an unknown topic's NotFoundException has RocketMQ's text."""
    if not (NODE_MODULES / "rocketmq-client-nodejs").exists():
        pytest.fail("interop/node_modules is missing: run `make test`", pytrace=False)
    with serve(tmp_path / "data") as server:
        topic, group = unique_name("NodeWireT"), unique_name("NodeWireG")
        missing = unique_name("NoSuchNodeT")
        asyncio.run(create_topic(server.namesrv, topic, queues=2))
        env = dict(os.environ, NODE_PATH=str(NODE_MODULES), HOME=str(tmp_path))
        node = shutil.which("node") or "node"
        args = ["--endpoints", server.grpc, "--topic", topic, "--group", group]
        done = subprocess.run(
            [node, str(WIRE_SCRIPT), *args, "--missing", missing],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-3000:]}"
        stored = asyncio.run(read_topic(server.namesrv, topic))
    [unknown] = [e for e in events if e["event"] == "unknown-topic"]
    assert (unknown["name"], unknown["code"]) == ("NotFoundException", 40402)
    assert re.search(
        rf"CODE: 17 {{2}}DESC: No topic route info in name server for the topic: {missing}",
        str(unknown["message"]),
    ), unknown
    sent = {str(e["label"]): e for e in events if e["event"] == "sent"}
    assert set(sent) == {"normal", "fifo", "delayed", "committed"}
    for receipt in sent.values():
        assert receipt["messageId"] and receipt["transactionId"] == receipt["messageId"], receipt
    got = {str(e["body"]): e for e in events if e["event"] == "received"}
    assert set(got) == set(sent)
    for label, message in got.items():
        assert message["messageId"] == sent[label]["messageId"]
    fifo = got["fifo"]
    assert fifo["messageGroup"] == "fifoMessageGroup"
    assert fifo["properties"]["__SHARDINGKEY"] == "fifoMessageGroup"
    committed = got["committed"]["properties"]
    assert committed["__transactionId__"] == sent["committed"]["transactionId"]
    # a remoting consumer sees it too
    [remoting] = [m for m in stored if m.body == b"committed"]
    assert remoting.properties["__transactionId__"] == sent["committed"]["transactionId"]


def run_push(
    tmp_path: Path, mode: str, *, retry_max_times: int = 16
) -> tuple[list[dict[str, object]], list[Any]]:
    settings = {"transaction_timeout_ms": 1000}
    with serve(tmp_path / "data", settings=settings) as server:
        topic, group = unique_name("NodePushT"), unique_name("NodePushG")

        async def setup() -> None:
            await create_topic(server.namesrv, topic, queues=2)
            async with AdminClient(server.namesrv) as admin:
                await admin.create_group(
                    group, orderly=mode == "fifo", retry_max_times=retry_max_times
                )

        asyncio.run(setup())
        env = dict(os.environ, NODE_PATH=str(NODE_MODULES), HOME=str(tmp_path))
        node = shutil.which("node") or "node"
        args = ["--endpoints", server.grpc, "--topic", topic, "--group", group, "--mode", mode]
        done = subprocess.run(
            [node, str(PUSH_SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120
        )
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-3000:]}"
        dead = []
        if mode == "fifo":

            def dead_lettered() -> list[Any]:
                try:
                    return asyncio.run(read_topic(server.namesrv, f"%DLQ%{group}"))
                except ClientError:
                    return []

            dead = wait_until(dead_lettered, "a message in the DLQ", interval=0.2)
    return [e for e in events if e["event"] == "consumed"], dead


def test_official_node_push_consumer_retries(tmp_path: Path) -> None:
    consumed, _ = run_push(tmp_path, "standard")
    attempts = [(e["body"], e["attempt"]) for e in consumed]
    assert ("m1", 1) in attempts and ("m1", 2) in attempts
    assert {body for body, _ in attempts} == {"m0", "m1", "m2", "m3"}


def test_official_node_push_consumer_fifo(tmp_path: Path) -> None:
    consumed, dead = run_push(tmp_path, "fifo", retry_max_times=1)
    for prefix in ("a", "b"):
        order: list[str] = []
        for event in consumed:
            body = str(event["body"])
            if body.startswith(prefix) and body not in order:
                order.append(body)
        assert order == [f"{prefix}0", f"{prefix}1", f"{prefix}2"]
    assert [str(e["body"]) for e in consumed].count("a1") == 2  # retried locally once
    assert [m.body for m in dead] == [b"b1"]
