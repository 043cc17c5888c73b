"""The official RocketMQ 5 Node client (`rocketmq-client-nodejs` 1.0.8, gRPC)
against a real `tidemq serve`: producer (normal with tag/keys/properties,
FIFO, delay, recall, transaction commit / rollback / orphan check-back) and
SimpleConsumer (receive, ack, change invisible duration, redelivery with the
attempt raised)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tidemq.testing.client_support import create_topic
from tidemq.testing.processes import serve
from tidemq.testing.waiting import unique_name

REPO = Path(__file__).resolve().parents[2]
NODE_MODULES = REPO / "interop" / "node_modules"
SCRIPT = Path(__file__).with_name("js") / "official_node.js"

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
