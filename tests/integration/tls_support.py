"""Certificates and `tidemq` argument lists for the TLS tests against real processes."""

from __future__ import annotations

import json
from pathlib import Path

from tidemq.testing.certs import CertSet


class Certs(CertSet):
    """The TLS tests' certificates, and the `tidemq` options that serve them."""

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
