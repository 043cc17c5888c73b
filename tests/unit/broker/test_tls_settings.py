"""Which TLS each of a broker's ports speaks, from its config (pure logic:
no file is read until a context is made)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidemq.broker.config import BrokerConfig
from tidemq.broker.tls_settings import GrpcTls, grpc_tls, remoting_tls
from tidemq.transport.tls import ClientAuth, ServerTls, TlsConfig, TlsConfigError, TlsMode

CERT, KEY, CA = "server.crt", "server.key", "ca.crt"


def test_the_default_mode_is_permissive_with_a_certificate_and_disabled_without() -> None:
    assert remoting_tls(None, None, None, None, "none").mode is TlsMode.DISABLED
    assert remoting_tls(None, CERT, KEY, None, "none").mode is TlsMode.PERMISSIVE
    assert remoting_tls("enforcing", CERT, KEY, None, "none").mode is TlsMode.ENFORCING
    with pytest.raises(TlsConfigError, match="needs a certificate"):
        remoting_tls("permissive", None, None, None, "none")
    with pytest.raises(TlsConfigError, match="must be one of"):
        remoting_tls("on", CERT, KEY, None, "none")
    with pytest.raises(TlsConfigError, match="must be one of"):
        remoting_tls("enforcing", CERT, KEY, CA, "always")


def test_grpc_follows_where_it_can() -> None:
    enforcing = ServerTls(TlsMode.ENFORCING, CERT, KEY, CA, ClientAuth.REQUIRE)
    assert grpc_tls(enforcing, True, None, None, None) == GrpcTls(CERT, KEY, CA, True)
    assert grpc_tls(ServerTls(), False, None, None, None) == GrpcTls()
    # a certificate without a mode: gRPC TLS only, as the endpoint's option always was
    defaulted = ServerTls(TlsMode.PERMISSIVE, CERT, KEY)
    assert grpc_tls(defaulted, False, None, None, None) == GrpcTls(CERT, KEY)
    # the old grpc_tls_cert/key keys still make gRPC TLS only
    assert grpc_tls(ServerTls(), False, None, "g.crt", "g.key") == GrpcTls("g.crt", "g.key")


def test_grpc_refuses_permissive_and_optional_client_certificates() -> None:
    permissive = ServerTls(TlsMode.PERMISSIVE, CERT, KEY)
    with pytest.raises(TlsConfigError, match="cannot be in TLS permissive mode"):
        grpc_tls(permissive, True, None, None, None)
    assert grpc_tls(permissive, True, "enforcing", None, None) == GrpcTls(CERT, KEY)
    assert grpc_tls(permissive, True, "disabled", None, None) == GrpcTls()
    optional = ServerTls(TlsMode.ENFORCING, CERT, KEY, CA, ClientAuth.OPTIONAL)
    with pytest.raises(TlsConfigError, match="optionally"):
        grpc_tls(optional, True, None, None, None)


def test_broker_config_keys(tmp_path: Path) -> None:
    path = tmp_path / "broker.json"
    path.write_text(
        json.dumps(
            {
                "tls_mode": "enforcing",
                "tls_cert": CERT,
                "tls_key": KEY,
                "tls_ca": CA,
                "tls_verify_client": "require",
                "namesrv_tls": True,
                "namesrv_tls_ca": CA,
                "grpc_port": 0,
            }
        )
    )
    config = BrokerConfig.from_file(path)
    assert config.remoting_tls == ServerTls(TlsMode.ENFORCING, CERT, KEY, CA, ClientAuth.REQUIRE)
    assert config.grpc_tls == GrpcTls(CERT, KEY, CA, True)
    assert config.namesrv_client_tls == TlsConfig(ca=CA)
    assert BrokerConfig(data_dir=tmp_path).namesrv_client_tls is None


def test_a_broker_config_that_cannot_work_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a certificate"):
        BrokerConfig(data_dir=tmp_path, tls_mode="enforcing")
    with pytest.raises(ValueError, match="permissive"):
        BrokerConfig(data_dir=tmp_path, tls_mode="permissive", tls_cert=CERT, tls_key=KEY,
                     grpc_port=0)  # fmt: skip
    config = BrokerConfig(
        data_dir=tmp_path, tls_mode="permissive", tls_cert=CERT, tls_key=KEY, grpc_port=None
    )
    assert config.remoting_tls.mode is TlsMode.PERMISSIVE
