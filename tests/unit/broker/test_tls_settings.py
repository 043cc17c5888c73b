"""Which TLS each of a broker's ports speaks, from its config (pure logic:
no file is read until a context is made)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidemq.broker.config import BrokerConfig
from tidemq.broker.tls_settings import grpc_tls, remoting_tls
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


def test_grpc_follows_the_remoting_mode_when_it_is_set() -> None:
    enforcing = ServerTls(TlsMode.ENFORCING, CERT, KEY, CA, ClientAuth.REQUIRE)
    assert grpc_tls(enforcing, True, None, None, None) == enforcing
    assert grpc_tls(ServerTls(), False, None, None, None) == ServerTls()
    permissive = ServerTls(TlsMode.PERMISSIVE, CERT, KEY, CA, ClientAuth.OPTIONAL)
    assert grpc_tls(permissive, True, None, None, None) == permissive
    # a certificate without a mode: gRPC TLS only, as the endpoint's option always was
    defaulted = ServerTls(TlsMode.PERMISSIVE, CERT, KEY)
    assert grpc_tls(defaulted, False, None, None, None) == ServerTls(TlsMode.ENFORCING, CERT, KEY)
    # the old grpc_tls_cert/key keys still make gRPC TLS only
    assert grpc_tls(ServerTls(), False, None, "g.crt", "g.key") == ServerTls(
        TlsMode.ENFORCING, "g.crt", "g.key"
    )


def test_grpc_tls_mode_gives_grpc_its_own_mode() -> None:
    permissive = ServerTls(TlsMode.PERMISSIVE, CERT, KEY)
    assert grpc_tls(permissive, True, "enforcing", None, None).mode is TlsMode.ENFORCING
    assert grpc_tls(permissive, True, "disabled", None, None) == ServerTls()
    assert grpc_tls(ServerTls(), False, "permissive", "g.crt", "g.key") == ServerTls(
        TlsMode.PERMISSIVE, "g.crt", "g.key"
    )
    assert grpc_tls(permissive, False, "Permissive ", None, None).mode is TlsMode.PERMISSIVE


def test_a_grpc_tls_that_cannot_work_is_refused_naming_the_grpc_endpoint() -> None:
    with pytest.raises(TlsConfigError, match="gRPC endpoint's TLS mode permissive needs a cert"):
        grpc_tls(ServerTls(), False, "permissive", None, None)
    with pytest.raises(TlsConfigError, match="gRPC endpoint's TLS mode enforcing needs a cert"):
        grpc_tls(ServerTls(), True, "enforcing", None, None)
    with pytest.raises(TlsConfigError, match="must be one of"):
        grpc_tls(ServerTls(), False, "sometimes", None, None)
    with pytest.raises(TlsConfigError, match="go together"):
        grpc_tls(ServerTls(), False, None, "g.crt", None)
    # client verification without a CA: the remoting port is off, gRPC is not
    unverifiable = ServerTls(TlsMode.DISABLED, CERT, KEY, None, ClientAuth.OPTIONAL)
    with pytest.raises(TlsConfigError, match="the gRPC endpoint: client verification optional"):
        grpc_tls(unverifiable, True, "permissive", None, None)


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
    assert config.grpc_tls == config.remoting_tls
    assert config.namesrv_client_tls == TlsConfig(ca=CA)
    assert BrokerConfig(data_dir=tmp_path).namesrv_client_tls is None


def test_the_master_is_dialled_as_the_name_servers_unless_master_tls_says_otherwise(
    tmp_path: Path,
) -> None:
    dials_namesrv_with_tls = BrokerConfig(data_dir=tmp_path, namesrv_tls=True, namesrv_tls_ca=CA)
    assert dials_namesrv_with_tls.master_client_tls == TlsConfig(ca=CA)
    plain_master = BrokerConfig(data_dir=tmp_path, namesrv_tls=True, master_tls=False)
    assert plain_master.master_client_tls is None
    tls_master_only = BrokerConfig(data_dir=tmp_path, master_tls=True, namesrv_tls_ca=CA)
    assert tls_master_only.master_client_tls == TlsConfig(ca=CA)
    assert tls_master_only.namesrv_client_tls is None
    assert BrokerConfig(data_dir=tmp_path).master_client_tls is None


def test_a_broker_config_that_cannot_work_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a certificate"):
        BrokerConfig(data_dir=tmp_path, tls_mode="enforcing")
    with pytest.raises(ValueError, match="gRPC endpoint's TLS mode permissive needs"):
        BrokerConfig(data_dir=tmp_path, grpc_tls_mode="permissive", grpc_port=0)
    with pytest.raises(ValueError, match="grpc_max_connections=0"):
        BrokerConfig(data_dir=tmp_path, grpc_max_connections=0)
    # without a gRPC endpoint its settings are not checked
    config = BrokerConfig(data_dir=tmp_path, grpc_tls_mode="permissive", grpc_port=None)
    assert config.remoting_tls.mode is TlsMode.DISABLED
    config = BrokerConfig(
        data_dir=tmp_path, tls_mode="permissive", tls_cert=CERT, tls_key=KEY, grpc_port=0
    )
    assert config.grpc_tls.mode is TlsMode.PERMISSIVE
