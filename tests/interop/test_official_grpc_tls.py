"""The official RocketMQ 5 clients over TLS and plain to ONE gRPC port in
RocketMQ's permissive mode (`tidemq serve --tls-mode permissive`, served
through the TLS front): the Python client (rocketmq-python-client 5.x) and
the Node client (rocketmq-client-nodejs) each send and receive over TLS and
in plain against the same address, trusting the test CA through
GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, which both grpc libraries read. Under
`--grpc-tls-mode enforcing` with `optional` client certificates the Python client, which
shows none, is served over TLS. The client-certificate refusals and the
access-control address checks through the front: tests/integration/test_tls_grpc.py."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidemq.testing.certs import Pair, authority, issue
from tidemq.testing.client_support import create_topic, read_topic
from tidemq.testing.processes import ServerProcess, started
from tidemq.testing.waiting import unique_name

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
NODE_MODULES = REPO / "interop" / "node_modules"
NODE_SCRIPT = Path(__file__).with_name("js") / "official_node_tls.js"
CLIENT_DEADLINE_S = 120

PYTHON_CLIENT = """
import sys
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message
from rocketmq import Producer, SimpleConsumer
endpoint, topic, group, body, tls = sys.argv[1:6]
tls = tls == "tls"
cfg = ClientConfiguration(endpoint, Credentials())
p = Producer(cfg, (topic,), tls_enable=tls); p.startup()
m = Message(); m.topic = topic; m.body = body.encode()
sent = p.send(m).message_id
print("sent", sent, flush=True)
p.shutdown()
c = SimpleConsumer(cfg, group, {topic: FilterExpression("*")}, 2, tls_enable=tls)
c.startup()
mine = False
for _ in range(20):
    for x in c.receive(16, 15):
        c.ack(x)
        print("received", x.body.decode(), flush=True)
        mine = mine or x.message_id == sent
    if mine:
        break
c.shutdown()
print("done" if mine else "missing", flush=True)
"""


def serve_tls(
    tmp_path: Path, ca: Pair, server: Pair, mode: str, verify: str, *extra: str
) -> Iterator[ServerProcess]:
    args = [
        "serve", "--data-dir", str(tmp_path / "data"),
        "--namesrv-port", "0", "--broker-port", "0", "--grpc-port", "0",
        "--tls-mode", mode, "--tls-cert", str(server.cert), "--tls-key", str(server.key),
        "--tls-ca", str(ca.cert), "--tls-verify-client", verify, *extra,
    ]  # fmt: skip
    with started(args, tmp_path, "serve") as (process, _):
        yield process


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Pair, Pair]:
    root = tmp_path_factory.mktemp("certs")
    ca = authority(root, "ca")
    return ca, issue(root, ca, "server")


@pytest.fixture(scope="module")
def permissive(
    tmp_path_factory: pytest.TempPathFactory, certs: tuple[Pair, Pair]
) -> Iterator[ServerProcess]:
    ca, server = certs
    yield from serve_tls(tmp_path_factory.mktemp("permissive"), ca, server, "permissive", "none")


def client_env(home: Path, ca: Pair) -> dict[str, str]:
    return dict(os.environ, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=str(ca.cert), HOME=str(home))


def run_python_client(
    server: ServerProcess, topic: str, body: str, tls: bool, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-c", PYTHON_CLIENT, server.grpc, topic, unique_name("TlsG"), body]
    args.append("tls" if tls else "plain")
    return subprocess.run(args, capture_output=True, text=True, timeout=CLIENT_DEADLINE_S, env=env)


def test_the_python_client_over_tls_and_plain_on_one_permissive_port(
    permissive: ServerProcess, certs: tuple[Pair, Pair], tmp_path: Path
) -> None:
    ca, _ = certs
    topic = unique_name("PermT")
    asyncio.run(create_topic(permissive.namesrv, topic, queues=1))
    env = client_env(tmp_path, ca)
    for body, tls in (("python over TLS", True), ("python in plain", False)):
        done = run_python_client(permissive, topic, body, tls, env)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"received {body}" in done.stdout and "done" in done.stdout, done.stdout
    stored = asyncio.run(read_topic(permissive.namesrv, topic))
    assert sorted(m.body for m in stored) == [b"python in plain", b"python over TLS"]


@pytest.mark.skipif(shutil.which("node") is None, reason="`node` is not installed")
def test_the_node_client_over_tls_and_plain_on_one_permissive_port(
    permissive: ServerProcess, certs: tuple[Pair, Pair], tmp_path: Path
) -> None:
    if not (NODE_MODULES / "rocketmq-client-nodejs").exists():
        pytest.fail("interop/node_modules is missing: run `make test`", pytrace=False)
    ca, _ = certs
    topic = unique_name("PermNodeT")
    asyncio.run(create_topic(permissive.namesrv, topic, queues=1))
    env = dict(client_env(tmp_path, ca), NODE_PATH=str(NODE_MODULES))
    node = shutil.which("node") or "node"
    for body, ssl in (("node over TLS", "true"), ("node in plain", "false")):
        args = ["--endpoints", permissive.grpc, "--topic", topic, "--group", unique_name("G")]
        args += ["--ssl", ssl, "--body", body]
        done = subprocess.run(
            [node, str(NODE_SCRIPT), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=CLIENT_DEADLINE_S,
        )
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-3000:]}"
        [sent] = [e for e in events if e["event"] == "sent"]
        assert sent["sslEnabled"] is (ssl == "true")
        assert body in [e["body"] for e in events if e["event"] == "received"]
    stored = asyncio.run(read_topic(permissive.namesrv, topic))
    assert sorted(m.body for m in stored) == [b"node in plain", b"node over TLS"]


def test_the_python_client_without_a_certificate_is_served_under_optional(
    certs: tuple[Pair, Pair], tmp_path: Path
) -> None:
    ca, server_pair = certs
    # the remoting ports stay permissive (the test's admin client is plain); gRPC is TLS only
    grpc_only = ("--grpc-tls-mode", "enforcing")
    for server in serve_tls(tmp_path, ca, server_pair, "permissive", "optional", *grpc_only):
        topic = unique_name("OptT")
        asyncio.run(create_topic(server.namesrv, topic, queues=1))
        done = run_python_client(server, topic, "no client cert", True, client_env(tmp_path, ca))
        assert done.returncode == 0, done.stderr[-3000:]
        assert "received no client cert" in done.stdout and "done" in done.stdout, done.stdout
