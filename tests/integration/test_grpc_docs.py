"""Every example in docs/grpc.md runs as written with the official RocketMQ 5
clients against a real `tidemq serve` (the gRPC address substituted), after
what the guide says to do first (`tidemq topic create Orders`). The TLS
example runs against a server started as the guide says, with the
certificate of `tidemq cert` trusted through the environment."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_examples import DEFAULT_GRPC, EXAMPLE_DEADLINE_S, blocks, run_python

from tidemq.testing.client_support import create_topic, read_topic
from tidemq.testing.processes import ServerProcess, serve, serve_args, started

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
NODE_MODULES = REPO / "interop" / "node_modules"
TOPIC = "Orders"


def python_examples() -> list[str]:
    return blocks("grpc.md", "python")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("grpc-docs") / "data") as process:
        asyncio.run(create_topic(process.namesrv, TOPIC, queues=2))
        yield process


def client_env(home: Path) -> dict[str, str]:
    """A clean environment (no inherited GRPC_DEFAULT_SSL_ROOTS_FILE_PATH); the
    official client logs under ~/logs."""
    return {"PATH": "/usr/bin:/bin", "HOME": str(home)}


def bodies(server: ServerProcess) -> list[bytes]:
    return [m.body for m in asyncio.run(read_topic(server.namesrv, TOPIC))]


def test_the_guide_has_plain_and_tls_examples() -> None:
    examples = python_examples()
    assert any("tls_enable=True" not in code for code in examples)
    tls = [code for code in examples if "tls_enable=True" in code]
    assert tls and all("ClientConfiguration(" in code for code in tls)
    assert all(
        "tls_enable" not in code.split("ClientConfiguration(")[1].split(")")[0] for code in tls
    )


@pytest.mark.parametrize("index", range(len(python_examples())))
def test_python_example_runs(index: int, server: ServerProcess, tmp_path: Path) -> None:
    code = python_examples()[index]
    assert DEFAULT_GRPC in code, "examples name the default gRPC endpoint"
    if "tls_enable=True" in code:
        result, stored = run_over_tls(code, tmp_path)
    else:
        result = run_python(
            code, tmp_path / "example.py", client_env(tmp_path), replace={DEFAULT_GRPC: server.grpc}
        )
        stored = bodies(server)
    assert result.returncode == 0, f"example {index} failed:\n{code}\n{result.stderr[-3000:]}"
    body = code.split('message.body = b"')[1].split('"')[0].encode()
    assert body in stored


def run_over_tls(code: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], list[bytes]]:
    """`tidemq cert --out certs` in the example's directory, a server with
    that pair, the certificate trusted: as the guide says."""
    made = subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", "cert", "--out", str(tmp_path / "certs")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    tls = [
        "--tls-cert",
        str(tmp_path / "certs/server.crt"),
        "--tls-key",
        str(tmp_path / "certs/server.key"),
    ]
    with started([*serve_args(tmp_path / "data"), *tls], tmp_path, "tls") as (process, _):
        asyncio.run(create_topic(process.namesrv, TOPIC, queues=1))
        env = client_env(tmp_path) | {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": "certs/server.crt"}
        result = run_python(
            code, tmp_path / "example.py", env, cwd=tmp_path, replace={DEFAULT_GRPC: process.grpc}
        )
        return result, bodies(process)


def test_js_example_runs(server: ServerProcess, tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("`node` is not installed: the Node example needs Node.js")
    if not (NODE_MODULES / "rocketmq-client-nodejs").exists():
        pytest.fail("interop/node_modules is missing: run `make test`", pytrace=False)
    (code,) = blocks("grpc.md", "js")
    assert DEFAULT_GRPC in code
    script = tmp_path / "example.js"
    script.write_text(code.replace(DEFAULT_GRPC, server.grpc))
    env = dict(os.environ, NODE_PATH=str(NODE_MODULES), HOME=str(tmp_path))
    result = subprocess.run(
        [node, str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=EXAMPLE_DEADLINE_S,
        check=False,
    )
    assert result.returncode == 0, f"{code}\n{result.stdout}\n{result.stderr[-3000:]}"
    assert result.stdout.strip(), "the example prints the message id"
    assert b"hello over gRPC" in bodies(server)
