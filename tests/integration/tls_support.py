"""Certificates and `tidemq` argument lists for the TLS tests against real processes."""

from __future__ import annotations

import json
from pathlib import Path

from tidemq import TlsConfig
from tidemq.testing.certs import Pair, authority, issue


class Certs:
    """A CA with a server and a client certificate; another CA with a stranger's."""

    def __init__(self, root: Path) -> None:
        self.ca = authority(root, "ca")
        self.server = issue(root, self.ca, "server")
        self.client = issue(root, self.ca, "client")
        self.other_ca = authority(root, "other-ca")
        self.stranger = issue(root, self.other_ca, "stranger")

    def client_tls(self, shown: Pair | None = None) -> TlsConfig:
        return TlsConfig(
            ca=str(self.ca.cert),
            cert=str(shown.cert) if shown else None,
            key=str(shown.key) if shown else None,
        )

    def server_args(self, mode: str, verify: str = "none") -> list[str]:
        return [
            "--tls-mode", mode,
            "--tls-cert", str(self.server.cert),
            "--tls-key", str(self.server.key),
            "--tls-ca", str(self.ca.cert),
            "--tls-verify-client", verify,
        ]  # fmt: skip


def serve_args(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "serve",
        "--data-dir", str(tmp_path / "data"),
        "--namesrv-port", "0",
        "--broker-port", "0",
        "--grpc-port", "0",
        *extra,
    ]  # fmt: skip


def broker_config_file(tmp_path: Path, namesrv: str, **settings: object) -> Path:
    path = tmp_path / "broker.json"
    config = {
        "broker_name": "broker-tls",
        "listen_port": 0,
        "namesrv_addrs": [namesrv],
        "data_dir": str(tmp_path / "broker-data"),
        "auto_create_topic": True,
        **settings,
    }
    path.write_text(json.dumps(config), encoding="utf-8")
    return path
