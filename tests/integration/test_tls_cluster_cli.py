"""TLS on `tidemq namesrv` and `tidemq broker` (cluster mode) and in the CLI, as real processes.

The broker takes its TLS keys from its JSON config (BrokerConfig) and dials
a name server that enforces TLS; the CLI speaks TLS with --tls-ca or the
TIDEMQ_TLS_* environment variables and fails in one line without it. A mode
that needs a certificate without one stops the server before it listens. A
broker's gRPC port takes its own mode (--grpc-tls-mode).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from cli_support import run_tidemq
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc
from tls_support import Certs, broker_config_file, serve_args

from tidemq.testing.processes import started

pytestmark = pytest.mark.slow

CLI_DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return Certs(tmp_path_factory.mktemp("certs"))


cli = run_tidemq


def ok(home: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    result = cli(home, *args, "--json", env=env)
    assert result.returncode == 0, f"{args}: {result.stdout} {result.stderr}"
    return json.loads(result.stdout)


def test_a_broker_registers_over_tls_with_a_name_server_that_enforces_it(
    tmp_path: Path, certs: Certs
) -> None:
    namesrv_args = ["namesrv", "--port", "0", *certs.server_args("enforcing", "require")]
    with started(namesrv_args, tmp_path, "namesrv") as (_, ready):
        namesrv = ready["namesrv"]
        config = broker_config_file(
            tmp_path,
            namesrv,
            tls_mode="enforcing",
            tls_cert=str(certs.server.cert),
            tls_key=str(certs.server.key),
            namesrv_tls=True,
            namesrv_tls_ca=str(certs.ca.cert),
            namesrv_tls_cert=str(certs.client.cert),
            namesrv_tls_key=str(certs.client.key),
        )
        with started(["broker", "--config", str(config)], tmp_path, "broker") as (_, broker):
            assert broker["name"] == "broker-tls"
            tls = [
                "--namesrv", namesrv,
                "--tls-ca", str(certs.ca.cert),
                "--tls-cert", str(certs.client.cert),
                "--tls-key", str(certs.client.key),
            ]  # fmt: skip
            clusters = ok(tmp_path, "cluster", "list", *tls)
            assert "broker-tls" in json.dumps(clusters)
            ok(tmp_path, "topic", "create", "ClusterTls", "--queues", "1", *tls)
            (sent,) = ok(tmp_path, "send", "ClusterTls", "over tls", *tls)
            assert sent["status"] == "SEND_OK"
            # no client certificate: the name server (require) refuses the CLI in one line
            refused = cli(tmp_path, "cluster", "list", "--namesrv", namesrv, "--tls-ca",
                          str(certs.ca.cert))  # fmt: skip
            assert refused.returncode == 1
            assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


def test_the_cli_over_tls_with_flags_and_environment(tmp_path: Path, certs: Certs) -> None:
    args = serve_args(tmp_path, *certs.server_args("enforcing"))
    with started(args, tmp_path, "serve") as (_, ready):
        namesrv = ["--namesrv", ready["namesrv"]]
        ca = ["--tls-ca", str(certs.ca.cert)]
        assert ok(tmp_path, "topic", "create", "CliTls", "--queues", "1", *namesrv, *ca)
        env = {"TIDEMQ_TLS": "1", "TIDEMQ_TLS_CA": str(certs.ca.cert)}
        (sent,) = ok(tmp_path, "send", "CliTls", "hello", *namesrv, env=env)
        assert sent["status"] == "SEND_OK"
        consumed = ok(tmp_path, "consume", "CliTls", "--from-beginning", "--max", "1",
                      "--timeout", "20", *namesrv, *ca)  # fmt: skip
        assert consumed["body"] == "hello"
        plain = cli(tmp_path, "topic", "list", *namesrv)
        assert plain.returncode == 1
        assert "TLS enforcing" in plain.stderr
        assert len(plain.stderr.strip().splitlines()) == 1, plain.stderr
        untrusted = cli(tmp_path, "topic", "list", *namesrv, "--tls-ca", str(certs.other_ca.cert))
        assert untrusted.returncode == 1
        assert "certificate verify failed" in untrusted.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["namesrv", "--port", "0", "--tls-mode", "enforcing"], "needs a certificate"),
        (["serve", "--no-grpc", "--tls-mode", "permissive"], "needs a certificate"),
        (
            ["serve", "--grpc-tls-mode", "permissive"],
            "the gRPC endpoint's TLS mode permissive needs a certificate and its key",
        ),
        (["serve", "--grpc-tls-mode", "sometimes", "CERTS"], "'sometimes' is not one of"),
    ],
)
def test_a_tls_setting_that_cannot_work_stops_before_listening(
    tmp_path: Path, certs: Certs, args: list[str], expected: str
) -> None:
    if "CERTS" in args:
        args = [a for a in args if a != "CERTS"]
        args += ["--tls-cert", str(certs.server.cert), "--tls-key", str(certs.server.key)]
        args += ["--tls-ca", str(certs.ca.cert)]
    if args[0] == "serve":
        args = [*args, "--data-dir", str(tmp_path / "data"), "--namesrv-port", "0",
                "--broker-port", "0", "--grpc-port", "0"]  # fmt: skip
    result = cli(tmp_path, *args)
    assert result.returncode != 0
    assert "tidemq ready" not in result.stdout
    assert expected in result.stderr
    assert len([line for line in result.stderr.splitlines() if "Error" in line]) == 1


def test_a_cluster_broker_serves_grpc_permissive_with_grpc_tls_mode(
    tmp_path: Path, certs: Certs
) -> None:
    """`tidemq broker --grpc-tls-mode permissive`: its gRPC port serves plain and
    TLS clients; the same mode without a certificate stops it in one line."""
    with started(["namesrv", "--port", "0"], tmp_path, "namesrv") as (_, ready):
        config = broker_config_file(
            tmp_path,
            ready["namesrv"],
            tls_cert=str(certs.server.cert),
            tls_key=str(certs.server.key),
        )
        args = ["broker", "--config", str(config), "--grpc-port", "0"]
        with started([*args, "--grpc-tls-mode", "permissive"], tmp_path, "broker") as (_, b):
            tls = grpc.ssl_channel_credentials(certs.ca.cert.read_bytes())
            for channel in (
                grpc.insecure_channel(b["grpc"]),
                grpc.secure_channel(b["grpc"], tls),
            ):
                with channel:
                    stub = service_pb2_grpc.MessagingServiceStub(channel)
                    request = spb.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic"))
                    answer = stub.QueryRoute(request, timeout=CLI_DEADLINE_S)
                    assert answer.status.code == pb.Code.TOPIC_NOT_FOUND
        bare = broker_config_file(tmp_path, ready["namesrv"], grpc_tls_mode="permissive")
        result = cli(tmp_path, "broker", "--config", str(bare), "--grpc-port", "0")
        assert result.returncode == 1
        assert "gRPC endpoint's TLS mode permissive needs a certificate" in result.stderr
        assert "tidemq ready" not in result.stdout
