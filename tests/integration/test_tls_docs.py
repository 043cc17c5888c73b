"""docs/tls.md and the README's "TLS" section, run as written: `tidemq cert`
makes the certificate, `tidemq serve` runs with the guide's TLS options, and
the CLI lines and Python examples run in order against it (the name server
address substituted, `certs/` relative to the directory they run in). Each
`tidemq serve` line of the guide's gRPC section runs too, and its gRPC port
serves plain and TLS clients, as the section says."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from doc_examples import BLOCK, DEFAULT_NAMESRV, DOCS, blocks, run_python
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc

from tidemq.testing.processes import server_env, started

pytestmark = pytest.mark.slow

GUIDE = DOCS / "tls.md"
README = DOCS.parent / "README.md"
CLI_DEADLINE_S = 60.0


def commands(text: str) -> list[list[str]]:
    """The `tidemq` lines of the untagged blocks."""
    return [
        shlex.split(line)
        for tag, code in BLOCK.findall(text)
        if not tag
        for line in code.splitlines()
        if line.startswith("tidemq ")
    ]


def readme_section() -> str:
    match = re.search(r"^## TLS\n(.*?)^## ", README.read_text(), re.S | re.M)
    assert match, "the README has no TLS section"
    return match.group(1)


def _cli(home: Path, command: list[str], namesrv: str | None) -> None:
    tail = ["--namesrv", namesrv] if namesrv else []
    result = subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", *command[1:], *tail],
        capture_output=True,
        text=True,
        env=server_env(home),
        cwd=home,
        timeout=CLI_DEADLINE_S,
        check=False,
    )
    assert result.returncode == 0, f"{shlex.join(command)}:\n{result.stdout}{result.stderr}"


def _run(home: Path, text: str, python: list[str]) -> list[str]:
    """Run `text`'s cert line, its serve line, then its CLI lines and `python` blocks."""
    found = commands(text)
    for command in (c for c in found if c[1] == "cert"):
        _cli(home, command, None)
    serve = next((c for c in found if c[1] == "serve"), None)
    options = serve[2:] if serve else ["--tls-mode", "enforcing", "--tls-cert", "certs/server.crt",
                                       "--tls-key", "certs/server.key"]  # fmt: skip
    options = [str(home / o) if o.startswith("certs/") else o for o in options]
    args = ["serve", *options, "--data-dir", str(home / "data"), "--namesrv-port", "0",
            "--broker-port", "0", "--grpc-port", "0"]  # fmt: skip
    with started(args, home, "serve") as (server, ready):
        namesrv = ready["namesrv"]
        for command in found:
            if command[1] not in ("cert", "serve"):
                _cli(home, command, namesrv)
        outputs = []
        for i, code in enumerate(python):
            result = run_python(
                code,
                home / f"example_{i}.py",
                {"PATH": "/usr/bin:/bin", "TIDEMQ_OFFSET_STORE_DIR": str(home / "offsets")},
                cwd=home,
                replace={DEFAULT_NAMESRV: namesrv},
            )
            assert result.returncode == 0, f"example {i} failed:\n{code}\n{result.stderr}"
            outputs.append(result.stdout)
        assert server.stop() == 0
    return outputs


def test_the_guide_runs_against_serve_with_tls(tmp_path: Path) -> None:
    assert any(c[1] == "serve" and "enforcing" in c for c in commands(GUIDE.read_text()))
    outputs = _run(tmp_path, GUIDE.read_text(), blocks("tls.md", "python"))
    assert outputs[0].strip() == "SEND_OK"
    assert outputs[1].splitlines() == ["2", "[b'payment 1', b'payment 2']"]


def test_the_readme_section_runs_against_serve_with_tls(tmp_path: Path) -> None:
    section = readme_section()
    python = [code for tag, code in BLOCK.findall(section) if tag == "python"]
    assert commands(section) and python
    outputs = _run(tmp_path, section, python)
    assert [o.strip() for o in outputs] == ["SEND_OK"]


def grpc_section() -> str:
    match = re.search(r"^## The gRPC endpoint\n(.*?)^## ", GUIDE.read_text(), re.S | re.M)
    assert match, "the guide has no gRPC section"
    return match.group(1)


def test_the_grpc_section_serves_plain_and_tls_on_one_port(tmp_path: Path) -> None:
    _cli(tmp_path, ["tidemq", "cert", "--out", "certs"], None)
    serves = [c for c in commands(grpc_section()) if c[1] == "serve"]
    assert len(serves) == 2
    trusted = grpc.ssl_channel_credentials((tmp_path / "certs" / "server.crt").read_bytes())
    for i, command in enumerate(serves):
        options = [str(tmp_path / o) if o.startswith("certs/") else o for o in command[2:]]
        args = ["serve", *options, "--data-dir", str(tmp_path / f"data{i}"),
                "--namesrv-port", "0", "--broker-port", "0", "--grpc-port", "0"]  # fmt: skip
        with started(args, tmp_path, f"serve{i}") as (server, ready):
            for channel in (
                grpc.insecure_channel(ready["grpc"]),
                grpc.secure_channel(ready["grpc"], trusted),
            ):
                with channel:
                    stub = service_pb2_grpc.MessagingServiceStub(channel)
                    request = spb.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic"))
                    answer = stub.QueryRoute(request, timeout=CLI_DEADLINE_S)
                    assert answer.status.code == pb.Code.TOPIC_NOT_FOUND, shlex.join(command)
            assert server.stop() == 0
